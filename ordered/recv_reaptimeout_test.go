package ordered_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// hangFirstDeleteQueue makes its first DeleteBatch outlast the caller's
// deadline: it returns the context's error, having deleted nothing (a
// request lost on a slow network). The later ones go through.
type hangFirstDeleteQueue struct {
	*memqueue.Queue
	calls atomic.Int32
}

func (q *hangFirstDeleteQueue) DeleteBatch(ctx context.Context, receipts []string) error {
	if q.calls.Add(1) == 1 {
		<-ctx.Done()
		return ctx.Err()
	}
	return q.Queue.DeleteBatch(ctx, receipts)
}

// A delete that outlasts ReceiveOptions.ReapTimeout (the bound of each
// receive-side I/O call) has an unknown outcome, not a final one: it is
// retried while the receipt is valid, and the message is gone from the
// queue well before its visibility ends. The driver does not call a
// deadline retryable (memqueue.IsRetryable is false for it), so only the
// receive side's own timeout says so; a blind plant that dropped that
// clause left the message in the queue until its visibility ended, to be
// delivered again, and no test saw it (none made a delete outlast
// ReapTimeout).
func TestDeleteRetriedAfterReapTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 30 * time.Second})
		drv := &hangFirstDeleteQueue{Queue: mq}
		q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{
			Receive: ordered.ReceiveOptions{Wait: time.Second, ReapTimeout: 2 * time.Second}})
		require.NoError(t, err)
		rxSend(t, mq, [][]byte{rxBody("g", 1, 1)})

		ctx, stop := context.WithCancel(context.Background())
		var handed atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				m, err := q.Receive(ctx)
				if err != nil {
					return
				}
				handed.Add(1)
				assert.NoError(t, m.Ack(ctx))
			}
		}()
		defer func() { // also when a require fails: leave no goroutine behind in the bubble
			stop()
			<-done
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			assert.NoError(t, q.Close(cctx))
		}()

		time.Sleep(10 * time.Second) // a third of the visibility
		synctest.Wait()
		require.Equal(t, int32(1), handed.Load(), "handed out once")
		require.GreaterOrEqual(t, drv.calls.Load(), int32(2), "the delete that timed out is retried")
		vis, inflight := mq.Len()
		require.Equal(t, [2]int{0, 0}, [2]int{vis, inflight},
			"the message is deleted while its receipt is valid, not left to be delivered again")

		time.Sleep(time.Minute) // past the visibility: nothing comes back
		synctest.Wait()
		require.Equal(t, int32(1), handed.Load(), "handed out exactly once")
	})
}
