package recvcore_test

// Attack on 843e11d (ExactlyOnce over FIFO queues: the Core pins a fresh
// group's first cursor itself, forceCommit, so that its early first
// arrival can park). A store world that enforces compare-and-set on every
// advance, the Core's and the application's alike, and counts what the
// application handled.
//
// Failing (defects found):
//   - TestAttackEOStartLowestPinDropsSkipMarks: pin overwrites g.ack and
//     drops the Skipped ranges of a StartLowest start; a late seq is then
//     deleted as a duplicate, never handled (message loss).
//   - TestAttackEOEpochZeroPinStalls: an epoch-0 group (legacy "#seq#"
//     format or tagged epoch 0) stops after its first early arrival: pin
//     takes a stored 0/n cursor for none, forces a commit with nothing to
//     write, and forced never clears (no hand-out for ever).
//   - TestAttackEOEpochZeroParkNeverGoesALO: the same root in AtLeastOnce,
//     older than 843e11d: msg.stored is g.dur.Epoch != 0.
//   - TestAttackEOConflictNackStoreUnchanged: a Nack wrapping ErrConflict
//     with the cursor unmoved leaves g.next past the seq: it is lost
//     (deleted as a duplicate); with an early arrival the pin writes the
//     cursor past it.
// Every other TestAttackEO* here passes: what held.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

func eoConfig() recvcore.Config {
	cfg := ehConfig()
	cfg.Mode = recvcore.ExactlyOnce
	cfg.ParkEarly = true
	cfg.Park = true
	return cfg
}

type eoWorld struct {
	*ehWorld
	handled  map[string][]uint64 // group -> seqs whose CursorAdvance was accepted, in order
	refused  []string            // application advances refused
	coreAdvs []seqstore.Advance  // advances the Core wrote itself
	dead     [][]byte
	nackAll  bool // the application fails every message (not a conflict)
}

func newEOWorld() *eoWorld {
	return &eoWorld{ehWorld: newEHWorld(), handled: map[string][]uint64{}}
}

// cas applies a to the store if its From is the stored cursor.
func (w *eoWorld) cas(a seqstore.Advance) error {
	cur := w.curs[a.Stream.Group]
	if !cur.Same(a.From) {
		return fmt.Errorf("%w: at %d/%d, from %d/%d", seqstore.ErrConflict, cur.Epoch, cur.Next, a.From.Epoch, a.From.Next)
	}
	w.curs[a.Stream.Group] = a.To
	for s, e := range w.park[a.Stream.Group] {
		if a.To.Below(e.Epoch, s) {
			delete(w.park[a.Stream.Group], s)
		}
	}
	return nil
}

// handle is the application: it applies d.Advance in its transaction and
// Acks, or Nacks with the conflict.
func (h *eh) eoHandle(w *eoWorld, d recvcore.Delivery) error {
	if w.nackAll {
		require.NoError(h.t, h.c.Nack(h.now, &d, fmt.Errorf("app failed")))
		h.ready()
		return nil
	}
	err := w.cas(d.Advance)
	if err != nil {
		w.refused = append(w.refused, fmt.Sprintf("%s %d/%d: %v", d.Group, d.Epoch, d.Seq, err))
		require.NoError(h.t, h.c.Nack(h.now, &d, err))
		h.ready()
		return err
	}
	w.handled[d.Group] = append(w.handled[d.Group], d.Seq)
	_, aerr := h.c.Ack(h.now, &d, false)
	require.NoError(h.t, aerr)
	h.ready()
	return nil
}

// eoCommit answers one pending Core commit against the CAS store.
func (h *eh) eoCommit(w *eoWorld) {
	c := h.commits[0]
	h.commits = h.commits[1:]
	errs := make([]error, len(c.Advances))
	refusedAny := false
	for i, a := range c.Advances {
		errs[i] = w.cas(a)
		if errs[i] == nil {
			w.coreAdvs = append(w.coreAdvs, a)
		} else {
			refusedAny = true
		}
	}
	var err error
	if refusedAny {
		err = &seqstore.BatchError{Errs: errs}
	}
	h.c.Committed(h.now, c.ID, err)
	h.ready()
}

