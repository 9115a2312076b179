package memqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
)

// sendN sends bodies "0".."n-1" in batches of 16 and fails on any error.
func sendN(t *testing.T, q *memqueue.Queue, n int) {
	t.Helper()
	for i := 0; i < n; i += 16 {
		var b [][]byte
		for k := i; k < min(i+16, n); k++ {
			b = append(b, []byte(strconv.Itoa(k)))
		}
		require.NoError(t, q.SendBatch(context.Background(), b), "SendBatch")
	}
}

// drain receives with no wait until a receive comes back empty.
func drain(t *testing.T, q *memqueue.Queue) []*driver.Message {
	t.Helper()
	var all []*driver.Message
	for {
		msgs, err := q.ReceiveBatch(context.Background(), 16, 0)
		require.NoError(t, err, "ReceiveBatch")
		if len(msgs) == 0 {
			return all
		}
		all = append(all, msgs...)
	}
}

func receipts(msgs []*driver.Message) []string {
	r := make([]string, len(msgs))
	for i, m := range msgs {
		r[i] = m.Receipt
	}
	return r
}

// within asserts that got is within tol of want.
func within(t *testing.T, got, want, tol float64, what string) {
	t.Helper()
	assert.InDelta(t, want, got, tol, "%s: want %.1f ± %.1f, got %.1f", what, want, tol, got)
}

func TestDefaults(t *testing.T) {
	q := memqueue.New(nil)
	defer q.Close()
	assert.Equal(t, driver.Limits{
		MaxBatch: 16, MaxBody: 65536, MaxWait: 30 * time.Second, Visibility: 30 * time.Second,
		MinVisibility: time.Second, MaxVisibility: 12 * time.Hour,
	}, q.Limits(), "limits of New(nil)")

	q2 := memqueue.New(&memqueue.Options{Visibility: 50 * time.Millisecond})
	defer q2.Close()
	assert.Equal(t, 50*time.Millisecond, q2.Limits().MinVisibility, "MinVisibility defaults to a Visibility shorter than 1s")
}

func TestInvalidOptionsPanic(t *testing.T) {
	for _, o := range []memqueue.Options{
		{Shards: -1}, {MaxBatch: -1}, {MaxBody: -5}, {MaxBatchBytes: -1}, {MaxWait: -time.Second},
		{Visibility: time.Second, MinVisibility: 2 * time.Second}, {Visibility: 13 * time.Hour, MaxVisibility: 12 * time.Hour},
		{MinVisibility: -1}, {Retention: -1}, {RedeliverAfter: -1}, {Latency: -1}, {LatencyJitter: -1},
		{Redeliver: 1.5}, {Loss: -0.1}, {ErrorRate: math.NaN()}, {EarlyEmpty: 2},
	} {
		assert.Panics(t, func() { memqueue.New(&o) }, "New(%+v) must panic", o)
	}
}

func TestOneShardIsFIFO(t *testing.T) {
	q := memqueue.New(&memqueue.Options{Shards: 1})
	defer q.Close()
	sendN(t, q, 100)
	for i, m := range drain(t, q) {
		require.Equal(t, strconv.Itoa(i), string(m.Body), "message %d from a one-shard queue", i)
	}
}

// TestDisorderIsLocal checks that shards reorder messages, but only locally,
// however deep the queue.
func TestDisorderIsLocal(t *testing.T) {
	q := memqueue.New(&memqueue.Options{Seed: 3})
	defer q.Close()
	const n = 20000
	sendN(t, q, n)
	msgs := drain(t, q)
	require.Len(t, msgs, n, "messages received")
	maxd, sum, seen := 0, 0, make([]bool, n)
	for pos, m := range msgs {
		v, err := strconv.Atoi(string(m.Body))
		require.NoError(t, err)
		require.False(t, seen[v], "message %d received twice", v)
		seen[v] = true
		d := max(v-pos, pos-v)
		maxd = max(maxd, d)
		sum += d
	}
	mean := float64(sum) / n
	t.Logf("displacement over %d messages: mean %.1f, max %d", n, mean, maxd)
	assert.Greater(t, mean, 4.0, "mean displacement: four shards must reorder")
	assert.Less(t, maxd, 1000, "max displacement: disorder must stay local in a deep queue")
}

