package batcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a Handler that records its batches, fails odd items, and
// can be held at a gate so that items pile up.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	gate    chan struct{} // nil: no gate; else each batch waits for a send
	open    chan struct{} // closed by release: batches pass the gate
	once    sync.Once
	entered chan struct{} // a batch started (buffered)
	running atomic.Int32
	peak    atomic.Int32
}

func newRecorder(gated bool) *recorder {
	r := &recorder{entered: make(chan struct{}, 1024), open: make(chan struct{})}
	if gated {
		r.gate = make(chan struct{})
	}
	return r
}

var errOdd = errors.New("odd item")

func (r *recorder) handle(batch []int, errs []error) {
	n := r.running.Add(1)
	for {
		p := r.peak.Load()
		if n <= p || r.peak.CompareAndSwap(p, n) {
			break
		}
	}
	r.entered <- struct{}{}
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-r.open:
		}
	}
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(batch))
	r.mu.Unlock()
	for i, v := range batch {
		if v%2 == 1 {
			errs[i] = fmt.Errorf("%w: %d", errOdd, v)
		}
	}
	r.running.Add(-1)
}

// release lets every batch, now and later, pass the gate.
func (r *recorder) release() { r.once.Do(func() { close(r.open) }) }

func (r *recorder) got() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func newBatcher(t *testing.T, opts *Options, r *recorder) *Batcher[int] {
	t.Helper()
	b, err := New(opts, r.handle)
	require.NoError(t, err)
	t.Cleanup(func() {
		r.release()
		b.Shutdown()
	})
	return b
}

// waitQueued waits until n items wait in b's queue.
func waitQueued[T any](t *testing.T, b *Batcher[T], n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		waiting := 0
		for _, e := range b.queue[b.head:] {
			if !e.withdrawn {
				waiting++
			}
		}
		return waiting == n
	}, 5*time.Second, time.Millisecond, "want %d items queued", n)
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{MaxHandlers: -1}, {MaxItems: -1}, {MaxSize: -1}, {Backlog: -1}, {MaxPartial: -1}, {MaxPartial: 1}} {
		_, err := New(&o, func([]int, []error) {})
		assert.Error(t, err, "options %+v must be refused", o)
	}
	_, err := New[int](nil, nil)
	assert.Error(t, err, "a nil handler must be refused")
}

func TestPerItemErrors(t *testing.T) {
	r := newRecorder(false)
	b := newBatcher(t, nil, r)
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() { errs[i] = b.Add(t.Context(), i) })
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 1 {
			assert.ErrorIs(t, err, errOdd, "item %d gets its own error", i)
			assert.Contains(t, err.Error(), fmt.Sprintf(": %d", i), "item %d gets its own error, not another's", i)
		} else {
			assert.NoError(t, err, "item %d succeeded", i)
		}
	}
	n := 0
	for _, batch := range r.got() {
		n += len(batch)
	}
	assert.Equal(t, 50, n, "every item is handled once")
}

// TestGroupCommit: items that arrive while a batch is handled wait and go
// together into the next batch, in submission order, split by the bounds.
func TestGroupCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want [][]int
	}{
		{"no bound", Options{}, [][]int{{0}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}},
		{"item bound", Options{MaxItems: 4}, [][]int{{0}, {1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder(true)
			b := newBatcher(t, &tc.opts, r)
			first := b.AddNoWait(0)
			<-r.entered // item 0's batch is being handled
			var results []<-chan error
			for i := 1; i <= 10; i++ {
				results = append(results, b.AddNoWait(i))
			}
			waitQueued(t, b, 10)
			for range tc.want {
				r.gate <- struct{}{}
			}
			assert.NoError(t, <-first)
			for i, c := range results {
				err := <-c
				assert.Equal(t, (i+1)%2 == 1, errors.Is(err, errOdd), "item %d: %v", i+1, err)
			}
			assert.Equal(t, tc.want, r.got(), "batches")
		})
	}
}

type sized struct{ id, bytes int }

func (s sized) Size() int { return s.bytes }

