package recvcore_test

// Review 3: reproductions at the level of the receive core. Each test says
// what it shows, what was expected and what happened.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// TestRev3_FetchFailedRoomNeverComesBack: FetchFailed counts a failed
// receive's n messages against the cap until a visibility timeout passes.
// Nothing wakes the Core when that time comes: Deadline does not include
// the end of the released entries (budget.released), and Room "changes
// nothing", so it keeps subtracting the expired entries until some other
// event runs makeRoom. An idle receiver (no group, no timer) whose receives
// failed a few times (a short queue outage) therefore stops fetching for
// good: the shell's fetchers wait for a room signal that only a step can
// give, and the keeper, with no deadline, sleeps an hour. Expected: a
// deadline at (or before) the time the failed receives stop counting, and
// Room back to the cap after it. Figures: MaxHeld 32, two failed receives of
// 16, Visibility 1h; Deadline reports none, and Room 2h later is still 0.
func TestRev3_FetchFailedRoomNeverComesBack(t *testing.T) {
	cfg := ehConfig()
	cfg.MaxHeld = 32
	cfg.Window = 32
	h := newEH(t, cfg)
	h.c.FetchFailed(h.now, 16)
	h.c.FetchFailed(h.now, 16)
	h.ready()
	require.Equal(t, 0, h.c.Room(h.now), "the failed receives fill the cap")
	at, ok := h.c.Deadline()
	later := h.now.Add(2 * time.Hour)
	room := h.c.Room(later)
	t.Logf("deadline %v (ok %v), room %v after the visibility timeout: %d", at.Sub(h.now), ok, later.Sub(h.now), room)
	require.True(t, ok && !at.After(h.now.Add(cfg.Visibility+time.Second)),
		"no deadline when the failed receives stop counting (Visibility %v): nothing wakes the Core to give the room back", cfg.Visibility)
	require.Equal(t, cfg.MaxHeld, room, "Room after the failed receives' visibility ended")
}

// TestRev3_MaxHoldPassedWithLongVisibility: README "Held too long": "no
// message stays received and not deleted longer than ReceiveOptions.MaxHold
// (default 20 minutes, under the 30 at which MNS throttles the whole
// queue)". The hold limit is only looked at when a message comes within
// VisibilityMargin of the end of its visibility (the visibility list), and
// it only refuses extensions. With a queue whose visibility timeout is
// longer than MaxHold (MNS allows up to 12 hours; one hour here, margin a
// third of it as the ordered default), a message waiting behind a hole is
// first looked at 40 minutes after it was received, and parked then.
// Expected: parked (deleted from the queue) by MaxHold, 20 minutes.
// Happened: parked at 40 minutes, 10 minutes past the service's 30.
func TestRev3_MaxHoldPassedWithLongVisibility(t *testing.T) {
	cfg := ehConfig()
	cfg.Park = true
	cfg.Visibility = time.Hour
	cfg.VisibilityExtend = time.Hour
	cfg.VisibilityMargin = 20 * time.Minute
	cfg.MaxHold = 20 * time.Minute
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	h.arrive(tagged("g", 1, 2)) // seq 1 is missing: seq 2 waits
	h.pump(w)
	start := h.now
	var parkedAt time.Duration = -1
	for range 60 {
		h.tick(time.Minute)
		h.pump(w)
		if h.c.Stats().Parked > 0 && parkedAt < 0 {
			parkedAt = h.now.Sub(start)
		}
	}
	t.Logf("seq 2 parked %v after it was received (MaxHold %v, the service's limit 30m)", parkedAt, cfg.MaxHold)
	require.True(t, parkedAt >= 0 && parkedAt <= cfg.MaxHold, "held received-and-not-deleted past MaxHold: parked at %v", parkedAt)
}

