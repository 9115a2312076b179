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

// slowDeleteQueue holds every DeleteBatch until gate is closed.
type slowDeleteQueue struct {
	*memqueue.Queue
	gate     chan struct{}
	inflight atomic.Int32
}

func (s *slowDeleteQueue) DeleteBatch(ctx context.Context, receipts []string) error {
	s.inflight.Add(1)
	select {
	case <-s.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Queue.DeleteBatch(ctx, receipts)
}

// AtMostOnce, clean shutdown, no crash: an untagged body is handed out
// Unordered only once its delete is done. Close comes while that delete is
// in flight: Receive returned ErrClosed, Close's flush completed the
// delete, and the message was gone: no receiver ever saw it. (For a tagged
// message in the same position the receiver marks the seq skipped so that
// the next receiver hands it out;
// TestRegress_AtMostOnceCancelledReceiveThenCloseLosesMessage is the tagged
// analogue.) Fixed: Close no longer ends the Receive's wait, its flush does,
// and the message is handed out as the delete ends ("waits"); a Receive
// that gives up meanwhile ("gives up") leaves it to Close, which sends the
// body back to the queue for the next receiver. Either way someone gets it.
func TestEng3_AMOUntaggedLostOnCleanClose(t *testing.T) {
	for _, giveUp := range []bool{false, true} {
		name := map[bool]string{false: "waits", true: "gives up"}[giveUp]
		t.Run(name, func(t *testing.T) { amoUntaggedClose(t, giveUp) })
	}
}

func amoUntaggedClose(t *testing.T, giveUp bool) {
	mq := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 300 * time.Millisecond})
	drv := &slowDeleteQueue{Queue: mq, gate: make(chan struct{})}
	st := memstore.New()
	opts := &ordered.Options{Receive: ordered.ReceiveOptions{Mode: ordered.AtMostOnce, Wait: 50 * time.Millisecond}}
	q, err := ordered.New(context.Background(), drv, st, opts)
	require.NoError(t, err)
	const body = "untagged: pay 100 to alice"
	require.NoError(t, mq.SendBatch(context.Background(), [][]byte{[]byte(body)}))

	type result struct {
		m   *ordered.Message
		err error
	}
	got := make(chan result, 1)
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	go func() {
		m, err := q.Receive(rctx)
		got <- result{m, err}
	}()
	require.Eventually(t, func() bool { return drv.inflight.Load() > 0 }, 5*time.Second, time.Millisecond,
		"the hand-out's delete is in flight")
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closed <- q.Close(ctx)
	}()
	select {
	case r := <-got:
		t.Fatalf("the Receive returned %v as Close began: its hand-out's delete is still in flight", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	if giveUp {
		rcancel()
		require.ErrorIs(t, (<-got).err, context.Canceled)
	}
	close(drv.gate) // the delete goes through during Close's flush
	require.NoError(t, <-closed)
	if !giveUp {
		r := <-got
		require.NoError(t, r.err, "handed out as Close's flush ends the delete")
		require.Equal(t, body, string(r.m.Body))
		return
	}
	require.Equal(t, int64(1), q.Stats().Receive.Requeued, "Close sends the body back to the queue")

	// A second receiver: the message should still be there for someone.
	q2, err := ordered.New(context.Background(), mq, st, opts)
	require.NoError(t, err)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	m, err := q2.Receive(ctx2)
	cancel2()
	vis, inflight := mq.Len()
	rxClose(t, q2)
	t.Logf("second receiver: err=%v; queue holds %d", err, vis+inflight)
	require.NoError(t, err, "the untagged message was deleted by a clean Close and never handed to any application")
	require.Equal(t, body, string(m.Body))
}