// eoPumpStore is the harness pump with commits through CAS.
func (h *eh) eoPumpStore(w *eoWorld) {
	for i := 0; i < 1000; i++ {
		did := len(h.commits) > 0
		for len(h.commits) > 0 {
			h.eoCommit(w)
		}
		// The rest: pump has no commit to answer now; it may leave new
		// ones, answered on the next round.
		n := len(h.reads) + len(h.parks) + len(h.unparks) + len(h.scans) + len(h.reqs) + len(h.vis)
		if !h.noDeletes {
			n += len(h.deletes)
		}
		if n > 0 {
			did = true
			h.pumpNoCommits(w)
		}
		if !did {
			return
		}
	}
}

// pumpNoCommits answers one round of everything but commits.
func (h *eh) pumpNoCommits(w *eoWorld) {
	for len(h.reads) > 0 {
		r := h.reads[0]
		h.reads = h.reads[1:]
		out := make([]seqstore.Cursor, len(r.Streams))
		for i, s := range r.Streams {
			out[i] = w.curs[s.Group]
		}
		h.c.Read(h.now, r.ID, out, nil)
		h.ready()
	}
	if len(h.commits) > 0 {
		return
	}
	for len(h.parks) > 0 {
		p := h.parks[0]
		h.parks = h.parks[1:]
		for _, e := range p.Entries {
			if w.park[e.Stream.Group] == nil {
				w.park[e.Stream.Group] = map[uint64]seqstore.Parked{}
			}
			w.park[e.Stream.Group][e.Seq] = e
		}
		h.c.Parked(h.now, p.ID, nil)
		h.ready()
	}
	for len(h.unparks) > 0 {
		u := h.unparks[0]
		h.unparks = h.unparks[1:]
		res := make([][]seqstore.Parked, len(u.Queries))
		for i, q := range u.Queries {
			var seqs []uint64
			for s, e := range w.park[q.Stream.Group] {
				if s >= q.From && e.Epoch == q.Epoch {
					seqs = append(seqs, s)
				}
			}
			slices.Sort(seqs)
			for _, s := range seqs[:min(len(seqs), q.Max)] {
				res[i] = append(res[i], w.park[q.Stream.Group][s])
			}
		}
		h.c.Unparked(h.now, u.ID, res, nil)
		h.ready()
	}
	for len(h.scans) > 0 {
		s := h.scans[0]
		h.scans = h.scans[1:]
		var gs []string
		for g, m := range w.park {
			if len(m) > 0 {
				gs = append(gs, g)
			}
		}
		h.c.Scanned(h.now, s.ID, gs, nil)
		h.ready()
	}
	for len(h.deletes) > 0 && !h.noDeletes {
		d := h.deletes[0]
		h.deletes = h.deletes[1:]
		h.c.Deleted(h.now, d.ID, nil)
		h.ready()
	}
	if len(h.reqs) > 0 {
		h.requeueAll()
	}
	for len(h.vis) > 0 {
		v := h.vis[0]
		h.vis = h.vis[1:]
		h.c.Visibility(h.now, v.ID, v.Receipt+"'", nil)
		h.ready()
	}
}

// eoPump answers everything, commits through CAS, and hands out and
// handles whatever the Core offers.
func (h *eh) eoPump(w *eoWorld) {
	for i := 0; i < 200; i++ {
		h.eoPumpStore(w)
		for len(h.deads) > 0 {
			d := h.deads[0]
			h.deads = h.deads[1:]
			w.dead = append(w.dead, d.Bodies...)
			h.c.DeadLettered(h.now, d.ID, make([]error, len(d.Bodies)))
			h.ready()
		}
		require.NoError(h.t, h.c.Invariants())
		d, ok := h.next()
		if !ok {
			if len(h.commits) == 0 && len(h.reads) == 0 && len(h.parks) == 0 && len(h.unparks) == 0 && len(h.scans) == 0 && len(h.deletes) == 0 && len(h.vis) == 0 {
				return
			}
			continue
		}
		if d.Unordered {
			w.handled[d.Group] = append(w.handled[d.Group], 1000+d.Seq)
			_, err := h.c.Ack(h.now, &d, false)
			require.NoError(h.t, err)
			h.ready()
			continue
		}
		_ = h.eoHandle(w, d)
	}
}

// Baseline: FIFO order 2,1,3 of a fresh group. Seq 2 parks behind a pin;
// every hand-out's CursorAdvance is accepted, each seq once, in order.
func TestAttackEOBaseline(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.eoPump(w)
	require.Len(t, w.coreAdvs, 1, "the pin")
	require.Equal(t, seqstore.Cursor{Epoch: 7, Next: 1}, w.coreAdvs[0].To)
	require.Len(t, w.park["g"], 1, "seq 2 parked")
	h.arrive(tagged("g", 7, 1))
	h.eoPump(w)
	h.arrive(tagged("g", 7, 3))
	h.eoPump(w)
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2, 3}, w.handled["g"])
}