// TestRev3_MaxHoldIgnoredWithoutExtension: with VisibilityMargin -1
// ("disables extension") the visibility lane returns before it looks at
// anything, so the hold limit is never applied: a message waiting behind a
// hole is neither parked nor reported, whatever MaxHold says. Over a queue
// whose visibility timeout is above MaxHold (an hour here) it stays
// received and not deleted for the whole hour. Expected: parked by MaxHold
// (20 min). Happened: never parked within 59 minutes.
func TestRev3_MaxHoldIgnoredWithoutExtension(t *testing.T) {
	cfg := ehConfig()
	cfg.Park = true
	cfg.Visibility = time.Hour
	cfg.VisibilityExtend = time.Hour
	cfg.VisibilityMargin = -1
	cfg.MaxHold = 20 * time.Minute
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	h.arrive(tagged("g", 1, 2))
	h.pump(w)
	start := h.now
	var parkedAt time.Duration = -1
	for range 59 {
		h.tick(time.Minute)
		h.pump(w)
		if h.c.Stats().Parked > 0 && parkedAt < 0 {
			parkedAt = h.now.Sub(start)
		}
	}
	t.Logf("parked at %v (-1ns: never), MaxHold %v, held now %d", parkedAt, cfg.MaxHold, h.c.Stats().Held)
	require.True(t, parkedAt >= 0 && parkedAt <= cfg.MaxHold, "MaxHold not applied with VisibilityMargin -1")
}

// TestRev3_CloseDoesNotGiveBackWhileExtending: Close gives back what it
// holds, its visibility shortened to ShortVisibility "so that a restart
// takes it within seconds". A held message whose visibility extension is
// in flight when Close begins is counted GivenBack and its shortening is
// asked for with the receipt the extension is about to replace (Close's
// loop over budget.released ignores fVisBusy): two changes of one receipt
// race, which is what fDelWait avoids for deletes. When the extension lands
// first (as here), the queue refuses the shortening as stale (MNS rotates
// the handle on every change), and when the extension's result comes, the
// msg is gone (generation fence): nothing shortens the new receipt. The
// message stays invisible for the whole VisibilityExtend (an hour here)
// after a Close that reported it given back. Expected: a ChangeVisibility
// to ShortVisibility of the receipt the extension returned. Happened:
// GivenBack 1, the only shortening is of the stale receipt r1.
func TestRev3_CloseDoesNotGiveBackWhileExtending(t *testing.T) {
	cfg := ehConfig()
	cfg.Visibility = 30 * time.Second
	cfg.VisibilityExtend = time.Hour
	cfg.VisibilityMargin = 10 * time.Second
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	h.arrive(tagged("g", 1, 2)) // waits behind seq 1
	h.pump(w)
	h.tick(21 * time.Second) // within the margin: an extension is asked for
	require.Len(t, h.vis, 1)
	ext := h.vis[0]
	h.vis = nil
	h.c.Close(h.now)
	h.ready()
	h.c.Visibility(h.now, ext.ID, "r1-extended", nil) // the queue: invisible for an hour, new receipt
	h.ready()
	var short []string
	answer := func() {
		for len(h.vis) > 0 {
			v := h.vis[0]
			h.vis = h.vis[1:]
			short = append(short, v.Receipt)
			var err error
			if v.Receipt == ext.Receipt {
				err = errors.New("stale receipt: rotated by the extension")
			}
			h.c.Visibility(h.now, v.ID, v.Receipt+"'", err)
			h.ready()
		}
	}
	answer()
	for i := 0; i < 20 && !h.c.Flushed(); i++ {
		h.tick(100 * time.Millisecond)
		h.pump(w)
		answer()
	}
	st := h.c.Stats()
	t.Logf("flushed %v, GivenBack %d, shortenings asked for %v (the queue's live receipt: r1-extended, invisible %v)", h.c.Flushed(), st.GivenBack, short, cfg.VisibilityExtend)
	require.Contains(t, short, "r1-extended", "a message Close counted as given back stays invisible for VisibilityExtend (%v)", cfg.VisibilityExtend)
}

