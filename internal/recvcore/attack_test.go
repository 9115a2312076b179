package recvcore_test

// Attack review of the recent receive-core changes (lost ChangeVisibility
// answers counted against MaxHeld, no stale receipts, AtMostOnce Unordered
// "own delete"). Each test reproduces one defect with the eh harness; the
// harness plays the queue, and the comment of each test says what the
// queue did.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// Cap (change 1): a message released while its extension is in flight is
// counted "as if extended" from the moment of the release (release time +
// VisibilityExtend). When the extension's answer is then lost (an
// ambiguous error, arriving late), releasedChanged returns without moving
// that end: but the queue may have applied the extension at any time up to
// the answer, so the message may stay invisible (received and not deleted,
// as the queue counts) until answer time + VisibilityExtend. The same lost
// answer for a message still held is counted until answer + timeout
// (Visibility, settledExtended); the released path is not.
//
// Figures: MaxHeld 8, Visibility 10 s, VisibilityExtend 30 s. The extension
// of seq 6 is sent at t=8.5 s and the message is evicted (released) at once;
// the answer, "timeout", comes at t=28.5 s. The queue may hold the message
// until t=58.5 s; the Core stops counting it at t=38.5 s: at t=45 s Room is
// 8 (the whole cap) although one message may still be invisible (want 7).
func TestAttackReleasedDuringExtensionLostAnswerUndercounts(t *testing.T) {
	cfg := ehConfig()
	cfg.MaxHeld = 8
	cfg.Visibility = 10 * time.Second
	cfg.VisibilityExtend = 30 * time.Second
	cfg.VisibilityMargin = 2 * time.Second
	h := newEH(t, cfg)
	start := h.now
	curs := map[string]seqstore.Cursor{"g": {Epoch: 1, Next: 1}}
	h.arrive(tagged("g", 1, 3), tagged("g", 1, 4), tagged("g", 1, 5), tagged("g", 1, 6))
	h.readAll(curs)
	require.Equal(t, 4, h.c.Room(h.now))

	h.tick(8500 * time.Millisecond) // extensions due (10 s - 2 s margin)
	require.Len(t, h.vis, 4)
	var v6 recvcore.ChangeVisibility
	for _, v := range h.vis {
		if v.Receipt == "r4" { // seq 6
			v6 = v
		}
	}
	require.NotZero(t, v6.ID)
	// Seqs 3..5: their extensions succeed at once.
	others := h.vis
	h.vis = nil
	for _, v := range others {
		if v.ID != v6.ID {
			h.c.Visibility(h.now, v.ID, v.Receipt+"'", nil)
			h.ready()
		}
	}
	// The cap fills (seq 2 is missing: nothing moves): makeRoom evicts,
	// the farthest first, until everything held is released, seq 6 among
	// them while its extension is in flight.
	h.arrive(tagged("g", 1, 7), tagged("g", 1, 8), tagged("g", 1, 9), tagged("g", 1, 10))
	for range 4 {
		h.readAll(curs) // the gap's cursor check: still 1/1
		h.tick(time.Millisecond)
	}
	require.GreaterOrEqual(t, h.c.Stats().Released, int64(8), "%s", h.c.Dump())
	// Shortenings of the others are answered; seq 6's is not shortened.
	for _, v := range h.vis {
		require.NotEqual(t, "r4", v.Receipt)
	}
	h.visAll()

	// The extension's answer is lost: it took effect at the queue just
	// before the client gave up, 20 s after it was sent.
	h.now = start.Add(28500 * time.Millisecond)
	h.c.Visibility(h.now, v6.ID, "", errors.New("read tcp: i/o timeout"))
	h.ready()
	h.tick(time.Millisecond)
	h.visAll() // shortenings of the others, rate-limited until now

	h.now = start.Add(37 * time.Second)
	h.c.Tick(h.now)
	h.ready()
	require.Equal(t, cfg.MaxHeld-1, h.c.Room(h.now), "t=37s: seq 6 alone is counted (everything else visible again)")

	h.now = start.Add(45 * time.Second)
	h.c.Tick(h.now)
	h.ready()
	room := h.c.Room(h.now)
	t.Logf("t=45s: Room %d of MaxHeld %d; seq 6 may be invisible until t=58.5s", room, cfg.MaxHeld)
	require.Equal(t, cfg.MaxHeld-1, room,
		"a lost extension answer of a released message: the queue may count it until answer+VisibilityExtend (t=58.5s), the Core stopped at release+VisibilityExtend (t=38.5s)")
}