func TestSeedReproducible(t *testing.T) {
	order := func(seed int64) string {
		q := memqueue.New(&memqueue.Options{Seed: seed, Redeliver: 0.1, Loss: 0.1})
		defer q.Close()
		sendN(t, q, 200)
		s := ""
		for _, m := range drain(t, q) {
			s += string(m.Body) + ","
		}
		return s
	}
	assert.Equal(t, order(0), order(memqueue.DefaultSeed), "Seed 0 means DefaultSeed")
	assert.Equal(t, order(42), order(42), "same seed, same calls: same order")
	assert.NotEqual(t, order(42), order(43), "different seeds give different orders")
}

func TestReceipts(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New(&memqueue.Options{Shards: 1})
	defer q.Close()
	other := memqueue.New(nil)
	defer other.Close()
	sendN(t, q, 2)
	sendN(t, other, 1)
	msgs := drain(t, q)
	require.Len(t, msgs, 2)
	foreign := drain(t, other)
	require.Len(t, foreign, 1)

	r := msgs[0].Receipt
	bad := []string{"", "x", r + "x", r + ".1", "zz" + r, foreign[0].Receipt}
	// A well-formed handle for a slot or generation never issued.
	if i := len(r) - 1; i > 0 {
		bad = append(bad, r[:i]+"zz")
	}
	// Another spelling of the issued handle (a leading zero in its slot
	// or its generation) names it without being it.
	if g := strings.LastIndexByte(r, '.'); g > 0 {
		if s := strings.LastIndexByte(r[:g], '.'); s >= 0 {
			bad = append(bad, r[:g+1]+"0"+r[g+1:], r[:s+1]+"0"+r[s+1:])
		}
	}
	for _, h := range bad {
		err := q.DeleteBatch(ctx, []string{h})
		var be *driver.BatchError
		require.ErrorAs(t, err, &be, "DeleteBatch(%q)", h)
		assert.ErrorIs(t, be.Errs[0], driver.ErrBadReceipt, "DeleteBatch(%q)", h)
		_, err = q.ChangeVisibility(ctx, h, time.Minute)
		assert.ErrorIs(t, err, driver.ErrBadReceipt, "ChangeVisibility(%q)", h)
	}

	r2, err := q.ChangeVisibility(ctx, r, time.Minute)
	require.NoError(t, err, "ChangeVisibility with a fresh receipt")
	assert.NotEqual(t, r, r2, "ChangeVisibility must rotate the receipt")
	_, err = q.ChangeVisibility(ctx, r, time.Minute)
	assert.ErrorIs(t, err, driver.ErrStaleReceipt, "receipt replaced by ChangeVisibility")
	require.NoError(t, q.DeleteBatch(ctx, []string{r2}), "delete with the rotated receipt")
	err = q.DeleteBatch(ctx, []string{r2, msgs[1].Receipt, r2})
	var be *driver.BatchError
	require.ErrorAs(t, err, &be)
	assert.ErrorIs(t, be.Errs[0], driver.ErrStaleReceipt, "receipt of a deleted message")
	assert.NoError(t, be.Errs[1], "fresh receipt")
	assert.ErrorIs(t, be.Errs[2], driver.ErrStaleReceipt, "receipt repeated in one batch")

	_, err = q.ChangeVisibility(ctx, r2, time.Millisecond)
	assert.Error(t, err, "timeout below MinVisibility")
	assert.False(t, errors.Is(err, driver.ErrStaleReceipt), "range check comes first, got %v", err)
	_, err = q.ChangeVisibility(ctx, r2, 13*time.Hour)
	assert.Error(t, err, "timeout above MaxVisibility")

	v, inflight := q.Len()
	assert.Equal(t, [2]int{0, 0}, [2]int{v, inflight}, "Len after deleting everything")
}

