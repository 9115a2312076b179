package recvcore_test

// Review of a13399d (failed AtLeastOnce groups keep what was acknowledged),
// by helper-54. Each test failed on a13399d: B (a kept group pinned the cap)
// and its growing form were a13399d's own; A, A' (an acknowledged message
// handed out again: the cursor read was the group's own write in flight, or
// another receiver's behind what was acknowledged), C (a SyncAck made after
// the stop never resolved) and D (the group stalled once the seq out was
// its adopted cursor's next) were older. Fixed by the next commit: a kept
// group settles its cursor read as a conflict does (resumeFailed), keeps
// only once (a group stopped again gives back what it kept), and
// becomeLoaded resolves the tickets and skips the seq out.

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// rkCorrupt answers every pending read with ErrCorrupt for each stream.
func (h *eh) rkReadsFail() {
	for len(h.reads) > 0 {
		r := h.reads[0]
		h.reads = h.reads[1:]
		errs := make([]error, len(r.Streams))
		for i := range errs {
			errs[i] = seqstore.ErrCorrupt
		}
		h.c.Read(h.now, r.ID, nil, &seqstore.BatchError{Errs: errs})
		h.ready()
	}
}

// rkHandAll hands out and acknowledges whatever is ready, recording seqs.
func (h *eh) rkHandAll(seen map[string][]uint64) {
	for {
		d, ok := h.next()
		if !ok {
			return
		}
		seen[d.Group] = append(seen[d.Group], d.Seq)
		_, err := h.c.Ack(h.now, &d, false)
		require.NoError(h.t, err)
		h.ready()
	}
}

// Finding A ([order] in the same life, no second receiver). A group stops
// on a store error while its own commit is in flight (here: the re-read of
// a hole answers ErrCorrupt). The commit is applied by the store, and the
// cursor is read again (RetryMax, or Reread) before the commit's answer
// arrives: the cursor read is this Core's own write, neither g.dur nor
// g.uncertain, so keepsAcked says no, the kept acknowledged messages are
// released and the group adopts the stored cursor: g/1/2 and g/1/3,
// acknowledged, are handed out again, after g/1/3 was handed out.
// resolveConflict, for the same cursor (behind g.ack), keeps g.ack.
func TestRevKeepOwnWriteInFlightReadAgain(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtLeastOnce
	h := newEH(t, cfg)
	curs := map[string]seqstore.Cursor{"g": {Epoch: 1, Next: 1}}
	h.arrive(tagged("g", 1, 1), tagged("g", 1, 2), tagged("g", 1, 3), tagged("g", 1, 5))
	h.readAll(curs)
	seen := map[string][]uint64{}
	d, ok := h.next()
	require.True(t, ok)
	seen["g"] = append(seen["g"], d.Seq)
	_, err := h.c.Ack(h.now, &d, false)
	require.NoError(t, err)
	h.ready()
	h.tick(cfg.ReapInterval)
	require.Len(t, h.commits, 1, "the advance past g/1/1, in flight")
	inflight := h.commits[0]
	h.commits = nil
	h.rkHandAll(seen) // 2 and 3; 4 is a hole
	require.Equal(t, []uint64{1, 2, 3}, seen["g"])
	// The hole is read again after GapTimeout: the read fails for good.
	for i := 0; i < 4 && len(h.reads) == 0; i++ {
		h.tick(cfg.GapTimeout)
	}
	require.NotEmpty(t, h.reads, "the hole's re-read")
	h.rkReadsFail()
	// The store applies the in-flight commit; its answer is late.
	for _, a := range inflight.Advances {
		curs[a.Stream.Group] = a.To
	}
	h.tick(cfg.RetryMax)
	h.readAll(curs)
	h.c.Committed(h.now, inflight.ID, nil)
	h.ready()
	// g/1/2, g/1/3 and g/1/5 come back from the queue (given back), and 4
	// arrives.
	h.arrive(tagged("g", 1, 2), tagged("g", 1, 3), tagged("g", 1, 5), tagged("g", 1, 4))
	for range 3 {
		h.rkHandAll(seen)
		h.tick(cfg.ReapInterval)
		h.readAll(curs)
		h.commitAll(curs, nil)
		h.deleteAll()
		h.visAll()
	}
	require.Equal(t, []uint64{1, 2, 3, 4, 5}, seen["g"], "an acknowledged message handed out again in the same life")
}

