package ordered_test

// Review 3: end-to-end reproductions over the public API.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// rev3Flaky wraps a driver and fails the first failReceives receives with
// a retryable error (before the queue sees them: nothing is made
// invisible).
type rev3Flaky struct {
	driver.Queue
	failReceives atomic.Int64
	receives     atomic.Int64
}

var errRev3Down = errors.New("rev3: queue unreachable")

func (f *rev3Flaky) ReceiveBatch(ctx context.Context, n int, wait time.Duration) ([]*driver.Message, error) {
	f.receives.Add(1)
	if f.failReceives.Add(-1) >= 0 {
		return nil, errRev3Down
	}
	return f.Queue.ReceiveBatch(ctx, n, wait)
}

func (f *rev3Flaky) IsRetryable(err error) bool {
	return errors.Is(err, errRev3Down) || f.Queue.IsRetryable(err)
}

// TestRev3_ReceiverStallsAfterShortOutage: a receiver with nothing to do
// whose first receives fail (a queue outage of a fraction of a second)
// stops fetching for good. Each failed receive counts its n messages
// against the cap until a visibility timeout passes (Core.FetchFailed);
// MaxUndeleted 32 and two fetchers of 16: two failures fill it. When the
// visibility timeout has passed nothing runs a step (the core gives the
// keeper no deadline for it, and Room does not expire them), so the
// fetchers wait for a room signal that never comes. Expected: the 20
// messages sent after the outage delivered within a few visibility
// timeouts (memqueue Visibility 1s). Happened: none delivered in 8 s; the
// driver saw only the failed receives; Stats.Undeleted stays 0 while the
// core's room is 0.
func TestRev3_ReceiverStallsAfterShortOutage(t *testing.T) {
	mq := memqueue.New(&memqueue.Options{Visibility: time.Second})
	drv := &rev3Flaky{Queue: mq}
	drv.failReceives.Store(2)
	ctx := context.Background()
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "q",
		Receive: ordered.ReceiveOptions{MaxUndeleted: 32, Wait: 200 * time.Millisecond}})
	require.NoError(t, err)
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		require.NoError(t, q.Close(cctx))
	}()
	var got atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = q.Run(runCtx, func(ctx context.Context, m *ordered.Message) error {
			got.Add(1)
			return nil
		})
	})
	defer func() { stop(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // the outage is over
	rxSend(t, mq, rxBodies("g", 1, 1, 20, nil))
	deadline := time.Now().Add(8 * time.Second)
	for got.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	st := q.Stats().Receive
	t.Logf("delivered %d of 20 in 8 s after a 2-receive outage; driver receives %d; stats: undeleted %d received %d",
		got.Load(), drv.receives.Load(), st.Undeleted, st.Received)
	require.EqualValues(t, 20, got.Load(), "the receiver stopped fetching after two failed receives")
}
