package ordered_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestReview4HandlerGetsEndedCtx: Run is started and cancelled over and
// over while messages arrive. Run "returns nil when ctx ends": once its
// ctx ended, a waiting worker should not start a handler. Under the
// change a waiting worker whose ctx ended and that was handed a message
// at the same moment takes either at random (one select): the handler
// runs with a ctx already done, and a handler that honours ctx (returns
// ctx.Err()) nacks, spending one of the message's MaxAttempts.
//
// Fixed: a worker checks ctx as it takes its hand-out, and gives it back
// if ctx ended. A ctx can still end between that check and the handler's
// start (the code before the change measured 14 in 29,398; the fix 10-17
// in 11,000-28,000, and 100 in 8,787 under -race in a CI run): the bound is
// 1 in 25 (1 in 12 under -race), where the change measured 1,764-2,943 in
// 31,324 (8 s runs) and take without its checks 1,430 in 11,715.
func TestReview4HandlerGetsEndedCtx(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Seed: 8})
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Concurrency: 8, MaxAttempts: 1000},
		Retry:   ordered.RetryOptions{Initial: time.Millisecond, Max: time.Millisecond},
	})
	require.NoError(t, err)
	defer rxClose(t, q)
	var ended, handled atomic.Int64
	rng := rand.New(rand.NewPCG(3, 4))
	seq := uint64(0)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
				handled.Add(1)
				if ctx.Err() != nil {
					ended.Add(1)
					return ctx.Err()
				}
				return nil
			})
		}()
		time.Sleep(time.Millisecond) // the workers wait
		seq++
		var bodies [][]byte
		for g := range 8 {
			bodies = append(bodies, rxBody(fmt.Sprintf("g%d", g), 1, seq))
		}
		go rxSend(t, drv, bodies)
		time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond)
		cancel()
		require.NoError(t, <-done)
	}
	t.Logf("%d hand-outs, %d with ctx already done at the handler's start", handled.Load(), ended.Load())
	per := int64(25)
	if raceEnabled {
		per = 12 // the race detector widens the window between take's check and the handler
	}
	require.LessOrEqual(t, ended.Load()*per, handled.Load(), "handlers started with their Run's ctx already ended")
}
