package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/seqstore"
)

// How often the watcher looks and speaks. A group that gets stuck is told
// at the next look, but lines come at most every printGap; groups still
// stuck are told again every repeatEvery; if nothing has arrived after
// quietAfter, the queue's counts are read and explained, once.
const (
	lookEvery   = time.Second
	printGap    = 2 * time.Second
	repeatEvery = 15 * time.Second
	quietAfter  = 3 * time.Second
	maxGroups   = 5  // stuck groups told per print
	maxEvents   = 5  // hook events told per print
	maxPending  = 64 // hook events kept between prints
)

// watcher tells the user, on stderr, why the receiver waits: each stuck
// group with its cause and the flag or action that fixes it, messages an
// earlier receiver holds invisible, and what the hooks report; and, at the
// end, a summary. It reads ReceiveStats.Stuck, the status page's JSON
// (Queue.StatusHandler: the seq a group waits on and the seqs it holds)
// and, for a hole at seq 1, the group's cursor in the store.
type watcher struct {
	c          config
	store      seqstore.Store
	visibility time.Duration // the queue's visibility timeout (driver.Limits)
	out        io.Writer
	// counts reads the queue's message counts (readCounts; tests replace it).
	counts func(ctx context.Context) (queueCounts, error)

	// streams is the Queue's Name, which names its streams in the store.
	streams string

	// Set by start.
	q      *ordered.Queue
	status http.Handler
	begun  time.Time
	cancel context.CancelFunc
	done   chan struct{}

	wake chan struct{} // OnGap and OnStuck: look now

	mu      sync.Mutex // guards the hooks' events
	events  []string
	dropped int

	// The watcher's goroutine only, then stop's caller.
	told      map[string]stuckKey // group -> what was told of it
	lastPrint time.Time
	lastStuck time.Time // last time the stuck groups were told
	quietDone bool
	final     ordered.ReceiveStats
	finalStat []groupStatus
}

// stuckKey identifies one episode of a group's trouble.
type stuckKey struct {
	group, reason string
	since         time.Time
}

func newWatcher(c config, store seqstore.Store, visibility time.Duration, out io.Writer) *watcher {
	w := &watcher{c: c, store: store, visibility: visibility, out: out, told: map[string]stuckKey{}, streams: "default",
		wake: make(chan struct{}, 1)}
	w.counts = func(ctx context.Context) (queueCounts, error) { return readCounts(ctx, c) }
	return w
}

// hooks are the Queue's hooks: they queue a line for the watcher to print,
// or wake it when a group got stuck (hooks run on the receiver's goroutine
// and must not wait for output).
func (w *watcher) hooks() ordered.Hooks {
	wake := func(ordered.Event) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return ordered.Hooks{
		OnGap:   wake,
		OnStuck: wake,
		OnSkip: func(e ordered.Event) {
			why := fmt.Sprintf("missing for %v", e.Age.Round(time.Second))
			switch {
			case w.c.lowest && e.Seq == 1:
				why = fmt.Sprintf("started at seq %d, the lowest present (-lowest)", e.Last+1)
			case w.c.gapSkip:
				why += " (-gap-skip)"
			}
			w.event("group %q: passed over seqs %s, %s; a copy that comes later is printed as unordered", e.Group, seqRange(e.Seq, e.Last), why)
		},
		OnConflict: func(e ordered.Event) {
			if errors.Is(e.Err, ordered.ErrStoreLost) {
				w.event("group %q: its cursor in the store went back (to seq %d): the store lost data (wiped, or an old backup); "+
					"the group goes on from what this receiver acknowledged", e.Group, e.Seq)
				return
			}
			w.event("group %q: another receiver moved its cursor: is a second receive running on queue %s with the same store? "+
				"This one goes on from the stored cursor", e.Group, w.c.queue)
		},
		OnEpoch: func(e ordered.Event) {
			w.event("group %q: the sender began again (epoch %d after %d: it lost its store); the group follows the new epoch",
				e.Group, e.Epoch, e.From)
		},
		OnLate: func(e ordered.Event) {
			w.event("group %q: seq %d came late (after its range was skipped, or from an older epoch): printed as unordered", e.Group, e.Seq)
		},
		OnUntagged: func(e ordered.Event) {
			why := "no header"
			if e.Err != nil {
				why = e.Err.Error()
			}
			if w.c.key != nil {
				w.event("message %s has no valid signed header (%s): left in the queue; is the sender's INORDER_KEY this one?", e.ID, why)
				return
			}
			w.event("message %s has no valid header (%s): not sent by command send; printed as unordered", e.ID, why)
		},
		OnMismatch: func(e ordered.Event) {
			w.event("group %q: seq %d came twice with different payloads (a forged or corrupted copy): the first is kept", e.Group, e.Seq)
		},
		OnDeadLetter: func(e ordered.Event) {
			w.event("group %q: seq %d dead-lettered: %v", e.Group, e.Seq, e.Err)
		},
	}
}