// Finding B (regression: the cap, and other groups' liveness). A group
// whose stored cursor is corrupt fails its commit and every read after
// it with ErrCorrupt. Before a13399d it let go of everything; now it
// keeps its acknowledged receipts, which count against MaxHeld for as
// long as the store refuses (they are never deleted nor given back), so
// the fetchers get no room and a healthy group's messages are never
// received: doc.go's Liveness ("whatever other groups do ... failing in
// the store") is broken.
func TestRevKeepFailedGroupPinsCap(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtLeastOnce
	cfg.MaxHeld = 4
	h := newEH(t, cfg)
	curs := map[string]seqstore.Cursor{"bad": {Epoch: 1, Next: 1}}
	h.arrive(tagged("bad", 1, 1), tagged("bad", 1, 2), tagged("bad", 1, 3), tagged("bad", 1, 4))
	h.readAll(curs)
	seen := map[string][]uint64{}
	h.rkHandAll(seen)
	require.Equal(t, []uint64{1, 2, 3, 4}, seen["bad"])
	h.tick(cfg.ReapInterval)
	require.NotEmpty(t, h.commits)
	h.commitAll(nil, &seqstore.BatchError{Errs: []error{seqstore.ErrCorrupt}})
	// A day of the store refusing that row: every retry's read fails.
	for range 24 * 60 {
		h.tick(time.Minute)
		h.rkReadsFail()
		h.visAll()
		h.deleteAll()
	}
	require.Positive(t, h.c.Room(h.now), "a day later, a group failing in the store holds the whole cap: no other group gets a message (live receipts: %d of %d)", cfg.MaxHeld-h.c.Room(h.now), cfg.MaxHeld)
}

// Finding B', the growing form: the store refuses every write of one
// group's cursor (ErrCorrupt) but reads it fine. Each retry resumes the
// group (keepsAcked), which hands out and acknowledges more before its
// write fails again, and keeps them all: the group's unreleased receipts
// grow cycle by cycle until they take the whole cap. Before a13399d each
// failure let go of them.
func TestRevKeepFailingWritesGrowHeld(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtLeastOnce
	cfg.MaxHeld = 16
	cfg.CommitInterval = 50 * time.Millisecond
	h := newEH(t, cfg)
	curs := map[string]seqstore.Cursor{"bad": {Epoch: 1, Next: 1}}
	seen := map[string][]uint64{}
	next := uint64(1)
	for cycle := range 8 {
		// The queue brings what the fetchers have room for: the group's
		// next messages (the given-back ones again, then new ones).
		var bodies [][]byte
		room := h.c.Room(h.now)
		for i := 0; i < min(room, 3); i++ {
			bodies = append(bodies, tagged("bad", 1, next+uint64(i)))
		}
		if len(bodies) > 0 {
			h.arrive(bodies...)
		}
		h.readAll(curs)
		before := len(seen["bad"])
		h.rkHandAll(seen)
		next += uint64(len(seen["bad"]) - before)
		h.tick(cfg.CommitInterval)
		for len(h.commits) > 0 {
			c := h.commits[0]
			h.commits = h.commits[1:]
			h.c.Committed(h.now, c.ID, &seqstore.BatchError{Errs: []error{seqstore.ErrCorrupt}})
			h.ready()
		}
		h.visAll()
		h.tick(cfg.RetryMax)
		h.readAll(curs)
		t.Logf("cycle %d: handed out %v, room %d", cycle, seen["bad"], h.c.Room(h.now))
	}
	require.Positive(t, h.c.Room(h.now), "the group whose writes fail for good holds the whole cap (%s)", fmt.Sprint(seen["bad"]))
}