// The pin in flight when seq 1 arrives: nothing is handed out until it is
// durable, and the first hand-out starts from it.
func TestAttackEOPinInFlightFirstArrives(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.readAll(nil)
	require.Len(t, h.commits, 1, "the pin goes out")
	h.arrive(tagged("g", 7, 1))
	_, ok := h.next()
	require.False(t, ok, "nothing out while the pin is in flight")
	h.eoPump(w)
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2}, w.handled["g"])
}

// The pin's outcome is unknown (the store applied it, the answer was
// lost): the Core reads the cursor back and goes on.
func TestAttackEOPinUnknownApplied(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.readAll(nil)
	require.Len(t, h.commits, 1)
	c := h.commits[0]
	h.commits = nil
	require.NoError(t, w.cas(c.Advances[0]))
	h.c.Committed(h.now, c.ID, fmt.Errorf("timeout"))
	h.ready()
	h.arrive(tagged("g", 7, 1))
	for i := 0; i < 10; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2}, w.handled["g"])
}

// The pin's outcome is unknown and the store did not apply it.
func TestAttackEOPinUnknownNotApplied(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.readAll(nil)
	require.Len(t, h.commits, 1)
	c := h.commits[0]
	h.commits = nil
	h.c.Committed(h.now, c.ID, fmt.Errorf("timeout"))
	h.ready()
	h.arrive(tagged("g", 7, 1))
	for i := 0; i < 10; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2}, w.handled["g"])
}

// The pin conflicts: someone (a second receiver and its application)
// handled seq 1 meanwhile and wrote 7/2. The parked seq 2 is handed out
// from 7/2, once.
func TestAttackEOPinConflictAhead(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.readAll(nil)
	require.Len(t, h.commits, 1)
	w.curs["g"] = seqstore.Cursor{Epoch: 7, Next: 2} // the other receiver's app
	w.handled["g"] = append(w.handled["g"], 1)
	for i := 0; i < 10; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2}, w.handled["g"])
}

// The pin conflicts with a cursor at the pin's own value (a second
// receiver pinned the same): the group goes on.
func TestAttackEOPinConflictSame(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.readAll(nil)
	require.Len(t, h.commits, 1)
	w.curs["g"] = seqstore.Cursor{Epoch: 7, Next: 1}
	h.arrive(tagged("g", 7, 1))
	for i := 0; i < 10; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2}, w.handled["g"])
}

// Close while the pin is in flight: the Core finishes (Flushed) once the
// pin answers, hands nothing out, and a next Core over the same store
// handles 1 and 2 once each.
func TestAttackEOCloseDuringPin(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.readAll(nil)
	require.Len(t, h.commits, 1)
	h.arrive(tagged("g", 7, 1))
	h.c.Close(h.now)
	h.ready()
	for i := 0; i < 20 && !h.c.Flushed(); i++ {
		for len(h.commits) > 0 {
			h.eoCommit(w)
		}
		h.eoPumpStore(w)
		h.tick(time.Second)
	}
	require.True(t, h.c.Flushed())
	require.Empty(t, w.handled["g"])

	h2 := newEH(t, eoConfig())
	// What was not deleted comes back; a parked seq is in the park.
	gone := map[string]bool{}
	for _, r := range h.deleted {
		gone[r] = true
	}
	var back [][]byte
	if !gone["r1"] {
		back = append(back, tagged("g", 7, 2))
	}
	if !gone["r2"] {
		back = append(back, tagged("g", 7, 1))
	}
	t.Logf("cursor %+v, parked %d, back %d", w.curs["g"], len(w.park["g"]), len(back))
	h2.arrive(back...)
	for i := 0; i < 10; i++ {
		h2.tick(5 * time.Second)
		h2.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2}, w.handled["g"])
}

// Restart after the pin, before any hand-out: seq 2 is parked (deleted
// from the queue), seq 1 comes to a new Core.
func TestAttackEORestartAfterPin(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.eoPump(w)
	require.Len(t, w.park["g"], 1)
	h2 := newEH(t, eoConfig())
	h2.arrive(tagged("g", 7, 1))
	for i := 0; i < 10; i++ {
		h2.tick(5 * time.Second)
		h2.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2}, w.handled["g"])
}

