package mnsqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// newEmulated creates a queue with attrs on srv and a driver on it.
func newEmulated(t *testing.T, srv *mnstest.Server, attrs *mnsqueue.QueueAttributes, opts *mnsqueue.Options) *mnsqueue.Queue {
	t.Helper()
	name := uniqueName("q")
	require.NoError(t, mnsqueue.CreateQueue(t.Context(), srv.Endpoint(), serverCred(srv), name, attrs), "CreateQueue")
	q, err := mnsqueue.New(t.Context(), srv.Endpoint(), name, serverCred(srv), opts)
	require.NoError(t, err, "New")
	t.Cleanup(func() { q.Close() })
	return q
}

func TestNewRejects(t *testing.T) {
	srv := newServer(t, nil)
	good := serverCred(srv)
	require.NoError(t, mnsqueue.CreateQueue(t.Context(), srv.Endpoint(), good, "exists", nil))
	t.Setenv(mnsqueue.EnvAccessKeyID, "")
	tests := []struct {
		name     string
		endpoint string
		queue    string
		cred     mnsqueue.Credentials
		opts     *mnsqueue.Options
		is       error
	}{
		{"empty endpoint", "", "exists", good, nil, nil},
		{"ip without dot", "http://127.0.0.1:1", "exists", good, nil, nil},
		{"five dots", "http://a.b.c.d.e.f", "exists", good, nil, nil},
		{"no scheme", "127.0.0.1:1/.", "exists", good, nil, nil},
		{"ftp", "ftp://1.mns.cn-hangzhou.aliyuncs.com", "exists", good, nil, nil},
		{"user info", "http://a.b@127.0.0.1:1", "exists", good, nil, nil},
		{"bad url", "http://[::1/.", "exists", good, nil, nil},
		{"empty queue", srv.Endpoint(), "", good, nil, nil},
		{"queue with slash", srv.Endpoint(), "a/b", good, nil, nil},
		{"queue with leading hyphen", srv.Endpoint(), "-a", good, nil, nil},
		{"no key, no env", srv.Endpoint(), "exists", mnsqueue.Credentials{}, nil, nil},
		{"no secret", srv.Endpoint(), "exists", mnsqueue.Credentials{AccessKeyID: "id"}, nil, nil},
		{"priority", srv.Endpoint(), "exists", good, &mnsqueue.Options{Priority: 17}, nil},
		{"short timeout", srv.Endpoint(), "exists", good, &mnsqueue.Options{Timeout: 30 * time.Second}, nil},
		{"fractional visibility", srv.Endpoint(), "exists", good, &mnsqueue.Options{Visibility: 1500 * time.Millisecond}, nil},
		{"max conns", srv.Endpoint(), "exists", good, &mnsqueue.Options{MaxConns: -1}, nil},
		{"missing queue", srv.Endpoint(), "missing", good, nil, driver.ErrQueueNotFound},
		{"wrong secret", srv.Endpoint(), "exists", mnsqueue.Credentials{AccessKeyID: good.AccessKeyID, AccessKeySecret: "wrong"}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q *mnsqueue.Queue
			var err error
			require.NotPanics(t, func() { q, err = mnsqueue.New(t.Context(), tc.endpoint, tc.queue, tc.cred, tc.opts) })
			require.Error(t, err, "New(%q, %q) must fail", tc.endpoint, tc.queue)
			assert.Nil(t, q)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
	t.Run("credentials from the environment", func(t *testing.T) {
		t.Setenv(mnsqueue.EnvAccessKeyID, good.AccessKeyID)
		t.Setenv(mnsqueue.EnvAccessKeySecret, good.AccessKeySecret)
		q, err := mnsqueue.New(t.Context(), srv.Endpoint()+"/", "exists", mnsqueue.Credentials{}, nil)
		require.NoError(t, err, "credentials from %s, endpoint with a trailing slash", mnsqueue.EnvAccessKeyID)
		require.NoError(t, q.SendBatch(t.Context(), [][]byte{[]byte("x")}))
		require.NoError(t, q.Close())
	})
}

func TestCreateDeleteQueue(t *testing.T) {
	srv := newServer(t, nil)
	ctx, cred := t.Context(), serverCred(srv)
	attrs := &mnsqueue.QueueAttributes{Visibility: 10 * time.Second, PollingWait: 2 * time.Second, MaxMessageSize: 4096, Retention: time.Hour, Delay: time.Second}
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), cred, "made", attrs))
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), cred, "made", attrs), "creating again with the same attributes")
	err := mnsqueue.CreateQueue(ctx, srv.Endpoint(), cred, "made", &mnsqueue.QueueAttributes{Visibility: 20 * time.Second})
	assert.ErrorIs(t, err, mnsqueue.ErrQueueExists, "creating again with other attributes")
	info, err := srv.Queue("made")
	require.NoError(t, err)
	assert.Equal(t, mnstest.QueueAttributes{DelaySeconds: 1, MaximumMessageSize: 4096, MessageRetentionPeriod: 3600, VisibilityTimeout: 10, PollingWaitSeconds: 2}, info.Attributes)
	assert.Error(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), cred, "bad", &mnsqueue.QueueAttributes{Visibility: 1500 * time.Millisecond}), "fractional seconds")
	require.NoError(t, mnsqueue.DeleteQueue(ctx, srv.Endpoint(), cred, "made"))
	require.NoError(t, mnsqueue.DeleteQueue(ctx, srv.Endpoint(), cred, "made"), "deleting a deleted queue")
	_, err = srv.Queue("made")
	assert.ErrorIs(t, err, mnstest.ErrQueueNotExist)
}