// Finding A' (same root as A, with a second receiver by mistake, no
// lease): the group stops on ErrCorrupt with g/1/1..3 acknowledged
// (dur 1/1, ack 1/4); meanwhile another receiver moves the cursor to 1/2.
// Read again, the cursor is behind what this Core acknowledged: a
// conflict (resolveConflict, reads.go) would keep g.ack and write it from
// 1/2 ("nothing acknowledged is delivered twice"); becomeLoaded releases
// g/1/2 and g/1/3 and hands them out again, after g/1/3.
func TestRevKeepFailedThenOtherReceiverBehindAck(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtLeastOnce
	h := newEH(t, cfg)
	curs := map[string]seqstore.Cursor{"g": {Epoch: 1, Next: 1}}
	h.arrive(tagged("g", 1, 1), tagged("g", 1, 2), tagged("g", 1, 3))
	h.readAll(curs)
	seen := map[string][]uint64{}
	h.rkHandAll(seen)
	require.Equal(t, []uint64{1, 2, 3}, seen["g"])
	h.tick(cfg.ReapInterval)
	require.NotEmpty(t, h.commits)
	h.commitAll(nil, &seqstore.BatchError{Errs: []error{seqstore.ErrCorrupt}})
	curs["g"] = seqstore.Cursor{Epoch: 1, Next: 2} // the other receiver
	h.tick(cfg.RetryMax)
	h.readAll(curs)
	h.arrive(tagged("g", 1, 2), tagged("g", 1, 3), tagged("g", 1, 4))
	for range 3 {
		h.rkHandAll(seen)
		h.tick(cfg.ReapInterval)
		h.readAll(curs)
		h.commitAll(curs, nil)
		h.deleteAll()
		h.visAll()
	}
	require.Equal(t, []uint64{1, 2, 3, 4}, seen["g"], "an acknowledged message handed out again in the same life")
}

// revReadCorrupt (per mille, INORDER_REV_READCORRUPT, default 10; 0
// turns it off) makes the world model's cursor reads fail for good
// (ErrCorrupt) for one stream, in the cases that inject corrupt commits.
var revReadCorrupt = func() int {
	n, err := strconv.Atoi(os.Getenv("INORDER_REV_READCORRUPT"))
	if err != nil {
		return 10
	}
	return n
}()

// Finding C (pre-existing, near the change): a SyncAck Ack made after
// the group stopped (its hand-out was with the application) waits in
// g.tickets; read again, the cursor is someone else's, ahead of it:
// becomeLoaded adopts it and never resolves the ticket (resolveConflict
// resolves such tickets with ErrConflict). Nothing more of the group
// comes, so the Ack waits until its ctx ends.
//
// Stopped twice (the retry's read refused too), the group gives back what
// it kept and adopts the cursor read after (becomeLoaded): the ticket must
// resolve there as well.
func TestRevKeepSyncAckAfterStopNeverResolves(t *testing.T) {
	for _, twice := range []bool{false, true} {
		t.Run(fmt.Sprintf("twice=%v", twice), func(t *testing.T) { revKeepSyncAckAfterStop(t, twice) })
	}
}

func revKeepSyncAckAfterStop(t *testing.T, twice bool) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtLeastOnce
	h := newEH(t, cfg)
	curs := map[string]seqstore.Cursor{"g": {Epoch: 1, Next: 1}}
	h.arrive(tagged("g", 1, 1), tagged("g", 1, 2))
	h.readAll(curs)
	d1, ok := h.next()
	require.True(t, ok)
	_, err := h.c.Ack(h.now, &d1, false)
	require.NoError(t, err)
	h.ready()
	d2, ok := h.next()
	require.True(t, ok)
	require.Equal(t, uint64(2), d2.Seq)
	h.tick(cfg.ReapInterval)
	require.NotEmpty(t, h.commits)
	h.commitAll(nil, &seqstore.BatchError{Errs: []error{seqstore.ErrCorrupt}})
	if twice {
		h.tick(cfg.RetryMax)
		h.rkReadsFail()
	}
	tk, err := h.c.Ack(h.now, &d2, true) // after the stop
	require.NoError(t, err)
	h.ready()
	curs["g"] = seqstore.Cursor{Epoch: 1, Next: 3} // someone else, past both
	if twice {
		// Someone else's, past g/1/1 only: the Ack's advance is not
		// durable, and will not be written.
		curs["g"] = seqstore.Cursor{Epoch: 1, Next: 2}
	}
	for range 5 {
		h.tick(cfg.RetryMax)
		h.readAll(curs)
		h.commitAll(curs, nil)
		h.deleteAll()
		h.visAll()
	}
	done, _ := h.r16Resolved(tk)
	require.True(t, done, "a SyncAck Ack made after the stop never resolves")
}

