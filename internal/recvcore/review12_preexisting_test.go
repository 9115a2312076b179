package recvcore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/inorder/inorder/internal/recvcore"
)

// TestReview12NoMarginBusyLoop (review 12, found by the differential
// test; NOT caused by 7c3a69e: the old Deadline is the same): with
// VisibilityMargin -1 (ordered.ReceiveOptions: "use -1 to disable"
// extensions), a message released before Close (here: beyond its group's
// window, not parked) is queued for a shortening that visLane.ready never
// sends before Close (it returns on a negative margin before readyShort),
// while visLane.due answers the lane's last refill time for a non-empty
// shortq. Deadline is then at or before now after every step, with
// nothing done: the shell's keeper wakes, Ticks and steps every
// millisecond (its floor against a spinning deadline) for as long as the
// receiver runs. Fails on 6d8fa7e and on 7c3a69e^.
func TestReview12NoMarginBusyLoop(t *testing.T) {
	cfg := ehConfig() // VisibilityMargin -1
	cfg.Window = 4
	h := newEH(t, cfg)
	h.arrive(tagged("g", 1, 1))
	h.readAll(nil)
	h.arrive(tagged("g", 1, 50)) // far beyond the window: released
	if st := h.c.Stats(); st.Released == 0 {
		t.Fatalf("nothing released: %+v", st)
	}
	for i := range 5 {
		at, ok := h.c.Deadline()
		if !ok || at.After(h.now) {
			return // not due: no busy loop
		}
		h.now = h.now.Add(time.Millisecond)
		h.c.Tick(h.now)
		rd := h.ready()
		if len(rd.Visibility)+len(rd.Deletes)+len(rd.Commits)+len(rd.Reads) > 0 {
			return // it did something
		}
		if i == 4 {
			t.Fatalf("Deadline %v is due at %v after 5 steps that did nothing: a busy loop (%s)", at, h.now, recvcore.DueParts(h.c))
		}
	}
}

// TestReview12UrgentDeleteAtLimit (review 12; NOT caused by 7c3a69e, the
// old Ready does the same): AtMostOnce, Unordered hand-outs each wait for
// their delete (urgent). With four deletes in flight (the lane's limit), a
// fifth hand-out's delete cannot go; deleteLane.ready clears urgent all
// the same (due is true, the loop does not run), so when a slot frees the
// partial batch waits for ReapInterval like any other: the Receive that
// waits for it waits ReapInterval (200 ms by default in ordered) instead
// of going at once. Fails on 6d8fa7e and on 7c3a69e^.
func TestReview12UrgentDeleteAtLimit(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtMostOnce
	cfg.Untagged = recvcore.UntaggedDeliver
	cfg.ReapInterval = time.Hour
	h := newEH(t, cfg)
	for i := range 5 {
		h.arrive([]byte("raw-" + string(rune('a'+i))))
		if _, ok := h.next(); !ok {
			t.Fatalf("hand-out %d: nothing", i)
		}
	}
	if len(h.deletes) != 4 {
		t.Fatalf("%d deletes in flight, want 4 (the limit)", len(h.deletes))
	}
	d := h.deletes[0]
	h.deletes = h.deletes[1:]
	h.c.Deleted(h.now, d.ID, nil)
	h.ready()
	if len(h.deletes) != 4 {
		at, _ := h.c.Deadline()
		t.Fatalf("a slot freed, the fifth hand-out's delete (urgent) did not go; Deadline %v (ReapInterval later: %v)", at, at.Sub(h.now))
	}
}

// TestReview12StatsAfterStuckGroupCompacted (review 12, found by the
// differential test; NOT caused by 7c3a69e): a group stuck on a poison
// message (MaxAttempts Nacks, no dead-letter queue) gives it back at
// Close; the group holds nothing then and Core.compact drops its
// groupCold (compactDelay later, on a Tick) while the group stays in
// c.stuck, its stuck reason being a field of the dropped groupCold. Stats
// and StuckStatus then read g.stuck through a nil pointer: a nil
// dereference; in ordered a panic in the caller of Queue.Stats/Status
// (under the receiver's lock) during or after Close. Fails on 6d8fa7e.
func TestReview12StatsAfterStuckGroupCompacted(t *testing.T) {
	h := newEH(t, ehConfig()) // MaxAttempts 3, no dead-letter queue
	h.arrive(tagged("g", 1, 1), tagged("g", 1, 2))
	h.readAll(nil)
	d, ok := h.next()
	if !ok {
		t.Fatal("nothing handed out")
	}
	h.c.Ack(h.now, &d, false) // its commit stays in flight until after Close
	h.ready()
	for i := 0; ; i++ {
		if st := h.c.Stats(); len(st.Stuck) > 0 || i > 10 {
			break
		}
		d, ok := h.next()
		if !ok {
			h.tick(5 * time.Second) // the retry's backoff
			continue
		}
		if err := h.c.Nack(h.now, &d, errors.New("poison")); err != nil {
			t.Fatal(err)
		}
		h.ready()
	}
	if st := h.c.Stats(); len(st.Stuck) == 0 {
		t.Fatalf("not stuck: %s", h.c.Dump())
	}
	h.c.Close(h.now) // gives the poison message back: g holds nothing
	h.ready()
	w := newEHWorld()
	h.pump(w) // the commit ends: g idle, queued for compaction
	for range 3 {
		h.tick(10 * time.Second) // past compactDelay
		h.pump(w)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Stats after the stuck group was compacted: %v\n%s", r, h.c.Dump())
		}
	}()
	h.c.StuckStatus(10)
	h.c.Stats()
}
