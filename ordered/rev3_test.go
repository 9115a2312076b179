package ordered_test

// Review 3: end-to-end reproductions over the public API.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// rev3Flaky wraps a driver and fails the first failReceives receives with
// a retryable error (before the queue sees them: nothing is made
// invisible).
type rev3Flaky struct {
	driver.Queue
	failReceives atomic.Int64
	receives     atomic.Int64
}

var errRev3Down = errors.New("rev3: queue unreachable")

func (f *rev3Flaky) ReceiveBatch(ctx context.Context, n int, wait time.Duration) ([]*driver.Message, error) {
	f.receives.Add(1)
	if f.failReceives.Add(-1) >= 0 {
		return nil, errRev3Down
	}
	return f.Queue.ReceiveBatch(ctx, n, wait)
}

func (f *rev3Flaky) IsRetryable(err error) bool {
	return errors.Is(err, errRev3Down) || f.Queue.IsRetryable(err)
}

// TestRev3_ReceiverStallsAfterShortOutage: a receiver with nothing to do
// whose first receives fail (a queue outage of a fraction of a second)
// stops fetching for good. Each failed receive counts its n messages
// against the cap until a visibility timeout passes (Core.FetchFailed);
// MaxUndeleted 32 and two fetchers of 16: two failures fill it. When the
// visibility timeout has passed nothing runs a step (the core gives the
// keeper no deadline for it, and Room does not expire them), so the
// fetchers wait for a room signal that never comes. Expected: the 20
// messages sent after the outage delivered within a few visibility
// timeouts (memqueue Visibility 1s). Happened: none delivered in 8 s; the
// driver saw only the failed receives; Stats.Undeleted stays 0 while the
// core's room is 0.
func TestRev3_ReceiverStallsAfterShortOutage(t *testing.T) {
	mq := memqueue.New(&memqueue.Options{Visibility: time.Second})
	drv := &rev3Flaky{Queue: mq}
	drv.failReceives.Store(2)
	ctx := context.Background()
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "q",
		Receive: ordered.ReceiveOptions{MaxUndeleted: 32, Wait: 200 * time.Millisecond}})
	require.NoError(t, err)
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		require.NoError(t, q.Close(cctx))
	}()
	var got atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = q.Run(runCtx, func(ctx context.Context, m *ordered.Message) error {
			got.Add(1)
			return nil
		})
	})
	defer func() { stop(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // the outage is over
	rxSend(t, mq, rxBodies("g", 1, 1, 20, nil))
	deadline := time.Now().Add(8 * time.Second)
	for got.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	st := q.Stats().Receive
	t.Logf("delivered %d of 20 in 8 s after a 2-receive outage; driver receives %d; stats: undeleted %d received %d",
		got.Load(), drv.receives.Load(), st.Undeleted, st.Received)
	require.EqualValues(t, 20, got.Load(), "the receiver stopped fetching after two failed receives")
}

// rev3AMORun sends n messages over groups, then runs incarnations of an
// AtMostOnce receiver over the same queue and store, each closed cleanly
// after a random time, with Receive calls that give up at random moments.
// It returns what the application saw: key -> count, and the ordered seqs
// per group in order; it logs each sighting of a key seen twice.
func rev3AMORun(t *testing.T, seed uint64, groups, per int, opts memqueue.Options) (map[string]int, map[string][]uint64, int, int) {
	rng := rand.New(rand.NewPCG(seed, seed))
	mq := memqueue.New(&opts)
	st := memstore.New()
	var bodies [][]byte
	for g := range groups {
		bodies = append(bodies, rxBodies(fmt.Sprintf("g%d", g), 1, 1, uint64(per), nil)...)
	}
	rng.Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
	rxSend(t, mq, bodies)
	seen := map[string]int{}
	sightings := map[string][]string{} // for the log of a duplicate
	defer func() {
		for k, ss := range sightings {
			if len(ss) > 1 {
				t.Logf("%s seen %d times: %v", k, len(ss), ss)
			}
		}
	}()
	order := map[string][]uint64{}
	total := groups * per
	incarnations := 0
	closeErrs := 0
	deadline := time.Now().Add(40 * time.Second)
	for len(seen) < total && time.Now().Before(deadline) {
		incarnations++
		q, err := ordered.New(context.Background(), mq, st, &ordered.Options{Name: "q", Retry: ordered.RetryOptions{Initial: time.Millisecond, Max: 20 * time.Millisecond},
			Receive: ordered.ReceiveOptions{Mode: ordered.AtMostOnce, Wait: 20 * time.Millisecond, GapTimeout: 200 * time.Millisecond,
				GapPolicy: ordered.GapSkip, MaxUndeleted: 64, Window: 16}})
		require.NoError(t, err)
		life := time.Duration(rng.IntN(150)+10) * time.Millisecond
		end := time.Now().Add(life)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 3 {
			wseed := rng.Uint64()
			_ = w
			wg.Go(func() {
				r := rand.New(rand.NewPCG(wseed, 1))
				for time.Now().Before(end) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(3000))*time.Microsecond)
					m, err := q.Receive(ctx)
					cancel()
					if err != nil {
						if errors.Is(err, ordered.ErrClosed) {
							return
						}
						continue
					}
					mu.Lock()
					key := fmt.Sprintf("%s/%d", m.Group, m.Seq)
					seen[key]++
					sightings[key] = append(sightings[key], fmt.Sprintf("incarnation %d, Unordered %v, attempt %d, redelivered %v, id %s",
						incarnations, m.Unordered, m.Attempt, m.Redelivered, m.ID))
					if !m.Unordered {
						order[m.Group] = append(order[m.Group], m.Seq)
					}
					mu.Unlock()
					_ = m.Ack(context.Background())
				}
			})
		}
		time.Sleep(life)
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := q.Close(cctx); err != nil {
			closeErrs++
			t.Logf("close: %v", err)
		}
		cancel()
		wg.Wait()
	}
	return seen, order, incarnations, closeErrs
}

