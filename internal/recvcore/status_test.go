package recvcore_test

// The status queries (status.go): what a status page shows of the groups in
// trouble, read from the Core without changing it.

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// handAck hands out the next message, which must be group's seq, and acks it.
func (h *eh) handAck(w *ehWorld, group string, seq uint64) {
	h.t.Helper()
	d, ok := h.next()
	require.True(h.t, ok, "a message of %s is ready", group)
	require.Equal(h.t, [2]any{group, seq}, [2]any{d.Group, d.Seq}, "the message handed out")
	_, err := h.c.Ack(h.now, &d, false)
	require.NoError(h.t, err)
	h.ready()
	h.pump(w)
}

func seqsOf(group string, epoch uint64, seqs ...uint64) [][]byte {
	var out [][]byte
	for _, s := range seqs {
		out = append(out, tagged(group, epoch, s))
	}
	return out
}

// TestStatusGapGroup: a group that handled seq 1 and holds 3..10 and 15
// (seq 2 missing) is reported, once GapTimeout passed, stuck on a "gap"
// since the hole began, waiting on seq 2, with its held seqs as ranges; a
// healthy group beside it is not stuck and says where it is.
func TestStatusGapGroup(t *testing.T) {
	h := newEH(t, ehConfig())
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 7, Next: 1}
	w.curs["ok"] = seqstore.Cursor{Epoch: 7, Next: 1}
	h.arrive(tagged("g", 7, 1))
	h.pump(w)
	h.handAck(w, "g", 1)
	h.arrive(seqsOf("ok", 7, 1, 2)...)
	h.pump(w)
	h.handAck(w, "ok", 1)
	h.handAck(w, "ok", 2)

	holeAt := h.now
	h.arrive(seqsOf("g", 7, 3, 4, 5, 6, 7, 8, 9, 10, 15)...)
	h.pump(w)
	worst, total := h.c.StuckStatus(10)
	assert.Empty(t, worst, "not stuck before GapTimeout")
	assert.Zero(t, total)

	h.tick(h.cfg.GapTimeout + time.Second)
	h.pump(w)
	worst, total = h.c.StuckStatus(10)
	require.Equal(t, 1, total, "one group stuck")
	require.Len(t, worst, 1)
	assert.Equal(t, recvcore.GroupStatus{
		Group: "g", Phase: "active", Reason: "gap", Since: holeAt,
		Epoch: 7, Next: 2, Acked: 1, Durable: 2, DurableEpoch: 7,
		Held: 9, HeldRanges: []recvcore.SeqRange{{3, 10}, {15, 15}},
	}, worst[0])

	ok, found := h.c.GroupStatus("ok")
	require.True(t, found, "the healthy group is in memory")
	assert.Equal(t, recvcore.GroupStatus{
		Group: "ok", Phase: "active", Epoch: 7, Next: 3, Acked: 2, Durable: 3, DurableEpoch: 7,
	}, ok)
	_, found = h.c.GroupStatus("nope")
	assert.False(t, found, "a group never seen")

	// The hole fills: the group is no longer stuck.
	h.arrive(tagged("g", 7, 2))
	h.pump(w)
	h.handAck(w, "g", 2)
	worst, total = h.c.StuckStatus(10)
	assert.Empty(t, worst)
	assert.Zero(t, total)
}

// TestStatusPoisonGroup: a message that failed MaxAttempts times under
// PoisonBlock is out (waiting for its retry): the group waits on it, with
// its attempts and the handler's error.
func TestStatusPoisonGroup(t *testing.T) {
	h := newEH(t, ehConfig())
	w := newEHWorld()
	w.curs["p"] = seqstore.Cursor{Epoch: 3, Next: 4}
	h.arrive(seqsOf("p", 3, 4, 5)...)
	h.pump(w)
	boom := errors.New("handler failed")
	var stuckAt time.Time
	for attempt := 1; attempt <= h.cfg.MaxAttempts; attempt++ {
		d, ok := h.next()
		require.True(t, ok, "attempt %d handed out", attempt)
		require.Equal(t, uint64(4), d.Seq)
		require.NoError(t, h.c.Nack(h.now, &d, boom))
		stuckAt = h.now
		h.ready()
		h.pump(w)
		h.tick(h.cfg.RetryMax + time.Second)
	}
	worst, total := h.c.StuckStatus(10)
	require.Equal(t, 1, total)
	require.Len(t, worst, 1)
	assert.Equal(t, recvcore.GroupStatus{
		Group: "p", Phase: "active", Reason: "poison", Since: stuckAt, Err: boom,
		Epoch: 3, Next: 4, Out: true, Attempt: h.cfg.MaxAttempts, Acked: 3, Durable: 4, DurableEpoch: 3,
		Held: 1, HeldRanges: []recvcore.SeqRange{{5, 5}},
	}, worst[0])
}