// TestReceiptsUpperCase: a handle whose generation is spelled in upper
// case (base 32 reads both cases) names the issued handle without being it.
func TestReceiptsUpperCase(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New(nil)
	defer q.Close()
	sendN(t, q, 1)
	msgs := drain(t, q)
	require.Len(t, msgs, 1)
	r := msgs[0].Receipt
	// Each ChangeVisibility issues the next generation: rotate until it
	// has a letter (generation 10 is "a").
	for i := 0; !strings.ContainsAny(r[strings.LastIndexByte(r, '.'):], "abcdefghijklmnopqrstuv"); i++ {
		require.Less(t, i, 100, "no letter in the generation of %q", r)
		var err error
		r, err = q.ChangeVisibility(ctx, r, time.Minute)
		require.NoError(t, err)
	}
	g := strings.LastIndexByte(r, '.')
	upper := r[:g] + strings.ToUpper(r[g:])
	_, err := q.ChangeVisibility(ctx, upper, time.Minute)
	assert.ErrorIs(t, err, driver.ErrBadReceipt, "ChangeVisibility(%q), issued as %q", upper, r)
	require.NoError(t, q.DeleteBatch(ctx, []string{r}), "the handle as issued")
}

func TestArguments(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New(&memqueue.Options{MaxBatch: 4, MaxBody: 10, MaxBatchBytes: 25})
	defer q.Close()
	assert.NoError(t, q.SendBatch(ctx, nil), "empty send is a no-op")
	assert.NoError(t, q.DeleteBatch(ctx, nil), "empty delete is a no-op")
	assert.ErrorIs(t, q.SendBatch(ctx, [][]byte{make([]byte, 10), make([]byte, 10), make([]byte, 6)}), driver.ErrTooLarge, "26 bytes > MaxBatchBytes 25")
	assert.NoError(t, q.SendBatch(ctx, [][]byte{make([]byte, 10), make([]byte, 10), make([]byte, 5)}), "25 bytes = MaxBatchBytes")
	_, err := q.ReceiveBatch(ctx, 0, 0)
	assert.Error(t, err, "ReceiveBatch(max 0)")
	_, err = q.ReceiveBatch(ctx, 5, 0)
	assert.ErrorIs(t, err, driver.ErrTooLarge, "ReceiveBatch(max 5 > MaxBatch 4)")
	assert.Equal(t, memqueue.Stats{SendRequests: 1, Sent: 3}, q.Stats(), "rejected calls are not requests")
}

func TestStats(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New(&memqueue.Options{Visibility: time.Hour})
	defer q.Close()
	sendN(t, q, 20) // 2 requests
	msgs := drain(t, q)
	require.Len(t, msgs, 20)
	_, err := q.ChangeVisibility(ctx, msgs[0].Receipt, time.Second)
	require.NoError(t, err)
	require.NoError(t, q.DeleteBatch(ctx, receipts(msgs[1:17])))
	v, inflight := q.Len()
	assert.Equal(t, 0, v, "visible")
	assert.Equal(t, 4, inflight, "in flight")
	st := q.Stats()
	assert.Equal(t, memqueue.Stats{
		SendRequests: 2, ReceiveRequests: st.ReceiveRequests, EmptyReceives: 1, DeleteRequests: 1, VisibilityRequests: 1,
		Sent: 20, Delivered: 20, Deleted: 16,
	}, st)
	assert.GreaterOrEqual(t, st.ReceiveRequests, int64(3), "20 messages need two receives of 16 and an empty one")
}