// TestRev3_AMOCleanClosesLoseNothing: README (Close): "Under AtMostOnce, a
// message the cursor passed and no application took is marked skipped and
// keeps a copy in the queue ..., so the next receiver hands it out flagged
// Unordered"; package doc: "A clean Close loses nothing". AtMostOnce:
// "nothing is ever delivered twice, Unordered ones included". 600 messages
// over 6 groups, shuffled, memqueue with redeliveries; receivers closed
// cleanly every 10-160 ms (Close returned nil), three Receive loops whose
// calls give up after 0-3 ms. Expected: every message seen exactly once,
// ordered ones in order. The figures are in the log.
func TestRev3_AMOCleanClosesLoseNothing(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			opts := memqueue.Options{Shards: 4, Visibility: 300 * time.Millisecond, Redeliver: 0.02, RedeliverAfter: 50 * time.Millisecond}
			if seed > 3 {
				opts.ErrorRate, opts.LoseReceive = 0.03, 0.02
			}
			seen, order, inc, cerr := rev3AMORun(t, seed, 6, 100, opts)
			dups, missing := 0, 0
			var dupKeys []string
			for g := range 6 {
				for s := 1; s <= 100; s++ {
					k := fmt.Sprintf("g%d/%d", g, s)
					switch n := seen[k]; {
					case n == 0:
						missing++
					case n > 1:
						dups++
						dupKeys = append(dupKeys, k)
					}
				}
			}
			disorder := 0
			for _, s := range order {
				for i := 1; i < len(s); i++ {
					if s[i] <= s[i-1] {
						disorder++
					}
				}
			}
			t.Logf("incarnations %d (close errors %d): seen %d of 600, duplicates %d %v, missing %d, out of order %d", inc, cerr, len(seen), dups, dupKeys, missing, disorder)
			require.Zero(t, dups, "AtMostOnce handed a message out twice")
			require.Zero(t, disorder, "ordered hand-outs out of order")
			if cerr == 0 {
				require.Zero(t, missing, "clean closes lost messages")
			}
		})
	}
}