func TestSizeBound(t *testing.T) {
	var mu sync.Mutex
	var batches [][]int
	gate := make(chan struct{})
	b, err := New(&Options{MaxSize: 100}, func(batch []sized, _ []error) {
		<-gate
		ids := make([]int, len(batch))
		for i, s := range batch {
			ids[i] = s.id
		}
		mu.Lock()
		batches = append(batches, ids)
		mu.Unlock()
	})
	require.NoError(t, err)
	defer b.Shutdown()
	first := b.AddNoWait(sized{0, 1})
	waitQueued(t, b, 0) // item 0 taken
	var results []<-chan error
	for i, size := range []int{40, 40, 30, 250, 10, 100} {
		results = append(results, b.AddNoWait(sized{i + 1, size}))
	}
	close(gate)
	// An item a batch can never take would leave its caller waiting for
	// ever: fail with a message, not at go test's timeout.
	deadline := time.After(10 * time.Second)
	for i, c := range append([]<-chan error{first}, results...) {
		select {
		case err := <-c:
			require.NoError(t, err)
		case <-deadline:
			t.Fatalf("item %d never handled within 10 s (batches so far %v)", i, batchesSoFar(&mu, &batches))
		}
	}
	assert.Equal(t, [][]int{{0}, {1, 2}, {3}, {4}, {5}, {6}}, batches,
		"at most 100 bytes per batch; a 250-byte item goes alone")
}

func TestMaxHandlersAndBacklog(t *testing.T) {
	// Each step submits items, then waits for the batches it starts (a
	// handler takes everything waiting, so the steps are one item each
	// while handlers start) and checks what waits and what runs.
	type step struct {
		items   int
		started int // batches that start
		queued  int // items waiting afterwards
		running int32
	}
	for _, tc := range []struct {
		name  string
		opts  Options
		steps []step
	}{
		{"one handler by default", Options{}, []step{{1, 1, 0, 1}, {3, 0, 3, 1}}},
		{"three handlers", Options{MaxHandlers: 3}, []step{{1, 1, 0, 1}, {1, 1, 0, 2}, {1, 1, 0, 3}, {2, 0, 2, 3}}},
		{"backlog: another handler only beyond 2 waiting", Options{MaxHandlers: 3, Backlog: 2},
			[]step{{1, 1, 0, 1}, {1, 0, 1, 1}, {1, 0, 2, 1}, {1, 1, 0, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder(true)
			b := newBatcher(t, &tc.opts, r)
			var results []<-chan error
			for i, st := range tc.steps {
				for range st.items {
					results = append(results, b.AddNoWait(2*len(results)))
				}
				for range st.started {
					<-r.entered
				}
				waitQueued(t, b, st.queued)
				time.Sleep(5 * time.Millisecond) // a handler that should not start has had time to
				assert.Equal(t, st.running, r.running.Load(), "step %d: batches in flight", i)
				assert.Empty(t, r.entered, "step %d: no other batch started", i)
			}
			r.release()
			for _, c := range results {
				require.NoError(t, <-c)
			}
			assert.LessOrEqual(t, r.peak.Load(), int32(max(1, tc.opts.MaxHandlers)), "never more than MaxHandlers batches at once")
		})
	}
}

// TestMaxPartial: while MaxPartial batches that are not full are in
// flight, items that make no full batch wait, even for a handler that comes
// back from a full batch; a full batch starts a handler at once, one per
// full batch; the waiting remainder goes when a partial batch ends.
func TestMaxPartial(t *testing.T) {
	var mu sync.Mutex
	gates := map[int]chan struct{}{} // by a batch's first item
	gate := func(first int) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if gates[first] == nil {
			gates[first] = make(chan struct{})
		}
		return gates[first]
	}
	entered := make(chan []int, 16)
	b, err := New(&Options{MaxHandlers: 4, MaxItems: 3, MaxPartial: 1}, func(batch []int, _ []error) {
		entered <- slices.Clone(batch)
		<-gate(batch[0])
	})
	require.NoError(t, err)
	opened := map[int]bool{}
	open := func(first int) { close(gate(first)); opened[first] = true }
	defer func() { // a failed check must not leave handlers at their gates
		for first := range 8 {
			if !opened[first] {
				close(gate(first))
			}
		}
		b.Shutdown()
	}()
	next := 0
	add := func(n int) {
		for range n {
			_ = b.Post(next)
			next++
		}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case got := <-entered:
			t.Fatalf("%s: batch %v started", what, got)
		case <-time.After(10 * time.Millisecond):
		}
	}
	add(1)
	assert.Equal(t, []int{0}, <-entered, "an idle batcher hands an item over at once")
	add(2)
	quiet("two items make no full batch beside the partial one")
	add(4) // 1..6: two full batches
	got := [][]int{<-entered, <-entered}
	assert.ElementsMatch(t, [][]int{{1, 2, 3}, {4, 5, 6}}, got, "one handler per full batch")
	add(1)
	quiet("a partial batch beyond MaxPartial")
	open(1) // a full batch ends: its handler must not take {7}
	quiet("a handler back from a full batch takes a partial one beyond MaxPartial")
	open(0) // the partial batch ends: {7} goes
	assert.Equal(t, []int{7}, <-entered)
	open(4)
	open(7)
}