// Stale receipt (change 2): a delete that the queue refuses as stale, after
// an extension whose answer was lost (fLapsed), counts the message until
// the extension's end (change 1) with a released entry that keeps the
// receipt the queue just called stale. Close then shortens every released
// entry with a receipt: a ChangeVisibility with that stale receipt.
//
// Figures: the delete of r1 at t=10 s returns Stale; Close at t=11 s sends
// ChangeVisibility(r1, 1 s): 1 request with a receipt known stale (want 0).
func TestAttackCloseShortensReceiptKnownStale(t *testing.T) {
	cfg := ehConfig()
	cfg.MaxHeld = 40
	cfg.Visibility = 10 * time.Second
	cfg.VisibilityExtend = 30 * time.Second
	cfg.VisibilityMargin = 2 * time.Second
	h := newEH(t, cfg)
	rs := h.arrive(tagged("g", 1, 1))
	h.readAll(nil)
	d, ok := h.next()
	require.True(t, ok)
	h.tick(9 * time.Second) // the extension is due
	require.Len(t, h.vis, 1)
	v := h.vis[0]
	h.vis = nil
	h.c.Visibility(h.now, v.ID, "", errors.New("timeout after")) // applied: the receipt rotated
	h.ready()
	_, err := h.c.Ack(h.now, &d, false)
	require.NoError(t, err)
	h.ready()
	h.commitAll(map[string]seqstore.Cursor{}, nil)
	h.tick(time.Second)
	require.NotEmpty(t, h.deletes)
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
	require.Empty(t, h.vis)
	h.tick(time.Second)
	h.c.Close(h.now)
	h.ready()
	var stale []recvcore.ChangeVisibility
	for _, v := range h.vis {
		if v.Receipt == rs[0] {
			stale = append(stale, v)
		}
	}
	t.Logf("visibility changes after Close: %+v", h.vis)
	require.Empty(t, stale, "Close changes the visibility of receipt %s, which the queue reported stale", rs[0])
}

// AtMostOnce (change 4): deletedBeforeHandOut takes a retried delete that
// finds the receipt stale while the Core believes the message invisible
// (visibleAt - sent > staleMargin, 1 s) for its own applied first attempt,
// and hands the message out. But the Core dates a visibility from the
// ANSWER of the change that set it (extended: now + timeout), while the
// queue dates it from when it applied the change. An extension answered L
// late makes the Core believe the message invisible L longer than it is;
// with L > staleMargin + the delete's backoff, another receiver can
// receive the message in between (its receipt then goes stale), and the
// Core hands it out too: delivered twice under AtMostOnce.
//
// Figures: Visibility 10 s, VisibilityExtend 30 s. The extension is sent
// at t=8 s and applied at once (invisible until t=38 s) but its answer
// comes at t=12 s (4 s late): the Core believes t=42 s. Next at t=37.2 s:
// the delete fails with a transient error (not applied). At t=38.05 s
// another receiver (AtMostOnce) receives the message and hands it out. The
// retry at t=38.2 s finds the receipt stale; 42 - 38.2 = 3.8 s > 1 s, so
// the Core resolves its hand-out without error: 2 hand-outs (want 1).
func TestAttackAMOStaleRetryAfterLateExtensionAnswerDuplicates(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtMostOnce
	cfg.Visibility = 10 * time.Second
	cfg.VisibilityExtend = 30 * time.Second
	cfg.VisibilityMargin = 2 * time.Second
	h := newEH(t, cfg)
	start := h.now
	rs := h.arrive([]byte("plain untagged payload"))
	h.tick(8 * time.Second)
	require.Len(t, h.vis, 1)
	v := h.vis[0]
	h.vis = nil
	// Applied by the queue at t=8 s (invisible until 38 s); answered at 12 s.
	h.now = start.Add(12 * time.Second)
	h.c.Visibility(h.now, v.ID, rs[0]+"'", nil)
	h.ready()

	h.now = start.Add(37200 * time.Millisecond)
	h.c.Tick(h.now)
	h.ready()
	d, ok := h.next()
	require.True(t, ok)
	require.True(t, d.Unordered)
	require.NotZero(t, d.Await)
	require.Len(t, h.deletes, 1)
	del := h.deletes[0]
	h.deletes = nil
	h.c.Deleted(h.now, del.ID, []recvcore.DeleteResult{{Err: errors.New("503 service unavailable"), Retry: true}})
	h.ready()
	require.Empty(t, h.resolve)

	// t=38 s: the message is visible at the queue; at 38.05 s another
	// receiver takes it (AtMostOnce: deletes it and hands it out).
	otherReceiverHandedOut := 1

	h.now = start.Add(38200 * time.Millisecond)
	h.c.Tick(h.now)
	h.ready()
	require.Len(t, h.deletes, 1, "the retry")
	del = h.deletes[0]
	h.deletes = nil
	h.c.Deleted(h.now, del.ID, []recvcore.DeleteResult{{Err: errors.New("receipt handle is stale"), Stale: true}})
	h.ready()
	require.Len(t, h.resolve, 1)
	handedOut := otherReceiverHandedOut
	if h.resolve[0].Err == nil {
		handedOut++ // the Receive waiting on d.Await gives the message to the application
	}
	t.Logf("hand-outs of the message: %d (this receiver's resolution: %v)", handedOut, h.resolve[0].Err)
	require.Equal(t, 1, handedOut, "AtMostOnce: the message went to another receiver after its visibility ended, and this Core hands it out too")
}