// TestRev3_ALOChaosCapAndExactlyOnceWithCleanCloses: AtLeastOnce with Run,
// clean Closes only (Close waits for running handlers, flushes the acked
// advances: "never one whose cursor advance was durable (SyncAck returned,
// or Close returned nil)" is delivered again), a small cap that makes the
// receiver park (MaxUndeleted 48, Window 16, MaxMemory 256 KiB) over
// memqueue with redeliveries, lost receive responses and 2% errors.
// Expected: every message handed out exactly once (Attempt 1), in order
// per group, and the queue's in-flight count (what the service counts as
// received and not deleted) never above the cap (sampled every ms, from
// 700 ms after each Close: what the previous incarnation gave back is
// visible again by then). Figures in the log.
func TestRev3_ALOChaosCapAndExactlyOnceWithCleanCloses(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	const groups, per, capN = 20, 150, 48
	for _, seed := range []uint64{11, 12} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			mq := memqueue.New(&memqueue.Options{Shards: 4, Visibility: 500 * time.Millisecond, Redeliver: 0.05,
				RedeliverAfter: 20 * time.Millisecond, LoseReceive: 0.01, ErrorRate: 0.02, Seed: int64(seed)})
			st := memstore.New()
			var bodies [][]byte
			for g := range groups {
				bodies = append(bodies, rxBodies(fmt.Sprintf("g%02d", g), 1, 1, per, nil)...)
			}
			rng.Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
			rxSend(t, mq, bodies)
			var mu sync.Mutex
			seen := map[string]int{}
			last := map[string]uint64{}
			var errs []string
			var peak atomic.Int64
			var quietAfter atomic.Int64 // sample only once the previous incarnation's leftovers are visible again
			stopSample := make(chan struct{})
			var sw sync.WaitGroup
			sw.Go(func() {
				for {
					select {
					case <-stopSample:
						return
					case <-time.After(time.Millisecond):
					}
					_, inflight := mq.Len()
					if time.Now().UnixNano() < quietAfter.Load() {
						continue
					}
					if int64(inflight) > peak.Load() {
						peak.Store(int64(inflight))
					}
				}
			})
			deadline := time.Now().Add(60 * time.Second)
			inc := 0
			for len(seen) < groups*per && time.Now().Before(deadline) {
				inc++
				q, err := ordered.New(context.Background(), mq, st, &ordered.Options{Name: "q",
					Retry: ordered.RetryOptions{Initial: time.Millisecond, Max: 50 * time.Millisecond},
					Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, MaxUndeleted: capN, Window: 16, MaxMemory: 256 << 10,
						Concurrency: 8}})
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					_ = q.Run(ctx, func(_ context.Context, m *ordered.Message) error {
						mu.Lock()
						defer mu.Unlock()
						k := fmt.Sprintf("%s/%d", m.Group, m.Seq)
						seen[k]++
						if seen[k] > 1 {
							errs = append(errs, "again: "+k)
						}
						if !m.Unordered {
							if m.Seq <= last[m.Group] {
								errs = append(errs, fmt.Sprintf("order: %s after %d", k, last[m.Group]))
							}
							last[m.Group] = m.Seq
						}
						return nil
					})
				}()
				time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
				quietAfter.Store(time.Now().Add(time.Hour).UnixNano())
				cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
				cerr := q.Close(cctx)
				quietAfter.Store(time.Now().Add(700 * time.Millisecond).UnixNano())
				ccancel()
				cancel()
				<-done
				if cerr != nil {
					errs = append(errs, "close: "+cerr.Error())
				}
			}
			close(stopSample)
			sw.Wait()
			mu.Lock()
			defer mu.Unlock()
			t.Logf("incarnations %d: distinct %d of %d; queue in-flight peak %d (cap %d); errors %d %v",
				inc, len(seen), groups*per, peak.Load(), capN, len(errs), errs[:min(len(errs), 10)])
			require.Empty(t, errs)
			require.Equal(t, groups*per, len(seen), "not everything delivered within 60 s")
			require.LessOrEqual(t, peak.Load(), int64(capN), "the queue counted more received and not deleted than the cap")
		})
	}
}

// TestRev3_HandlerFailingDuringCloseCostsATimeout: Close "waits for
// running Run handlers" and "gives back what the receiver holds and will
// not deliver (held messages, messages waiting for a retry, ...)", so that
// "a restarted receiver takes them at once instead of after the queue's
// visibility timeout". A handler running when Close begins that returns an
// error Nacks its message after Close began: the message waits for a retry
// that never comes, and is not given back. Queue visibility 6 s. Expected:
// the next receiver gets seq 1 again within about a second
// (ShortVisibility), as it gets seq 2, which was held. Happened: seq 2 comes
// back at once, seq 1 only after the 6 s visibility timeout (figures in the
// log).
func TestRev3_HandlerFailingDuringCloseCostsATimeout(t *testing.T) {
	mq := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 6 * time.Second})
	st := memstore.New()
	rxSend(t, mq, [][]byte{rxBody("g", 1, 1), rxBody("g", 1, 2)})
	opts := &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Wait: 50 * time.Millisecond}}
	q, err := ordered.New(context.Background(), mq, st, opts)
	require.NoError(t, err)
	inHandler := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = q.Run(context.Background(), func(_ context.Context, m *ordered.Message) error {
			once.Do(func() { close(inHandler) })
			<-release
			return errors.New("handler failed")
		})
	}()
	<-inHandler
	time.Sleep(100 * time.Millisecond) // seq 2 is held by now
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closed <- q.Close(cctx)
	}()
	time.Sleep(50 * time.Millisecond) // Close began and waits for the handler
	close(release)
	require.NoError(t, <-closed)
	<-done
	gb := q.Stats().Receive.GivenBack
	start := time.Now()
	q2, err := ordered.New(context.Background(), mq, st, opts)
	require.NoError(t, err)
	defer rxClose(t, q2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := q2.Receive(ctx)
	require.NoError(t, err)
	took := time.Since(start)
	t.Logf("first receiver gave back %d; the next one got seq %d after %v (queue visibility 6 s)", gb, m.Seq, took.Round(10*time.Millisecond))
	require.Less(t, took, 3*time.Second, "the message nacked during Close waited for the visibility timeout")
}
