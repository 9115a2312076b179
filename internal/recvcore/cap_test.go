package recvcore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// A receive whose response is lost leaves its messages invisible in the
// queue, received and not deleted as the service counts them: the cap
// counts a failed receive's messages until a visibility timeout passes.
func TestFetchFailedCountsAgainstCap(t *testing.T) {
	cfg := ehConfig()
	cfg.MaxHeld = 40
	cfg.Visibility = 30 * time.Second
	h := newEH(t, cfg)
	room := h.c.Room(h.now)
	h.c.FetchFailed(h.now, 16)
	h.ready()
	require.Equal(t, room-16, h.c.Room(h.now), "a failed receive of 16 may have made 16 invisible")
	h.tick(29 * time.Second)
	require.Equal(t, room-16, h.c.Room(h.now), "until their visibility ends")
	h.tick(2 * time.Second)
	require.Equal(t, room, h.c.Room(h.now), "then they are visible again")
}

// An extension whose answer is lost may have taken effect: the queue then
// holds the message, under a receipt the Core never learns, until the
// extension's end. The delete with the old receipt finds it stale; the cap
// counts the message until that end all the same (a receiver at its cap
// would otherwise hold one more than the cap, as the service counts).
func TestFailedExtensionCountsUntilItsEnd(t *testing.T) {
	cfg := ehConfig()
	cfg.MaxHeld = 40
	cfg.Visibility = 10 * time.Second
	cfg.VisibilityExtend = 30 * time.Second
	cfg.VisibilityMargin = 2 * time.Second
	h := newEH(t, cfg)
	room := h.c.Room(h.now)
	h.arrive(tagged("g", 1, 1))
	h.readAll(nil)
	d, ok := h.next()
	require.True(t, ok)
	h.tick(9 * time.Second) // the extension is due
	require.Len(t, h.vis, 1)
	v := h.vis[0]
	h.vis = nil
	h.c.Visibility(h.now, v.ID, "", errors.New("timeout after")) // applied: invisible until now+30s
	h.ready()
	_, err := h.c.Ack(h.now, &d, false)
	require.NoError(t, err)
	h.ready()
	h.commitAll(map[string]seqstore.Cursor{}, nil)
	h.tick(time.Second)
	for len(h.deletes) > 0 {
		del := h.deletes[0]
		h.deletes = h.deletes[1:]
		res := make([]recvcore.DeleteResult, len(del.Receipts))
		for i := range res {
			res[i] = recvcore.DeleteResult{Err: errors.New("stale receipt"), Stale: true}
		}
		h.c.Deleted(h.now, del.ID, res)
		h.ready()
	}
	require.Equal(t, room-1, h.c.Room(h.now), "the extension may have applied: the queue counts the message")
	h.tick(27 * time.Second)
	require.Equal(t, room-1, h.c.Room(h.now), "until its end")
	h.tick(2 * time.Second)
	require.Equal(t, room, h.c.Room(h.now), "then it is visible again")
}

// A shortening of a released message that waited behind the request budget
// until its visibility nearly ended is dropped: a short timeout sent then
// would make the message invisible longer, not shorter (and the cap,
// counting it until its old end, would be short of the queue's count).
func TestLateShorteningIsDropped(t *testing.T) {
	cfg := ehConfig()
	cfg.Window = 2
	cfg.Visibility = 3600 * time.Millisecond // shortenings go at 0, 1.1, 2.2 and 3.3 s: the last 0.3 s before the end
	cfg.VisibilityExtend = cfg.Visibility
	cfg.ShortVisibility = 500 * time.Millisecond
	cfg.VisibilityMargin = time.Second
	cfg.MaxVisibilityRate = 1
	h := newEH(t, cfg)
	until := map[string]time.Time{}
	var bodies [][]byte
	for s := uint64(1); s <= 10; s++ {
		bodies = append(bodies, tagged("g", 1, s))
	}
	for _, r := range h.arrive(bodies...) {
		until[r] = h.now.Add(cfg.Visibility)
	}
	curs := map[string]seqstore.Cursor{"g": {Epoch: 1, Next: 1}}
	h.readAll(curs)
	sent := 0
	for range 60 {
		for { // the two held are handled at once: no extension takes the budget
			d, ok := h.next()
			if !ok {
				break
			}
			_, err := h.c.Ack(h.now, &d, false)
			require.NoError(t, err)
			h.ready()
		}
		h.commitAll(curs, nil)
		h.deleteAll()
		for len(h.vis) > 0 {
			v := h.vis[0]
			h.vis = h.vis[1:]
			if v.Timeout == cfg.ShortVisibility {
				sent++
				require.Greater(t, until[v.Receipt].Sub(h.now), cfg.ShortVisibility,
					"shortening %s sent %v before its end", v.Receipt, until[v.Receipt].Sub(h.now))
			}
			h.c.Visibility(h.now, v.ID, v.Receipt+"'", nil)
			h.ready()
		}
		h.tick(100 * time.Millisecond)
	}
	require.NotZero(t, sent, "some shortenings go out while they are worth it: %s", h.c.Dump())
}

// AtMostOnce hands an Unordered message out only once its delete took
// effect. A stale answer to the first delete says the receipt is no longer
// ours (the visibility ended, another receiver may hold the message): the
// hand-out is refused. Only a retry that finds the receipt stale, well
// within the visibility, follows an attempt of ours that took effect (a
// blind plant that took the first stale answer for our own delete handed
// out a message another receiver may deliver too, and no test saw it).
func TestAMOUnorderedFirstDeleteStaleRefused(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtMostOnce
	cfg.Visibility = 30 * time.Second
	h := newEH(t, cfg)
	h.arriveID("u1", []byte("no header"))
	d, ok := h.next()
	require.True(t, ok, "an untagged body is handed out Unordered")
	require.True(t, d.Unordered)
	require.NotZero(t, d.Await, "AtMostOnce: it waits for its delete")
	h.tick(cfg.ReapInterval)
	require.Len(t, h.deletes, 1)
	del := h.deletes[0]
	h.deletes = nil
	h.c.Deleted(h.now, del.ID, []recvcore.DeleteResult{{Err: errors.New("404 MessageNotExist"), Stale: true}})
	h.ready()
	var res *recvcore.Resolution
	for i := range h.resolve {
		if h.resolve[i].Ticket == d.Await {
			res = &h.resolve[i]
		}
	}
	require.NotNil(t, res, "the hand-out's wait is resolved")
	require.Error(t, res.Err, "a first delete found stale is not ours: the message is not handed out")
}

// A sender's clock a little ahead of the receiver's is allowed: an epoch
// up to MaxEpochAhead in the future is delivered, one beyond it is refused
// (a blind plant that ignored the allowance refused every epoch ahead of
// the receiver's clock, and no test had one).
func TestEpochAheadAllowance(t *testing.T) {
	cfg := ehConfig()
	cfg.MaxEpochAhead = time.Hour
	h := newEH(t, cfg)
	ahead := uint64(h.now.Add(time.Minute).UnixMilli()) << 20
	far := uint64(h.now.Add(2*time.Hour).UnixMilli()) << 20
	h.arrive(tagged("near", ahead, 1), tagged("far", far, 1))
	h.readAll(nil)
	ordered := map[string]bool{}
	for {
		d, ok := h.next()
		if !ok {
			break
		}
		if !d.Unordered {
			ordered[d.Group] = true
		}
	}
	require.True(t, ordered["near"], "an epoch a minute ahead is delivered in order")
	require.False(t, ordered["far"], "an epoch two hours ahead is refused (untagged)")
}