// A fresh group whose first arrival is seq 3, then 2, then 1 (each early
// one parks behind one pin).
func TestAttackEOReverse(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 3))
	h.eoPump(w)
	h.arrive(tagged("g", 7, 2))
	h.eoPump(w)
	h.arrive(tagged("g", 7, 1))
	h.eoPump(w)
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2, 3}, w.handled["g"])
	require.Len(t, w.coreAdvs, 1, "one pin, nothing else written by the Core")
}

// Seq 1 arrives first and is out; seq 2 arrives while it is out (not
// parkable: something out); the application acks; then the group goes on.
// Then a new epoch's early arrival (8/2 before 8/1).
func TestAttackEOOutThenNewEpochEarly(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("g", 7, 1))
	h.eoPumpStore(w)
	d, ok := h.next()
	require.True(t, ok)
	h.arrive(tagged("g", 7, 2))
	require.NoError(t, h.eoHandle(w, d))
	h.eoPump(w)
	h.arrive(tagged("g", 8, 2))
	h.eoPump(w)
	h.arrive(tagged("g", 8, 1))
	for i := 0; i < 10; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2, 1, 2}, w.handled["g"])
	require.Empty(t, w.coreAdvs, "no pin: the group has a cursor")
}

// A fresh group whose first arrival is a new epoch's seq 2 (8/2), then
// 8/1.
func TestAttackEOFreshNewEpochEarly(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 7, Next: 5}
	h.arrive(tagged("g", 8, 2))
	h.eoPump(w)
	h.arrive(tagged("g", 8, 1))
	for i := 0; i < 10; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2}, w.handled["g"])
}

// StartLowest (allowed with a FIFO queue) in ExactlyOnce: a fresh group
// sees 7/3 and 7/4 within StartSettle and starts at 3, passing over 1..2
// (recorded as skipped in its cursor, so that a late 1 or 2 is handed out
// Unordered, not deleted as a duplicate). 7/4 is early: it parks, and
// pin overwrites g.ack with {Epoch, Next} only (budget.go pin, ExactlyOnce
// branch: `g.ack = seqstore.Cursor{Epoch: g.epoch, Next: g.next}`),
// dropping the Skipped ranges that endSettle put there. The pin is
// written without them, the hand-outs' advances carry none, and the late
// 7/1 is then taken for a duplicate and deleted: never handled. The
// AtLeastOnce branch of pin keeps g.ack when it is set.
func TestAttackEOStartLowestPinDropsSkipMarks(t *testing.T) {
	for _, withPin := range []bool{false, true} {
		t.Run(fmt.Sprintf("pin=%v", withPin), func(t *testing.T) {
			cfg := eoConfig()
			cfg.Start = recvcore.StartLowest
			h := newEH(t, cfg)
			w := newEOWorld()
			if withPin {
				h.arrive(tagged("g", 7, 3), tagged("g", 7, 4))
			} else {
				h.arrive(tagged("g", 7, 3))
			}
			h.eoPump(w)
			h.tick(3 * time.Second)
			h.eoPump(w)
			h.tick(3 * time.Second)
			h.eoPump(w)
			t.Logf("cursor after start: %+v; core wrote %d", w.curs["g"], len(w.coreAdvs))
			h.arrive(tagged("g", 7, 1))
			h.eoPump(w)
			h.tick(10 * time.Second)
			h.eoPump(w)
			t.Logf("handled %v (1000+seq: Unordered), cursor %+v, duplicates %d", w.handled["g"], w.curs["g"], h.c.Stats().Duplicates)
			require.Empty(t, w.refused)
			require.Contains(t, w.handled["g"], uint64(1001), "the late 7/1 must be handed out Unordered, not deleted as a duplicate")
		})
	}
}

