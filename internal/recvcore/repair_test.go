package recvcore_test

// The repairs (repair.go), step by step: each drives a Core into the state
// a repair needs, asks for it, and checks what the Core asks of the world
// and when the repair's ticket resolves. testdata/repair.txt shows the same
// as scripts.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// resolution returns the resolution of t among those collected, if any.
func (h *eh) resolution(t recvcore.Ticket) (error, bool) {
	for _, r := range h.resolve {
		if r.Ticket == t {
			return r.Err, true
		}
	}
	return nil, false
}

// reportsOf returns the reports of kind collected.
func (h *eh) reportsOf(kind recvcore.ReportKind) []recvcore.Report {
	var out []recvcore.Report
	for _, r := range h.reports {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// holed returns a Core (GapWait) whose group g handed out and committed
// seq 1 and waits on a hole at seq 2 (seqs 3 and 4 held), reported stuck.
func holed(t *testing.T, cfg recvcore.Config) (*eh, *ehWorld) {
	h, w := newEH(t, cfg), newEHWorld()
	h.arrive(tagged("g", 1, 1), tagged("g", 1, 3), tagged("g", 1, 4))
	h.pump(w)
	h.handAck(w, "g", 1)
	h.tick(cfg.GapTimeout + time.Second)
	h.pump(w)
	require.Len(t, h.reportsOf(recvcore.ReportGap), 1, "the hole is reported")
	require.Equal(t, []recvcore.StuckGroup{{Group: "g", Reason: "gap", Since: h.c.Stats().Stuck[0].Since}}, h.c.Stats().Stuck)
	return h, w
}

// TestRepairSkipHole: SkipHole moves the group past its hole at once,
// records the skipped range in the cursor it writes, and resolves its
// ticket only once that cursor is durable. A skipped seq that arrives
// later is reported late and handed out Unordered: deleted only after its
// Ack, never as a duplicate.
func TestRepairSkipHole(t *testing.T) {
	h, w := holed(t, ehConfig())
	tk, err := h.c.SkipHole(h.now, "g")
	require.NoError(t, err)
	h.ready()
	rep := h.reportsOf(recvcore.ReportRepair)
	require.Len(t, rep, 1, "the repair is reported")
	assert.Equal(t, recvcore.Report{Kind: recvcore.ReportRepair, Action: recvcore.ActionSkipHole, Msg: rep[0].Msg,
		Group: "g", Epoch: 1, Seq: 2, Last: 2, Age: rep[0].Age}, rep[0])
	skips := h.reportsOf(recvcore.ReportSkip)
	require.Len(t, skips, 1, "the skip is reported (OnSkip)")
	assert.Equal(t, [2]uint64{2, 2}, [2]uint64{skips[0].Seq, skips[0].Last})
	assert.Empty(t, h.c.Stats().Stuck, "no longer stuck")

	// The skip goes with the next commit: the ticket waits for it.
	require.Len(t, h.commits, 1)
	to := h.commits[0].Advances[0].To
	assert.Equal(t, []seqstore.Range{{Epoch: 1, First: 2, Last: 2}}, to.Skipped, "the skipped range is in the cursor written")
	assert.Equal(t, uint64(3), to.Next)
	_, done := h.resolution(tk)
	assert.False(t, done, "the ticket resolves only once the skip is durable")
	h.commitAll(w.curs, errors.New("store unreachable"))
	_, done = h.resolution(tk)
	assert.False(t, done, "a failed write does not end the wait: the skip is written again")
	h.tick(10 * time.Second)
	h.pump(w)
	err, done = h.resolution(tk)
	require.True(t, done, "resolved once durable")
	require.NoError(t, err)
	assert.Equal(t, []seqstore.Range{{Epoch: 1, First: 2, Last: 2}}, w.curs["g"].Skipped, "durable in the store")

	// The group moved on.
	d, ok := h.next()
	require.True(t, ok)
	assert.Equal(t, uint64(3), d.Seq)
	assert.False(t, d.Unordered)

	// Seq 2 arrives late: reported, handed out Unordered, not deleted
	// until its Ack.
	r := h.arrive(tagged("g", 1, 2))[0]
	late := h.reportsOf(recvcore.ReportLate)
	require.Len(t, late, 1, "the late arrival is reported (OnLate)")
	assert.Equal(t, uint64(2), late[0].Seq)
	h.tick(time.Second)
	h.pump(w)
	assert.NotContains(t, h.deleted, r, "a late arrival is never deleted unseen")
	u, ok := h.next()
	require.True(t, ok)
	assert.True(t, u.Unordered, "handed out flagged Unordered")
	assert.Equal(t, uint64(2), u.Seq)
	_, err = h.c.Ack(h.now, &u, false)
	require.NoError(t, err)
	h.tick(time.Second)
	h.pump(w)
	assert.Contains(t, h.deleted, r, "deleted after its Ack")
}

// TestRepairSkipHoleLateBeforeDurable: a skipped seq that arrives before
// the skip is durable is released (it comes back), not handed out: a
// restart could begin where it is not late.
func TestRepairSkipHoleLateBeforeDurable(t *testing.T) {
	h, _ := holed(t, ehConfig())
	_, err := h.c.SkipHole(h.now, "g")
	require.NoError(t, err)
	h.ready()
	r := h.arrive(tagged("g", 1, 2))[0]
	assert.Empty(t, h.reportsOf(recvcore.ReportLate), "not late until the skip is durable")
	assert.NotContains(t, h.deleted, r)
	assert.Equal(t, int64(1), h.c.Stats().Released, "released: it comes back")
}

// stuckOnHoleExactlyOnce returns an ExactlyOnce Core whose group g, stored
// at 1/2, holds 1/3 and is stuck on the hole at 1/2 past GapTimeout.
func stuckOnHoleExactlyOnce(t *testing.T) (*eh, *ehWorld, recvcore.Config) {
	cfg := ehConfig()
	cfg.Mode = recvcore.ExactlyOnce
	h, w := newEH(t, cfg), newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 2}
	h.arrive(tagged("g", 1, 3))
	h.pump(w)
	h.tick(cfg.GapTimeout + time.Second)
	h.pump(w)
	require.Len(t, h.c.Stats().Stuck, 1)
	return h, w, cfg
}

// TestRepairSkipHoleExactlyOnce: in ExactlyOnce mode the application
// writes the cursors past what it handles; the skip, which no hand-out
// carries yet, is written by the Core itself, and the group hands nothing
// out until it is durable.
func TestRepairSkipHoleExactlyOnce(t *testing.T) {
	h, w, _ := stuckOnHoleExactlyOnce(t)
	tk, err := h.c.SkipHole(h.now, "g")
	require.NoError(t, err)
	h.ready()
	require.Len(t, h.commits, 1, "the Core writes the skip")
	_, ok := h.next()
	assert.False(t, ok, "nothing handed out before the skip is durable")
	h.pump(w)
	err, done := h.resolution(tk)
	require.True(t, done)
	require.NoError(t, err)
	d, ok := h.next()
	require.True(t, ok)
	assert.Equal(t, uint64(3), d.Seq)
	assert.Equal(t, w.curs["g"], d.Advance.From, "the hand-out's advance starts from the written skip")
}

// TestRepairSkipHoleParked: with parking, the park is read before the
// skip: a missing seq found there is not skipped, and the ticket resolves
// without a skip.
func TestRepairSkipHoleParked(t *testing.T) {
	cfg := ehConfig()
	cfg.Park = true
	h, w := holed(t, cfg)
	w.park["g"] = map[uint64]seqstore.Parked{2: {Stream: seqstore.Stream{Queue: "q", Group: "g"}, Epoch: 1, Seq: 2, Body: tagged("g", 1, 2)}}
	h.tick(cfg.GapTimeout) // the hole's next look marks the park unread
	tk, err := h.c.SkipHole(h.now, "g")
	require.NoError(t, err)
	h.ready()
	assert.Empty(t, h.reportsOf(recvcore.ReportSkip), "nothing skipped before the park is read")
	h.pump(w)
	err, done := h.resolution(tk)
	require.True(t, done)
	require.NoError(t, err)
	assert.Empty(t, h.reportsOf(recvcore.ReportSkip), "the park held it: nothing skipped")
	d, ok := h.next()
	require.True(t, ok)
	assert.Equal(t, uint64(2), d.Seq, "handed out from the park, in order")
}

// poisoned returns a Core with a dead-letter queue whose group d is stuck
// on seq 1 (failed MaxAttempts times under PoisonBlock, waiting for its
// retry), seq 2 held behind it. It returns seq 1's receipt.
func poisoned(t *testing.T, deadLetter bool) (*eh, *ehWorld, string) {
	cfg := ehConfig()
	cfg.DeadLetter = deadLetter
	h, w := newEH(t, cfg), newEHWorld()
	r := h.arrive(tagged("d", 1, 1), tagged("d", 1, 2))[0]
	h.pump(w)
	for i := range cfg.MaxAttempts {
		if i > 0 {
			h.tick(cfg.RetryMax) // past the backoff
		}
		d, ok := h.next()
		require.True(t, ok)
		require.Equal(t, uint64(1), d.Seq)
		require.NoError(t, h.c.Nack(h.now, &d, errors.New("handler failed")))
		h.ready()
	}
	require.Len(t, h.reportsOf(recvcore.ReportStuck), 1, "stuck on a poison message")
	return h, w, r
}

// TestRepairDeadLetterHead: DeadLetterHead sends the poison message to the
// dead-letter queue first; its queue copy is deleted only once the copy is
// sent and the cursor past it is durable; a failed send resolves the
// ticket with its error and deletes nothing; the group moves on.
func TestRepairDeadLetterHead(t *testing.T) {
	h, w, r := poisoned(t, true)
	tk, err := h.c.DeadLetterHead(h.now, "d")
	require.NoError(t, err)
	h.ready()
	require.Len(t, h.deads, 1, "the dead-letter copy is asked for")
	assert.Equal(t, [][]byte{tagged("d", 1, 1)}, h.deads[0].Bodies, "the message as it was on the queue")
	rep := h.reportsOf(recvcore.ReportRepair)
	require.Len(t, rep, 1)
	assert.Equal(t, recvcore.ActionDeadLetterHead, rep[0].Action)
	h.tick(time.Second) // past ReapInterval: a delete queued would go now
	h.pump(w)
	assert.NotContains(t, h.deleted, r, "not deleted before its dead-letter copy is sent")
	assert.Empty(t, h.commits, "nor passed")
	_, ok := h.next()
	assert.False(t, ok, "nothing handed out meanwhile")

	// The send fails: the ticket tells, the message stays.
	dl := h.deads[0]
	h.deads = nil
	h.c.DeadLettered(h.now, dl.ID, []error{errors.New("dlq: 503")})
	h.ready()
	err, done := h.resolution(tk)
	require.True(t, done)
	require.ErrorContains(t, err, "dlq: 503")
	h.tick(10 * time.Second)
	h.pump(w)
	assert.NotContains(t, h.deleted, r, "not deleted after a failed send")
	assert.Empty(t, h.reportsOf(recvcore.ReportDeadLetter))

	// Asked again, it waits for the send retried.
	tk2, err := h.c.DeadLetterHead(h.now, "d")
	require.NoError(t, err)
	h.ready()
	require.Len(t, h.deads, 1, "the send is retried")
	dl = h.deads[0]
	h.deads = nil
	h.c.DeadLettered(h.now, dl.ID, []error{nil})
	h.ready()
	require.Len(t, h.reportsOf(recvcore.ReportDeadLetter), 1, "OnDeadLetter")
	assert.NotContains(t, h.deleted, r, "the cursor past it is not durable yet")
	_, done = h.resolution(tk2)
	assert.False(t, done, "the ticket waits for the cursor past the message")
	require.Len(t, h.commits, 1)
	assert.Equal(t, uint64(2), h.commits[0].Advances[0].To.Next, "the cursor passes the dead-lettered message")
	h.commitAll(w.curs, nil)
	err, done = h.resolution(tk2)
	require.True(t, done)
	require.NoError(t, err)
	h.tick(time.Second)
	h.pump(w)
	assert.Contains(t, h.deleted, r, "deleted once dead-lettered and passed")
	assert.Empty(t, h.c.Stats().Stuck)
	d, ok := h.next()
	require.True(t, ok, "the group moves on")
	assert.Equal(t, uint64(2), d.Seq)
}

// TestRepairReread: a group stopped by a store error reads its cursor at
// once when asked (not after RetryMax), and the ticket resolves with the
// read; a read that fails resolves it with the error.
func TestRepairReread(t *testing.T) {
	h, w := newEH(t, ehConfig()), newEHWorld()
	h.arrive(tagged("f", 1, 1))
	h.pump(w)
	d, ok := h.next()
	require.True(t, ok)
	_, err := h.c.Ack(h.now, &d, false)
	require.NoError(t, err)
	h.ready()
	require.Len(t, h.commits, 1)
	h.c.Committed(h.now, h.commits[0].ID, &seqstore.BatchError{Errs: []error{seqstore.ErrCorrupt}})
	h.commits = nil
	h.ready()
	require.Equal(t, "store", h.c.Stats().Stuck[0].Reason)
	require.Empty(t, h.reads, "no read before RetryMax")

	tk, err := h.c.Reread(h.now, "f")
	require.NoError(t, err)
	h.ready()
	require.Len(t, h.reads, 1, "read now")
	rd := h.reads[0]
	h.reads = nil
	h.c.Read(h.now, rd.ID, nil, errors.New("store unreachable"))
	h.ready()
	err, done := h.resolution(tk)
	require.True(t, done)
	require.ErrorContains(t, err, "store unreachable")

	tk, err = h.c.Reread(h.now, "f")
	require.NoError(t, err)
	h.ready()
	require.Len(t, h.reads, 1, "read now, whatever the lane's backoff")
	h.readAll(w.curs)
	err, done = h.resolution(tk)
	require.True(t, done)
	require.NoError(t, err)
	assert.Empty(t, h.c.Stats().Stuck, "the cursor read, the group is no longer stopped")
}

// TestRepairStartAt: a group with no stored cursor starts where asked: the
// seqs below are skipped in the cursor written, the ticket resolves once
// that is durable, and a seq below that arrives later is late.
func TestRepairStartAt(t *testing.T) {
	cfg := ehConfig()
	cfg.Start = recvcore.StartLowest
	h, w := newEH(t, cfg), newEHWorld()
	h.arrive(tagged("s", 7, 12), tagged("s", 7, 10), tagged("s", 7, 11), tagged("s", 6, 30))
	h.pump(w)
	// Settling (StartLowest): it would start at 6/30.
	tk, err := h.c.StartAt(h.now, "s", 7, 10)
	require.NoError(t, err)
	h.ready()
	require.Len(t, h.commits, 1)
	assert.Equal(t, seqstore.Cursor{Epoch: 7, Next: 10, Skipped: []seqstore.Range{{Epoch: 7, First: 1, Last: 9}}}, h.commits[0].Advances[0].To)
	_, done := h.resolution(tk)
	assert.False(t, done)
	assert.Equal(t, int64(1), h.c.Stats().Released, "the older epoch's message is let go until the start is durable: then it is late")
	h.pump(w)
	err, done = h.resolution(tk)
	require.True(t, done)
	require.NoError(t, err)
	for want := uint64(10); want <= 12; want++ {
		d, ok := h.next()
		require.True(t, ok)
		assert.Equal(t, want, d.Seq)
		assert.False(t, d.Unordered)
		_, err := h.c.Ack(h.now, &d, false)
		require.NoError(t, err)
		h.ready()
	}
	h.tick(3 * time.Second) // past StartSettle: no second start
	h.arrive(tagged("s", 7, 4), tagged("s", 6, 30))
	late := h.reportsOf(recvcore.ReportLate)
	require.Len(t, late, 2, "below the start, and of an older epoch: late")
	_, err = h.c.StartAt(h.now, "s", 7, 20)
	require.ErrorIs(t, err, recvcore.ErrNotStuck, "started: refused")
}

// TestRepairRefusals: each repair refuses a group that is not in the
// state it needs, without a dead-letter queue, and after Close.
func TestRepairRefusals(t *testing.T) {
	dlq := ehConfig()
	dlq.DeadLetter = true
	t.Run("not in memory", func(t *testing.T) {
		h := newEH(t, dlq)
		for name, f := range repairs(h) {
			_, err := f("nobody")
			assert.ErrorIs(t, err, recvcore.ErrNotStuck, name)
		}
	})
	t.Run("hole", func(t *testing.T) {
		h, _ := holed(t, dlq)
		for name, f := range repairs(h) {
			_, err := f("g")
			if name == recvcore.ActionSkipHole {
				assert.NoError(t, err, name)
				continue
			}
			assert.ErrorIs(t, err, recvcore.ErrNotStuck, name)
		}
	})
	t.Run("poison", func(t *testing.T) {
		h, _, _ := poisoned(t, true)
		for name, f := range repairs(h) {
			_, err := f("d")
			if name == recvcore.ActionDeadLetterHead {
				assert.NoError(t, err, name)
				continue
			}
			assert.ErrorIs(t, err, recvcore.ErrNotStuck, name)
		}
	})
	t.Run("no dead-letter queue", func(t *testing.T) {
		h, w, r := poisoned(t, false)
		_, err := h.c.DeadLetterHead(h.now, "d")
		require.ErrorIs(t, err, recvcore.ErrNoDeadLetter)
		h.ready()
		h.tick(time.Minute)
		h.pump(w)
		assert.Empty(t, h.deads)
		assert.NotContains(t, h.deleted, r, "refused: nothing deleted")
	})
	t.Run("healthy", func(t *testing.T) {
		h, w := newEH(t, dlq), newEHWorld()
		h.arrive(tagged("g", 1, 1), tagged("g", 1, 2))
		h.pump(w)
		h.handAck(w, "g", 1)
		for name, f := range repairs(h) {
			_, err := f("g")
			assert.ErrorIs(t, err, recvcore.ErrNotStuck, name)
		}
	})
	t.Run("closed", func(t *testing.T) {
		h, _ := holed(t, ehConfig())
		h.c.Close(h.now)
		for name, f := range repairs(h) {
			_, err := f("g")
			assert.ErrorIs(t, err, recvcore.ErrClosed, name)
		}
	})
	t.Run("closed while waiting", func(t *testing.T) {
		cfg := ehConfig()
		cfg.Park = true
		h, _ := holed(t, cfg)
		h.tick(cfg.GapTimeout)
		tk, err := h.c.SkipHole(h.now, "g") // waits for the park's read
		require.NoError(t, err)
		h.c.Close(h.now)
		h.ready()
		err, done := h.resolution(tk)
		require.True(t, done)
		assert.ErrorIs(t, err, recvcore.ErrClosed)
	})
}

// repairs returns the four repairs of h's Core by name (StartAt at 1/5).
func repairs(h *eh) map[string]func(string) (recvcore.Ticket, error) {
	return map[string]func(string) (recvcore.Ticket, error){
		recvcore.ActionDeadLetterHead: func(g string) (recvcore.Ticket, error) { return h.c.DeadLetterHead(h.now, g) },
		recvcore.ActionSkipHole:       func(g string) (recvcore.Ticket, error) { return h.c.SkipHole(h.now, g) },
		recvcore.ActionReread:         func(g string) (recvcore.Ticket, error) { return h.c.Reread(h.now, g) },
		recvcore.ActionStartAt:        func(g string) (recvcore.Ticket, error) { return h.c.StartAt(h.now, g, 1, 5) },
	}
}

// TestRepairSkipHoleRefusedExactlyOnce: in ExactlyOnce mode the Core writes
// a skip itself (forceCommit) and hands nothing out until it is durable.
// When the store refuses that write for good, the group stops; read again,
// it takes the stored cursor, and what it forced is not written (the
// repair's ticket said so): it must hand out again. It stayed forced, and
// the group stuck on its hole for good, even once the missing seq arrived
// (the world model with permanent store errors, [liveness/eo-dead-letter],
// -rapid.checks=3000 -rapid.seed=1, 2026-12-06).
func TestRepairSkipHoleRefusedExactlyOnce(t *testing.T) {
	h, w, cfg := stuckOnHoleExactlyOnce(t)
	tk, err := h.c.SkipHole(h.now, "g")
	require.NoError(t, err)
	h.ready()
	require.Len(t, h.commits, 1, "the Core writes the skip")
	h.commitAll(nil, &seqstore.BatchError{Errs: []error{seqstore.ErrCorrupt}})
	err, done := h.resolution(tk)
	require.True(t, done)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "the skip was refused")
	h.tick(cfg.RetryMax)
	h.pump(w) // the group's cursor read again: 1/2, as stored
	h.arrive(tagged("g", 1, 2), tagged("g", 1, 3))
	h.pump(w)
	d, ok := h.next()
	require.True(t, ok, "the group stays stuck on its hole after the refused skip, the missing seq present:\n%s", h.c.Dump())
	assert.Equal(t, uint64(2), d.Seq)
}