func (w *watcher) event(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) >= maxPending {
		w.dropped++
		return
	}
	w.events = append(w.events, fmt.Sprintf(format, args...))
}

// start starts the watcher's goroutine, which stop ends.
func (w *watcher) start(ctx context.Context, q *ordered.Queue) {
	w.q, w.status, w.begun, w.streams = q, q.StatusHandler(), time.Now(), q.Name()
	ctx, w.cancel = context.WithCancel(ctx)
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		t := time.NewTicker(lookEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				w.look(ctx, now)
			case <-w.wake:
				w.look(ctx, time.Now())
			}
		}
	}()
}

// stop ends the watcher's goroutine and keeps the last stats for the
// summary.
func (w *watcher) stop() {
	w.cancel()
	<-w.done
	w.final = w.q.Stats().Receive
	if len(w.final.Stuck) > 0 {
		w.finalStat = w.stuckStatus()
	}
}

// look is one look at the receiver: it prints what changed, within the
// print limits.
func (w *watcher) look(ctx context.Context, now time.Time) {
	st := w.q.Stats().Receive
	if !w.quietDone && now.Sub(w.begun) >= quietAfter {
		w.quietDone = true
		if st.Received == 0 {
			w.explainQuiet(ctx)
		}
	}
	if now.Sub(w.lastPrint) < printGap {
		return
	}
	w.printEvents()
	fresh := false
	current := make(map[string]stuckKey, len(st.Stuck))
	for _, s := range st.Stuck {
		k := stuckKey{s.Group, s.Reason, s.Since}
		current[s.Group] = k
		if w.told[s.Group] != k {
			fresh = true
		}
	}
	for g, k := range w.told {
		if _, ok := current[g]; !ok {
			w.printf("group %q goes on (it was stuck: %s)", g, k.reason)
		}
	}
	w.told = current
	if len(current) > 0 && (fresh || now.Sub(w.lastStuck) >= repeatEvery) {
		w.lastStuck = now
		w.printStuck(ctx, w.stuckStatus(), st.Stuck)
	}
}

// printf prints one line, "receive: " first.
func (w *watcher) printf(format string, args ...any) {
	fmt.Fprintf(w.out, "receive: "+format+"\n", args...)
	w.lastPrint = time.Now()
}

func (w *watcher) printEvents() {
	w.mu.Lock()
	events, dropped := w.events, w.dropped
	w.events, w.dropped = nil, 0
	w.mu.Unlock()
	for i, e := range events {
		if i == maxEvents {
			dropped += len(events) - i
			break
		}
		w.printf("%s", e)
	}
	if dropped > 0 {
		w.printf("... and %d more such events (-v logs each)", dropped)
	}
}