// TestMaxPartialShutdown: Shutdown hands the waiting items over in a
// partial batch whatever the bound.
func TestMaxPartialShutdown(t *testing.T) {
	r := newRecorder(true)
	b := newBatcher(t, &Options{MaxHandlers: 2, MaxItems: 4, MaxPartial: 1}, r)
	first := b.AddNoWait(0)
	<-r.entered
	second := b.AddNoWait(2)
	waitQueued(t, b, 1)
	done := make(chan struct{})
	go func() { b.Shutdown(); close(done) }()
	r.gate <- struct{}{} // {0} ends; its handler takes {2}
	<-r.entered
	r.gate <- struct{}{}
	<-done
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	assert.Equal(t, [][]int{{0}, {2}}, r.got())
}

func TestWithdraw(t *testing.T) {
	r := newRecorder(true)
	b := newBatcher(t, nil, r)
	first := b.AddNoWait(0)
	<-r.entered
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- b.Add(ctx, 2) }()
	third := b.AddNoWait(4)
	waitQueued(t, b, 2)
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled, "Add returns when its ctx ends")
	waitQueued(t, b, 1)
	r.gate <- struct{}{}
	r.gate <- struct{}{}
	require.NoError(t, <-first)
	require.NoError(t, <-third)
	assert.Equal(t, [][]int{{0}, {4}}, r.got(), "a withdrawn item is never handled")

	done, cancel2 := context.WithCancel(t.Context())
	cancel2()
	assert.ErrorIs(t, b.Add(done, 6), context.Canceled, "an ended ctx submits nothing")
}

func TestWithdrawAfterTake(t *testing.T) {
	r := newRecorder(true)
	b := newBatcher(t, nil, r)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- b.Add(ctx, 8) }()
	<-r.entered // taken: too late to withdraw
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled, "Add returns when its ctx ends, even while its batch is handled")
	r.gate <- struct{}{}
	require.Eventually(t, func() bool { return len(r.got()) == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, [][]int{{8}}, r.got(), "an item taken before its caller gave up is handled")
}

func TestShutdownFlushes(t *testing.T) {
	r := newRecorder(true)
	b, err := New(&Options{MaxItems: 3}, r.handle)
	require.NoError(t, err)
	var results []<-chan error
	for i := range 10 {
		results = append(results, b.AddNoWait(2*i))
	}
	<-r.entered
	shut := make(chan struct{})
	go func() { b.Shutdown(); close(shut) }()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.shutdown
	}, 5*time.Second, time.Millisecond)
	assert.ErrorIs(t, b.Post(1), ErrShutdown, "Post after Shutdown")
	assert.ErrorIs(t, <-b.AddNoWait(1), ErrShutdown, "AddNoWait after Shutdown")
	assert.ErrorIs(t, b.Add(t.Context(), 1), ErrShutdown, "Add after Shutdown")
	select {
	case <-shut:
		t.Fatal("Shutdown returned before the queued items were handled")
	default:
	}
	r.release()
	<-shut
	for i, c := range results {
		assert.NoError(t, <-c, "item %d submitted before Shutdown is handled", i)
	}
	assert.Len(t, slices.Concat(r.got()...), 10)
	b.Shutdown() // idempotent
}

// TestIdleOwnsNoGoroutine: handlers stop when nothing waits (goleak in
// TestMain checks the end of the run too).
func TestIdleOwnsNoGoroutine(t *testing.T) {
	b, err := New(&Options{MaxHandlers: 4}, func([]int, []error) {})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { _ = b.Add(t.Context(), i) })
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.handlers == 0
	}, 5*time.Second, time.Millisecond, "handlers must exit once the queue is empty")
}

