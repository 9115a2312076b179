package ordered_test

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/stretchr/testify/require"
)

// Review56 (helper-56) attacked 2ee4705, which made every batch in flight,
// full or not, hold a partial one back (TCP's Nagle rule). Each test below
// failed on it and passes on the rule in place (a partial batch waits only
// for partial ones: Minshall's variant), to which 26ca673 went back. "HEAD"
// in their comments is 2ee4705.

// review56Queue is a Queue over a send driver of the given latency with
// MNS's limits without Raw (16 messages, 49,120 bytes a request).
func review56Queue(t *testing.T, latency time.Duration, opts *ordered.Options) (*ordered.Queue, *sendDriver) {
	d := newSendDriver()
	d.latency = latency
	d.limits.MaxBatchBytes = 65536/4*3 - 2*16
	d.limits.MaxBody = d.limits.MaxBatchBytes
	if opts == nil {
		opts = &ordered.Options{}
	}
	return newSendQueue(t, d, newTestStore(), opts), d
}

// TestReview56LargeMessagesGoConcurrently: eight 30 KB messages (each a
// request of its own under MNS's 49,120 bytes a request) sent at once to
// an idle Queue over 50 ms requests. Before 2ee4705 the eight requests
// went together (about 50 ms); on HEAD a request full by size holds its
// place and the send batcher starts another handler only per 16 messages
// waiting (startLocked counts full batches by MaxItems), so they go one
// request at a time: about 400 ms, 8 times slower, with the same eight
// requests.
func TestReview56LargeMessagesGoConcurrently(t *testing.T) {
	const latency = 50 * time.Millisecond
	ctx := sendCtx(t)
	q, d := review56Queue(t, latency, nil)
	payload := bytes.Repeat([]byte("x"), 30<<10)
	start := time.Now()
	var rs []*ordered.SendResult
	for i := range 8 {
		r, err := q.SendAsync(ctx, fmt.Sprintf("g%d", i), payload)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	for _, r := range rs {
		require.NoError(t, r.Wait(ctx))
	}
	took := time.Since(start)
	t.Logf("8 messages of 30 KB over %v requests: %v, %d requests, at most %d in flight", latency, took, d.calls.Load(), d.peak.Load())
	require.Less(t, took, 4*latency, "eight requests full by size went one at a time")
}

// TestReview56LargeMessagesSteady: a steady 40 messages/s of 30 KB (one
// request each) from 10 groups over 50 ms requests, 100 messages: two
// requests in flight on average. Before 2ee4705: p50 ~78 ms, p99 ~103 ms;
// on HEAD one request goes at a time until 16 messages wait, and a
// message waits for those before it: p50 ~135 ms, p99 ~430 ms.
func TestReview56LargeMessagesSteady(t *testing.T) {
	const latency = 50 * time.Millisecond
	ctx := sendCtx(t)
	q, d := review56Queue(t, latency, nil)
	payload := bytes.Repeat([]byte("x"), 30<<10)
	var mu sync.Mutex
	var lats []time.Duration
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / 40)
	defer tick.Stop()
	for i := range 100 {
		<-tick.C
		start := time.Now()
		r, err := q.SendAsync(ctx, fmt.Sprintf("g%d", i%10), payload)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.Wait(ctx) == nil {
				mu.Lock()
				lats = append(lats, time.Since(start))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, lats, 100)
	slices.Sort(lats)
	p50, p99 := lats[len(lats)/2], lats[len(lats)*99/100]
	t.Logf("40/s of 30 KB over %v requests: p50 %v p99 %v, %d requests, at most %d in flight", latency, p50, p99, d.calls.Load(), d.peak.Load())
	require.Less(t, p99, 4*latency, "messages full by size queued behind one request at a time")
}

// TestReview56SendBatchTail: SendBatch of 17 messages (one more than a
// request takes) to an idle Queue over 50 ms requests. Before 2ee4705 the
// full request and the one of the 17th message went together (about 50
// ms); on HEAD the second waits for the first to end (about 100 ms), for
// the same two requests: a batch of MaxBatch+1..2*MaxBatch-1 messages
// takes two request times.
func TestReview56SendBatchTail(t *testing.T) {
	const latency = 50 * time.Millisecond
	ctx := sendCtx(t)
	q, d := review56Queue(t, latency, nil)
	payloads := make([][]byte, 17)
	for i := range payloads {
		payloads[i] = []byte(fmt.Sprint(i))
	}
	var took []time.Duration
	for range 5 {
		start := time.Now()
		require.NoError(t, q.SendBatch(ctx, "g", payloads))
		took = append(took, time.Since(start))
		time.Sleep(2 * latency)
	}
	slices.Sort(took)
	t.Logf("SendBatch of 17 over %v requests: %v; %d requests for 5", latency, took, d.calls.Load())
	require.Less(t, took[len(took)/2], latency*3/2, "a SendBatch of 17 on an idle queue took two request times")
}

// TestReview56WindowThroughput: one hot group with a backlog and
// MaxDisorder 30 (31 messages of the group in flight at most; the default
// for Receive.MaxUndeleted 120): each request that ends releases as many
// messages as it sent, from within the send handler, so that 16 + 15 wait
// and a full request always is in flight: the remainder of 15 never goes
// on its own, and the group moves 16 messages a request time instead of
// 31. 620 messages over 20 ms requests: before 2ee4705 about 0.41 s
// (30 a request time), on HEAD about 0.8 s (15.5), for the same requests
// (40 and 39): the rule saves nothing here.
func TestReview56WindowThroughput(t *testing.T) {
	const latency = 40 * time.Millisecond // long beside a loaded host's scheduling delays
	ctx := sendCtx(t)
	q, d := review56Queue(t, latency, &ordered.Options{Send: ordered.SendOptions{MaxDisorder: 30}})
	const n = 310
	start := time.Now()
	var last *ordered.SendResult
	for i := range n {
		r, err := q.SendAsync(ctx, "hot", []byte(fmt.Sprint(i)))
		require.NoError(t, err)
		last = r
	}
	require.NoError(t, last.Wait(ctx))
	took := time.Since(start)
	perLatency := float64(n) / (float64(took) / float64(latency))
	t.Logf("%d messages of one group, MaxDisorder 30, over %v requests: %v (%.1f messages a request time), %d requests",
		n, latency, took, perLatency, d.calls.Load())
	require.Greater(t, perLatency, 24.0, "the window's 31 messages went 16 a request time")
}