// TestBatchBytesWorstCase: a batch of MaxBatchBytes whose bodies all need
// base64 padding still fits the service's 64 KiB, and a body of MaxBody fits
// its maximum message size.
func TestBatchBytesWorstCase(t *testing.T) {
	srv := newServer(t, nil)
	q := newEmulated(t, srv, nil, nil)
	l := q.Limits()
	require.Equal(t, 0, l.MaxBatchBytes%l.MaxBatch, "test needs MaxBatchBytes divisible by MaxBatch")
	size := l.MaxBatchBytes / l.MaxBatch
	require.Equal(t, 1, size%3, "bodies of %d bytes need the most padding", size)
	bodies := make([][]byte, l.MaxBatch)
	for i := range bodies {
		bodies[i] = make([]byte, size)
	}
	require.NoError(t, q.SendBatch(t.Context(), bodies), "%d bodies of %d bytes (MaxBatchBytes %d)", l.MaxBatch, size, l.MaxBatchBytes)
	require.NoError(t, q.SendBatch(t.Context(), [][]byte{make([]byte, l.MaxBody)}), "one body of MaxBody %d", l.MaxBody)
	assert.GreaterOrEqual(t, l.MaxBatchBytes, l.MaxBody, "MaxBatchBytes admits one body of MaxBody")
}

// TestZeroWaitWithPollingWait: on a queue with PollingWaitSeconds, a zero wait
// cannot be a short poll through the SDK and becomes 1s, not the queue's wait.
func TestZeroWaitWithPollingWait(t *testing.T) {
	srv := newServer(t, nil)
	q := newEmulated(t, srv, &mnsqueue.QueueAttributes{PollingWait: 5 * time.Second}, nil)
	start := time.Now()
	msgs, err := q.ReceiveBatch(t.Context(), 16, 0)
	require.NoError(t, err)
	assert.Empty(t, msgs)
	assert.Less(t, time.Since(start), 2500*time.Millisecond, "zero wait on a queue with PollingWaitSeconds 5 must wait about 1s")
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the wait is rounded up to 1s")
}

func TestRawMode(t *testing.T) {
	srv := newServer(t, nil)
	raw := newEmulated(t, srv, nil, &mnsqueue.Options{Raw: true})
	b64, err := mnsqueue.New(t.Context(), srv.Endpoint(), raw.Name(), serverCred(srv), nil)
	require.NoError(t, err)
	defer b64.Close()
	text := "#1#héllo <&> \t\r\n"
	require.NoError(t, raw.SendBatch(t.Context(), [][]byte{[]byte(text)}))
	msgs, err := raw.ReceiveBatch(t.Context(), 1, time.Second)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, text, string(msgs[0].Body), "raw round trip")
	require.NoError(t, raw.DeleteBatch(t.Context(), []string{msgs[0].Receipt}))

	// A base64 receiver gets a text body that is not base64 unchanged.
	require.NoError(t, raw.SendBatch(t.Context(), [][]byte{[]byte("#2#not base64")}))
	msgs, err = b64.ReceiveBatch(t.Context(), 1, time.Second)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "#2#not base64", string(msgs[0].Body))
}

// TestCloseEndsLongPoll: Close cuts a 30s long poll at once and later calls
// fail with ErrClosed.
func TestCloseEndsLongPoll(t *testing.T) {
	srv := newServer(t, nil)
	q := newEmulated(t, srv, nil, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := q.ReceiveBatch(context.Background(), 16, 30*time.Second)
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	require.NoError(t, q.Close())
	assert.Less(t, time.Since(start), time.Second, "Close must not wait for the long poll")
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, driver.ErrClosed, "long poll cut by Close")
		assert.False(t, q.IsRetryable(err))
	case <-time.After(2 * time.Second):
		t.Fatal("ReceiveBatch still waiting 2s after Close")
	}
	assert.ErrorIs(t, q.SendBatch(t.Context(), [][]byte{[]byte("x")}), driver.ErrClosed)
}

