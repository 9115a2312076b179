package ordered_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// review15LeaseRefusedAck: a Run handler holds seq 1 when the Lease ends;
// the Queue is closed with closeWait. The handler returns after
// handlerFor. It reports how long a second receiver waits for seq 1.
func review15LeaseRefusedAck(t *testing.T, closeWait, handlerFor time.Duration) (time.Duration, error) {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
	store := memstore.New()
	rxSend(t, drv, rxBodies("g", 1, 1, 3, nil))
	var gone atomic.Bool
	o := &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Concurrency: 1, Wait: time.Second, Lease: func() error {
		if gone.Load() {
			return errLeaseGone
		}
		return nil
	}}}
	q := rxQueue(t, drv, store, o)
	started := make(chan struct{})
	runDone := make(chan error, 1)
	go func() {
		runDone <- q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
			if m.Seq == 1 {
				close(started)
				time.Sleep(handlerFor) // ignores ctx, as review14's handler
			}
			return nil
		})
	}()
	<-started
	gone.Store(true)
	cctx, cancel := context.WithTimeout(ctx, closeWait)
	closeErr := q.Close(cctx)
	cancel()
	<-runDone
	t0 := time.Now()
	q2 := rxQueue(t, drv, store, &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Wait: time.Second}})
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer rcancel()
	m, err := q2.Receive(rctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), m.Seq)
	took := time.Since(t0)
	require.NoError(t, m.Ack(rctx))
	c2, c2cancel := context.WithTimeout(ctx, 10*time.Second)
	defer c2cancel()
	require.NoError(t, q2.Close(c2))
	return took, closeErr
}

// Held: the handler returns within Close's wait: its refused Ack disowns
// seq 1 and Close gives it back at once.
func TestReview15_LeaseRefusedAckWithinCloseGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		took, closeErr := review15LeaseRefusedAck(t, 10*time.Second, 2*time.Second)
		require.NoError(t, closeErr)
		t.Logf("seq 1 back after %v", took)
		require.Less(t, took, 5*time.Second)
	})
}

// The handler outlives Close's ctx (scaleout's fence closes with one
// second after DrainTimeout). Close's wait for the Run workers ends with
// ctx: closed is set, the flush is skipped, and the handler's Ack, refused
// by the lease, comes to ack's "closed" check first: no Disown. Review15
// asked for seq 1 back at once; Message.Ack's doc now says what happens:
// what the application still has after Close stays invisible for at most
// the queue's visibility timeout (30 s here; it came back after 25 s), so
// that nobody else handles it meanwhile.
func TestReview15_LeaseRefusedAckAfterCloseDeadlineBackWithinVisibility(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		took, closeErr := review15LeaseRefusedAck(t, time.Second, 5*time.Second)
		require.Error(t, closeErr, "Close ran out of time waiting for the handler")
		t.Logf("seq 1 back after %v", took)
		require.LessOrEqual(t, took, 30*time.Second, "back within the queue's visibility timeout")
	})
}

// A Receive caller's variant: the lease ends while the application holds
// seq 1; it closes the Queue (Close does not wait for Receive callers),
// then its handler ends and Acks: ErrClosed before the lease check, no
// Disown, seq 1 invisible until its visibility ends (30 s), as
// Message.Ack's doc says.
func TestReview15_ReceiveCallerAckAfterCloseBackWithinVisibility(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		drv := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
		store := memstore.New()
		rxSend(t, drv, rxBodies("g", 1, 1, 3, nil))
		var gone atomic.Bool
		q := rxQueue(t, drv, store, &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Wait: time.Second, Lease: func() error {
			if gone.Load() {
				return errLeaseGone
			}
			return nil
		}}})
		m, err := q.Receive(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(1), m.Seq)
		gone.Store(true)
		_, err = q.Receive(ctx)
		require.ErrorIs(t, err, errLeaseGone, "the application learns the lease ended")
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		require.NoError(t, q.Close(cctx))
		cancel()
		require.ErrorIs(t, m.Ack(ctx), ordered.ErrClosed)
		t0 := time.Now()
		q2 := rxQueue(t, drv, store, &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Wait: time.Second}})
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
		defer rcancel()
		m2, err := q2.Receive(rctx)
		require.NoError(t, err)
		require.Equal(t, uint64(1), m2.Seq)
		took := time.Since(t0)
		require.NoError(t, m2.Ack(rctx))
		require.NoError(t, q2.Close(rctx))
		t.Logf("seq 1 back after %v", took)
		require.LessOrEqual(t, took, 30*time.Second, "back within the queue's visibility timeout")
	})
}