// TestRev3_NackDuringCloseNotGivenBack: Close "gives back ... messages
// waiting for a retry". It does so for the ones waiting when Close begins.
// A Run handler still running at Close (Close waits for it) that fails
// Nacks its message after Close began: the retry timer fires, the message
// becomes ready (outReady), nothing hands it out (closing), and nothing
// gives it back: Flushed is true with the message held and invisible.
// Expected: the nacked message given back (visibility shortened).
// Happened: GivenBack 0, no shortening, Flushed true.
func TestRev3_NackDuringCloseNotGivenBack(t *testing.T) {
	cfg := ehConfig()
	cfg.Visibility = 30 * time.Second
	cfg.VisibilityExtend = 30 * time.Second
	cfg.VisibilityMargin = 10 * time.Second
	h := newEH(t, cfg)
	w := newEHWorld()
	h.arrive(tagged("g", 1, 1))
	h.pump(w)
	d, ok := h.next()
	require.True(t, ok)
	h.c.Close(h.now)
	h.ready()
	require.NoError(t, h.c.Nack(h.now, &d, errors.New("handler failed")))
	h.ready()
	var short []string
	for range 50 {
		short = append(short, h.visAll()...) // (before pump answers them)
		h.tick(100 * time.Millisecond)
		h.pump(w)
	}
	st := h.c.Stats()
	t.Logf("flushed %v, GivenBack %d, held %d, shortenings %v", h.c.Flushed(), st.GivenBack, st.Held, short)
	require.Contains(t, short, "r1", "the message nacked during Close is not given back: it stays invisible until its timeout")
}

// TestRev3_SettledEntryStuckAfterReceiptSwap: a held message's extension is
// in flight (fVisBusy, with receipt r1) when the queue delivers the same
// message again (receipt r2): swapReceipt takes r2 and keeps fVisBusy. The
// message is then handed out and acked: settleMsg copies fVisBusy into the
// settled entry, with receipt r2. The extension's result names r1:
// settledExtended looks the entry up by (epoch, seq, r1), finds none
// ("deleted or released meanwhile") and returns, so fVisBusy is never
// cleared. Once the cursor is durable flushSettled sees fVisBusy, sets
// fDelWait and keeps the entry, for ever: the message is never deleted,
// the group never goes idle, and the cap keeps counting it (live never
// drops). Expected: after the commit, the delete of r2 and Held 0.
// Happened: no delete of r2, Held 1, the settled entry kept.
func TestRev3_SettledEntryStuckAfterReceiptSwap(t *testing.T) {
	cfg := ehConfig()
	cfg.Visibility = 30 * time.Second
	cfg.VisibilityExtend = 30 * time.Second
	cfg.VisibilityMargin = 10 * time.Second
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	r1 := h.arriveID("id-2", tagged("g", 1, 2)) // waits behind seq 1
	h.pump(w)
	h.tick(21 * time.Second)
	require.Len(t, h.vis, 1)
	ext := h.vis[0]
	h.vis = nil
	require.Equal(t, r1, ext.Receipt)
	// The queue delivers it again (its visibility was about to end).
	h.receipts++
	r2 := "r-again"
	h.c.Arrive(h.now, []recvcore.Incoming{{Body: tagged("g", 1, 2), ID: "id-2", Receipt: r2, DequeueCount: 2}})
	h.ready()
	h.arrive(tagged("g", 1, 1))
	for range 2 {
		d, ok := h.next()
		require.True(t, ok)
		_, err := h.c.Ack(h.now, &d, false)
		require.NoError(t, err)
		h.ready()
	}
	// The old extension answers (the queue refuses a stale receipt).
	h.c.Visibility(h.now, ext.ID, "", recvcore.NotApplied(errors.New("receipt stale")))
	h.ready()
	for range 20 {
		h.tick(time.Second)
		h.pump(w)
	}
	st := h.c.Stats()
	t.Logf("deleted %v, Held %d, cursor %+v", h.deleted, st.Held, w.curs["g"])
	require.Contains(t, h.deleted, r2, "the acked message's live receipt is never deleted")
	require.Equal(t, 0, st.Held, "received and not deleted after everything was acked and committed")
}

