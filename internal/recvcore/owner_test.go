package recvcore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// A cursor's Owner is a fencing token (seqstore.Claim): the owner of a
// shard claims each of its streams by setting it, and an older owner's
// compare-and-set then fails. The core must carry the stored Owner into
// every advance it asks for, the application's ExactlyOnce one included:
// an advance that wrote Owner 0 would un-claim the stream, and a stale
// owner could claim it back.
func TestAdvancesKeepTheStoredOwner(t *testing.T) {
	modes := map[string]recvcore.Mode{"alo": recvcore.AtLeastOnce, "amo": recvcore.AtMostOnce, "eo": recvcore.ExactlyOnce}
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			cfg := ehConfig()
			cfg.Mode = mode
			h := newEH(t, cfg)
			curs := map[string]seqstore.Cursor{"g": {Owner: 7}}
			h.arrive(tagged("g", 1, 1), tagged("g", 1, 2), tagged("g", 1, 3))
			h.readAll(curs)
			var advances []seqstore.Advance
			commit := func() { // answers every commit, keeping its advances
				for len(h.commits) > 0 {
					c := h.commits[0]
					h.commits = h.commits[1:]
					for _, a := range c.Advances {
						advances = append(advances, a)
						curs[a.Stream.Group] = a.To
					}
					h.c.Committed(h.now, c.ID, nil)
					h.ready()
				}
			}
			for range 3 {
				d, ok := h.next()
				require.True(t, ok)
				commit()
				if mode == recvcore.ExactlyOnce {
					advances = append(advances, d.Advance)
					curs["g"] = d.Advance.To
				}
				_, err := h.c.Ack(h.now, &d, false)
				require.NoError(t, err)
				h.ready()
			}
			commit()
			h.tick(cfg.ReapInterval)
			commit()
			require.NotEmpty(t, advances)
			for _, a := range advances {
				require.Equal(t, uint64(7), a.From.Owner, "advance %+v", a)
				require.Equal(t, uint64(7), a.To.Owner, "advance %+v", a)
			}
		})
	}
}

// StartAt builds a group's cursor afresh: it must keep the Owner that the
// claim stored in the cursor it starts from.
func TestStartAtKeepsTheStoredOwner(t *testing.T) {
	h := newEH(t, ehConfig())
	curs := map[string]seqstore.Cursor{"g": {Owner: 7}} // claimed, never advanced
	h.arrive(tagged("g", 1, 5), tagged("g", 1, 6))
	h.readAll(curs)
	h.tick(ehConfig().GapTimeout)
	_, err := h.c.StartAt(h.now, "g", 1, 5)
	require.NoError(t, err)
	h.ready()
	require.NotEmpty(t, h.commits, "the start cursor is written")
	for _, c := range h.commits {
		for _, a := range c.Advances {
			require.Equal(t, uint64(7), a.From.Owner, "advance %+v", a)
			require.Equal(t, uint64(7), a.To.Owner, "advance %+v", a)
		}
	}
}

// An ExactlyOnce hand-out's advance (the application's transaction writes
// it) keeps the stored Owner too, after a StartAt that built the group's
// cursor afresh: TestWorldLeases found one that wrote Owner 0, which
// un-claims the stream for a stale owner to claim back.
func TestExactlyOnceAdvanceAfterStartAtKeepsTheStoredOwner(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.ExactlyOnce
	h := newEH(t, cfg)
	curs := map[string]seqstore.Cursor{"g": {Owner: 7}} // claimed, never advanced
	h.arrive(tagged("g", 1, 5), tagged("g", 1, 6))
	h.readAll(curs)
	h.tick(cfg.GapTimeout)
	_, err := h.c.StartAt(h.now, "g", 1, 5)
	require.NoError(t, err)
	h.ready()
	for len(h.commits) > 0 {
		c := h.commits[0]
		h.commits = h.commits[1:]
		h.c.Committed(h.now, c.ID, nil)
		h.ready()
	}
	d, ok := h.next()
	require.True(t, ok, "the start's message is handed out")
	require.Equal(t, uint64(5), d.Seq)
	require.Equal(t, uint64(7), d.Advance.From.Owner, "advance %+v", d.Advance)
	require.Equal(t, uint64(7), d.Advance.To.Owner, "advance %+v", d.Advance)
}

// Once StartAt's cursor is durable the group has nothing more to write: a
// cursor built afresh with Owner 0 differed from the stored one forever,
// and the Core wrote the same cursor again at every commit (a closing Core
// never flushed); TestWorldLeases found it.
func TestStartAtWritesItsCursorOnce(t *testing.T) {
	cfg := ehConfig()
	h := newEH(t, cfg)
	curs := map[string]seqstore.Cursor{"g": {Owner: 7}}
	h.arrive(tagged("g", 1, 5))
	h.readAll(curs)
	h.tick(cfg.GapTimeout)
	_, err := h.c.StartAt(h.now, "g", 1, 5)
	require.NoError(t, err)
	h.ready()
	writes := 0
	for range 5 {
		for i := 0; len(h.commits) > 0 && i < 10; i++ {
			c := h.commits[0]
			h.commits = h.commits[1:]
			writes += len(c.Advances)
			h.c.Committed(h.now, c.ID, nil)
			h.ready()
		}
		h.tick(cfg.ReapInterval)
	}
	require.Equal(t, 1, writes, "StartAt's cursor is written once, then the group is quiet")
}
