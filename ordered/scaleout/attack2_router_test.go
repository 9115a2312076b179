package scaleout

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// hungQueue is a shard whose send requests hang until their context ends,
// as a well-behaved driver does on a stuck connection when its caller set
// no timeout of its own (the driver honours ctx, nothing more).
type hungQueue struct {
	driver.Queue
	inflight atomic.Int64
	calls    atomic.Int64
}

func (q *hungQueue) SendBatch(ctx context.Context, _ [][]byte) error {
	q.calls.Add(1)
	q.inflight.Add(1)
	defer q.inflight.Add(-1)
	<-ctx.Done()
	return ctx.Err()
}

// TestAttack2SenderCloseLeavesShardRequests: a sender whose shard hangs
// (a network partition; a driver without a deadline of its own) gives up
// on Send (the caller's ctx ends) and is closed; Close returns, yet the
// router's batcher goroutine stays inside the shard driver's SendBatch for
// good, with a context nobody can cancel. What a user sees: goroutines
// (and the driver's connection) leak, one per hung request up to
// Concurrency per shard, for each sender ever closed; and when the
// partition heals, bodies the user was told were not sent, and whose
// Queue is closed, are sent afterwards, through drivers the user may have
// closed since ("Close leaves the shards' drivers open: they belong to the
// caller", so the caller closes them after the Queue). Cause: router.go
// sends each merged request with context.Background() ("the driver's
// timeout bounds it": nothing guarantees there is one), and router.Close
// returns nil without shutting the batchers down or cancelling their
// requests. Suggested fix: give the router a context cancelled by Close
// (or by the last waiting caller giving up), Shutdown the batchers in
// Close, and bound each request by a timeout of the router's own.
func TestAttack2SenderCloseLeavesShardRequests(t *testing.T) {
	ctx := context.Background()
	hung := &hungQueue{Queue: memqueue.New(nil)}
	shards := []Shard{{Name: "orders-0", Queue: hung}, {Name: "orders-1", Queue: memqueue.New(nil)}}
	snd, err := NewSender(ctx, shards, memstore.New(), &ordered.Options{Name: "orders"})
	require.NoError(t, err)

	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = snd.Send(sctx, groupOn(t, 0, 2), []byte("x"))
	cancel()
	require.Error(t, err, "the shard hangs: Send gives up with its context")
	require.Eventually(t, func() bool { return hung.calls.Load() > 0 }, 2*time.Second, 10*time.Millisecond)

	cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
	defer ccancel()
	_ = snd.Close(cctx) // an error is fine: the send never completed

	deadline := time.Now().Add(3 * time.Second)
	for hung.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Zero(t, hung.inflight.Load(),
		"3 s after the sender's Close returned, a request it started is still inside the shard's SendBatch, on a context that never ends")
}
