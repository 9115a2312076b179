package ordered_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestAttack2LeaseEndsEveryMode: in each receive mode (AtLeastOnce with
// and without SyncAck or CommitInterval, AtMostOnce), with several
// handlers, once Lease fails no handler gets a message any more, Run
// returns the lease's error, and Close returns promptly. Kept as a
// regression test of ReceiveOptions.Lease (it passed when written).
func TestAttack2LeaseEndsEveryMode(t *testing.T) {
	for name, ro := range map[string]ordered.ReceiveOptions{
		"AtLeastOnce":         {},
		"SyncAck":             {SyncAck: true},
		"CommitInterval":      {CommitInterval: 50 * time.Millisecond},
		"AtMostOnce":          {Mode: ordered.AtMostOnce},
		"AtMostOnceCommitInt": {Mode: ordered.AtMostOnce, CommitInterval: 50 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{Visibility: time.Second})
			rxSend(t, drv, rxBodies("a", 1, 1, 40, nil))
			rxSend(t, drv, rxBodies("b", 1, 1, 40, nil))
			rxSend(t, drv, rxBodies("c", 1, 1, 40, nil))
			var gone atomic.Bool
			var after atomic.Int32
			ro.Concurrency = 3
			ro.Lease = func() error {
				if gone.Load() {
					return errLeaseGone
				}
				return nil
			}
			q := rxQueue(t, drv, memstore.New(), &ordered.Options{Name: "q", Receive: ro})
			var n atomic.Int32
			errc := make(chan error, 1)
			go func() {
				errc <- q.Run(context.Background(), func(context.Context, *ordered.Message) error {
					if gone.Load() {
						after.Add(1)
					}
					if n.Add(1) == 20 {
						gone.Store(true)
					}
					time.Sleep(time.Millisecond)
					return nil
				})
			}()
			select {
			case err := <-errc:
				assert.ErrorIs(t, err, errLeaseGone)
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after the lease ended")
			}
			// Handlers already past their hand-out may start after the flag;
			// at most Concurrency-1 others.
			assert.LessOrEqual(t, after.Load(), int32(2), "hand-outs after the lease ended")
			start := time.Now()
			rxClose(t, q)
			assert.Less(t, time.Since(start), 3*time.Second, "Close after the lease ended")
		})
	}
}