// TestStatusWorstFirstAndLimit: StuckStatus lists at most limit groups, the
// longest stuck first, and counts them all.
func TestStatusWorstFirstAndLimit(t *testing.T) {
	h := newEH(t, ehConfig())
	w := newEHWorld()
	names := []string{"c", "a", "d", "b", "e"} // holes begin in this order
	for _, n := range names {
		w.curs[n] = seqstore.Cursor{Epoch: 1, Next: 1}
		h.arrive(tagged(n, 1, 2)) // seq 1 missing
		h.pump(w)
		h.tick(time.Second)
		h.pump(w)
	}
	h.tick(h.cfg.GapTimeout)
	h.pump(w)

	worst, total := h.c.StuckStatus(3)
	assert.Equal(t, 5, total, "all stuck groups are counted")
	var got []string
	for _, g := range worst {
		got = append(got, g.Group)
		assert.Equal(t, "gap", g.Reason)
	}
	assert.Equal(t, []string{"c", "a", "d"}, got, "the three stuck longest, longest first")

	worst, total = h.c.StuckStatus(100)
	assert.Equal(t, 5, total)
	assert.Len(t, worst, 5)
	for i := 1; i < len(worst); i++ {
		assert.True(t, worst[i-1].Since.Before(worst[i].Since), "sorted by Since: %v", worst)
	}
	worst, total = h.c.StuckStatus(0)
	assert.Empty(t, worst)
	assert.Equal(t, 5, total)
}

// TestStatusRangesCapped: a group holding many runs lists the first
// MaxStatusRanges of them and says more follow; one long run is one range.
func TestStatusRangesCapped(t *testing.T) {
	h := newEH(t, ehConfig())
	w := newEHWorld()
	w.curs["odd"] = seqstore.Cursor{Epoch: 1, Next: 1}
	w.curs["run"] = seqstore.Cursor{Epoch: 1, Next: 1}
	var odd []uint64
	for s := uint64(3); len(odd) < recvcore.MaxStatusRanges+4; s += 2 {
		odd = append(odd, s)
	}
	h.arrive(seqsOf("odd", 1, odd...)...)
	var run []uint64
	for s := uint64(2); s <= 60; s++ {
		run = append(run, s)
	}
	h.arrive(seqsOf("run", 1, run...)...)
	h.pump(w)

	s, ok := h.c.GroupStatus("odd")
	require.True(t, ok)
	assert.Equal(t, len(odd), s.Held)
	require.Len(t, s.HeldRanges, recvcore.MaxStatusRanges)
	assert.True(t, s.HeldMore, "more runs than listed")
	for i, r := range s.HeldRanges {
		assert.Equal(t, recvcore.SeqRange{odd[i], odd[i]}, r)
	}

	s, ok = h.c.GroupStatus("run")
	require.True(t, ok)
	assert.Equal(t, []recvcore.SeqRange{{2, 60}}, s.HeldRanges)
	assert.False(t, s.HeldMore)
	assert.Equal(t, 59, s.Held)
}

// TestStatusParked: beyond the Window, arrivals are parked (one at a time
// here: of a batch, the Core parks the nearest and lets the farther come
// back); the status counts them and lists their seqs apart from those held
// in memory.
func TestStatusParked(t *testing.T) {
	cfg := ehConfig()
	cfg.Park = true
	cfg.Window = 4
	cfg.ParkLimits = recvcore.ParkLimits{Messages: 1000}
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["k"] = seqstore.Cursor{Epoch: 2, Next: 1}
	for _, b := range seqsOf("k", 2, 2, 3, 4, 5, 6, 7, 9, 10) {
		h.arrive(b)
		h.pump(w)
	}
	s, ok := h.c.GroupStatus("k")
	require.True(t, ok)
	assert.Equal(t, uint64(1), s.Next)
	assert.Equal(t, []recvcore.SeqRange{{2, 4}}, s.HeldRanges, "within the Window: held")
	assert.Equal(t, 5, s.Parked)
	assert.Equal(t, []recvcore.SeqRange{{5, 7}, {9, 10}}, s.ParkedRanges, "beyond it: parked")
	assert.Equal(t, int64(s.Parked), h.c.Stats().ParkedNow, "as Stats counts them")
}

// TestStatusReadOnly: the queries change nothing in the Core: its state
// description and its next Ready are the same with or without them.
func TestStatusReadOnly(t *testing.T) {
	build := func(query bool) (string, recvcore.Ready) {
		h := newEH(t, ehConfig())
		w := newEHWorld()
		for i := range 5 {
			g := fmt.Sprintf("g%d", i)
			w.curs[g] = seqstore.Cursor{Epoch: 1, Next: 1}
			h.arrive(seqsOf(g, 1, 2, 3, 5)...)
		}
		h.pump(w)
		h.tick(h.cfg.GapTimeout + time.Second)
		h.pump(w)
		if query {
			_, total := h.c.StuckStatus(2)
			require.Equal(t, 5, total)
			_, ok := h.c.GroupStatus("g3")
			require.True(t, ok)
		}
		h.tick(h.cfg.GapTimeout + time.Second)
		rd := h.c.Ready(h.now)
		return h.c.Dump(), rd
	}
	dump, rd := build(false)
	dumpQ, rdQ := build(true)
	assert.Equal(t, dump, dumpQ)
	assert.Equal(t, fmt.Sprintf("%+v", rd), fmt.Sprintf("%+v", rdQ))
}
