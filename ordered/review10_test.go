package ordered_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/stretchr/testify/require"
)

// review10Driver is a sendDriver whose requests take latency (changeable
// while it runs), and that hangs the requests carrying a payload marked
// stuck: each call holding "stuckN" hangs for stuckFor on its first
// attempt and then fails with a retryable error (a client timeout); while
// outage is set, every request fails with a retryable error after its
// latency (MNS throttling, 5xx).
type review10Driver struct {
	*sendDriver
	latency  atomic.Int64
	stuckFor time.Duration
	outage   atomic.Bool

	mu    sync.Mutex
	stuck map[string]bool // stuck payloads that hung once already
}

func newReview10Driver(latency, stuckFor time.Duration) *review10Driver {
	d := &review10Driver{sendDriver: newSendDriver(), stuckFor: stuckFor, stuck: make(map[string]bool)}
	d.latency.Store(int64(latency))
	return d
}

func (d *review10Driver) SendBatch(ctx context.Context, bodies [][]byte) error {
	for _, b := range bodies {
		i := bytes.Index(b, []byte("stuck"))
		if i < 0 {
			continue
		}
		key := string(b[i:])
		d.mu.Lock()
		first := !d.stuck[key]
		d.stuck[key] = true
		d.mu.Unlock()
		if first {
			t := time.NewTimer(d.stuckFor)
			defer t.Stop()
			select {
			case <-t.C:
				return fmt.Errorf("fake: client timeout: %w", errRetryable)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if l := time.Duration(d.latency.Load()); l > 0 {
		time.Sleep(l)
	}
	if d.outage.Load() {
		d.calls.Add(1)
		return fmt.Errorf("fake: throttled: %w", errRetryable)
	}
	return d.sendDriver.SendBatch(ctx, bodies)
}

// sendWait sends one message and waits for it, returning how long it took.
func sendWait(t *testing.T, ctx context.Context, q *ordered.Queue, group, payload string) time.Duration {
	t.Helper()
	start := time.Now()
	r, err := q.SendAsync(ctx, group, []byte(payload))
	require.NoError(t, err)
	require.NoError(t, r.Wait(ctx))
	return time.Since(start)
}

// behindStuck sends a message whose request hangs, then, 20 ms later, one
// from another group, and returns how long the second one took.
func behindStuck(t *testing.T, ctx context.Context, q *ordered.Queue, tag string) time.Duration {
	t.Helper()
	_, err := q.SendAsync(ctx, "sg-"+tag, []byte("stuck"+tag))
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	return sendWait(t, ctx, q, "other-"+tag, "after"+tag)
}

// TestReview10TimedOutRequestInflatesHold: over a 10 ms driver, a request
// that hangs until the client's timeout is taken as stuck after about
// 4 x 10 ms, as documented (SendOptions.Concurrency: "a request in flight
// four times longer than requests usually take ... is taken as stuck").
// But when it does time out, its whole time (the timeout, plus the retry's
// backoff and request) enters the moving average with weight 1/8: the
// usual time becomes about timeout/8, the hold about timeout/2. The next
// request that hangs (stuck requests come in clusters: a network blip, a
// dead connection pool) then stalls the partial sends of every group for
// seconds, here with a 3 s timeout about 400 ms (15 s for a 30 s client
// timeout), even after ten normal 10 ms requests.
func TestReview10TimedOutRequestInflatesHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newReview10Driver(10*time.Millisecond, 3*time.Second)
	q := newSendQueue(t, d, newTestStore(), nil)
	for i := range 20 {
		sendWait(t, ctx, q, fmt.Sprintf("warm%d", i), "warm")
	}
	first := behindStuck(t, ctx, q, "1")
	t.Logf("behind the first stuck request: %v", first)
	require.Less(t, first, 200*time.Millisecond, "the hold was not 4 x the usual 10 ms")
	// Let the first stuck request time out and be retried.
	time.Sleep(3500 * time.Millisecond)
	for i := range 10 {
		sendWait(t, ctx, q, fmt.Sprintf("normal%d", i), "normal")
	}
	second := behindStuck(t, ctx, q, "2")
	t.Logf("behind the second stuck request, after ten normal ones: %v", second)
	require.Less(t, second, 200*time.Millisecond,
		"one timed-out request inflated the usual time per batch: the next stuck request stalled every group's partial sends")
}

// TestReview10RetryEpisodeInflatesHold: a throttling episode of one second
// (every request fails with a retryable error) over a 10 ms driver, under
// a trickle of one message every 20 ms with the default options. Each
// handler's time includes its retries' backoff (50 ms doubling, default
// Retry), so the moving average of the time per batch grows to hundreds of
// milliseconds; after the episode, and ten normal requests, a stuck
// request stalls every group's partial sends for far longer than 4 x the
// 10 ms the requests take.
func TestReview10RetryEpisodeInflatesHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newReview10Driver(10*time.Millisecond, 2*time.Second)
	q := newSendQueue(t, d, newTestStore(), nil)
	for i := range 20 {
		sendWait(t, ctx, q, fmt.Sprintf("warm%d", i), "warm")
	}
	d.outage.Store(true)
	var wg sync.WaitGroup
	episode := time.Now()
	var mu sync.Mutex
	var last time.Duration
	for i := range 50 {
		r, err := q.SendAsync(ctx, fmt.Sprintf("g%d", i), []byte("during"))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, r.Wait(ctx))
			mu.Lock()
			last = max(last, time.Since(episode))
			mu.Unlock()
		}()
		time.Sleep(20 * time.Millisecond)
	}
	d.outage.Store(false)
	wg.Wait()
	t.Logf("the episode's messages all sent %v after it began (it lasted 1 s)", last)
	for i := range 10 {
		sendWait(t, ctx, q, fmt.Sprintf("normal%d", i), "normal")
	}
	behind := behindStuck(t, ctx, q, "1")
	t.Logf("behind a stuck request after the episode and ten normal requests: %v", behind)
	require.Less(t, behind, 200*time.Millisecond,
		"a retry episode inflated the usual time per batch: a stuck request stalled every group's partial sends")
}

// TestReview10FirstStuckRequestStalls: a Queue's first request hangs (a
// dead connection until the client's timeout) while no request has ended:
// FirstHold holds every group's partial sends back for a second. Before
// bf9f0ab, with the default Concurrency (16, MaxPartial 4), the next
// message went at once; at bf9f0ab, after 5 ms.
func TestReview10FirstStuckRequestStalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newReview10Driver(10*time.Millisecond, 3*time.Second)
	q := newSendQueue(t, d, newTestStore(), nil)
	behind := behindStuck(t, ctx, q, "0")
	t.Logf("behind the first, stuck, request: %v", behind)
	require.Less(t, behind, 250*time.Millisecond, "a stuck first request stalled every group's partial sends for FirstHold")
}
