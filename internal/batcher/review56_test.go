package batcher

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Review56 (helper-56) attacked 2ee4705, which made every batch in flight,
// full or not, hold a partial one back (TCP's Nagle rule). Each test below
// failed on it and passes on the rule in place (a partial batch waits only
// for partial ones: Minshall's variant), to which 26ca673 went back. "HEAD"
// in their comments is 2ee4705.

// big is an item that fills a batch by size: two do not fit MaxSize 1000.
type big int

func (big) Size() int { return 600 }

// review56Gated is a Handler of big items whose batches each wait at the
// gate of their first item until the test ends, reporting when they start.
type review56Gated struct {
	entered chan []big
	stop    chan struct{}
}

func newReview56Gated(*testing.T) *review56Gated {
	g := &review56Gated{entered: make(chan []big, 64), stop: make(chan struct{})}
	return g
}

func (g *review56Gated) handle(batch []big, _ []error) {
	g.entered <- slices.Clone(batch)
	<-g.stop
}

// count returns how many batches started within d.
func (g *review56Gated) count(d time.Duration) int {
	n := 0
	deadline := time.After(d)
	for {
		select {
		case <-g.entered:
			n++
		case <-deadline:
			return n
		}
	}
}

// TestReview56SizeBoundBatchesRunConcurrently: batches that are full by
// MaxSize (the sender's MaxBatchBytes: MNS takes 49,120 bytes a request
// without Raw, so every message over 24.5 KB goes alone and every one over
// 3 KB fills a request before 16 messages) hold their place since 2ee4705,
// and startLocked counts the full batches waiting by MaxItems only
// (waiting / MaxItems), not by size as takeLocked and fullLocked do. With
// one batch in flight, the other waiting items, each a full batch by size,
// start no handler: only the handler in flight, back from its batch, takes
// the next one, and the sends go one request at a time (or one more per
// hold). Before 2ee4705 a batch full by size did not count against
// MaxPartial and each took its own handler: 4 batches in flight at once
// here; on HEAD 1. (The last item, with nothing waiting after it, is a
// partial batch by definition: the test asks for 3.)
func TestReview56SizeBoundBatchesRunConcurrently(t *testing.T) {
	g := newReview56Gated(t)
	b, err := New(&Options{MaxHandlers: 4, MaxItems: 16, MaxSize: 1000, MaxPartial: 1, PartialHold: time.Hour}, g.handle)
	require.NoError(t, err)
	t.Cleanup(func() {
		close(g.stop)
		b.Shutdown()
	})
	require.NoError(t, b.PostAll([]big{0, 1, 2, 3}))
	n := g.count(500 * time.Millisecond)
	// The last item, with nothing after it, is a partial batch by
	// definition and may wait; the three before it are full batches.
	require.GreaterOrEqual(t, n, 3, "four items of one batch each by size and four handlers: only %d in flight", n)
}

// TestReview56SizeBoundBatchesPostedOneByOne: the same with items posted
// one at a time (Post, as reservations of single messages are), handlers
// of a realistic hold (the sender's 5 ms; FirstHold while none ended).
func TestReview56SizeBoundBatchesPostedOneByOne(t *testing.T) {
	g := newReview56Gated(t)
	b, err := New(&Options{MaxHandlers: 4, MaxItems: 16, MaxSize: 1000, MaxPartial: 1, PartialHold: 5 * time.Millisecond}, g.handle)
	require.NoError(t, err)
	t.Cleanup(func() {
		close(g.stop)
		b.Shutdown()
	})
	for i := range 4 {
		require.NoError(t, b.Post(big(i)))
	}
	n := g.count(FirstHold / 2)
	require.GreaterOrEqual(t, n, 3, "four items of one batch each by size, posted: only %d in flight before FirstHold", n)
}

// TestReview56BurstTailGoesAtOnce: one PostAll of MaxItems+1 items on an
// idle Batcher (a SendBatch of 17 messages to one group, or 17 groups'
// reservations in one call) makes a full batch and a remainder of one.
// Since 2ee4705 the remainder waits for the full batch to end (or for its
// hold): the burst takes two request times instead of one, and saves no
// request (two either way) unless more items come within the request
// time. TCP's Nagle rule has the same flaw with the tail of a large write,
// which Minshall's variant (Linux's tcp_minshall_check: a small segment
// waits only while a small one is unacknowledged, the rule before 2ee4705)
// removes. PartialHold of an hour makes the hold irrelevant: on HEAD the
// remainder does not start while the full batch is in flight.
func TestReview56BurstTailGoesAtOnce(t *testing.T) {
	entered := make(chan []int, 8)
	stop := make(chan struct{})
	b, err := New(&Options{MaxHandlers: 4, MaxItems: 4, MaxPartial: 1, PartialHold: time.Hour}, func(batch []int, _ []error) {
		entered <- slices.Clone(batch)
		<-stop
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		close(stop)
		b.Shutdown()
	})
	require.NoError(t, b.PostAll([]int{0, 1, 2, 3, 4}))
	var got [][]int
	deadline := time.After(500 * time.Millisecond)
	for len(got) < 2 {
		select {
		case batch := <-entered:
			got = append(got, batch)
		case <-deadline:
			t.Fatalf("a burst of MaxItems+1 on an idle batcher: only %v in flight; the remainder {4} waits for the full batch it was posted with", got)
		}
	}
	require.ElementsMatch(t, [][]int{{0, 1, 2, 3}, {4}}, got)
}

