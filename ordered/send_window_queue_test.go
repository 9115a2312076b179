package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// The sender's disorder bound (SendOptions.MaxDisorder) over a whole Queue.

// errFlaky is the retryable error of flakySends.
var errFlaky = errors.New("flaky: send failed")

// flakySends is a memqueue whose SendBatch fails now and then with a
// retryable error: before the queue took the messages, or (with after) half
// of the time after it did, so that they are in the queue twice, as on a
// network that loses responses. A retried request waits its backoff while
// the other send workers go on: without a bound, one group's later messages
// overtake it by as many as the queue takes meanwhile. Receives are
// untouched, so with one shard a plain consumer sees the messages exactly in
// the order they landed.
type flakySends struct {
	*memqueue.Queue
	mu    sync.Mutex
	rng   *rand.Rand
	rate  float64
	after bool
	fails int
}

func newFlakySends(seed uint64, rate float64, after bool) *flakySends {
	return &flakySends{
		Queue: memqueue.New(&memqueue.Options{Shards: 1, Seed: int64(seed)}),
		rng:   rand.New(rand.NewPCG(seed, seed^0x5eed)),
		rate:  rate,
		after: after,
	}
}

func (f *flakySends) SendBatch(ctx context.Context, bodies [][]byte) error {
	f.mu.Lock()
	fail := f.rng.Float64() < f.rate
	after := fail && f.after && f.rng.IntN(2) == 0
	if fail {
		f.fails++
	}
	f.mu.Unlock()
	if fail && !after {
		return errFlaky
	}
	if err := f.Queue.SendBatch(ctx, bodies); err != nil {
		return err
	}
	if after {
		return errFlaky
	}
	return nil
}

func (f *flakySends) IsRetryable(err error) bool {
	return errors.Is(err, errFlaky) || f.Queue.IsRetryable(err)
}

// burstN is the size of the SendAsync burst into one group.
const burstN = 50_000

// burst sends burstN messages to one group from one goroutine with
// SendAsync, over drv, with the given MaxDisorder (-1: no bound), waits for
// all of them and returns the sender's stats.
func burst(t testing.TB, drv driver.Queue, maxDisorder int, retry ordered.RetryOptions) ordered.SendStats {
	t.Helper()
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{
		Retry: retry,
		Send:  ordered.SendOptions{MaxDisorder: maxDisorder, MaxAttempts: 100},
	})
	require.NoError(t, err)
	ctx := context.Background()
	results := make([]*ordered.SendResult, 0, burstN)
	for i := range burstN {
		r, err := q.SendAsync(ctx, "hot", fmt.Appendf(nil, "m%d", i+1))
		require.NoError(t, err)
		results = append(results, r)
	}
	for i, r := range results {
		require.NoError(t, r.Wait(ctx), "message %d", i+1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, q.Close(ctx))
	return q.Stats().Send
}

// landed receives everything in mq with a plain consumer (no ordering) and
// returns the bodies in the order they came, duplicates included.
func landed(t testing.TB, mq *memqueue.Queue) [][]byte {
	t.Helper()
	ctx := context.Background()
	var out [][]byte
	for {
		msgs, err := mq.ReceiveBatch(ctx, 16, 0)
		require.NoError(t, err)
		if len(msgs) == 0 {
			return out
		}
		receipts := make([]string, 0, len(msgs))
		for _, m := range msgs {
			out = append(out, slices.Clone(m.Body))
			receipts = append(receipts, m.Receipt)
		}
		require.NoError(t, mq.DeleteBatch(ctx, receipts))
	}
}

// lateness is the disorder a plain consumer sees: for each arrival, how far
// its seq is below the highest seq that arrived before it; the largest of
// them, and how many arrivals came late at all.
func lateness(t testing.TB, bodies [][]byte) (worst uint64, late int) {
	t.Helper()
	var high uint64
	for _, b := range bodies {
		h, _, ok := envelope.Parse(b)
		require.True(t, ok, "tagged body")
		if h.Seq < high {
			late++
			worst = max(worst, high-h.Seq)
		}
		high = max(high, h.Seq)
	}
	return worst, late
}

// burstRetry makes a failed request wait long enough (50-100ms) that the
// other workers can run far ahead of it when nothing bounds them.
var burstRetry = ordered.RetryOptions{Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond}

