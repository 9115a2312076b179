package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
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
	// A bound that never lets go must fail the test, not hang it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	results := make([]*ordered.SendResult, 0, burstN)
	for i := range burstN {
		r, err := q.SendAsync(ctx, "hot", fmt.Appendf(nil, "m%d", i+1))
		require.NoError(t, err)
		results = append(results, r)
	}
	for i, r := range results {
		require.NoError(t, r.Wait(ctx), "message %d", i+1)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
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
		// Parking is on (memstore can park). Once a group parks, what
		// arrives behind the parked range is parked too until the park is
		// read, so a parking episode may take most of the burst (measured:
		// 180 to 46k of 50k with the bound, 46k-50k without): the bound
		// keeps the receiver from giving anything back, not from parking.
	}
}

// heldQueue is a Queue over a sendDriver whose sends block until released,
// with MaxDisorder 3: the first 4 messages of a group go to the driver and
// stay there, later ones are held.
func heldQueue(t *testing.T, d *sendDriver, store *testStore, opts *ordered.Options) *ordered.Queue {
	t.Helper()
	if opts == nil {
		opts = &ordered.Options{}
	}
	if opts.Send.MaxDisorder == 0 {
		opts.Send.MaxDisorder = 3
	}
	return newSendQueue(t, d, store, opts)
}

// waitHeld waits until the Queue reports n held messages.
func waitHeld(t *testing.T, q *ordered.Queue, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return q.Stats().Send.Held == n }, 5*time.Second, time.Millisecond,
		"want %d messages held", n)
}

// TestSendHeldCancel: a Send whose message is held by the bound returns when
// its ctx ends, with an error that says the message is held and wraps
// ctx.Err(); nothing is lost: the message keeps its seq and is sent when
// the messages ahead of it are, with no hole.
func TestSendHeldCancel(t *testing.T) {
	d := newSendDriver()
	d.block = make(chan struct{})
	store := newTestStore()
	q := heldQueue(t, d, store, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var results []*ordered.SendResult
	for i := range 4 {
		r, err := q.SendAsync(ctx, "g", fmt.Appendf(nil, "m%d", i+1))
		require.NoError(t, err)
		results = append(results, r)
	}
	require.Eventually(t, func() bool { return d.inflight.Load() > 0 }, 5*time.Second, time.Millisecond, "first messages at the driver")

	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	err := q.Send(short, "g", []byte("m5"))
	cancelShort()
	require.Error(t, err, "Send of a held message returns when its ctx ends")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "MaxDisorder", "the error says the message is held by the bound")
	assert.EqualValues(t, 1, q.Stats().Send.Held)

	r6, err := q.SendAsync(ctx, "g", []byte("m6"))
	require.NoError(t, err, "SendAsync does not wait for the bound")
	waitHeld(t, q, 2)
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	err = r6.Wait(cancelled)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "MaxDisorder")
	assert.EqualValues(t, 6, r6.Seq(), "a held message has its seq")

	close(d.block)
	require.NoError(t, r6.Wait(ctx), "the held message is sent once those ahead are")
	for _, r := range results {
		require.NoError(t, r.Wait(ctx))
	}
	require.NoError(t, q.Send(ctx, "g", []byte("m7")))
	closeQueue(t, q)
	msgs := checkStreams(t, d)["g"]
	require.Len(t, msgs, 7, "every message sent once, the cancelled one included")
	assert.Equal(t, "m5", msgs[4].Payload)
	assert.Zero(t, store.journalLen(), "nothing left in the journal")
}

