package ordered_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

func rxQueue(t testing.TB, drv *memqueue.Queue, store seqstore.Store, o *ordered.Options) *ordered.Queue {
	t.Helper()
	q, err := ordered.New(context.Background(), drv, store, o)
	require.NoError(t, err)
	return q
}

func rxClose(t testing.TB, q *ordered.Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, q.Close(ctx))
}

// rxRunUntil runs q.Run with the recorder until it saw want messages.
func rxRunUntil(t testing.TB, q *ordered.Queue, rc *rxRecorder, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
			defer rc.record(m)()
			return nil
		})
	}()
	rxWait(t, rc, d)
	cancel()
	require.NoError(t, <-errc, "Run returns nil when its ctx ends")
}

func TestReceiveOneGroupInOrder(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Shards: 8, Seed: 1})
	store := memstore.New()
	q := rxQueue(t, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{Wait: 50 * time.Millisecond}})
	const n = 500
	rxSend(t, drv, rxBodies("g", 7, 1, n, rand.New(rand.NewPCG(1, 2))))
	rc := newRxRecorder(n)
	rxRunUntil(t, q, rc, 20*time.Second)
	rxClose(t, q)
	rc.check(t, map[string]uint64{"g": n})

	c, err := storeCursor(context.Background(), store, seqstore.Stream{Queue: "default", Group: "g"})
	require.NoError(t, err)
	assert.Equal(t, uint64(7), c.Epoch, "durable cursor epoch")
	assert.Equal(t, uint64(n+1), c.Next, "Close flushes the cursor past every acked message")
	vis, inflight := drv.Len()
	assert.Equal(t, 0, vis+inflight, "Close deletes every acked message")
	st := q.Stats().Receive
	assert.Equal(t, int64(n), st.Acked)
	assert.Equal(t, int64(n), st.Deleted)
}

// TestReceiveChaos is the main end-to-end proof: 1,000 groups, several
// concurrent senders, a queue that reorders, redelivers 10% of messages,
// fails 5% of calls and has a short visibility timeout. Each group must see
// exactly 1..N in order, without duplicates. A second receiver on the same
// store then drains the queue and must deliver nothing.
func TestReceiveChaos(t *testing.T) {
	for _, tc := range []struct {
		groups, n int
	}{{1, 3000}, {1000, 20}} {
		t.Run(fmt.Sprintf("groups=%d", tc.groups), func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{
				Shards: 8, Seed: 42, Redeliver: 0.1, ErrorRate: 0.05,
				Visibility: 300 * time.Millisecond,
			})
			store := memstore.New()
			q := rxQueue(t, drv, store, &ordered.Options{
				Retry: ordered.RetryOptions{Initial: time.Millisecond, Max: 20 * time.Millisecond},
				Receive: ordered.ReceiveOptions{
					Wait: 20 * time.Millisecond, Concurrency: 32, Fetchers: 4, Window: 256,
					VisibilityExtend: 300 * time.Millisecond, ReapInterval: 10 * time.Millisecond,
				},
			})
			want := map[string]uint64{}
			var wg sync.WaitGroup
			const senders = 4
			for s := range senders {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(s), 9))
					var bs [][]byte
					for g := s; g < tc.groups; g += senders {
						bs = append(bs, rxBodies(fmt.Sprintf("g%d", g), 1, 1, uint64(tc.n), nil)...)
					}
					// Local disorder on top of the queue's own: shuffle windows of 32.
					for i := 0; i < len(bs); i += 32 {
						w := bs[i:min(i+32, len(bs))]
						rng.Shuffle(len(w), func(a, b int) { w[a], w[b] = w[b], w[a] })
					}
					rxSend(t, drv, bs)
				})
			}
			for g := range tc.groups {
				want[fmt.Sprintf("g%d", g)] = uint64(tc.n)
			}
			rc := newRxRecorder(tc.groups * tc.n)
			rxRunUntil(t, q, rc, 40*time.Second)
			wg.Wait()
			rxClose(t, q)
			rc.check(t, want)
			st := q.Stats()
			t.Logf("receive stats: %+v", st.Receive)
			t.Logf("requests: %+v (%.3f driver requests per message)", st.Requests,
				float64(st.Requests.Receive+st.Requests.Delete+st.Requests.ChangeVisibility)/float64(tc.groups*tc.n))
			assert.LessOrEqual(t, st.Receive.MaxBuffered, tc.groups*256+64, "buffer bound")

			// A restart on the same store delivers nothing again: everything
			// left in the queue is a duplicate below the durable cursor.
			q2 := rxQueue(t, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{
				Wait: 20 * time.Millisecond, ReapInterval: 10 * time.Millisecond,
			}})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			delivered := 0
			go func() {
				for {
					vis, inflight := drv.Len()
					if vis+inflight == 0 {
						cancel()
						return
					}
					select {
					case <-ctx.Done():
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			for {
				m, err := q2.Receive(ctx)
				if err != nil {
					break
				}
				delivered++
				t.Errorf("restart delivered %s seq %d again", m.Group, m.Seq)
				_ = m.Ack(ctx)
			}
			cancel()
			rxClose(t, q2)
			assert.Zero(t, delivered, "no message is delivered twice across a clean restart")
			vis, inflight := drv.Len()
			assert.Equal(t, 0, vis+inflight, "the restarted receiver reaps every duplicate left")
		})
	}
}

// TestReceiveChaosWithSend runs the real send side: several goroutines per
// process Send concurrently over 200 groups, through a queue with chaos;
// the receiver (another Queue on its own store) sees each group's 1..N in
// order, without duplicates.
func TestReceiveChaosWithSend(t *testing.T) {
	const groups, n, senders = 200, 25, 8
	drv := memqueue.New(&memqueue.Options{Shards: 8, Seed: 11, Redeliver: 0.1, ErrorRate: 0.05, Visibility: 300 * time.Millisecond})
	retry := ordered.RetryOptions{Initial: time.Millisecond, Max: 20 * time.Millisecond}
	sq := rxQueue(t, drv, memstore.New(), &ordered.Options{Retry: retry})
	rq := rxQueue(t, drv, memstore.New(), &ordered.Options{Retry: retry, Receive: ordered.ReceiveOptions{
		Wait: 20 * time.Millisecond, Concurrency: 32, VisibilityExtend: 300 * time.Millisecond, ReapInterval: 10 * time.Millisecond,
	}})
	rc := newRxRecorder(groups * n)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() {
		runDone <- rq.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
			if string(m.Body) != fmt.Sprint(m.Seq) {
				t.Errorf("group %s seq %d carries payload %q, sent as message %q", m.Group, m.Seq, m.Body, fmt.Sprint(m.Seq))
			}
			defer rc.record(m)()
			return nil
		})
	}()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			// Each group is sent by one goroutine, so its payloads say its order.
			for i := 1; i <= n; i++ {
				for g := s; g < groups; g += senders {
					if err := sq.Send(context.Background(), fmt.Sprintf("g%d", g), []byte(fmt.Sprint(i))); err != nil {
						t.Errorf("send: %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	rxWait(t, rc, 40*time.Second)
	cancel()
	require.NoError(t, <-runDone)
	rxClose(t, sq)
	rxClose(t, rq)
	want := map[string]uint64{}
	for g := range groups {
		want[fmt.Sprintf("g%d", g)] = n
	}
	rc.check(t, want)
	st := rq.Stats()
	t.Logf("receive: delivered %d, duplicates %d reaped %d, max buffered %d; requests %+v",
		st.Receive.Delivered, st.Receive.Duplicates, st.Receive.DuplicatesReaped, st.Receive.MaxBuffered, st.Requests)
}