// A stream of epoch 0 (the legacy "#<seq>#" format of the MNS sample, or
// a tagged header with epoch 0): its stored cursor has Epoch 0 even once
// written. pin's guard (`g.dur.Epoch != 0`) and canPark's take that for
// "no stored cursor": once the group handled 1 and 2 (cursor 0/3), an
// early 4 parks and pin sets g.ack = 0/3, the stored cursor itself, and
// forces a commit that committable never sends (nothing to write): forced
// stays set, and g.ready refuses every hand-out: the group stops for good.
func TestAttackEOEpochZeroPinStalls(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			h := newEH(t, eoConfig())
			w := newEOWorld()
			group := "g"
			body := func(seq uint64) []byte { return tagged("g", 0, seq) }
			if legacy {
				group = ""
				body = func(seq uint64) []byte { return []byte(fmt.Sprintf("#%d#payload %d", seq, seq)) }
			}
			h.arrive(body(1))
			h.eoPump(w)
			h.arrive(body(2))
			h.eoPump(w)
			require.Equal(t, []uint64{1, 2}, w.handled[group])
			t.Logf("cursor %+v", w.curs[group])
			h.arrive(body(4)) // early: 3 is behind it in the FIFO group
			h.eoPump(w)
			h.arrive(body(3))
			for i := 0; i < 10; i++ {
				h.tick(5 * time.Second)
				h.eoPump(w)
			}
			t.Logf("cursor %+v, core wrote %v, parked %d", w.curs[group], w.coreAdvs, len(w.park[group]))
			require.Empty(t, w.refused)
			require.Equal(t, []uint64{1, 2, 3, 4}, w.handled[group], "epoch-0 group stopped after an early arrival")
		})
	}
}

// Dead letters use forceCommit too: the pinned group's seq 1 fails
// MaxAttempts times and is dead-lettered (the Core writes 7/1 -> 7/2);
// the parked 2 is then handed out from 7/2, once.
func TestAttackEODeadLetterAfterPin(t *testing.T) {
	cfg := eoConfig()
	cfg.Poison = recvcore.PoisonDeadLetter
	cfg.DeadLetter = true
	h := newEH(t, cfg)
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.eoPump(w)
	h.arrive(tagged("g", 7, 1))
	w.nackAll = true
	for i := 0; i < 10 && len(w.dead) == 0; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Len(t, w.dead, 1)
	w.nackAll = false
	for i := 0; i < 10; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{2}, w.handled["g"])
	require.Equal(t, seqstore.Cursor{Epoch: 7, Next: 3}, w.curs["g"])
}

// A fresh group's seq 1 (no pin: it came first) is dead-lettered: the
// Core writes zero -> 7/2. Seq 3 arrives early while that write is in
// flight (nothing out: it may park; pin sees forced and leaves it), then
// 2. Each handled once, in order.
func TestAttackEODeadLetterFreshThenEarly(t *testing.T) {
	cfg := eoConfig()
	cfg.Poison = recvcore.PoisonDeadLetter
	cfg.DeadLetter = true
	h := newEH(t, cfg)
	w := newEOWorld()
	h.arrive(tagged("g", 7, 1))
	w.nackAll = true
	for i := 0; i < 10 && len(h.commits) == 0; i++ {
		h.tick(5 * time.Second)
		h.pumpNoCommits(w)
		for len(h.deads) > 0 {
			d := h.deads[0]
			h.deads = h.deads[1:]
			w.dead = append(w.dead, d.Bodies...)
			h.c.DeadLettered(h.now, d.ID, make([]error, len(d.Bodies)))
			h.ready()
		}
		if d, ok := h.next(); ok {
			require.NoError(t, h.c.Nack(h.now, &d, fmt.Errorf("app failed")))
			h.ready()
		}
	}
	require.Len(t, w.dead, 1)
	require.Len(t, h.commits, 1, "the dead letter's cursor write")
	w.nackAll = false
	h.arrive(tagged("g", 7, 3))
	h.eoPump(w)
	h.arrive(tagged("g", 7, 2))
	for i := 0; i < 10; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{2, 3}, w.handled["g"])
}

// GapSkip: the pinned group's seq 1 never comes; after GapTimeout (and
// the wait past it) 2 is handed out with 1 marked skipped; a late 1 is
// handed out Unordered.
func TestAttackEOGapSkipAfterPin(t *testing.T) {
	cfg := eoConfig()
	cfg.GapPolicy = recvcore.GapSkip
	h := newEH(t, cfg)
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.eoPump(w)
	for i := 0; i < 40; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Equal(t, []uint64{2}, w.handled["g"])
	h.arrive(tagged("g", 7, 1))
	h.eoPump(w)
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{2, 1001}, w.handled["g"])
}

