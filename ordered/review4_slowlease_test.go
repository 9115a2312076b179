package ordered_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestReview4SlowLeaseHandlerAfterClose: a Run worker waits; the lease
// check turns slow (300 ms, a store round trip under load); a message
// arrives and Close(50 ms) begins while the worker is inside Lease. Close
// gives up and returns; the worker's Lease then says yes and the handler
// starts: a handler that begins after Close began, and here after Close
// returned, whose Ack is refused (ErrClosed): the message should come back
// from the queue after its visibility timeout, to be handled again (not
// checked here). Before the change the worker's Lease check came before its look
// at the core, which then said closing: no handler ran.
func TestReview4SlowLeaseHandlerAfterClose(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Seed: 4})
	var slow atomic.Bool
	var asked atomic.Int32
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Concurrency: 1, Lease: func() error {
			asked.Add(1)
			if slow.Load() {
				time.Sleep(300 * time.Millisecond)
			}
			return nil
		}},
	})
	require.NoError(t, err)
	var closeReturned atomic.Int64
	var handlerStart atomic.Int64
	runErr := make(chan error, 1)
	go func() {
		runErr <- q.Run(context.Background(), func(context.Context, *ordered.Message) error {
			handlerStart.Store(time.Now().UnixNano())
			return nil
		})
	}()
	require.Eventually(t, func() bool { return asked.Load() > 0 }, 5*time.Second, time.Millisecond)
	time.Sleep(30 * time.Millisecond) // the worker waits
	slow.Store(true)
	rxSend(t, drv, [][]byte{rxBody("a", 1, 1)})
	time.Sleep(50 * time.Millisecond) // the message arrived; the worker is in Lease
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_ = q.Close(ctx)
	cancel()
	closeReturned.Store(time.Now().UnixNano())
	select {
	case err := <-runErr:
		require.ErrorIs(t, err, ordered.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	if hs := handlerStart.Load(); hs != 0 {
		t.Fatalf("the handler started %v after Close returned", time.Duration(hs-closeReturned.Load()))
	}
}