// TestSendHeldClose: Close waits for held messages like for any in flight,
// and refuses new ones meanwhile; when its ctx ends first, the held
// messages fail with ErrClosed, stay journaled, and recovery sends them
// under their own seqs.
func TestSendHeldClose(t *testing.T) {
	const n = 10
	sendAll := func(t *testing.T, q *ordered.Queue) []*ordered.SendResult {
		var rs []*ordered.SendResult
		for i := range n {
			r, err := q.SendAsync(context.Background(), "g", fmt.Appendf(nil, "m%d", i+1))
			require.NoError(t, err)
			rs = append(rs, r)
		}
		waitHeld(t, q, n-4)
		return rs
	}

	t.Run("drains", func(t *testing.T) {
		d := newSendDriver()
		d.block = make(chan struct{})
		q := heldQueue(t, d, newTestStore(), nil)
		rs := sendAll(t, q)
		closed := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			closed <- q.Close(ctx)
		}()
		admitted := 0 // before Close began
		require.Eventually(t, func() bool {
			_, err := q.SendAsync(context.Background(), "g", []byte("late"))
			if err == nil {
				admitted++
			}
			return errors.Is(err, ordered.ErrClosed)
		}, 5*time.Second, time.Millisecond, "Close refuses new messages")
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) with messages held", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(d.block)
		require.NoError(t, <-closed, "Close waits for the held messages")
		for i, r := range rs {
			require.NoError(t, r.Err(), "message %d", i+1)
		}
		assert.Len(t, checkStreams(t, d)["g"], n+admitted)
	})

	t.Run("gives up", func(t *testing.T) {
		d := newSendDriver()
		d.block = make(chan struct{}) // never released
		store := newTestStore()
		q := heldQueue(t, d, store, nil)
		rs := sendAll(t, q)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := q.Close(ctx)
		cancel()
		require.ErrorContains(t, err, "gave up", "Close's ctx ended with messages held")
		for i, r := range rs {
			select {
			case <-r.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("message %d never finished after Close gave up", i+1)
			}
			assert.ErrorIs(t, r.Err(), ordered.ErrClosed, "message %d", i+1)
		}
		assert.Equal(t, n, store.journalLen(), "every message stays journaled")

		d2 := newSendDriver()
		q2 := newSendQueue(t, d2, store, &ordered.Options{Send: ordered.SendOptions{NoRecover: true}})
		got, err := q2.Recover(context.Background())
		require.NoError(t, err)
		assert.Equal(t, n, got, "recovery sends the held messages")
		closeQueue(t, q2)
		assert.Len(t, checkStreams(t, d2)["g"], n, "seqs 1..n, each once")
	})
}