// explainQuiet says why nothing has arrived: an empty queue, or messages
// that an earlier receiver took and did not delete, invisible until the
// queue's visibility timeout ends.
func (w *watcher) explainQuiet(ctx context.Context) {
	vis := "the queue's visibility timeout"
	if w.visibility > 0 {
		vis = fmt.Sprintf("the queue's visibility timeout, %v", w.visibility)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := w.counts(cctx)
	switch {
	case err != nil:
		w.printf("nothing has arrived in %v from queue %s (its counts are unknown: %v); messages an earlier receiver took "+
			"and did not delete stay invisible until %s, ends", quietAfter, w.c.queue, err, vis)
	case n.inactive > 0:
		back := "when " + vis + " ends"
		if w.visibility > 0 {
			back = fmt.Sprintf("at most %v after it took them (the queue's visibility timeout)", w.visibility)
		}
		w.printf("nothing has arrived in %v: queue %s holds %d messages invisible (%d visible, %d delayed): taken by an earlier "+
			"receiver that did not delete them (killed, or still running). They come back %s", quietAfter, w.c.queue, n.inactive, n.active, n.delayed, back)
	case n.delayed > 0:
		w.printf("nothing has arrived in %v: queue %s holds %d delayed messages (sent with a delay), %d visible", quietAfter, w.c.queue, n.delayed, n.active)
	case n.active == 0:
		w.printf("nothing has arrived in %v: queue %s is empty; run command send (with the same -queue), or check -queue and -endpoint",
			quietAfter, w.c.queue)
	}
}

// groupStatus is what the watcher reads of a stuck group in the status
// page's JSON (README.md, "Status page").
type groupStatus struct {
	Group        string  `json:"group"`
	Cause        string  `json:"cause"`
	StuckSeconds float64 `json:"stuck_seconds"`
	Error        string  `json:"error"`
	Next         uint64  `json:"next"`
	Out          bool    `json:"out"`
	Attempt      int     `json:"attempt"`
	Delivered    uint64  `json:"last_delivered"`
	DurableNext  uint64  `json:"durable_next"`
	HeldRanges   string  `json:"held_ranges"`
}

// stuckStatus reads the stuck groups, the longest stuck first, from the
// status page's JSON; nil if it cannot (then Stats alone is told).
func (w *watcher) stuckStatus() []groupStatus {
	rec := httptest.NewRecorder()
	w.status.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?format=json", nil))
	var page struct {
		Stuck []groupStatus `json:"stuck"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil {
		return nil
	}
	return page.Stuck
}

// printStuck tells up to maxGroups stuck groups: from the status JSON,
// or if there is none, from stuck (ReceiveStats.Stuck), without the seqs.
func (w *watcher) printStuck(ctx context.Context, groups []groupStatus, stuck []ordered.StuckGroup) {
	if groups == nil {
		for _, s := range stuck {
			groups = append(groups, groupStatus{Group: s.Group, Cause: s.Reason, StuckSeconds: time.Since(s.Since).Seconds()})
			if s.Err != nil {
				groups[len(groups)-1].Error = s.Err.Error()
			}
		}
	}
	for i, g := range groups {
		if i == maxGroups {
			break
		}
		w.printf("%s", w.describe(ctx, g))
	}
	if len(stuck) > maxGroups {
		w.printf("... %d groups stuck in all (-v logs each)", len(stuck))
	}
}

// describe is one stuck group's line: what it waits on, since when, why,
// and what fixes it.
func (w *watcher) describe(ctx context.Context, g groupStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "group %q", g.Group)
	if g.Next > 0 {
		fmt.Fprintf(&b, " waits for seq %d", g.Next)
	}
	if g.HeldRanges != "" {
		fmt.Fprintf(&b, " (held %s)", g.HeldRanges)
	}
	fmt.Fprintf(&b, " since %v: ", (time.Duration(g.StuckSeconds) * time.Second).Round(time.Second))
	switch g.Cause {
	case "gap":
		if g.Next == 1 && g.Delivered == 0 {
			// Nothing of the group handled, and seq 1 missing: a lost
			// store, if the store has no cursor, or one that a receiver
			// wrote at seq 1 since (it does when it parks what it holds).
			switch cur, err := w.cursor(ctx, g.Group); {
			case err != nil:
			case cur.Same(seqstore.Cursor{}):
				if !w.c.lowest {
					b.WriteString("the store has no cursor for it; if the store was lost, restart with -lowest to start at the lowest seq present")
					return b.String()
				}
			case cur.Next <= 1:
				fmt.Fprintf(&b, "the store's cursor for it is at seq 1 and nothing was handled; if the store was lost, restart with -gap-skip "+
					"to skip to the lowest seq present after -gap-timeout (%v) (-lowest applies only to a group with no cursor)", w.c.gapTimeout)
				return b.String()
			}
		}
		fmt.Fprintf(&b, "seq %d has not arrived: taken by another receiver and invisible until the queue's visibility timeout (%v) ends, "+
			"or lost; if it is lost for good, restart with -gap-skip to skip holes older than -gap-timeout (%v)",
			g.Next, w.visibility, w.c.gapTimeout)
	case "poison":
		fmt.Fprintf(&b, "handed out %d times without an ack (ReceiveOptions.MaxAttempts); it is retried and nothing else of the group "+
			"is delivered: fix what fails, or set ReceiveOptions.Poison to PoisonDeadLetter with a DeadLetter queue", g.Attempt)
	case "conflict":
		fmt.Fprintf(&b, "another receiver moved its cursor: is a second receive running on queue %s with the same store? "+
			"Stop it; this one reads the cursor again and goes on from it", w.c.queue)
	case "store":
		fmt.Fprintf(&b, "the store refused its cursor: %s; repair or replace the store (-store); meanwhile the group's "+
			"messages go back to the queue and its cursor is read again later", g.Error)
	default:
		fmt.Fprintf(&b, "stuck (%s) %s", g.Cause, g.Error)
	}
	return b.String()
}

// cursor reads group's cursor from the store.
func (w *watcher) cursor(ctx context.Context, group string) (seqstore.Cursor, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cur, err := w.store.Cursors(ctx, []seqstore.Stream{{Queue: w.streams, Group: group}})
	if err != nil {
		return seqstore.Cursor{}, err
	}
	if len(cur) != 1 {
		return seqstore.Cursor{}, fmt.Errorf("the store returned %d cursors for 1 stream", len(cur))
	}
	return cur[0], nil
}

// summary prints the run's last lines: the events not told yet (called
// after Queue.Close, which waits for the hooks, it has them all), the
// groups still stuck, then one line of counts.
func (w *watcher) summary(got, n int) {
	w.printEvents()
	st := w.final
	if len(st.Stuck) > 0 {
		w.printStuck(context.Background(), w.finalStat, st.Stuck)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d messages from queue %s in %v; received %d", got, n, w.c.queue,
		time.Since(w.begun).Round(100*time.Millisecond), st.Received)
	for _, c := range []struct {
		name string
		n    int64
	}{
		{"duplicates", st.Duplicates}, {"redelivered", st.Redelivered}, {"late", st.Late}, {"untagged", st.Untagged},
		{"gaps", st.Gaps}, {"skipped", st.Skipped}, {"conflicts", st.Conflicts}, {"stuck groups", int64(len(st.Stuck))},
	} {
		if c.n > 0 {
			fmt.Fprintf(&b, ", %s %d", c.name, c.n)
		}
	}
	if got < n && st.Buffered > 0 {
		fmt.Fprintf(&b, ", held waiting for their turn %d", st.Buffered)
	}
	w.printf("%s", b.String())
}

// seqRange is "a-b", or "a" when b is a or unknown.
func seqRange(a, b uint64) string {
	if b <= a {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d-%d", a, b)
}

// progressNote is the progress line's tail: held and stuck counts.
func progressNote(q *ordered.Queue) string {
	if q == nil {
		return "connecting"
	}
	st := q.Stats().Receive
	var parts []string
	if st.Buffered > 0 {
		parts = append(parts, fmt.Sprintf("%d held", st.Buffered))
	}
	if len(st.Stuck) > 0 {
		parts = append(parts, fmt.Sprintf("%d stuck", len(st.Stuck)))
	}
	return strings.Join(parts, ", ")
}
