package mnsqueue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// orderedPair opens a sending and a receiving ordered.Queue, each on its own
// driver and store, over one emulated queue.
func orderedPair(tb testing.TB, srv *mnstest.Server, attrs *mnsqueue.QueueAttributes, newStore func(string) seqstore.Store, ro ordered.ReceiveOptions) (tx, rx *ordered.Queue) {
	tb.Helper()
	name := uniqueName("ordered")
	ctx := context.Background()
	require.NoError(tb, mnsqueue.CreateQueue(ctx, srv.Endpoint(), serverCred(srv), name, attrs))
	open := func(role string, o *ordered.Options) *ordered.Queue {
		drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
		require.NoError(tb, err)
		q, err := ordered.New(ctx, drv, newStore(role), o)
		require.NoError(tb, err)
		tb.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			assert.NoError(tb, q.Close(cctx), "%s: ordered Close", role)
			assert.NoError(tb, drv.Close(), "%s: driver Close", role)
		})
		return q
	}
	return open("send", nil), open("receive", &ordered.Options{Receive: ro})
}

// sendGroups sends n messages to each of groups groups, bodies "1".."n" in
// order per group, from several goroutines with SendAsync.
func sendGroups(tb testing.TB, ctx context.Context, q *ordered.Queue, groups, n, producers int) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			var pending []*ordered.SendResult
			for g := p; g < groups; g += producers {
				for i := 1; i <= n; i++ {
					r, err := q.SendAsync(ctx, "g"+strconv.Itoa(g), []byte(strconv.Itoa(i)))
					if err != nil {
						errs <- err
						return
					}
					pending = append(pending, r)
				}
			}
			for _, r := range pending {
				if err := r.Wait(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(tb, err, "SendAsync")
	}
}

// groupRecorder checks that each group's handler calls see 1..n in order.
type groupRecorder struct {
	mu     sync.Mutex
	next   map[string]int
	bad    []string
	total  atomic.Int64
	doneAt int64
	done   chan struct{}
	once   sync.Once
	// apply, when set, runs first (ExactlyOnce: the cursor advance in the
	// application's own write); its error fails the hand-out.
	apply func(context.Context, *ordered.Message) error
}

func newGroupRecorder(want int64) *groupRecorder {
	return &groupRecorder{next: map[string]int{}, doneAt: want, done: make(chan struct{})}
}

func (r *groupRecorder) handle(ctx context.Context, m *ordered.Message) error {
	if r.apply != nil {
		if err := r.apply(ctx, m); err != nil {
			return err
		}
	}
	r.mu.Lock()
	want := r.next[m.Group] + 1
	got, err := strconv.Atoi(string(m.Body))
	if err != nil || got != want || m.Unordered {
		r.bad = append(r.bad, fmt.Sprintf("group %s: want body %d, got %q (seq %d, unordered %v)", m.Group, want, m.Body, m.Seq, m.Unordered))
	}
	r.next[m.Group] = max(r.next[m.Group], got)
	r.mu.Unlock()
	if r.total.Add(1) == r.doneAt {
		r.once.Do(func() { close(r.done) })
	}
	return nil
}

// runUntil runs q.Run with rec until it has seen its messages or d passed.
// It may run in its own goroutine: it reports through its result, never
// through a testing.TB (require may only stop the test's own goroutine).
// behind lists the groups whose last body is below the highest one seen
// (a group never seen is not listed: the status page shows it, if stuck).
func (r *groupRecorder) behind() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	top := 0
	for _, n := range r.next {
		top = max(top, n)
	}
	out := map[string]int{}
	for g, n := range r.next {
		if n < top {
			out[g] = n
		}
	}
	return out
}

// statusPage returns the start of q's status page at target (JSON: Stats,
// the stuck groups, or one group): what a failure to receive everything
// needs to be explained.
func statusPage(q *ordered.Queue, target string) string {
	w := httptest.NewRecorder()
	q.StatusHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	b := w.Body.String()
	return b[:min(len(b), 4<<10)]
}

func runUntil(q *ordered.Queue, rec *groupRecorder, d time.Duration) error {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- q.Run(ctx, rec.handle) }()
	var late error
	select {
	case <-rec.done:
	case <-time.After(d):
		behind := rec.behind()
		late = fmt.Errorf("handled %d of %d messages within %v; groups behind the others: %v; the status page:\n%s",
			rec.total.Load(), rec.doneAt, d, behind, statusPage(q, "/?format=json"))
		n := 0
		for g := range behind {
			if n++; n <= 3 {
				late = fmt.Errorf("%w\ngroup %s: %s", late, g, statusPage(q, "/?format=json&group="+url.QueryEscape(g)))
			}
		}
	}
	cancel()
	if err := <-errc; err != nil {
		return errors.Join(late, fmt.Errorf("Run: %w", err))
	}
	return late
}

