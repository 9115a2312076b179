package backendtest_test

// Helpers copied, trimmed, from package ordered's tests (sec3_test.go,
// e2e_test.go, send_fakes_test.go), whose other tests still use them.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
)

var sec3Key = []byte("0123456789abcdef0123456789abcdef")

// sec3Redis returns a client of the Redis named by INORDER_TEST_REDIS_ADDR
// (required with CI=true, else the test is skipped) and a fresh key prefix
// removed at the end.
func sec3Redis(t *testing.T) (*redis.Client, string) {
	addr := os.Getenv("INORDER_TEST_REDIS_ADDR")
	if addr == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but INORDER_TEST_REDIS_ADDR is not set: the real Redis test is required in CI")
		}
		t.Skip("INORDER_TEST_REDIS_ADDR not set")
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	require.NoError(t, c.Ping(context.Background()).Err(), "Redis at %s", addr)
	prefix := fmt.Sprintf("sec3-%d:", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		_ = c.Close()
	})
	return c, prefix
}

func rxClose(t testing.TB, q *ordered.Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, q.Close(ctx))
}

// sec3Got collects what Run hands out.
type sec3Got struct {
	mu   sync.Mutex
	msgs []ordered.Message
}

func (g *sec3Got) handler(ctx context.Context, m *ordered.Message) error {
	g.mu.Lock()
	g.msgs = append(g.msgs, ordered.Message{Group: m.Group, Epoch: m.Epoch, Seq: m.Seq, Body: append([]byte(nil), m.Body...), Unordered: m.Unordered})
	g.mu.Unlock()
	return nil
}

// wait returns what was handed out once n messages were, or after d.
func (g *sec3Got) wait(t *testing.T, n int, d time.Duration) []ordered.Message {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		k := len(g.msgs)
		g.mu.Unlock()
		if k >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]ordered.Message(nil), g.msgs...)
}

func sec3Dump(ms []ordered.Message) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "\n  group=%q epoch=%d seq=%d unordered=%v body=%q", m.Group, m.Epoch, m.Seq, m.Unordered, m.Body)
	}
	return b.String()
}

// sec3Run runs q's handlers into g until the test ends, then closes q.
func sec3Run(t *testing.T, q *ordered.Queue, g *sec3Got) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = q.Run(ctx, g.handler) }()
	t.Cleanup(func() { cancel(); <-done; rxClose(t, q) })
}

var errPermanent = errors.New("fake: permanent")

// sendDriver is a driver.Queue for send tests: SendBatch records what it
// accepted and consults fail (if set) first; nothing is ever received.
type sendDriver struct {
	limits driver.Limits
	// fail, if set, decides the outcome of a call: nil accepts every body.
	fail func(call int, bodies [][]byte) error

	mu       sync.Mutex
	calls    int
	accepted [][]byte // copies, in acceptance order
	closed   bool
}

func newSendDriver() *sendDriver {
	return &sendDriver{limits: driver.Limits{
		MaxBatch: 16, MaxBody: 65536, MaxWait: 30 * time.Second, Visibility: 30 * time.Second,
		MinVisibility: time.Second, MaxVisibility: 12 * time.Hour,
	}}
}

func (d *sendDriver) Limits() driver.Limits { return d.limits }

func (d *sendDriver) SendBatch(ctx context.Context, bodies [][]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return driver.ErrClosed
	}
	d.calls++
	if d.fail != nil {
		if err := d.fail(d.calls, bodies); err != nil {
			return err
		}
	}
	for _, b := range bodies {
		d.accepted = append(d.accepted, slices.Clone(b))
	}
	return nil
}

func (d *sendDriver) ReceiveBatch(ctx context.Context, max int, wait time.Duration) ([]*driver.Message, error) {
	return nil, nil
}

func (d *sendDriver) DeleteBatch(ctx context.Context, receipts []string) error { return nil }

func (d *sendDriver) ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) (string, error) {
	return receipt, nil
}

func (d *sendDriver) IsRetryable(err error) bool { return false }

func (d *sendDriver) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return nil
}

// checkStreams decodes what d accepted, by group and sorted by seq, and
// checks that each group's seqs are 1, 2, 3... with no hole or duplicate.
func checkStreams(t *testing.T, d *sendDriver) map[string][]envelope.Header {
	t.Helper()
	d.mu.Lock()
	groups := make(map[string][]envelope.Header)
	for _, b := range d.accepted {
		h, _, ok := envelope.Parse(b)
		require.True(t, ok, "untagged body %q", b)
		groups[h.Group] = append(groups[h.Group], h)
	}
	d.mu.Unlock()
	for g, hs := range groups {
		slices.SortFunc(hs, func(a, b envelope.Header) int { return int(a.Seq) - int(b.Seq) })
		for i, h := range hs {
			if !assert.Equal(t, uint64(i+1), h.Seq, "group %q: message %d of %d has the wrong seq (a hole or a duplicate)", g, i, len(hs)) {
				break
			}
		}
	}
	return groups
}