// TestSendHeldRetryKeepsPlace: a request that fails with retryable errors
// keeps its messages' place in the bound: while they are retried, no
// message more than MaxDisorder seqs after them reaches the driver.
func TestSendHeldRetryKeepsPlace(t *testing.T) {
	const maxDisorder, n = 4, 200
	d := newSendDriver()
	d.limits.MaxBatch = 2
	var mu sync.Mutex
	pending := map[uint64]bool{} // attempted, not accepted
	attempts := map[uint64]int{}
	var violations []string
	fails := 0
	d.fail = func(call int, bodies [][]byte) error {
		mu.Lock()
		defer mu.Unlock()
		seqs := make([]uint64, len(bodies))
		low := uint64(1 << 62)
		for i, b := range bodies {
			h, _, ok := envelope.Parse(b)
			if !ok {
				panic("untagged")
			}
			seqs[i] = h.Seq
			pending[h.Seq] = true
			attempts[h.Seq]++
		}
		for s := range pending {
			low = min(low, s)
		}
		for _, s := range seqs {
			if s-low > maxDisorder {
				violations = append(violations, fmt.Sprintf("seq %d sent while %d was unfinished", s, low))
			}
		}
		// Every 10th message's request fails 5 times before it goes.
		for _, s := range seqs {
			if s%10 == 3 && attempts[s] <= 5 {
				fails++
				return errRetryable
			}
		}
		for _, s := range seqs {
			delete(pending, s)
		}
		return nil
	}
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{
		Retry: ordered.RetryOptions{Initial: 2 * time.Millisecond, Max: 2 * time.Millisecond},
		Send:  ordered.SendOptions{MaxDisorder: maxDisorder, Concurrency: 8},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rs []*ordered.SendResult
	for i := range n {
		r, err := q.SendAsync(ctx, "g", fmt.Appendf(nil, "m%d", i+1))
		require.NoError(t, err)
		rs = append(rs, r)
	}
	for _, r := range rs {
		require.NoError(t, r.Wait(ctx))
	}
	closeQueue(t, q)
	st := q.Stats().Send
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d failed attempts, %d retries, %d held", fails, st.Retries, st.Held)
	require.Positive(t, fails, "the fault fired")
	assert.Empty(t, violations, "retried messages keep their place in the bound")
	assert.Len(t, checkStreams(t, d)["g"], n)
}

// TestSendMaxDisorderDefault: the default bound derives from the receive
// side's cap (max(1, Receive.MaxUndeleted/4), with the receive default
// first); -1 turns it off; below -1 is refused.
func TestSendMaxDisorderDefault(t *testing.T) {
	// held checks that n messages sent to one group with its sends blocked
	// end with want held. The reservations end at their own pace (a loaded
	// machine: more than 10 ms): it waits for want, then checks that the
	// count stays (a bound too loose would pass through want on its way).
	held := func(t *testing.T, opts *ordered.Options, n int, want int64) {
		t.Helper()
		d := newSendDriver()
		d.block = make(chan struct{})
		defer close(d.block)
		q := newSendQueue(t, d, newTestStore(), opts)
		for i := range n {
			_, err := q.SendAsync(context.Background(), "g", fmt.Appendf(nil, "m%d", i+1))
			require.NoError(t, err)
		}
		var last int64
		if !assert.Eventually(t, func() bool {
			st := q.Stats().Send
			last = st.Held
			return d.inflight.Load() > 0 && st.InFlight == int64(n) && st.Held == want
		}, 10*time.Second, time.Millisecond) {
			t.Errorf("held %d of %d, want %d", last, n, want)
			return
		}
		time.Sleep(20 * time.Millisecond)
		assert.Equal(t, want, q.Stats().Send.Held, "held of %d, after it was %d", n, want)
	}
	// MaxUndeleted 12: bound 3, so 4 go and 6 of 10 are held.
	held(t, &ordered.Options{Receive: ordered.ReceiveOptions{MaxUndeleted: 12}}, 10, 6)
	// MaxUndeleted 3: bound max(1, 0) = 1, so 2 go.
	held(t, &ordered.Options{Receive: ordered.ReceiveOptions{MaxUndeleted: 3}}, 10, 8)
	// The receive default 4000: bound 1000.
	held(t, nil, 1100, 1100-1001)
	// Off.
	held(t, &ordered.Options{Send: ordered.SendOptions{MaxDisorder: -1}}, 1100, 0)

	_, err := ordered.New(context.Background(), newSendDriver(), newTestStore(), &ordered.Options{Send: ordered.SendOptions{MaxDisorder: -2}})
	assert.ErrorContains(t, err, "MaxDisorder")
}

// TestSendDisorderCost measures what the bound costs on a calm queue: the
// CPU time (process-wide, GC included) and wall time of the 50,000-message
// burst into one group over memqueue, with the default bound and without,
// alternating in one run, the least of five rounds each (a burst lasts a
// tenth of a second: the mean of three swung 1.06-1.57 on 2026-12-06's
// host, whatever the code). The assertion is loose so that a loaded
// machine does not flake; the figures are logged (README, "The sender's
// disorder bound").
func TestSendDisorderCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	const rounds = 5
	cpu := [2]time.Duration{math.MaxInt64, math.MaxInt64}
	wall := [2]time.Duration{math.MaxInt64, math.MaxInt64}
	var held int64
	for range rounds {
		for i, maxDisorder := range []int{0, -1} {
			mq := memqueue.New(nil)
			runtime.GC()
			c0, w0 := cpuTime(t), time.Now()
			st := burst(t, mq, maxDisorder, ordered.RetryOptions{})
			cpu[i] = min(cpu[i], cpuTime(t)-c0)
			wall[i] = min(wall[i], time.Since(w0))
			if i == 0 {
				held += st.Held
			}
			drain(t, mq)
			require.NoError(t, mq.Close())
		}
	}
	ratio := float64(cpu[0]) / float64(cpu[1])
	t.Logf("50k burst, one group, memqueue, least of %d: bound %v CPU (%.2f µs/msg), %v wall; no bound %v CPU (%.2f µs/msg), %v wall; CPU ratio %.3f, wall ratio %.3f; %d held per burst",
		rounds, cpu[0], float64(cpu[0])/burstN/1e3, wall[0],
		cpu[1], float64(cpu[1])/burstN/1e3, wall[1],
		ratio, float64(wall[0])/float64(wall[1]), held/rounds)
	assert.Less(t, ratio, 1.5, "the bound's CPU cost on a calm queue")
}