// TestRev3_ScanDeadlineSpinsDuringClose: scanLane.due reports l.after
// whenever the park's streams are still to be listed (a failed listing, or
// a rescan asked for after shedding), but scanLane.ready does nothing once
// the Core closes. After Close, Deadline keeps returning a time already
// past and Tick at it changes nothing: a deadline that is due and does
// nothing, which the shell's keeper turns into a step every millisecond
// (its floor) for as long as the Close flush lasts. Expected: no deadline
// from the scan lane once closing (or one that moves on). Happened: the
// same past deadline after 5 Ticks.
func TestRev3_ScanDeadlineSpinsDuringClose(t *testing.T) {
	cfg := ehConfig()
	cfg.Park = true
	h := newEH(t, cfg)
	h.ready()
	require.Len(t, h.scans, 1)
	s := h.scans[0]
	h.scans = nil
	h.c.Scanned(h.now, s.ID, nil, errors.New("store unreachable")) // retried after a backoff
	h.ready()
	h.c.Close(h.now)
	h.ready()
	var stuck int
	var first time.Time
	for range 5 {
		at, ok := h.c.Deadline()
		if !ok {
			break
		}
		if first.IsZero() {
			first = at
		}
		if !at.After(h.now) {
			stuck++
		}
		h.now = maxT(h.now, at).Add(time.Millisecond)
		h.c.Tick(h.now)
		h.ready()
	}
	at, ok := h.c.Deadline()
	t.Logf("after Close: deadline %v (ok %v), %d of 5 ticks at a deadline already due; now %v", at.Format(time.StampMilli), ok, stuck, h.now.Format(time.StampMilli))
	require.False(t, ok && !at.After(h.now), "a due deadline that Tick never clears (the keeper spins at its 1 ms floor)")
}

