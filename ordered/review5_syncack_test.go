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

// TestReview5SyncAckAcrossClose: a Receive caller acks (SyncAck) as Close
// runs. Ack reads closed=false, then asks Lease (the application's code: a
// store round trip, here held until Close returned); Close finishes its
// flush, sets stopped and answers the waiting tickets with ErrClosed. Ack's
// step then registers a fresh ticket whose commit the stopped receiver never
// starts: nothing resolves it, and Ack waits for its ctx (forever with
// context.Background).
func TestReview5SyncAckAcrossClose(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(map[bool]string{true: "sync", false: "async"}[sync], func(t *testing.T) { review5AckAcrossClose(t, sync) })
	}
}

// review5AckAcrossClose: with sync false, the same Ack returns nil after
// Close returned, though its advance is never written (no I/O once
// stopped): Message.Ack documents ErrClosed after the Queue closed.
func review5AckAcrossClose(t *testing.T, sync bool) {
	drv := memqueue.New(&memqueue.Options{Seed: 5})
	var armed atomic.Bool
	entered := make(chan struct{})
	release := make(chan struct{})
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{SyncAck: sync, Lease: func() error {
			if armed.CompareAndSwap(true, false) {
				close(entered)
				<-release
			}
			return nil
		}},
	})
	require.NoError(t, err)
	rxSend(t, drv, [][]byte{rxBody("a", 1, 1)})
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	m, err := q.Receive(rctx)
	rcancel()
	require.NoError(t, err)

	armed.Store(true)
	ackCtx, ackCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ackCancel()
	ackErr := make(chan error, 1)
	go func() { ackErr <- m.Ack(ackCtx) }()
	<-entered // Ack read closed=false and is in Lease

	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	cerr := q.Close(cctx)
	ccancel()
	t.Logf("Close: %v", cerr)
	close(release)

	start := time.Now()
	select {
	case err := <-ackErr:
		t.Logf("Ack returned after %v: %v", time.Since(start), err)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "Ack waited for its ctx: its ticket was never resolved")
		require.ErrorIs(t, err, ordered.ErrClosed, "Ack returned after Close returned, its advance never written")
	case <-time.After(10 * time.Second):
		t.Fatal("Ack did not return")
	}
}