// Stale receipt (change 2): swapReceipt (the same message received again
// while an extension C1 of its old receipt is in flight) clears fVisBusy
// but leaves C1 in vis.busy, bound to the message at the same generation.
// A new extension C2 of the new receipt r2 sets fVisBusy again; when C1's
// answer then comes (any error), Visibility clears fVisBusy although C2 is
// still in flight. The acked message is then settled without fVisBusy, its
// settled entry is watched and extended again: a second change C3 with r2,
// which C2 rotates; C3's failure releases the delete that waited, also
// with r2. Both are refused as stale by a queue that applied C2. (The cap
// held here: countUntilVisible attaches the release entry to C2, whose
// success then counts the message until its end.)
//
// Figures: Visibility 10 s, VisibilityExtend 30 s, margin 2 s. C1 (r1) at
// t=8 s never reaches the queue; the message is received again at 10.5 s
// (r2); C2 (r2) at 18.5 s, applied; C1's answer "deadline exceeded" at
// 19 s; ack, commit: C3 (r2) is sent while C2 is in flight: 1 change and 1
// delete with a stale receipt (want 0 and 0). Room at 25 s: 39 of 40 (right).
func TestAttackStaleAnswerAfterRedeliveryClearsBusyOfNewChange(t *testing.T) {
	cfg := ehConfig()
	cfg.MaxHeld = 40
	cfg.Visibility = 10 * time.Second
	cfg.VisibilityExtend = 30 * time.Second
	cfg.VisibilityMargin = 2 * time.Second
	h := newEH(t, cfg)
	start := h.now
	curs := map[string]seqstore.Cursor{}
	room := h.c.Room(h.now)
	rs := h.arrive(tagged("g", 1, 1))
	h.readAll(curs)
	d, ok := h.next()
	require.True(t, ok)

	h.now = start.Add(8 * time.Second)
	h.c.Tick(h.now)
	h.ready()
	require.Len(t, h.vis, 1)
	c1 := h.vis[0]
	h.vis = nil
	require.Equal(t, rs[0], c1.Receipt)

	// C1 never reached the queue: the message is visible at 10 s and this
	// receiver gets it again.
	h.now = start.Add(10500 * time.Millisecond)
	r2 := h.arrive(tagged("g", 1, 1))[0]

	h.now = start.Add(18500 * time.Millisecond)
	h.c.Tick(h.now)
	h.ready()
	require.Len(t, h.vis, 1, "the new receipt's extension")
	c2 := h.vis[0]
	h.vis = nil
	require.Equal(t, r2, c2.Receipt)
	// The queue applies C2 at once: invisible until 48.5 s, r2 stale.

	h.now = start.Add(19 * time.Second)
	h.c.Visibility(h.now, c1.ID, "", errors.New("context deadline exceeded"))
	h.ready()
	_, err := h.c.Ack(h.now, &d, false)
	require.NoError(t, err)
	h.ready()
	h.commitAll(curs, nil)
	h.tick(200 * time.Millisecond)
	h.commitAll(curs, nil)
	staleChanges := h.vis
	h.vis = nil
	for _, v := range staleChanges {
		h.c.Visibility(h.now, v.ID, "", recvcore.NotApplied(errors.New("receipt handle stale")))
		h.ready()
	}
	h.tick(200 * time.Millisecond)
	var staleDeletes int
	for len(h.deletes) > 0 {
		del := h.deletes[0]
		h.deletes = h.deletes[1:]
		res := make([]recvcore.DeleteResult, len(del.Receipts))
		for i, r := range del.Receipts {
			if r == r2 {
				staleDeletes++
				res[i] = recvcore.DeleteResult{Err: errors.New("receipt handle stale"), Stale: true}
			}
		}
		h.c.Deleted(h.now, del.ID, res)
		h.ready()
	}
	h.c.Visibility(h.now, c2.ID, r2+"'", nil) // C2's answer, late
	h.ready()

	h.now = start.Add(25 * time.Second)
	h.c.Tick(h.now)
	h.ready()
	got := h.c.Room(h.now)
	t.Logf("changes sent with r2 while C2 (r2) was in flight: %d; deletes with r2: %d; Room at 25 s: %d of %d (the queue holds the message until 48.5 s)",
		len(staleChanges), staleDeletes, got, room)
	require.Empty(t, staleChanges, "a visibility change with r2 while C2, which rotates r2, is in flight")
	require.Zero(t, staleDeletes, "a delete with r2 while C2, which rotates r2, is in flight")
	require.Equal(t, room-1, got, "the queue holds the message invisible until 48.5 s")
}