func maxT(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestRev3_StartLowestLoneStaleCopyStartsStream: README (Faults, "Receiver
// store wiped"): "with StartLowest, the new receiver continues at the
// lowest seq it saw (a stale copy left in the queue excepted)". The stale
// copy is only recognised when a second, higher seq arrives in the same
// StartSettle: a stale copy (received three times before, 10,000 below
// the stream's head) that is the only arrival of the settle time (the
// sender was quiet for two seconds) becomes the group's start. Everything
// between it and the head was handled and deleted long ago, so under
// GapWait the group then waits for ever on seq 6 while the head (10,001
// on) arrives. Expected: the stale copy passed over once the head shows
// (or not taken as the start). Happened: the group starts at 5, hands out
// 5 (an old, already-handled message, as ordered), then reports a gap at 6
// and never hands out 10,001..10,003.
func TestRev3_StartLowestLoneStaleCopyStartsStream(t *testing.T) {
	cfg := ehConfig()
	cfg.Start = recvcore.StartLowest
	cfg.Window = 100
	h := newEH(t, cfg)
	w := newEHWorld()
	h.receipts++
	h.c.Arrive(h.now, []recvcore.Incoming{{Body: tagged("g", 7, 5), ID: "stale-5", Receipt: "r-stale", DequeueCount: 3}})
	h.ready()
	h.pump(w)
	h.tick(3 * time.Second) // StartSettle ends with the stale copy alone
	h.pump(w)
	var got []uint64
	for range 60 { // a minute: the sender sends the head
		if len(got) < 10 {
			h.arrive(tagged("g", 7, 10001), tagged("g", 7, 10002), tagged("g", 7, 10003))
		}
		h.pump(w)
		for {
			d, ok := h.next()
			if !ok {
				break
			}
			got = append(got, d.Seq)
			_, _ = h.c.Ack(h.now, &d, false)
			h.ready()
		}
		h.tick(time.Second)
	}
	st := h.c.Stats()
	t.Logf("handed out %v; stuck %+v; cursor %+v", got, st.Stuck, w.curs["g"])
	require.Contains(t, got, uint64(10001), "the stream's head never handed out: the group started at the stale copy")
}

// TestRev3_SkippedRangesFullForLife: under GapSkip every hole the group
// ever skipped stays in its cursor (ranges are exact, never merged across a
// handed-out seq, never dropped), and a cursor with seqstore.MaxSkipped
// (64) ranges passes over nothing more. Over a group's life that is 64
// holes in all, however old: a topic subscriber (README: "a push whose
// retries fail is dropped ... GapSkip skips and reports it") whose group
// lost 64 pushes over months is then stuck for good on the 65th, although
// the earliest ranges lie far below anything that can still arrive (the
// queue's retention). Expected: the 65th hole skipped like the others once
// the oldest ranges are older than anything the queue can still deliver.
// Happened: the 65th hole is never skipped; the group is reported stuck
// ("skipped") and hands out nothing more.
func TestRev3_SkippedRangesFullForLife(t *testing.T) {
	cfg := ehConfig()
	cfg.GapPolicy = recvcore.GapSkip
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	seq := uint64(0)
	delivered := 0
	for hole := 1; hole <= 65; hole++ {
		seq++ // this seq is lost (a dropped push)
		seq++
		h.arrive(tagged("g", 1, seq))
		h.pump(w)
		for range 8 { // GapTimeout 5 s; a day passes between holes in life
			h.tick(time.Second)
			h.pump(w)
			for {
				d, ok := h.next()
				if !ok {
					break
				}
				delivered++
				_, _ = h.c.Ack(h.now, &d, false)
				h.ready()
			}
		}
	}
	st := h.c.Stats()
	t.Logf("65 holes, each skipped after GapTimeout: delivered %d of 65, skipped ranges in the cursor %d, stuck %+v",
		delivered, len(w.curs["g"].Skipped), st.Stuck)
	require.Equal(t, 65, delivered, "the 65th hole in the group's life is never skipped")
}

// TestRev3_DeadLetterAfterRecycleSettlesAnotherMessage: a use after
// recycle. A poison message (PoisonDeadLetter) stays out (outDead) while
// its dead letter is sent, and the dead lane keeps a pointer to its msg. A
// conflict resolved meanwhile (a second receiver moved the cursor past it:
// moveTo) queues the same msg for delete; the delete ends, gone recycles
// the msg, and the next arrival (seq 1 of another group, "x") takes it from
// the pool. When the dead letter's result comes, DeadLettered runs
// deadLettered on the recycled msg, now x's seq 1, waiting for its turn:
// it is "settled as an Ack would", x's acknowledged cursor jumps past seq
// 1, which is committed and deleted from the queue without ever being
// handed out. Expected: x's seq 1 handed out, the dead letter's result for
// the old message ignored. Happened: x's cursor committed to 2 and x's
// receipt (r4) deleted before any hand-out; only w/1 is handed out after
// it: x's seq 1 is lost (silently: no report).
func TestRev3_DeadLetterAfterRecycleSettlesAnotherMessage(t *testing.T) {
	cfg := ehConfig()
	cfg.Poison = recvcore.PoisonDeadLetter
	cfg.DeadLetter = true
	cfg.MaxAttempts = 1
	cfg.CommitInterval = 0
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	w.curs["x"] = seqstore.Cursor{Epoch: 1, Next: 1}
	w.curs["w"] = seqstore.Cursor{Epoch: 1, Next: 1}
	h.arrive(tagged("g", 1, 1), tagged("g", 1, 2))
	h.pump(w)
	d1, ok := h.next()
	require.True(t, ok)
	_, err := h.c.Ack(h.now, &d1, false)
	require.NoError(t, err)
	h.ready()
	require.Len(t, h.commits, 1, "seq 1's advance is written")
	commit := h.commits[0]
	h.commits = nil
	d2, ok := h.next()
	require.True(t, ok)
	require.EqualValues(t, 2, d2.Seq)
	require.NoError(t, h.c.Nack(h.now, &d2, errors.New("poison")))
	h.ready()
	require.Len(t, h.deads, 1, "seq 2 is being dead-lettered")
	dead := h.deads[0]
	h.deads = nil
	// A second receiver moved g's cursor to 10: the commit is refused.
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 10}
	h.c.Committed(h.now, commit.ID, &seqstore.BatchError{Errs: []error{seqstore.ErrConflict}})
	h.ready()
	h.pump(w) // the cursor is read again; seq 2's msg is queued for delete
	h.tick(300 * time.Millisecond)
	h.pump(w) // and deleted (ReapInterval): its msg is recycled
	t.Logf("deleted before x arrives: %v", h.deleted)
	// x's seq 1 arrives and takes a msg from the pool.
	xr := h.arrive(tagged("w", 1, 1), tagged("x", 1, 1)) // (the pool gives the last recycled first)
	h.pump(w)
	// The dead letter of g's seq 2 is sent.
	h.c.DeadLettered(h.now, dead.ID, make([]error, len(dead.Bodies)))
	h.ready()
	h.pump(w)
	h.tick(300 * time.Millisecond)
	h.pump(w)
	before := w.curs["x"]
	deletedBefore := append([]string(nil), h.deleted...)
	t.Logf("before any hand-out of x: x's cursor %+v, receipts deleted %v (x's seq 1: %s)", before, deletedBefore, xr[1])
	var got []string
	for {
		d, ok := h.next()
		if !ok {
			break
		}
		got = append(got, d.Group+"/"+string(rune('0'+d.Seq)))
		_, _ = h.c.Ack(h.now, &d, false)
		h.ready()
	}
	h.tick(time.Second)
	h.pump(w)
	t.Logf("handed out after the dead letter: %v; x's cursor %+v; receipts deleted %v (x's seq 1: %s)", got, w.curs["x"], h.deleted, xr[1])
	require.EqualValues(t, 0, before.Next-1, "x's cursor committed past seq 1 before any hand-out of it (a crash now loses it)")
	require.NotContains(t, deletedBefore, xr[1], "x's seq 1 deleted from the queue before its hand-out")
}

// TestRev3_CloseDoesNotWaitForDeadLetters: deadLane.flushed is always
// true, so Flushed (and the shell's Close) ends while dead letters are in
// flight or queued. The shell then cancels its context: a dead letter in
// flight is cut off (if the dead-letter queue took it, the message is
// neither deleted nor advanced past, and the next receiver dead-letters it
// again: a duplicate in the dead-letter queue); the queued ones are neither
// sent nor given back (they stay invisible for their whole visibility
// timeout). Five untagged bodies under UntaggedDeadLetter (batch 4, one
// request at a time). Expected: Flushed false until the dead letters are
// sent (or the queued ones given back). Happened: Flushed true with 4 in
// flight and 1 queued, GivenBack 0.
func TestRev3_CloseDoesNotWaitForDeadLetters(t *testing.T) {
	cfg := ehConfig()
	cfg.DeadLetter = true
	cfg.Untagged = recvcore.UntaggedDeadLetter
	h := newEH(t, cfg)
	h.arrive([]byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e"))
	require.Len(t, h.deads, 1)
	require.Len(t, h.deads[0].Bodies, 4)
	h.c.Close(h.now)
	h.ready()
	st := h.c.Stats()
	t.Logf("after Close: Flushed %v with a dead letter of %d bodies in flight and 1 queued; GivenBack %d", h.c.Flushed(), len(h.deads[0].Bodies), st.GivenBack)
	require.False(t, h.c.Flushed(), "Close ends with dead letters in flight and queued")
}

// TestRev3_AMOHandOutStrandedByPermanentCommitError: an AtMostOnce
// hand-out waits for its commit (Await ticket). When that commit fails with
// an error retrying soon cannot fix for the stream (seqstore.ErrCorrupt,
// once: say a record repaired meanwhile), becomeFailed resolves the SyncAck
// tickets but not the hand-out's, leaves it as the group's out message
// (outCommit), and after RetryMax re-reads the cursor, which resets the
// acknowledged cursor to the stored one: nothing is left to commit, the
// ticket never resolves, and the group never hands anything out again (its
// out message blocks it). Expected: once the store answers again, the
// hand-out proceeds (or its ticket resolves with the error and the message
// is handed out again later). Happened: the ticket is never resolved and
// nothing of the group is handed out in 60 s, seqs 1-3 all present.
func TestRev3_AMOHandOutStrandedByPermanentCommitError(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtMostOnce
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	h.arrive(tagged("g", 1, 1), tagged("g", 1, 2), tagged("g", 1, 3))
	h.pump(w)
	d, ok := h.next()
	require.True(t, ok)
	require.NotZero(t, d.Await)
	require.Len(t, h.commits, 1)
	c := h.commits[0]
	h.commits = nil
	h.c.Committed(h.now, c.ID, &seqstore.BatchError{Errs: []error{seqstore.ErrCorrupt}})
	h.ready()
	resolved := false
	var got []uint64
	for range 60 {
		h.tick(time.Second)
		h.pump(w)
		for _, r := range h.resolve {
			if r.Ticket == d.Await {
				resolved = true
			}
		}
		for {
			x, ok := h.next()
			if !ok {
				break
			}
			got = append(got, x.Seq)
			h.pump(w)
			_, _ = h.c.Ack(h.now, &x, false)
			h.ready()
		}
	}
	st := h.c.Stats()
	t.Logf("ticket resolved %v; handed out afterwards %v; cursor %+v; stuck %+v", resolved, got, w.curs["g"], st.Stuck)
	require.True(t, resolved || len(got) > 0, "the AtMostOnce hand-out waits for ever and its group is blocked")
}