func TestRedeliver(t *testing.T) {
	ctx := context.Background()
	const n, p = 4000, 0.2
	q := memqueue.New(&memqueue.Options{Redeliver: p, Seed: 7})
	defer q.Close()
	sendN(t, q, n)
	deleted := map[string]int{}
	lastCount := map[string]int{}
	stale := 0
	for len(deleted) < n {
		msgs, err := q.ReceiveBatch(ctx, 16, 0)
		require.NoError(t, err)
		require.NotEmpty(t, msgs, "queue ran dry with %d of %d deleted", len(deleted), n)
		for _, m := range msgs {
			assert.Equal(t, lastCount[string(m.Body)]+1, m.DequeueCount, "DequeueCount of %s", m.Body)
			lastCount[string(m.Body)] = m.DequeueCount
		}
		err = q.DeleteBatch(ctx, receipts(msgs))
		var be *driver.BatchError
		if err != nil {
			require.ErrorAs(t, err, &be)
		}
		for i, m := range msgs {
			if be != nil && be.Errs[i] != nil {
				require.ErrorIs(t, be.Errs[i], driver.ErrStaleReceipt)
				stale++
				continue
			}
			deleted[string(m.Body)]++
		}
	}
	for b, c := range deleted {
		assert.Equal(t, 1, c, "successful deletes of %s", b)
	}
	st := q.Stats()
	// Each delivery is cut short with probability p: deliveries are
	// geometric, n/(1-p) on average, and redeliveries n*p/(1-p) = 1000 with
	// a standard deviation near 35.
	want := n * p / (1 - p)
	within(t, float64(st.Redelivered), want, 6*math.Sqrt(want/(1-p)), "redeliveries")
	assert.Equal(t, int64(stale), st.Redelivered, "every redelivery made exactly one receipt stale")
	assert.Equal(t, int64(n), st.Deleted, "deleted")
	assert.Equal(t, st.Delivered, int64(n)+st.Redelivered, "delivered = first deliveries + redeliveries")
}

func TestLoss(t *testing.T) {
	const n, p = 5000, 0.1
	q := memqueue.New(&memqueue.Options{Loss: p, Seed: 9})
	defer q.Close()
	sendN(t, q, n)
	got := len(drain(t, q))
	st := q.Stats()
	within(t, float64(n-got), n*p, 6*math.Sqrt(n*p*(1-p)), "messages lost")
	assert.Equal(t, int64(n-got), st.Lost, "Stats.Lost counts what never came")
	assert.Equal(t, int64(n), st.Sent, "Stats.Sent counts lost messages too")
}

// TestLoseReceive: a lost receive response fails the call and leaves its
// messages invisible for one visibility timeout; then they come back, with
// a new receipt, and nothing else is disturbed.
func TestLoseReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const n, p = 3200, 0.1
		q := memqueue.New(&memqueue.Options{LoseReceive: p, Seed: 12, Visibility: time.Second, Shards: 1})
		defer q.Close()
		sendN(t, q, n)
		got := map[string]int{}
		var lostCalls int
		start := time.Now()
		for len(got) < n {
			msgs, err := q.ReceiveBatch(ctx, 16, 5*time.Second)
			if err != nil {
				require.ErrorIs(t, err, memqueue.ErrInjected)
				require.True(t, q.IsRetryable(err))
				lostCalls++
				continue
			}
			require.NotEmpty(t, msgs, "every message comes back")
			for _, m := range msgs {
				got[string(m.Body)]++
			}
			require.NoError(t, q.DeleteBatch(ctx, receipts(msgs)))
		}
		st := q.Stats()
		assert.Equal(t, int64(lostCalls), st.LostReceives, "Stats.LostReceives counts the lost responses")
		calls := float64(n / 16)
		within(t, float64(lostCalls), calls*p/(1-p), 6*math.Sqrt(calls*p)/(1-p), "lost responses")
		assert.Equal(t, int64(n), st.Deleted, "every message delivered and deleted")
		assert.Equal(t, st.Delivered-int64(n), st.Redelivered, "only the lost ones came again")
		assert.Equal(t, int64(16*lostCalls), st.Redelivered, "each lost response took a full batch of 16")
		// The receives take no virtual time: the last lost ones are back
		// one visibility timeout after they were lost, not before.
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, time.Second, "lost messages stay invisible for the visibility timeout")
		assert.LessOrEqual(t, took, 2*time.Second, "and come back after it")
	})
}