// TestLongQueue keeps more than a thousand items waiting, so that the
// queue's array is compacted while items are withdrawn and taken.
func TestLongQueue(t *testing.T) {
	r := newRecorder(true)
	b := newBatcher(t, &Options{MaxItems: 7}, r)
	first := b.AddNoWait(-2)
	<-r.entered
	const n = 3000
	results := make([]<-chan error, n)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range n {
		if i%10 == 0 {
			wg.Go(func() { _ = b.Add(ctx, 2*i) }) // withdrawn below
			continue
		}
		results[i] = b.AddNoWait(2 * i)
	}
	waitQueued(t, b, n)
	cancel()
	wg.Wait()
	r.release()
	require.NoError(t, <-first)
	for i, c := range results {
		if c != nil {
			require.NoError(t, <-c, "item %d", i)
		}
	}
	var order []int
	for _, batch := range r.got()[1:] {
		assert.LessOrEqual(t, len(batch), 7)
		order = append(order, batch...)
	}
	var want []int
	for i := range n {
		if i%10 != 0 {
			want = append(want, 2*i)
		}
	}
	assert.Equal(t, want, order, "every item not withdrawn is handled once, in submission order")
}

// TestStress submits from many goroutines with random cancellation: an Add
// that returned nil or an item error was handled exactly once; a withdrawn
// item never.
func TestStress(t *testing.T) {
	var mu sync.Mutex
	handled := map[int]int{}
	b, err := New(&Options{MaxHandlers: 3, MaxItems: 16}, func(batch []int, errs []error) {
		mu.Lock()
		for _, v := range batch {
			handled[v]++
		}
		mu.Unlock()
		time.Sleep(50 * time.Microsecond)
	})
	require.NoError(t, err)
	const workers, per = 16, 200
	outcome := make([]error, workers*per)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				id := w*per + i
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(id%5)*20*time.Microsecond)
				outcome[id] = b.Add(ctx, id)
				cancel()
			}
		})
	}
	wg.Wait()
	b.Shutdown()
	ok := 0
	for id, err := range outcome {
		switch {
		case err == nil:
			ok++
			assert.Equal(t, 1, handled[id], "item %d succeeded, so it was handled once", id)
		default:
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.LessOrEqual(t, handled[id], 1, "item %d handled at most once", id)
		}
	}
	t.Logf("%d of %d items handled before their deadline", ok, len(outcome))
	assert.Positive(t, ok)
}

func batchesSoFar(mu *sync.Mutex, batches *[][]int) [][]int {
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(*batches)
}

// TestDrained: Drained is closed at once when no item waits, and once a
// handler took the last waiting item otherwise (not when it finished).
func TestDrained(t *testing.T) {
	r := newRecorder(true)
	b := newBatcher(t, &Options{MaxHandlers: 1, MaxItems: 2}, r)
	defer b.Shutdown()
	select {
	case <-b.Drained():
	default:
		t.Fatal("an idle batcher's Drained is not closed")
	}
	_ = b.Post(0)
	<-r.entered // {0} is being handled, nothing waits
	select {
	case <-b.Drained():
	default:
		t.Fatal("Drained is not closed while the only item is being handled")
	}
	_ = b.Post(1)
	_ = b.Post(2)
	_ = b.Post(3)
	waitQueued(t, b, 3)
	d := b.Drained()
	select {
	case <-d:
		t.Fatal("Drained is closed while three items wait")
	case <-time.After(10 * time.Millisecond):
	}
	r.gate <- struct{}{} // {0} ends; the handler takes {1, 2}: {3} waits
	<-r.entered
	select {
	case <-d:
		t.Fatal("Drained is closed while an item waits")
	case <-time.After(10 * time.Millisecond):
	}
	r.gate <- struct{}{} // {1, 2} ends; the handler takes {3}
	<-r.entered
	closed := false
	select {
	case <-d:
		closed = true
	case <-time.After(5 * time.Second):
	}
	r.gate <- struct{}{} // before a failure: Shutdown waits for the handler
	require.True(t, closed, "Drained not closed once the last waiting item was taken")
}