// TestReview56BurstTailLatency measures the above with a handler of 30 ms
// (the sender's PartialHold, 5 ms): a burst of 17 items (MaxItems 16),
// posted together, every 100 ms, for 10 bursts. The last item of each
// burst is done about 30 ms after the burst before 2ee4705 and about 60
// ms after on HEAD, for the same two batches a burst.
func TestReview56BurstTailLatency(t *testing.T) {
	const latency = 30 * time.Millisecond
	var mu sync.Mutex
	batches := 0
	done := make(chan time.Time, 17)
	b, err := New(&Options{MaxHandlers: 16, MaxItems: 16, MaxPartial: 1, PartialHold: 5 * time.Millisecond}, func(batch []int, _ []error) {
		mu.Lock()
		batches++
		mu.Unlock()
		time.Sleep(latency)
		for range batch {
			done <- time.Now()
		}
	})
	require.NoError(t, err)
	t.Cleanup(b.Shutdown)
	var took []time.Duration
	for burst := range 10 {
		items := make([]int, 17)
		for i := range items {
			items[i] = burst*17 + i
		}
		start := time.Now()
		require.NoError(t, b.PostAll(items))
		var last time.Time
		for range items {
			last = <-done
		}
		took = append(took, last.Sub(start))
		time.Sleep(100*time.Millisecond - time.Since(start))
	}
	mu.Lock()
	n := batches
	mu.Unlock()
	slices.Sort(took)
	t.Logf("bursts of 17 took %v over %v batches; %d batches for 10 bursts", took, latency, n)
	// The median: a host under load delays a burst now and then.
	require.Less(t, took[len(took)/2], latency*3/2, "an isolated burst of 17 took two batch times: its tail waited for the full batch")
}

// TestReview56ShutdownTakesPartialBehindFull: after Shutdown "a batch that
// is not full is taken whatever the bound", but Shutdown starts no handler
// for it: a partial batch waiting behind a full one in flight (which holds
// its place since 2ee4705) waits for that batch's hold, or, with
// PartialHold 0, until the full batch ends, however long Shutdown takes.
// Before 2ee4705 a full batch held nothing back and {3} went at once.
func TestReview56ShutdownTakesPartialBehindFull(t *testing.T) {
	shutdownBehindStuck(t, []int{0, 1, 2}, 3, "full")
}

// TestShutdownTakesPartialBehindPartial is review56's finding on the rule in
// place: a partial batch waiting behind a partial one in flight (PartialHold
// 0: it holds its place as long as it is in flight) goes once Shutdown lifts
// the bound, though the one in flight never ends.
func TestShutdownTakesPartialBehindPartial(t *testing.T) {
	shutdownBehindStuck(t, []int{0}, 1, "partial")
}

// shutdownBehindStuck posts stuck, a batch (MaxItems 3, MaxPartial 1) whose
// handler does not return until the test ends, then the item next, which
// must wait for it (a partial batch beside one in flight) and go once
// Shutdown lifts the bound.
func shutdownBehindStuck(t *testing.T, stuck []int, next int, kind string) {
	entered := make(chan []int, 8)
	stop := make(chan struct{})
	b, err := New(&Options{MaxHandlers: 2, MaxItems: 3, MaxPartial: 1}, func(batch []int, _ []error) {
		entered <- slices.Clone(batch)
		if batch[0] == stuck[0] {
			<-stop // a request that does not come back until the test ends
		}
	})
	require.NoError(t, err)
	shut := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		<-shut
	})
	require.NoError(t, b.PostAll(stuck))
	require.Equal(t, stuck, <-entered)
	require.NoError(t, b.Post(next))
	if kind == "partial" {
		select {
		case got := <-entered:
			t.Fatalf("batch %v went beside the partial one in flight", got)
		case <-time.After(10 * time.Millisecond):
		}
	}
	go func() {
		defer close(shut)
		b.Shutdown()
	}()
	select {
	case got := <-entered:
		require.Equal(t, []int{next}, got)
	case <-time.After(time.Second):
		t.Fatalf("after Shutdown the partial batch {%d} still waits behind the %s batch in flight", next, kind)
	}
}