// The shedding path in ExactlyOnce with ParkEarly: a flood of fresh groups
// whose seq 2 comes first. Each pins, parks, and is shed; memory stays
// within the budget; then every group's seq 1 comes, and each group
// handles 1 then 2, each once, without a refused advance.
func TestAttackEOShedFreshGroups(t *testing.T) {
	cfg := eoConfig()
	cfg.MaxMemory = 64 << 10
	cfg.MaxHeld = 4000
	cfg.Window = 4000
	cfg.MaxBatch = 16
	cfg.MaxUndeletedRate = 1e9
	h := newEH(t, cfg)
	w := newEOWorld()
	groups := 0
	peak := 0
	const total = 1500
	for round := 0; round < 2000 && groups < total; round++ {
		n := h.c.Room(h.now)
		if n > 0 {
			var bodies [][]byte
			for range min(n, cfg.MaxBatch, total-groups) {
				groups++
				bodies = append(bodies, tagged(fmt.Sprintf("group-%06d", groups), 7, 2))
			}
			h.arrive(bodies...)
		}
		h.eoPump(w)
		h.tick(250 * time.Millisecond)
		h.eoPump(w)
		peak = max(peak, h.c.Stats().Memory)
	}
	st := h.c.Stats()
	t.Logf("groups %d; in memory %d; memory %d (peak %d) of %d; parked %d; evicted %d; core writes %d",
		groups, st.Groups, st.Memory, peak, cfg.MaxMemory, st.Parked, st.Evicted, len(w.coreAdvs))
	require.Equal(t, total, groups)
	require.LessOrEqual(t, st.Memory, 2*cfg.MaxMemory)
	sent := 0
	for round := 0; round < 4000 && sent < total; round++ {
		n := h.c.Room(h.now)
		if n > 0 {
			var bodies [][]byte
			for range min(n, cfg.MaxBatch, total-sent) {
				sent++
				bodies = append(bodies, tagged(fmt.Sprintf("group-%06d", sent), 7, 1))
			}
			h.arrive(bodies...)
		}
		h.eoPump(w)
		h.tick(250 * time.Millisecond)
		h.eoPump(w)
	}
	for i := 0; i < 40; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	bad := 0
	for i := 1; i <= total; i++ {
		g := fmt.Sprintf("group-%06d", i)
		if !slices.Equal(w.handled[g], []uint64{1, 2}) {
			if bad < 5 {
				t.Logf("%s handled %v, cursor %+v, parked %d", g, w.handled[g], w.curs[g], len(w.park[g]))
			}
			bad++
		}
	}
	require.Zero(t, bad, "groups not handled 1,2 once each")
}

// A new epoch's early arrival on a pinned group: pinned at 7/1 with 7/2
// parked, 7/1 lost; 8/2 comes before 8/1. After GapTimeout the group moves
// to epoch 8 and hands out 8/1 then 8/2. (GapSkip: under GapWait the
// group waits for 7/1 for ever in every mode, by design.)
func TestAttackEOPinnedNewEpochEarly(t *testing.T) {
	cfg := eoConfig()
	cfg.GapPolicy = recvcore.GapSkip
	h := newEH(t, cfg)
	w := newEOWorld()
	h.arrive(tagged("g", 7, 2))
	h.eoPump(w)
	r := h.arrive(tagged("g", 8, 2))[0]
	h.eoPump(w)
	// The FIFO service hands out 8/1 once 8/2 is deleted (parked).
	sent := false
	for i := 0; i < 120; i++ {
		h.tick(time.Second)
		h.eoPump(w)
		if !sent && slices.Contains(h.deleted, r) {
			sent = true
			h.arrive(tagged("g", 8, 1))
			h.eoPump(w)
		}
	}
	t.Logf("8/1 sent: %v", sent)
	t.Logf("handled %v, cursor %+v, core writes %v", w.handled["g"], w.curs["g"], w.coreAdvs)
	require.Empty(t, w.refused)
	n := len(w.handled["g"])
	require.GreaterOrEqual(t, n, 2)
	require.Equal(t, []uint64{1, 2}, w.handled["g"][n-2:], "8/1, 8/2 handled last, in order")
}