// Finding D (pre-existing; found by the world model once its reads also
// fail for good: INORDER_REV_READCORRUPT=30, seed 7, [liveness] "g0/100/4
// not delivered", g0 next=3 dur=ack=100/4). A group stops on a store
// error while its next message is out (g/1/2, with the application); read
// again, the cursor is not the one it knew durable, so becomeLoaded
// adopts it and sets next to cur.Next, the seq that is out. moveTo has the
// guard for exactly this ("left at it, next would stay behind the cursor
// once that Ack is durable, waiting forever for a seq already handled");
// becomeLoaded does not: once g/1/2's Ack is durable the group waits for
// seq 2 for ever, and g/1/3 is never handed out.
//
// Stopped twice, the group adopts the cursor in becomeLoaded, which needs
// the same guard.
func TestRevKeepFailedWithOutStallsAfterLoad(t *testing.T) {
	for _, twice := range []bool{false, true} {
		t.Run(fmt.Sprintf("twice=%v", twice), func(t *testing.T) { revKeepFailedWithOut(t, twice) })
	}
}

func revKeepFailedWithOut(t *testing.T, twice bool) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtLeastOnce
	h := newEH(t, cfg)
	curs := map[string]seqstore.Cursor{"g": {Epoch: 1, Next: 1}}
	h.arrive(tagged("g", 1, 1), tagged("g", 1, 2))
	h.readAll(curs)
	d1, ok := h.next()
	require.True(t, ok)
	_, err := h.c.Ack(h.now, &d1, false)
	require.NoError(t, err)
	h.ready()
	d2, ok := h.next()
	require.True(t, ok)
	require.Equal(t, uint64(2), d2.Seq)
	h.tick(cfg.ReapInterval)
	require.NotEmpty(t, h.commits)
	// The advance 1/1->1/2 is refused as a conflict: the store holds 1/2
	// (its own write applied, reported refused; or someone else's).
	curs["g"] = seqstore.Cursor{Epoch: 1, Next: 2}
	h.commitAll(nil, &seqstore.BatchError{Errs: []error{seqstore.ErrConflict}})
	require.NotEmpty(t, h.reads, "the conflict's re-read")
	h.rkReadsFail() // ... fails for good: the group stops
	if twice {
		h.tick(cfg.RetryMax)
		h.rkReadsFail()
	}
	h.tick(cfg.RetryMax)
	h.readAll(curs) // 1/2
	_, err = h.c.Ack(h.now, &d2, false)
	require.NoError(t, err)
	h.ready()
	h.arrive(tagged("g", 1, 3))
	var got []uint64
	for range 4 {
		h.tick(cfg.GapTimeout)
		h.readAll(curs)
		h.commitAll(curs, nil)
		h.deleteAll()
		h.visAll()
		if d, ok := h.next(); ok {
			got = append(got, d.Seq)
			_, err := h.c.Ack(h.now, &d, false)
			require.NoError(t, err)
			h.ready()
		}
	}
	require.Equal(t, uint64(4), curs["g"].Next, "g/1/2's and g/1/3's advances")
	require.Equal(t, []uint64{3}, got, "g/1/3, present, is never handed out: the group waits for seq 2, below its cursor")
}