// TestErrorRate checks injected failures: their rate, that half of them take
// effect, and that a client retrying on IsRetryable ends with every message
// delivered and deleted.
func TestErrorRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const n, p = 2000, 0.2
		q := memqueue.New(&memqueue.Options{ErrorRate: p, Seed: 11, Visibility: time.Second})
		defer q.Close()
		failed := map[string]bool{}
		var sendErrs int
		for i := range n {
			body := []byte(strconv.Itoa(i))
			if err := q.SendBatch(ctx, [][]byte{body}); err != nil {
				require.ErrorIs(t, err, memqueue.ErrInjected)
				require.True(t, q.IsRetryable(err), "IsRetryable(%v)", err)
				failed[string(body)] = true
				sendErrs++
			}
		}
		within(t, float64(sendErrs), n*p, 6*math.Sqrt(n*p*(1-p)), "failed sends")

		got := map[string]int{}
		deletedAfterFailure := 0
		var lastGot time.Time
		for start := time.Now(); time.Since(start) < time.Minute; {
			msgs, err := q.ReceiveBatch(ctx, 16, 5*time.Second)
			if err != nil {
				require.True(t, q.IsRetryable(err), "receive error %v", err)
				continue
			}
			if len(msgs) == 0 {
				break
			}
			lastGot = time.Now()
			rs := receipts(msgs)
			for {
				err := q.DeleteBatch(ctx, rs)
				if err == nil {
					break
				}
				if q.IsRetryable(err) {
					continue
				}
				// A delete that failed after deleting: the retry finds
				// every receipt stale.
				var be *driver.BatchError
				require.ErrorAs(t, err, &be)
				for _, e := range be.Errs {
					require.ErrorIs(t, e, driver.ErrStaleReceipt)
				}
				deletedAfterFailure++
				break
			}
			for _, m := range msgs {
				got[string(m.Body)]++
			}
		}
		require.False(t, lastGot.IsZero(), "nothing received")
		enqueuedOfFailed := 0
		for i := range n {
			b := strconv.Itoa(i)
			if failed[b] {
				if got[b] > 0 {
					enqueuedOfFailed++
				}
				continue
			}
			assert.Positive(t, got[b], "message %s sent without error but never received", b)
		}
		within(t, float64(enqueuedOfFailed), float64(sendErrs)/2, 6*math.Sqrt(float64(sendErrs)/4), "failed sends that enqueued anyway")
		assert.Positive(t, deletedAfterFailure, "some deletes must fail after deleting")
		st := q.Stats()
		requests := st.SendRequests + st.ReceiveRequests + st.DeleteRequests
		within(t, float64(st.Injected), float64(requests)*p, 6*math.Sqrt(float64(requests)*p*(1-p)), "injected failures over all requests")
		assert.Positive(t, st.Redelivered, "receives that failed after taking messages must lead to redeliveries")
		v, inflight := q.Len()
		assert.Equal(t, [2]int{0, 0}, [2]int{v, inflight}, "Len at the end")
	})
}

