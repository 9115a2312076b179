package memqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
)

// TestConcurrentChaos runs senders, receivers, deleters and visibility
// changes on one queue with every chaos knob but loss on, and checks that a
// client that retries what IsRetryable allows receives every message and
// leaves the queue empty, with every stored copy deleted.
func TestConcurrentChaos(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New(&memqueue.Options{
		Seed: 21, Shards: 8, Visibility: 30 * time.Millisecond, MinVisibility: time.Millisecond,
		Redeliver: 0.1, ErrorRate: 0.1, Latency: 50 * time.Microsecond, LatencyJitter: 100 * time.Microsecond,
	})
	defer q.Close()
	const senders, perSender, receivers = 4, 400, 4

	var (
		mu   sync.Mutex
		sent = map[string]bool{}
		got  = map[string]bool{}
	)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := 0; i < perSender; i += 8 {
				var bodies [][]byte
				for k := i; k < i+8; k++ {
					bodies = append(bodies, fmt.Appendf(nil, "%d/%d", g, k))
				}
				for {
					err := q.SendBatch(ctx, bodies)
					if err == nil {
						break
					}
					if !q.IsRetryable(err) {
						t.Errorf("SendBatch: %v", err)
						return
					}
				}
				mu.Lock()
				for _, b := range bodies {
					sent[string(b)] = true
				}
				mu.Unlock()
			}
		})
	}
	rctx, stop := context.WithCancel(ctx)
	for g := range receivers {
		wg.Go(func() {
			for rctx.Err() == nil {
				msgs, err := q.ReceiveBatch(rctx, 16, 5*time.Millisecond)
				if err != nil {
					if rctx.Err() == nil && !q.IsRetryable(err) {
						t.Errorf("ReceiveBatch: %v", err)
					}
					continue
				}
				mu.Lock()
				for _, m := range msgs {
					got[string(m.Body)] = true
				}
				mu.Unlock()
				var rs []string
				for i, m := range msgs {
					r := m.Receipt
					if i%5 == g%5 { // sometimes extend first, deleting with the new receipt
						nr, err := q.ChangeVisibility(ctx, r, time.Second)
						if err == nil {
							r = nr
						} else if !q.IsRetryable(err) && !errors.Is(err, driver.ErrStaleReceipt) {
							t.Errorf("ChangeVisibility: %v", err)
						}
					}
					rs = append(rs, r)
				}
				if len(rs) == 0 {
					continue
				}
				var err2 error
				for {
					err2 = q.DeleteBatch(ctx, rs)
					if !q.IsRetryable(err2) {
						break
					}
				}
				var be *driver.BatchError
				if err2 != nil && !errors.As(err2, &be) {
					t.Errorf("DeleteBatch: %v", err2)
					continue
				}
				// A stale entry was redelivered, or deleted by an attempt
				// that failed after deleting; the queue's counters tell.
				for i := range msgs {
					if be != nil && be.Errs[i] != nil && !errors.Is(be.Errs[i], driver.ErrStaleReceipt) {
						t.Errorf("DeleteBatch entry: %v", be.Errs[i])
					}
				}
			}
		})
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		n := len(sent)
		mu.Unlock()
		v, inflight := q.Len()
		if n == senders*perSender && v == 0 && inflight == 0 || time.Now().After(deadline) {
			break
		}
	}
	stop()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sent, senders*perSender, "bodies sent")
	for b := range sent {
		assert.True(t, got[b], "body %s sent but never received", b)
	}
	v, inflight := q.Len()
	assert.Equal(t, [2]int{0, 0}, [2]int{v, inflight}, "Len at the end")
	st := q.Stats()
	assert.Equal(t, st.Sent, st.Deleted, "every stored message (including duplicates of retried sends) was deleted: %+v", st)
	assert.Greater(t, st.Sent, int64(senders*perSender), "retried sends that had enqueued must add duplicates")
	assert.Positive(t, st.Redelivered, "redeliveries")
	assert.Positive(t, st.Injected, "injected errors")
	t.Logf("stats: %+v", st)
}