// TestAbandonedReceiveReleases: messages that a receive brings after its
// caller gave up are made visible again within about a second, not after
// the queue's 30s visibility timeout.
func TestAbandonedReceiveReleases(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Shards: 1})
	q := newEmulated(t, srv, &mnsqueue.QueueAttributes{Visibility: 30 * time.Second}, nil)
	// Cancelled, not a deadline: a deadline would shorten the wait itself.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := q.ReceiveBatch(ctx, 16, 10*time.Second)
	require.ErrorIs(t, err, context.Canceled)
	// The abandoned long poll is still waiting: it takes this message.
	require.NoError(t, q.SendBatch(t.Context(), [][]byte{[]byte("taken by the abandoned poll")}))
	start := time.Now()
	var got []*driver.Message
	for len(got) == 0 && time.Since(start) < 5*time.Second {
		got, err = q.ReceiveBatch(t.Context(), 16, time.Second)
		require.NoError(t, err)
	}
	require.Len(t, got, 1, "the released message must come back within 5s")
	assert.Equal(t, 2, got[0].DequeueCount, "the abandoned poll received it first")
	assert.Less(t, time.Since(start), 4*time.Second, "released, not left to the 30s visibility timeout")
}

// TestChaos sends, receives and deletes through one driver from many
// goroutines while the emulator injects 5xx answers, dropped connections,
// redeliveries and latency. Every error must be retryable or a stale receipt,
// and every message must arrive.
func TestChaos(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Seed: 7, Faults: mnstest.Faults{Error5xx: 0.05, Drop: 0.03, Redeliver: 0.05, Latency: time.Millisecond, Jitter: 2 * time.Millisecond}})
	q := newEmulated(t, srv, &mnsqueue.QueueAttributes{Visibility: 2 * time.Second}, nil)
	const senders, perSender, receivers = 8, 200, 8
	total := senders * perSender
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()

	var (
		mu       sync.Mutex
		seen     = map[string]int{}
		bad      []string
		retries  atomic.Int64
		stale    atomic.Int64
		received atomic.Int64
	)
	note := func(what string, err error) {
		mu.Lock()
		bad = append(bad, fmt.Sprintf("%s: %v", what, err))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(s), 1))
			for i := 0; i < perSender; {
				n := min(1+r.IntN(16), perSender-i)
				bodies := make([][]byte, n)
				for k := range bodies {
					bodies[k] = fmt.Appendf(nil, "%d-%d", s, i+k)
				}
				for ctx.Err() == nil {
					err := q.SendBatch(ctx, bodies)
					var be *driver.BatchError
					if err == nil {
						break
					}
					if errors.As(err, &be) {
						var left [][]byte
						for k, e := range be.Errs {
							if e != nil {
								if !q.IsRetryable(e) {
									note("send entry", e)
								}
								left = append(left, bodies[k])
							}
						}
						bodies = left
					} else if !q.IsRetryable(err) {
						note("send", err)
						return
					}
					retries.Add(1)
				}
				i += n
			}
		})
	}
	for range receivers {
		wg.Go(func() {
			for ctx.Err() == nil && received.Load() < int64(total) {
				msgs, err := q.ReceiveBatch(ctx, 16, time.Second)
				if err != nil {
					if ctx.Err() == nil && !q.IsRetryable(err) {
						note("receive", err)
					}
					retries.Add(1)
					continue
				}
				rs := make([]string, len(msgs))
				mu.Lock()
				for i, m := range msgs {
					rs[i] = m.Receipt
					if seen[string(m.Body)] == 0 {
						received.Add(1)
					}
					seen[string(m.Body)]++
				}
				mu.Unlock()
				if len(rs) == 0 {
					continue
				}
				err = q.DeleteBatch(ctx, rs)
				var be *driver.BatchError
				if errors.As(err, &be) {
					for _, e := range be.Errs {
						switch {
						case e == nil:
						case errors.Is(e, driver.ErrStaleReceipt):
							stale.Add(1)
						case !q.IsRetryable(e):
							note("delete entry", e)
						}
					}
				} else if err != nil && ctx.Err() == nil && !q.IsRetryable(err) {
					note("delete", err)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, bad, "errors neither retryable nor stale receipts")
	assert.Len(t, seen, total, "distinct messages received")
	st := srv.Stats()
	t.Logf("%d messages, %d retried calls, %d stale deletes; server: %d 5xx, %d drops, %d redeliveries",
		total, retries.Load(), stale.Load(), st.Errors5xx, st.Drops, st.Redelivered)
	assert.Positive(t, st.Errors5xx+st.Drops, "faults were injected")
}