// burstRun is one burst over flakySends and what a plain consumer saw.
type burstRun struct {
	name        string
	maxDisorder int
	worst       uint64 // largest lateness of an arrival
	late, fails int
	stats       ordered.SendStats
	bodies      [][]byte // in landing order
}

func runBurst(t *testing.T, name string, maxDisorder int, after bool) *burstRun {
	t.Helper()
	r := &burstRun{name: name, maxDisorder: maxDisorder}
	drv := newFlakySends(7, 1.0/128, after)
	r.stats = burst(t, drv, maxDisorder, burstRetry)
	r.bodies = landed(t, drv.Queue)
	drv.mu.Lock()
	r.fails = drv.fails
	drv.mu.Unlock()
	r.worst, r.late = lateness(t, r.bodies)
	require.NoError(t, drv.Close())
	t.Logf("%s: %d arrivals (%d sends failed, %d retries): worst %d seqs out of order, %d arrivals late; %d messages held",
		name, len(r.bodies), r.fails, r.stats.Retries, r.worst, r.late, r.stats.Held)
	require.Positive(t, r.fails, "%s: the fault fired", name)
	return r
}

// defaultBound is MaxDisorder's default: Receive.MaxUndeleted 4000 / 4.
const defaultBound = 1000

// TestSendDisorderBurst: a 50,000-message SendAsync burst into one group,
// over a one-shard memqueue whose sends fail now and then (retried after a
// backoff; half of the failures after the queue took the messages, which
// then land twice), lands at most MaxDisorder out of order at a plain
// consumer with the default bound, and far more without it.
func TestSendDisorderBurst(t *testing.T) {
	bounded := runBurst(t, "bound", 0, true)
	free := runBurst(t, "no bound", -1, true)
	assert.LessOrEqual(t, bounded.worst, uint64(defaultBound), "with MaxDisorder %d, nothing lands further out of order", defaultBound)
	assert.Positive(t, bounded.stats.Held, "the bound held messages")
	assert.Greater(t, free.worst, uint64(2*defaultBound), "without the bound, retried requests land far out of order (else this test proves nothing)")
	assert.Zero(t, free.stats.Held, "no bound, nothing held")
}

// TestSendDisorderBurstDrains: an ordered receiver (default options, a store
// that cannot park) drains the burst as it landed with nothing given back to
// the queue and nothing parked; without the bound it gives arrivals back,
// which come back only after their visibility timeout. The failures here
// all happen before the queue takes the messages: a second copy of a
// message that arrives while the first waits for its turn is given back by
// design, whatever the sender's bound.
func TestSendDisorderBurstDrains(t *testing.T) {
	for _, r := range []*burstRun{runBurst(t, "bound", 0, false), runBurst(t, "no bound", -1, false)} {
		require.Len(t, r.bodies, burstN, "%s: every message landed once", r.name)
		mq := memqueue.New(&memqueue.Options{Shards: 1})
		rxSend(t, mq, r.bodies)
		q := rxQueue(t, mq, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{Wait: 50 * time.Millisecond}})
		rc := newRxRecorder(burstN)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			errc <- q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
				defer rc.record(m)()
				return nil
			})
		}()
		start := time.Now()
		limit := 5 * time.Second
		if r.maxDisorder != -1 {
			limit = 2 * time.Minute
		}
		select {
		case <-rc.done:
		case <-time.After(limit):
		}
		took := time.Since(start)
		cancel()
		require.NoError(t, <-errc)
		st := q.Stats().Receive
		rxClose(t, q)
		require.NoError(t, mq.Close())
		rc.mu.Lock()
		delivered := rc.total
		rc.mu.Unlock()
		t.Logf("%s: ordered receiver delivered %d of %d in %v: NotKept %d, Parked %d, peak undeleted %d",
			r.name, delivered, burstN, took.Round(time.Millisecond), st.NotKept, st.Parked, st.MaxUndeleted)
		if r.maxDisorder == -1 {
			assert.Positive(t, st.NotKept+st.Parked, "no bound: arrivals beyond the receiver's window were given back or parked (else this test proves nothing)")
			continue
		}
		rc.check(t, map[string]uint64{"hot": burstN})
		assert.Zero(t, st.NotKept, "bound: no arrival given back to the queue")
		assert.Zero(t, st.Parked, "bound: no arrival parked")
	}
}
