package ordered_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestReview4ReceiveStarvesBesideIdleRun: a Queue served by Run (its
// handlers fast, so its workers mostly wait) and by a Receive caller at
// the same time. Messages arrive one at a time, each of its own group.
// Receive "returns the next message of any group that has one ready,
// waiting until one is": with messages ready every few milliseconds for
// seconds, it should be handed some. Under the change every ready message
// goes to a waiting Run worker first (serveIdle, under the lock, before
// avail is signalled), so the Receive caller waits for ever.
func TestReview4ReceiveStarvesBesideIdleRun(t *testing.T) {
	const n = 300
	drv := memqueue.New(&memqueue.Options{Seed: 7})
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Concurrency: 4},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close(context.Background())) }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var byRun, byReceive atomic.Int64
	runDone := make(chan error, 1)
	go func() {
		runDone <- q.Run(ctx, func(context.Context, *ordered.Message) error {
			byRun.Add(1)
			return nil
		})
	}()
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			m, err := q.Receive(ctx)
			if err != nil {
				return
			}
			byReceive.Add(1)
			_ = m.Ack(ctx)
		}
	}()
	time.Sleep(50 * time.Millisecond) // both wait
	for i := range n {
		rxSend(t, drv, [][]byte{rxBody(fmt.Sprintf("g%d", i), 1, 1)})
		time.Sleep(3 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return byRun.Load()+byReceive.Load() == n }, 10*time.Second, 5*time.Millisecond)
	cancel()
	<-runDone
	<-recvDone
	t.Logf("Run handled %d, Receive %d", byRun.Load(), byReceive.Load())
	require.Positive(t, byReceive.Load(), "the Receive caller waited through %d ready messages: all went to Run's waiting workers", n)
}