func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := memqueue.New(&memqueue.Options{Latency: 10 * time.Millisecond, LatencyJitter: 5 * time.Millisecond})
		defer q.Close()
		const calls = 200
		var total time.Duration
		for range calls {
			start := time.Now()
			require.NoError(t, q.SendBatch(ctx, [][]byte{[]byte("x")}))
			d := time.Since(start)
			require.GreaterOrEqual(t, d, 10*time.Millisecond, "latency")
			require.LessOrEqual(t, d, 15*time.Millisecond, "latency + jitter")
			total += d
		}
		// Uniform jitter: mean 12.5ms, standard deviation of the mean 0.1ms.
		within(t, float64(total/calls)/1e6, 12.5, 0.6, "mean latency in ms")

		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(3*time.Millisecond, cancel)
		start := time.Now()
		_, err := q.ReceiveBatch(cctx, 1, 0)
		assert.ErrorIs(t, err, context.Canceled, "cancelled during latency")
		assert.Equal(t, 3*time.Millisecond, time.Since(start), "returns when cancelled")

		time.AfterFunc(4*time.Millisecond, func() { q.Close() })
		start = time.Now()
		err = q.SendBatch(ctx, [][]byte{[]byte("y")})
		assert.ErrorIs(t, err, driver.ErrClosed, "closed during latency")
		assert.Equal(t, 4*time.Millisecond, time.Since(start), "returns when closed")
	})
}

func TestRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New(&memqueue.Options{Retention: time.Minute, Visibility: 40 * time.Second})
		defer q.Close()
		sendN(t, q, 10)
		held, err := q.ReceiveBatch(context.Background(), 3, 0) // in flight until 40s
		require.NoError(t, err)
		require.Len(t, held, 3)
		time.Sleep(30 * time.Second)
		sendN(t, q, 5)
		v, inflight := q.Len()
		assert.Equal(t, [2]int{12, 3}, [2]int{v, inflight}, "Len at 30s")
		time.Sleep(31 * time.Second)
		v, inflight = q.Len()
		assert.Equal(t, [2]int{5, 0}, [2]int{v, inflight}, "Len at 61s: the first ten expired")
		assert.Equal(t, int64(10), q.Stats().Lost, "Stats.Lost")
		assert.Len(t, drain(t, q), 5, "messages left")
	})
}

// TestFakeClock runs a queue inside a synctest bubble: waits and visibility
// timeouts follow the fake clock exactly.
func TestFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
		defer q.Close()

		start := time.Now()
		msgs, err := q.ReceiveBatch(ctx, 16, 20*time.Second)
		require.NoError(t, err)
		assert.Empty(t, msgs)
		assert.Equal(t, 20*time.Second, time.Since(start), "an empty receive waits its full wait")

		start = time.Now()
		time.AfterFunc(5*time.Second, func() { sendN(t, q, 1) })
		msgs, err = q.ReceiveBatch(ctx, 16, 30*time.Second)
		require.NoError(t, err)
		require.Len(t, msgs, 1, "the message sent during the wait")
		assert.Equal(t, 5*time.Second, time.Since(start), "the wait ends when the message is sent")
		m := msgs[0]
		assert.Equal(t, start.Add(5*time.Second), m.EnqueueTime, "EnqueueTime")
		assert.Equal(t, start.Add(35*time.Second), m.NextVisible, "NextVisible")

		// The message is invisible for 30s; a long poll wakes when it
		// reappears, with no goroutine of the queue's own.
		received := time.Now()
		msgs, err = q.ReceiveBatch(ctx, 16, 29*time.Second)
		require.NoError(t, err)
		assert.Empty(t, msgs, "still invisible")
		msgs, err = q.ReceiveBatch(ctx, 16, 30*time.Second)
		require.NoError(t, err)
		require.Len(t, msgs, 1, "redelivered")
		assert.Equal(t, 30*time.Second, time.Since(received), "redelivered exactly when visibility ends")
		assert.Equal(t, 2, msgs[0].DequeueCount)
		err = q.DeleteBatch(ctx, []string{m.Receipt})
		assert.ErrorIs(t, err, driver.ErrStaleReceipt, "first receipt after redelivery")

		// A visibility change wakes a waiting receive when it shortens the
		// time the receive must wait.
		r := msgs[0].Receipt
		time.AfterFunc(time.Second, func() {
			_, err := q.ChangeVisibility(ctx, r, 2*time.Second)
			assert.NoError(t, err)
		})
		start = time.Now()
		msgs, err = q.ReceiveBatch(ctx, 16, 30*time.Second)
		require.NoError(t, err)
		require.Len(t, msgs, 1, "back after the shortened visibility")
		assert.Equal(t, 3*time.Second, time.Since(start), "1s until the change + 2s of visibility")
		assert.Equal(t, 3, msgs[0].DequeueCount)

		// An expired receipt is stale even before the message is received
		// again.
		time.Sleep(31 * time.Second)
		_, err = q.ChangeVisibility(ctx, msgs[0].Receipt, time.Minute)
		assert.ErrorIs(t, err, driver.ErrStaleReceipt, "receipt whose visibility expired")
		v, inflight := q.Len()
		assert.Equal(t, [2]int{1, 0}, [2]int{v, inflight}, "Len after expiry")

		// Close wakes a waiting receive.
		time.AfterFunc(time.Second, func() { q.Close() })
		drain(t, q)
		start = time.Now()
		_, err = q.ReceiveBatch(ctx, 16, 30*time.Second)
		assert.ErrorIs(t, err, driver.ErrClosed, "receive waiting when Close is called")
		assert.Equal(t, time.Second, time.Since(start), "returns at Close")
	})
}

func TestEarlyEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const n, p = 400, 0.25
		q := memqueue.New(&memqueue.Options{EarlyEmpty: p, Seed: 13})
		defer q.Close()
		early := 0
		for range n {
			start := time.Now()
			msgs, err := q.ReceiveBatch(ctx, 16, time.Second)
			require.NoError(t, err)
			require.Empty(t, msgs)
			switch d := time.Since(start); d {
			case 0:
				early++
			case time.Second:
			default:
				t.Fatalf("an empty receive with wait 1s took %v: want 0 or 1s", d)
			}
		}
		within(t, float64(early), n*p, 6*math.Sqrt(n*p*(1-p)), "receives that ended at once")
		assert.Equal(t, int64(n), q.Stats().EmptyReceives, "EmptyReceives")

		// A message waiting is always returned.
		sendN(t, q, 1)
		msgs, err := q.ReceiveBatch(ctx, 16, time.Second)
		require.NoError(t, err)
		assert.Len(t, msgs, 1, "a visible message with EarlyEmpty on")
	})
}

func TestRedeliverAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := memqueue.New(&memqueue.Options{Redeliver: 1, RedeliverAfter: 2 * time.Second})
		defer q.Close()
		sendN(t, q, 1)
		first := drain(t, q)
		require.Len(t, first, 1)
		assert.Equal(t, 30*time.Second, time.Until(first[0].NextVisible), "NextVisible as promised, not as it will happen")
		start := time.Now()
		msgs, err := q.ReceiveBatch(ctx, 1, 10*time.Second)
		require.NoError(t, err)
		require.Len(t, msgs, 1, "duplicate delivery")
		assert.Equal(t, 2*time.Second, time.Since(start), "the duplicate comes after RedeliverAfter")
		assert.Equal(t, first[0].ID, msgs[0].ID)
		err = q.DeleteBatch(ctx, []string{first[0].Receipt})
		assert.ErrorIs(t, err, driver.ErrStaleReceipt, "the first receiver's receipt went stale")
	})
}

func TestContextAndClose(t *testing.T) {
	q := memqueue.New(nil)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, q.SendBatch(cctx, [][]byte{[]byte("x")}), context.Canceled)
	assert.Equal(t, memqueue.Stats{}, q.Stats(), "a cancelled call is not a request")
	require.NoError(t, q.Close())
	require.NoError(t, q.Close())
	assert.ErrorIs(t, q.SendBatch(context.Background(), [][]byte{[]byte("x")}), driver.ErrClosed)
	assert.False(t, q.IsRetryable(fmt.Errorf("x: %w", driver.ErrClosed)))
}