// Control for TestAttackEOPinnedNewEpochEarly: the same arrivals in
// AtLeastOnce.
func TestAttackEOPinnedNewEpochEarlyControlALO(t *testing.T) {
	cfg := eoConfig()
	cfg.Mode = recvcore.AtLeastOnce
	cfg.GapPolicy = recvcore.GapSkip
	h := newEH(t, cfg)
	w := newEHWorld()
	var got []string
	run := func() {
		for i := 0; i < 2; i++ {
			h.tick(time.Second)
			h.pump(w)
			for {
				d, ok := h.next()
				if !ok {
					break
				}
				got = append(got, fmt.Sprintf("%d/%d", d.Epoch, d.Seq))
				_, err := h.c.Ack(h.now, &d, false)
				require.NoError(t, err)
				h.ready()
				h.pump(w)
			}
		}
	}
	h.arrive(tagged("g", 7, 2))
	run()
	r := h.arrive(tagged("g", 8, 2))[0]
	sent := false
	for i := 0; i < 60; i++ {
		run()
		if !sent && slices.Contains(h.deleted, r) {
			sent = true
			h.arrive(tagged("g", 8, 1))
		}
	}
	t.Logf("8/1 sent: %v", sent)
	t.Logf("handed out %v, cursor %+v", got, w.curs["g"])
}

// Control for TestAttackEOEpochZeroPinStalls, in AtLeastOnce (so not
// 843e11d's doing, but the same root): msg.stored (park.go) is
// `g.dur.Epoch != 0`, so an epoch-0 group's park never goes out, and with
// ParkEarly its early arrival waits in the park lane for ever. Over a FIFO
// queue the service holds the missing seq behind it: the group stops
// (ordered/mnsqueue TestAttackEOFIFOEpochZeroStalls legacy|epoch0/AtLeastOnce).
func TestAttackEOEpochZeroParkNeverGoesALO(t *testing.T) {
	cfg := eoConfig()
	cfg.Mode = recvcore.AtLeastOnce
	h := newEH(t, cfg)
	w := newEHWorld()
	var got []uint64
	run := func() {
		for i := 0; i < 5; i++ {
			h.tick(time.Second)
			h.pump(w)
			for {
				d, ok := h.next()
				if !ok {
					break
				}
				got = append(got, d.Seq)
				_, err := h.c.Ack(h.now, &d, false)
				require.NoError(t, err)
				h.ready()
				h.pump(w)
			}
		}
	}
	h.arrive(tagged("g", 0, 1))
	run()
	h.arrive(tagged("g", 0, 2))
	run()
	r := h.arrive(tagged("g", 0, 4))[0]
	run()
	t.Logf("handed out %v, cursor %+v, parked %d, 4 deleted (so that the FIFO service sends 3): %v",
		got, w.curs["g"], len(w.park["g"]), slices.Contains(h.deleted, r))
	require.True(t, slices.Contains(h.deleted, r), "the early 4 is never parked and deleted: a FIFO queue holds 3 behind it for ever")
}

// The park of 2 is in flight (or fails) when 1 is handed out and acked
// (the pin is durable): 2 is still handed out, once, from 7/2.
func TestAttackEOParkInFlightAcrossFirstAck(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("parkfails=%v", fail), func(t *testing.T) {
			h := newEH(t, eoConfig())
			w := newEOWorld()
			h.arrive(tagged("g", 7, 2))
			h.readAll(nil)
			for len(h.commits) > 0 {
				h.eoCommit(w)
			}
			require.Len(t, h.parks, 1, "the park goes out once the pin is durable")
			p := h.parks[0]
			h.parks = nil
			h.arrive(tagged("g", 7, 1))
			d, ok := h.next()
			require.True(t, ok)
			require.NoError(t, h.eoHandle(w, d))
			if fail {
				h.c.Parked(h.now, p.ID, fmt.Errorf("store down"))
			} else {
				for _, e := range p.Entries {
					if w.park[e.Stream.Group] == nil {
						w.park[e.Stream.Group] = map[uint64]seqstore.Parked{}
					}
					w.park[e.Stream.Group][e.Seq] = e
				}
				h.c.Parked(h.now, p.ID, nil)
			}
			h.ready()
			for i := 0; i < 10; i++ {
				h.tick(5 * time.Second)
				h.eoPump(w)
			}
			require.Empty(t, w.refused)
			require.Equal(t, []uint64{1, 2}, w.handled["g"])
		})
	}
}

