package ordered_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
)

// TestReview5SendStress: many SendAsync callers over a driver that fails
// retryably (whole calls and single entries) and is slow: every Wait
// returns, nothing is lost or duplicated (checkStreams), with and without
// MaxDisorder.
func TestReview5SendStress(t *testing.T) {
	for _, md := range []int{0, 4} {
		t.Run(fmt.Sprintf("maxdisorder=%d", md), func(t *testing.T) {
			ctx := sendCtx(t)
			d := newSendDriver()
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(5, uint64(md)))
			d.fail = func(call int, bodies [][]byte) error {
				mu.Lock()
				defer mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
				switch rng.IntN(5) {
				case 0:
					return errRetryable
				case 1:
					errs := make([]error, len(bodies))
					for i := range errs {
						if rng.IntN(2) == 0 {
							errs[i] = errRetryable
						}
					}
					return &driver.BatchError{Errs: errs}
				}
				return nil
			}
			opts := &ordered.Options{Send: ordered.SendOptions{MaxDisorder: md, MaxAttempts: 100, Concurrency: 4}}
			opts.Retry.Initial = 100 * time.Microsecond
			opts.Retry.Max = time.Millisecond
			q := newSendQueue(t, d, newTestStore(), opts)
			var wg sync.WaitGroup
			var fails atomic.Int64
			for c := range 32 {
				wg.Go(func() {
					var rs []*ordered.SendResult
					for i := range 100 {
						r, err := q.SendAsync(ctx, fmt.Sprintf("g%d", (c+i)%7), []byte("x"))
						if err != nil {
							fails.Add(1)
							continue
						}
						rs = append(rs, r)
					}
					for _, r := range rs {
						if err := r.Wait(ctx); err != nil {
							fails.Add(1)
							t.Errorf("Wait: %v", err)
						}
					}
				})
			}
			wg.Wait()
			closeQueue(t, q)
			require.Zero(t, fails.Load())
			checkStreams(t, d)
		})
	}
}

// TestReview5SendCloseBlocked: the driver blocks every send; callers keep
// SendAsync-ing (reservations wait on a send batcher that never drains);
// Close(200 ms) gives up: Close returns promptly and every Wait returns.
func TestReview5SendCloseBlocked(t *testing.T) {
	d := newSendDriver()
	d.block = make(chan struct{})
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{Concurrency: 2}})
	ctx := context.Background()
	var rs []*ordered.SendResult
	for i := range 500 {
		r, err := q.SendAsync(ctx, fmt.Sprintf("g%d", i%50), []byte("x"))
		require.NoError(t, err)
		rs = append(rs, r)
	}
	time.Sleep(20 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	start := time.Now()
	err := q.Close(cctx)
	cancel()
	took := time.Since(start)
	t.Logf("Close after %v: %v", took, err)
	require.Less(t, took, 2*time.Second)
	done := make(chan struct{})
	go func() {
		for _, r := range rs {
			wctx, c := context.WithTimeout(ctx, 5*time.Second)
			_ = r.Wait(wctx)
			c()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a Wait did not return after Close")
	}
	for i, r := range rs {
		require.Error(t, r.Err(), "result %d", i)
	}
}
