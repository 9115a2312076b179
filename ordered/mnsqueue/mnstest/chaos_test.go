package mnstest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// TestChaos runs senders and receivers through the SDK with every fault on
// except loss, and checks what at-least-once promises: every message whose
// send succeeded is received, the queue drains, and the server's books
// balance (stored = deleted + expired).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run skipped in -short mode")
	}
	srv := newServer(t, &mnstest.Options{Seed: 7, Faults: mnstest.Faults{
		Redeliver: 0.1, Error5xx: 0.05, Drop: 0.02, EarlyEmpty: 0.3,
		Latency: 200 * time.Microsecond, Jitter: 500 * time.Microsecond,
	}})
	name, _ := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 1})
	const senders, perSender, receivers = 4, 160, 4

	var mu sync.Mutex
	sent := map[string]bool{}
	received := map[string]int{}
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			q := ali_mns.NewMNSQueue(name, newClient(srv))
			for i := 0; i < perSender; i += 8 {
				batch := make([]ali_mns.MessageSendRequest, 8)
				for j := range batch {
					batch[j] = msg(fmt.Sprintf("%d-%d", s, i+j))
				}
				resp, err := q.BatchSendMessage(batch...)
				mu.Lock()
				for j, m := range batch {
					// Only entries the server confirmed count as sent; a
					// failed request may still have stored them (duplicates
					// and extras are allowed, losses are not).
					if err == nil || (mnsCode(err) == codeBatchOpFail && j < len(resp.Messages) && resp.Messages[j].ErrorCode == "") {
						sent[m.MessageBody] = true
					}
				}
				mu.Unlock()
			}
		})
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for range receivers {
		rwg.Go(func() {
			q := ali_mns.NewMNSQueue(name, newClient(srv))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ms, err := batchReceive(q, 16, 1)
				if err != nil {
					continue // empty, injected 500 or dropped connection
				}
				var hs []string
				mu.Lock()
				for _, m := range ms {
					received[m.MessageBody]++
					hs = append(hs, m.ReceiptHandle)
				}
				mu.Unlock()
				// Stale handles (cut-short visibility) and injected faults
				// leave messages to come back; that is the point.
				_, _ = q.BatchDeleteMessage(hs...)
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(40 * time.Second)
	for {
		info, err := srv.Queue(name)
		require.NoError(t, err)
		if info.Active+info.Inactive+info.Delayed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained in time: %+v", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	rwg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, sent)
	for b := range sent {
		assert.Positive(t, received[b], "message %s confirmed sent but never received", b)
	}
	st := srv.Stats()
	assert.Equal(t, st.Sent, st.Deleted+st.Expired, "stored = deleted + expired once drained: %+v", st)
	assert.Zero(t, st.LostAckedSends)
	assert.Positive(t, st.Redelivered, "redelivery fault fired")
	assert.Positive(t, st.Errors5xx, "5xx fault fired")
	assert.Positive(t, st.EarlyEmpty, "early-empty fault fired")
	dups := 0
	for _, n := range received {
		if n > 1 {
			dups++
		}
	}
	t.Logf("sent %d confirmed, %d distinct received, %d received more than once; stats %+v", len(sent), len(received), dups, st)
}