// Two Cores: B handed out 7/1 from the zero cursor while A pinned 7/1 (a
// redelivery after a visibility lapse gave A the early 2). B's application
// is refused (conflict), B re-reads, and 7/1 handed out again from 7/1 is
// accepted: handled once.
func TestAttackEOOtherCorePinUnderHandOut(t *testing.T) {
	w := newEOWorld()
	b := newEH(t, eoConfig())
	b.arrive(tagged("g", 7, 1))
	b.eoPumpStore(w)
	d, ok := b.next()
	require.True(t, ok)
	require.Equal(t, seqstore.Cursor{}, d.Advance.From)

	a := newEH(t, eoConfig())
	a.arrive(tagged("g", 7, 2))
	a.eoPump(w)
	require.Equal(t, seqstore.Cursor{Epoch: 7, Next: 1}, w.curs["g"], "A's pin")

	require.Error(t, b.eoHandle(w, d), "refused: A's pin moved the cursor")
	for i := 0; i < 5; i++ {
		b.tick(5 * time.Second)
		b.eoPump(w)
	}
	b.arrive(tagged("g", 7, 1)) // back from the queue
	for i := 0; i < 5; i++ {
		b.tick(5 * time.Second)
		b.eoPump(w)
	}
	t.Logf("handled %v, refused %v, cursor %+v", w.handled["g"], w.refused, w.curs["g"])
	require.Equal(t, []uint64{1, 2}, w.handled["g"], "B hands out 1 again from 7/1 and unparks 2")
}

// Two fresh groups pin in one commit; one of them conflicts (another
// receiver moved it to 7/3): the batch answers one refusal, and both
// groups go on.
func TestAttackEOPinBatchPartialConflict(t *testing.T) {
	h := newEH(t, eoConfig())
	w := newEOWorld()
	h.arrive(tagged("a", 7, 2), tagged("b", 7, 3))
	h.readAll(nil)
	require.Len(t, h.commits, 1)
	require.Len(t, h.commits[0].Advances, 2, "one commit for both pins")
	w.curs["b"] = seqstore.Cursor{Epoch: 7, Next: 3}
	w.handled["b"] = []uint64{1, 2}
	h.arrive(tagged("a", 7, 1))
	for i := 0; i < 10; i++ {
		h.tick(5 * time.Second)
		h.eoPump(w)
	}
	require.Empty(t, w.refused)
	require.Equal(t, []uint64{1, 2}, w.handled["a"])
	require.Equal(t, []uint64{1, 2, 3}, w.handled["b"])
}

// ExactlyOnce, a Nack wrapping ErrConflict while the stored cursor did not
// move (the application advanced two groups in one store call, and the
// other group's advance conflicted: the *BatchError wraps ErrConflict for
// both; or any spurious conflict). resolveConflict finds the cursor equal
// to g.dur and returns without resetting g.next, which takeNext set past
// the seq: the seq, released, comes back and is deleted as a duplicate,
// never handled (message loss), and 7/2 is handed out with an advance
// from the zero cursor that passes 7/1 with no skip mark. With ParkEarly
// and an early 7/3 meanwhile (nothing out, no stored cursor), pin writes
// {7, g.next} = 7/2 itself: the Core moves the cursor past the unhandled
// 7/1. (early=false is older than 843e11d; early=true adds the pin's
// write.)
func TestAttackEOConflictNackStoreUnchanged(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprintf("early=%v", early), func(t *testing.T) {
			h := newEH(t, eoConfig())
			w := newEOWorld()
			h.arrive(tagged("g", 7, 1))
			h.eoPumpStore(w)
			d, ok := h.next()
			require.True(t, ok)
			// The application's store call failed with another group's
			// conflict: nothing of g was written.
			cause := &seqstore.BatchError{Errs: []error{seqstore.ErrAborted, fmt.Errorf("%w: other group", seqstore.ErrConflict)}}
			require.ErrorIs(t, cause, seqstore.ErrConflict)
			require.NoError(t, h.c.Nack(h.now, &d, cause))
			h.ready()
			h.eoPumpStore(w)
			want := []uint64{1, 2}
			if early {
				h.arrive(tagged("g", 7, 3))
				h.eoPump(w)
				t.Logf("core wrote %v", w.coreAdvs)
				want = []uint64{1, 2, 3}
			}
			h.arrive(tagged("g", 7, 1)) // back from the queue
			for i := 0; i < 10; i++ {
				h.tick(5 * time.Second)
				h.eoPump(w)
			}
			h.arrive(tagged("g", 7, 2))
			for i := 0; i < 5; i++ {
				h.tick(5 * time.Second)
				h.eoPump(w)
			}
			t.Logf("handled %v, refused %v, cursor %+v, duplicates %d", w.handled["g"], w.refused, w.curs["g"], h.c.Stats().Duplicates)
			require.Equal(t, want, w.handled["g"], "7/1 must be handled after the refused attempt")
		})
	}
}