// TestOrderedOverEmulator runs package ordered end to end over this driver
// and the emulator with faults on: 5% of deliveries repeated early, 2% of
// requests answered 500, 1% of connections dropped, 4 shards. Every group
// must see exactly 1..n, in order, once.
func TestOrderedOverEmulator(t *testing.T) {
	for _, tc := range []struct{ groups, n int }{{1, 1000}, {300, 6}} {
		t.Run(fmt.Sprintf("groups=%d", tc.groups), func(t *testing.T) {
			srv := newServer(t, &mnstest.Options{Seed: int64(tc.groups), Faults: mnstest.Faults{Redeliver: 0.05, Error5xx: 0.02, Drop: 0.01}})
			tx, rx := orderedPair(t, srv, &mnsqueue.QueueAttributes{Visibility: 5 * time.Second},
				func(string) seqstore.Store { return memstore.New() },
				ordered.ReceiveOptions{Wait: time.Second, Concurrency: 64})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			rec := newGroupRecorder(int64(tc.groups * tc.n))
			runErr := make(chan error, 1)
			go func() { runErr <- runUntil(rx, rec, 50*time.Second) }()
			sendGroups(t, ctx, tx, tc.groups, tc.n, 4)
			require.NoError(t, <-runErr, "receiving every message")
			rec.mu.Lock()
			defer rec.mu.Unlock()
			assert.Empty(t, rec.bad, "out-of-order, duplicate or unordered deliveries")
			assert.Len(t, rec.next, tc.groups, "groups seen")
			for g, last := range rec.next {
				assert.Equal(t, tc.n, last, "last body of group %s", g)
			}
			st := srv.Stats()
			t.Logf("server: sent %d, received %d, deleted %d; injected %d 5xx, %d drops, %d redeliveries",
				st.Sent, st.Received, st.Deleted, st.Errors5xx, st.Drops, st.Redelivered)
		})
	}
}

// BenchmarkOrderedVsRaw measures, in one run over the emulator without
// faults, raw driver throughput (send, receive, delete in 16-message
// batches) and ordered.Queue throughput (SendAsync, Run, Ack) with durable
// filestores on both sides, for 1 group and for 1,000 groups. One op is one
// message; reqs/msg counts every request the emulator served.
func BenchmarkOrderedVsRaw(b *testing.B) {
	b.Run("raw", func(b *testing.B) { BenchmarkRawThroughput(b) })
	window, _ := strconv.Atoi(os.Getenv("INORDER_BENCH_WINDOW")) // 0: the default
	for _, groups := range []int{1, 1000} {
		b.Run(fmt.Sprintf("ordered/groups=%d", groups), func(b *testing.B) {
			srv := newServer(b, nil)
			dir := b.TempDir()
			tx, rx := orderedPair(b, srv, nil, func(role string) seqstore.Store {
				s, err := filestore.Open(dir+"/"+role, nil)
				require.NoError(b, err)
				b.Cleanup(func() { s.Close() })
				return s
			}, ordered.ReceiveOptions{Wait: time.Second, Concurrency: 64, Window: window})
			per := max(1, b.N/groups)
			total := per * groups
			rec := newGroupRecorder(int64(total))
			b.ResetTimer()
			runErr := make(chan error, 1)
			go func() { runErr <- runUntil(rx, rec, 10*time.Minute) }()
			sendGroups(b, context.Background(), tx, groups, per, 8)
			require.NoError(b, <-runErr, "receiving every message")
			b.StopTimer()
			if len(rec.bad) > 0 {
				b.Fatalf("%d bad deliveries, first: %s", len(rec.bad), rec.bad[0])
			}
			st := srv.Stats()
			var reqs int64
			for _, n := range st.Requests {
				reqs += n
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(reqs)/float64(total), "reqs/msg")
			rs := rx.Stats()
			b.Logf("%v: receive %+v requests %+v; server %+v", b.Elapsed(), rs.Receive, rs.Requests, st)
		})
	}
}

// TestOrderedUnderThrottling runs package ordered over the emulator with a
// request rate limit, answered 429 TooManyRequests and, in the legacy form,
// 400 QpsLimitExceeded: the driver reports both as retryable
// driver.ErrThrottled, so the portable layer backs off and retries, and
// every group still sees 1..n in order.
func TestOrderedUnderThrottling(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{RequestRate: 400, Legacy: legacy, Hold: 20 * time.Millisecond}})
			tx, rx := orderedPair(t, srv, &mnsqueue.QueueAttributes{Visibility: 5 * time.Second},
				func(string) seqstore.Store { return memstore.New() },
				ordered.ReceiveOptions{Wait: time.Second, Concurrency: 16, Fetchers: 4})
			const groups, n = 10, 40
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			rec := newGroupRecorder(groups * n)
			runErr := make(chan error, 1)
			go func() { runErr <- runUntil(rx, rec, 50*time.Second) }()
			sendGroups(t, ctx, tx, groups, n, 8)
			require.NoError(t, <-runErr, "receiving every message")
			rec.mu.Lock()
			defer rec.mu.Unlock()
			assert.Empty(t, rec.bad, "out-of-order, duplicate or unordered deliveries")
			for g, last := range rec.next {
				assert.Equal(t, n, last, "last body of group %s", g)
			}
			st := srv.Stats()
			code := mnstest.CodeTooManyRequests
			if legacy {
				code = mnstest.CodeQpsLimitExceeded
			}
			assert.Positive(t, st.Errors[code], "the emulator throttled requests (%s): the test must exercise the backoff", code)
			t.Logf("throttled %d requests; requests %v", st.Throttled, st.Requests)
		})
	}
}
