package ordered_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/batcher"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore"
)

func newSendQueue(t *testing.T, drv driver.Queue, store seqstore.Store, opts *ordered.Options) *ordered.Queue {
	t.Helper()
	q, err := ordered.New(t.Context(), drv, store, opts)
	require.NoError(t, err, "ordered.New")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Close(ctx)
	})
	return q
}

// sendCtx is the ctx of a test's sends, waits and recoveries: a send that
// never finishes fails the test there, with the deadline's error and the
// call's message, instead of hanging it until go test's timeout.
func sendCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func closeQueue(t *testing.T, q *ordered.Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, q.Close(ctx), "Close")
}

// checkStreams asserts that every group's accepted messages carry seqs
// 1..n exactly once each, and returns them by group.
func checkStreams(t *testing.T, d *sendDriver) map[string][]sentMsg {
	t.Helper()
	groups := d.byGroup()
	for g, msgs := range groups {
		for i, m := range msgs {
			if !assert.Equal(t, uint64(i+1), m.Seq, "group %q: message %d of %d has the wrong seq (a hole or a duplicate)", g, i, len(msgs)) {
				break
			}
		}
	}
	return groups
}

func TestSendAsyncAdmissionOrderOneGoroutine(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	d.latency = 200 * time.Microsecond
	q := newSendQueue(t, d, newTestStore(), nil)
	groups := []string{"a", "b", "", "ünïcode group #;%~"}
	const perGroup = 500
	var results []*ordered.SendResult
	for i := range perGroup {
		for _, g := range groups {
			r, err := q.SendAsync(ctx, g, []byte(strconv.Itoa(i)))
			require.NoError(t, err, "SendAsync %d to %q", i, g)
			results = append(results, r)
		}
	}
	for i, r := range results {
		require.NoError(t, r.Wait(ctx), "result %d", i)
		assert.Equal(t, uint64(i/len(groups)+1), r.Seq(), "result %d: seq", i)
		assert.NotZero(t, r.Epoch(), "result %d: epoch", i)
	}
	closeQueue(t, q)

	byGroup := checkStreams(t, d)
	require.Len(t, byGroup, len(groups), "groups seen by the driver")
	for _, g := range groups {
		msgs := byGroup[g]
		require.Len(t, msgs, perGroup, "messages of group %q", g)
		for i, m := range msgs {
			assert.Equal(t, strconv.Itoa(i), m.Payload, "group %q seq %d: payload must be the %d-th admitted", g, m.Seq, i)
			assert.Equal(t, msgs[0].Epoch, m.Epoch, "group %q: one epoch", g)
		}
	}
	st := q.Stats().Send
	assert.Equal(t, int64(perGroup*len(groups)), st.Sent, "Stats.Send.Sent")
	assert.Zero(t, st.Failed, "Stats.Send.Failed")
	assert.Zero(t, st.InFlight, "Stats.Send.InFlight after Close")
	assert.Less(t, st.Reservations, int64(perGroup*len(groups)), "reservations must coalesce")
}

// TestSendAdmissionOrderManyGoroutines serialises admissions with a lock
// that also numbers them, from many goroutines: seqs must follow that
// numbering exactly, whatever goroutine admitted.
func TestSendAdmissionOrderManyGoroutines(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	d.latency = 100 * time.Microsecond
	q := newSendQueue(t, d, newTestStore(), nil)
	const workers, each = 16, 200
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	errs := make(chan error, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				mu.Lock()
				n := next
				next++
				r, err := q.SendAsync(ctx, "shared", []byte(strconv.Itoa(n)))
				mu.Unlock()
				if err != nil {
					errs <- err
					continue
				}
				if err := r.Wait(ctx); err != nil {
					errs <- err
				} else if r.Seq() != uint64(n+1) {
					errs <- fmt.Errorf("admission %d got seq %d, want %d", n, r.Seq(), n+1)
				}
			}
		})
	}
	// Plain Send from other goroutines to other groups at the same time:
	// each goroutine's own messages must come in its order.
	for w := range 8 {
		wg.Go(func() {
			for i := range each {
				if err := q.Send(ctx, "own-"+strconv.Itoa(w), []byte(strconv.Itoa(i))); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	closeQueue(t, q)
	byGroup := checkStreams(t, d)
	require.Len(t, byGroup["shared"], workers*each, "messages of the shared group")
	for i, m := range byGroup["shared"] {
		require.Equal(t, strconv.Itoa(i), m.Payload, "shared seq %d", m.Seq)
	}
	for w := range 8 {
		msgs := byGroup["own-"+strconv.Itoa(w)]
		require.Len(t, msgs, each, "messages of own-%d", w)
		for i, m := range msgs {
			require.Equal(t, strconv.Itoa(i), m.Payload, "own-%d seq %d", w, m.Seq)
		}
	}
}

func TestSendPipelinesRequests(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	d.latency = time.Millisecond
	q := newSendQueue(t, d, newTestStore(), nil)
	const n = 2000
	var results []*ordered.SendResult
	for i := range n {
		r, err := q.SendAsync(ctx, "one", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		results = append(results, r)
	}
	for _, r := range results {
		require.NoError(t, r.Wait(ctx))
	}
	peak := d.peak.Load()
	t.Logf("peak concurrent send requests: %d, requests: %d for %d messages", peak, d.calls.Load(), n)
	assert.Greater(t, peak, int64(1), "one group must still have several requests in flight")
	assert.LessOrEqual(t, peak, int64(16), "at most Concurrency (16) requests in flight")
	assert.Less(t, d.calls.Load(), int64(n/4), "requests must carry batches")
	checkStreams(t, d)
}

func TestSendBatchAcrossGroupsRespectsLimits(t *testing.T) {
	d := newSendDriver()
	d.limits.MaxBatch = 4
	d.limits.MaxBatchBytes = 300
	d.latency = time.Millisecond
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{Concurrency: 2}})
	var wg sync.WaitGroup
	for g := range 10 {
		wg.Go(func() {
			payloads := make([][]byte, 20)
			for i := range payloads {
				payloads[i] = []byte(strings.Repeat("x", 50+i))
			}
			assert.NoError(t, q.SendBatch(t.Context(), strconv.Itoa(g), payloads))
		})
	}
	wg.Wait()
	byGroup := checkStreams(t, d)
	assert.Len(t, byGroup, 10)
	assert.LessOrEqual(t, d.peak.Load(), int64(2), "Concurrency 2")
	// The fake driver rejects batches beyond its limits with ErrTooLarge,
	// which is not retryable: nothing failed, so no batch broke them.
	assert.Zero(t, q.Stats().Send.Failed)
}

func TestSendPartialBatchFailureResendsOnlyFailed(t *testing.T) {
	d := newSendDriver()
	d.fail = func(call int, bodies [][]byte) error {
		be := &driver.BatchError{Errs: make([]error, len(bodies))}
		failed := false
		for i, b := range bodies {
			// Odd payloads fail on their first attempt.
			if n, _ := strconv.Atoi(string(b[strings.LastIndexByte(string(b), '#')+1:])); n%2 == 1 && !d.wasSent(b) {
				be.Errs[i] = errRetryable
				failed = true
			}
		}
		if failed {
			return be
		}
		return nil
	}
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Retry: ordered.RetryOptions{Initial: time.Millisecond, Max: time.Millisecond}})
	payloads := make([][]byte, 64)
	for i := range payloads {
		payloads[i] = []byte(strconv.Itoa(i))
	}
	require.NoError(t, q.SendBatch(t.Context(), "g", payloads))
	msgs := checkStreams(t, d)["g"]
	require.Len(t, msgs, 64, "every message accepted once")
	d.mu.Lock()
	defer d.mu.Unlock()
	for body, n := range d.attempts {
		p := body[strings.LastIndexByte(body, '#')+1:]
		v, _ := strconv.Atoi(p)
		want := 1
		if v%2 == 1 {
			want = 2
		}
		assert.Equal(t, want, n, "attempts of payload %s", p)
	}
	assert.Equal(t, int64(32), q.Stats().Send.Retries, "Stats.Send.Retries counts the resent entries")
}

// wasSent reports whether body was attempted before the current call.
func (d *sendDriver) wasSent(body []byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attempts[string(body)] > 1
}

func TestSendRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newSendDriver()
		d.fail = func(call int, bodies [][]byte) error {
			if call <= 4 {
				return fmt.Errorf("call %d: %w", call, errRetryable)
			}
			return nil
		}
		retry := ordered.RetryOptions{Initial: 100 * time.Millisecond, Max: 300 * time.Millisecond}
		q, err := ordered.New(t.Context(), d, newTestStore(), &ordered.Options{Retry: retry})
		require.NoError(t, err)
		require.NoError(t, q.Send(t.Context(), "g", []byte("x")))
		require.NoError(t, q.Close(t.Context()))

		d.mu.Lock()
		times := d.times
		d.mu.Unlock()
		require.Len(t, times, 5, "4 failures then a success")
		for i := 1; i < len(times); i++ {
			full := min(retry.Initial<<(i-1), retry.Max)
			gap := times[i].Sub(times[i-1])
			assert.GreaterOrEqual(t, gap, full/2, "backoff before attempt %d", i+1)
			assert.LessOrEqual(t, gap, full, "backoff before attempt %d", i+1)
		}
		assert.Equal(t, int64(4), q.Stats().Send.Retries)
	})
}

func TestSendRetryGivesUpAfterMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newSendDriver()
		d.fail = func(int, [][]byte) error { return errRetryable }
		q, err := ordered.New(t.Context(), d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{MaxAttempts: 3}})
		require.NoError(t, err)
		err = q.Send(t.Context(), "g", []byte("x"))
		require.ErrorIs(t, err, errRetryable)
		assert.Contains(t, err.Error(), "after 3 attempt(s)")
		assert.Equal(t, int64(3), d.calls.Load(), "driver calls")
		assert.Equal(t, int64(1), q.Stats().Send.Failed)
		require.NoError(t, q.Close(t.Context()))
	})
}

func TestSendNonRetryableError(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	d.fail = func(int, [][]byte) error { return errPermanent }
	q := newSendQueue(t, d, newTestStore(), nil)
	err := q.Send(ctx, "g", []byte("x"))
	require.ErrorIs(t, err, errPermanent)
	assert.Equal(t, int64(1), d.calls.Load(), "a non-retryable error is not retried")

	// In a batch, every failure is counted and the first one wrapped.
	err = q.SendBatch(ctx, "g", [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	require.ErrorIs(t, err, errPermanent)
	assert.Contains(t, err.Error(), "3 of 3 messages failed")
}

func TestSendStoreFailure(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	store := newTestStore()
	errStore := errors.New("store down")
	store.failNext = errStore
	q := newSendQueue(t, d, store, nil)
	err := q.Send(ctx, "g", []byte("x"))
	require.ErrorIs(t, err, errStore)
	assert.Zero(t, d.calls.Load(), "nothing sent without a reservation")
	require.NoError(t, q.Send(ctx, "g", []byte("y")))
	msgs := checkStreams(t, d)["g"]
	require.Len(t, msgs, 1)
	assert.Equal(t, "y", msgs[0].Payload)
}

// TestSendDurableRecoveryOnNew: a process that journaled messages and never
// got them to the queue (its driver failed for good) leaves them to the
// next Queue on the same store, which sends them with the same epoch and
// seq when it starts.
func TestSendDurableRecoveryOnNew(t *testing.T) {
	ctx := sendCtx(t)
	store := newTestStore()
	broken := newSendDriver()
	broken.fail = func(int, [][]byte) error { return errPermanent }
	q1 := newSendQueue(t, broken, store, nil)
	var epoch uint64
	for i := range 5 {
		r, err := q1.SendAsync(ctx, "g", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		require.ErrorIs(t, r.Wait(ctx), errPermanent)
		epoch = r.Epoch()
	}
	closeQueue(t, q1)
	require.Equal(t, 5, store.journalLen(), "failed messages stay journaled")

	// A crash between reservation and send leaves the same trace.
	_, err := storeReserve(ctx, store, seqstore.Stream{Queue: "default", Group: "h"}, 2, [][]byte{[]byte("h1"), []byte("h2")})
	require.NoError(t, err)

	good := newSendDriver()
	q2 := newSendQueue(t, good, store, nil)
	closeQueue(t, q2) // waits for the recovered sends and flushes their marks
	byGroup := checkStreams(t, good)
	require.Len(t, byGroup["g"], 5)
	for i, m := range byGroup["g"] {
		assert.Equal(t, epoch, m.Epoch, "recovered message keeps its epoch")
		assert.Equal(t, strconv.Itoa(i), m.Payload)
	}
	require.Len(t, byGroup["h"], 2)
	assert.Equal(t, "h2", byGroup["h"][1].Payload)
	assert.Equal(t, int64(7), q2.Stats().Send.Recovered)
	assert.Zero(t, store.journalLen(), "recovered messages are marked sent")
}

func TestSendRecoverOnDemand(t *testing.T) {
	ctx := sendCtx(t)
	store := newTestStore()
	d := newSendDriver()
	var broken sync.Mutex
	down := true
	d.fail = func(int, [][]byte) error {
		broken.Lock()
		defer broken.Unlock()
		if down {
			return errPermanent
		}
		return nil
	}
	q := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Millisecond}})
	require.ErrorIs(t, q.SendBatch(ctx, "g", [][]byte{[]byte("1"), []byte("2"), []byte("3")}), errPermanent)
	broken.Lock()
	down = false
	broken.Unlock()
	require.NoError(t, q.Send(ctx, "g", []byte("4")))

	n, err := q.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n, "the three failed messages are sent again, the sent one is not")
	n, err = q.Recover(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left to recover")
	msgs := checkStreams(t, d)["g"]
	require.Len(t, msgs, 4)
	for i, m := range msgs {
		assert.Equal(t, strconv.Itoa(i+1), m.Payload)
	}
	closeQueue(t, q)
	assert.Zero(t, store.journalLen())
}

// TestSendRecoverSkipsInFlight: Recover must not re-send what this process
// has in flight.
func TestSendRecoverSkipsInFlight(t *testing.T) {
	ctx := sendCtx(t)
	store := newTestStore()
	d := newSendDriver()
	d.block = make(chan struct{})
	q := newSendQueue(t, d, store, nil)
	r, err := q.SendAsync(ctx, "g", []byte("x"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return store.journalLen() == 1 }, 5*time.Second, time.Millisecond, "reserved")
	n, err := q.Recover(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "an in-flight message is not recovered")
	close(d.block)
	require.NoError(t, r.Wait(ctx))
	closeQueue(t, q)
	assert.Len(t, d.sent(), 1, "sent once")
}

func TestSendFastModeJournalsNothing(t *testing.T) {
	ctx := sendCtx(t)
	store := newTestStore()
	d := newSendDriver()
	d.fail = func(call int, _ [][]byte) error {
		if call == 1 {
			return errPermanent
		}
		return nil
	}
	q := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{Mode: ordered.SendFast}})
	require.ErrorIs(t, q.Send(ctx, "g", []byte("lost")), errPermanent)
	require.NoError(t, q.Send(ctx, "g", []byte("ok")))
	assert.Zero(t, store.journalLen(), "fast mode journals nothing")
	n, err := q.Recover(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	msgs := d.sent()
	require.Len(t, msgs, 1)
	assert.Equal(t, uint64(2), msgs[0].Seq, "the failed message leaves a hole at seq 1")
}

func TestSendLegacyFormat(t *testing.T) {
	d := newSendDriver()
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{Format: ordered.FormatLegacy}})
	require.NoError(t, q.Send(t.Context(), "", []byte("hello")))
	require.NoError(t, q.Send(t.Context(), "", []byte("world")))
	d.mu.Lock()
	got := []string{string(d.accepted[0]), string(d.accepted[1])}
	d.mu.Unlock()
	assert.Equal(t, []string{"#1#hello", "#2#world"}, got)
	err := q.Send(t.Context(), "g", []byte("x"))
	assert.ErrorIs(t, err, ordered.ErrInvalidGroup, "legacy carries only the default group")
}

func TestSendValidationReservesNothing(t *testing.T) {
	d := newSendDriver()
	d.limits.MaxBody = 1000
	store := newTestStore()
	q := newSendQueue(t, d, store, nil)
	long := strings.Repeat("g", 129)
	cases := []struct {
		name    string
		group   string
		payload []byte
		want    error
	}{
		{"payload over MaxBody", "g", make([]byte, 1000), ordered.ErrTooLarge},
		{"payload fits only without the worst-case header", "g", make([]byte, 1000-10), ordered.ErrTooLarge},
		{"group too long", long, nil, ordered.ErrInvalidGroup},
		{"group not UTF-8", "\xff", nil, ordered.ErrInvalidGroup},
		{"group with NUL", "a\x00b", nil, ordered.ErrInvalidGroup},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := q.Send(t.Context(), c.group, c.payload)
			assert.ErrorIs(t, err, c.want)
			_, err = q.SendAsync(t.Context(), c.group, c.payload)
			assert.ErrorIs(t, err, c.want)
			err = q.SendBatch(t.Context(), c.group, [][]byte{[]byte("fine"), c.payload})
			assert.ErrorIs(t, err, c.want, "one bad payload fails the whole batch")
		})
	}
	// The largest payload that fits a worst-case header is accepted.
	hdr := len("#v1;9223372036854775807;9223372036854775807;g#")
	require.NoError(t, q.Send(t.Context(), "g", make([]byte, 1000-hdr)))
	assert.Equal(t, 1, store.reservations(), "only the valid send reserved")
	assert.Equal(t, int64(1), q.Stats().Requests.Reserve)
	assert.Equal(t, uint64(1), d.sent()[0].Seq, "no seq was taken by the rejected sends")
}

func TestSendBoundedInFlight(t *testing.T) {
	d := newSendDriver()
	d.block = make(chan struct{})
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{MaxInFlight: 4}})
	// A bound that never gives room back must fail the test, with a
	// message, not hang it until go test's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var results []*ordered.SendResult
	for i := range 4 {
		r, err := q.SendAsync(ctx, "g", []byte(strconv.Itoa(i)))
		require.NoError(t, err, "admission %d within the bound", i)
		results = append(results, r)
	}
	start := time.Now() // before the deadline is set: it runs from there
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_, err := q.SendAsync(short, "g", []byte("5th"))
	require.ErrorIs(t, err, context.DeadlineExceeded, "the 5th admission waits for room")
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	assert.Equal(t, int64(4), q.Stats().Send.InFlight)

	// Room comes back as messages complete.
	done := make(chan error, 1)
	go func() {
		r, err := q.SendAsync(ctx, "g", []byte("4"))
		if err == nil {
			err = r.Wait(ctx)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("admitted while full: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(d.block)
	require.NoError(t, <-done, "the admission that waited is let in and sent once the 4 in flight complete (within 10s)")
	for i, r := range results {
		require.NoError(t, r.Wait(ctx), "message %d completes once the driver is unblocked (within 10s)", i)
	}
	msgs := checkStreams(t, d)["g"]
	require.Len(t, msgs, 5, "the timed-out admission took no seq")
}

func TestSendCloseFlushes(t *testing.T) {
	store := newTestStore()
	d := newSendDriver()
	d.latency = time.Millisecond
	q, err := ordered.New(t.Context(), d, store, &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Hour}})
	require.NoError(t, err)
	var results []*ordered.SendResult
	for i := range 300 {
		r, err := q.SendAsync(t.Context(), strconv.Itoa(i%7), []byte("x"))
		require.NoError(t, err)
		results = append(results, r)
	}
	closeQueue(t, q)
	for i, r := range results {
		select {
		case <-r.Done():
			assert.NoError(t, r.Err(), "result %d", i)
		default:
			t.Fatalf("result %d not done after Close", i)
		}
	}
	assert.Len(t, d.sent(), 300)
	assert.Zero(t, store.journalLen(), "Close flushes the Sent marks (MarkInterval is an hour)")

	_, err = q.SendAsync(t.Context(), "g", nil)
	assert.ErrorIs(t, err, ordered.ErrClosed)
	assert.ErrorIs(t, q.Send(t.Context(), "g", nil), ordered.ErrClosed)
	assert.ErrorIs(t, q.SendBatch(t.Context(), "g", [][]byte{nil}), ordered.ErrClosed)
	_, err = q.Recover(t.Context())
	assert.ErrorIs(t, err, ordered.ErrClosed)
	assert.NoError(t, q.Close(t.Context()), "Close is idempotent")
}

func TestSendCloseGivesUp(t *testing.T) {
	d := newSendDriver()
	d.block = make(chan struct{})
	defer close(d.block)
	store := newTestStore()
	q, err := ordered.New(t.Context(), d, store, &ordered.Options{Send: ordered.SendOptions{MaxInFlight: 2}})
	require.NoError(t, err)
	r, err := q.SendAsync(t.Context(), "g", []byte("stuck"))
	require.NoError(t, err)
	_, err = q.SendAsync(t.Context(), "g", []byte("stuck too"))
	require.NoError(t, err)
	waiter := make(chan error, 1)
	go func() {
		_, err := q.SendAsync(t.Context(), "g", []byte("waits for room"))
		waiter <- err
	}()
	time.Sleep(10 * time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err = q.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, <-waiter, ordered.ErrClosed, "an admission waiting for room fails when Close begins")
	select {
	case <-r.Done():
		assert.ErrorIs(t, r.Err(), ordered.ErrClosed)
	default:
		t.Fatal("an abandoned message's result must be done after Close returns")
	}
	assert.Equal(t, 2, store.journalLen(), "abandoned messages stay journaled for recovery")
}

func TestSendPartialBatchPermanentFailureFailsOnlyThatMessage(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	d.fail = func(call int, bodies [][]byte) error {
		be := &driver.BatchError{Errs: make([]error, len(bodies))}
		for i, b := range bodies {
			if strings.HasSuffix(string(b), "#bad") {
				be.Errs[i] = errPermanent
			}
		}
		return be
	}
	d.block = make(chan struct{})
	q := newSendQueue(t, d, newTestStore(), nil)
	var results []*ordered.SendResult
	for _, p := range []string{"ok1", "bad", "ok2"} {
		r, err := q.SendAsync(ctx, "g", []byte(p))
		require.NoError(t, err)
		results = append(results, r)
	}
	// In flight: not done, no error yet.
	assert.NoError(t, results[1].Err(), "Err is nil while in flight")
	select {
	case <-results[1].Done():
		t.Fatal("done while the driver is blocked")
	default:
	}
	close(d.block)
	require.NoError(t, results[0].Wait(ctx))
	require.ErrorIs(t, results[1].Wait(ctx), errPermanent)
	require.NoError(t, results[2].Wait(ctx))
	<-results[1].Done()
	assert.ErrorIs(t, results[1].Err(), errPermanent)
	assert.Equal(t, uint64(2), results[1].Seq())
	// The three may share a request or not (admission races the first
	// reservation); either way the bad one was attempted once.
	d.mu.Lock()
	badAttempts := 0
	for body, n := range d.attempts {
		if strings.HasSuffix(body, "#bad") {
			badAttempts += n
		}
	}
	d.mu.Unlock()
	assert.Equal(t, 1, badAttempts, "a permanent entry failure is not retried")
	assert.LessOrEqual(t, d.calls.Load(), int64(2), "requests for 3 messages, none retried")
	st := q.Stats().Send
	assert.Equal(t, int64(2), st.Sent)
	assert.Equal(t, int64(1), st.Failed)
}

func TestSendBoundedInFlightBytes(t *testing.T) {
	d := newSendDriver()
	d.block = make(chan struct{})
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{MaxInFlightBytes: 100}})
	// A bound that never gives room back must fail the test, with a
	// message, not hang it until go test's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := q.SendAsync(ctx, "g", make([]byte, 60))
	require.NoError(t, err)
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	_, err = q.SendAsync(short, "g", make([]byte, 60))
	require.ErrorIs(t, err, context.DeadlineExceeded, "60+60 bytes pass MaxInFlightBytes 100")
	_, err = q.SendAsync(ctx, "g", make([]byte, 40))
	require.NoError(t, err, "60+40 bytes fit (within 10s)")
	close(d.block)
	require.NoError(t, r.Wait(ctx), "the first message completes once the driver is unblocked (within 10s)")
	// A batch larger than the bound alone is admitted once nothing else is
	// in flight.
	require.NoError(t, q.SendBatch(ctx, "g", [][]byte{make([]byte, 80), make([]byte, 80)}),
		"a batch larger than the bound is admitted once nothing is in flight (within 10s)")
}

func TestSendOptionsValidated(t *testing.T) {
	for _, o := range []ordered.SendOptions{
		{Mode: 7},
		{Format: 9},
		{MaxInFlight: -1},
		{MaxInFlightBytes: -1},
		{Concurrency: -2},
		{MaxAttempts: -1},
		{MarkInterval: -time.Second},
	} {
		_, err := ordered.New(t.Context(), newSendDriver(), newTestStore(), &ordered.Options{Send: o})
		assert.Error(t, err, "options %+v", o)
	}
}

func TestSendCloseRacesWithSenders(t *testing.T) {
	d := newSendDriver()
	d.latency = 100 * time.Microsecond
	q, err := ordered.New(t.Context(), d, newTestStore(), nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var admitted, closed sync.Map
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				r, err := q.SendAsync(t.Context(), strconv.Itoa(w), []byte(strconv.Itoa(i)))
				if err != nil {
					closed.Store(w, err)
					return
				}
				admitted.Store(r, w)
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	closeQueue(t, q)
	wg.Wait()
	closed.Range(func(_, err any) bool {
		assert.ErrorIs(t, err.(error), ordered.ErrClosed)
		return true
	})
	n := 0
	admitted.Range(func(r, _ any) bool {
		n++
		select {
		case <-r.(*ordered.SendResult).Done():
			assert.NoError(t, r.(*ordered.SendResult).Err())
		default:
			t.Error("an admitted message is not done after Close")
			return false
		}
		return true
	})
	assert.Equal(t, n, len(d.sent()), "every admitted message was sent, nothing else")
	checkStreams(t, d)
}

// TestSendNagleBatching: while a batch that is not full is in flight (one
// such batch may be), later messages wait and leave
// together in one request instead of one request each.
func TestSendNagleBatching(t *testing.T) {
	ordered.SetPartialHold(t, time.Hour) // the blocked request holds the rest back for good
	ctx := sendCtx(t)
	d := newSendDriver()
	d.block = make(chan struct{})
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{Concurrency: 4}})
	first, err := q.SendAsync(ctx, "g", []byte("first"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return d.calls.Load() == 1 }, 5*time.Second, time.Millisecond, "first request")
	var rest []*ordered.SendResult
	for i := range 10 {
		r, err := q.SendAsync(ctx, strconv.Itoa(i%3), []byte("later"))
		require.NoError(t, err)
		rest = append(rest, r)
	}
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, int64(1), d.calls.Load(), "no second partial request while one is in flight")
	close(d.block)
	require.NoError(t, first.Wait(ctx))
	for _, r := range rest {
		require.NoError(t, r.Wait(ctx))
	}
	assert.Equal(t, int64(2), d.calls.Load(), "the 10 later messages share the second request")

	// A full batch does not wait for a partial one.
	d2 := newSendDriver()
	d2.block = make(chan struct{})
	q2 := newSendQueue(t, d2, newTestStore(), &ordered.Options{Send: ordered.SendOptions{Concurrency: 4}})
	_, err = q2.SendAsync(ctx, "g", []byte("partial"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return d2.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	payloads := make([][]byte, 16)
	for i := range payloads {
		payloads[i] = []byte("full")
	}
	_, err = q2.SendAsync(ctx, "h", nil) // joins the waiting messages
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- q2.SendBatch(ctx, "g", payloads) }()
	require.Eventually(t, func() bool { return d2.calls.Load() == 2 }, 5*time.Second, time.Millisecond,
		"a full batch goes out while a partial one is in flight")
	close(d2.block)
	require.NoError(t, <-done)
}

// TestSendSlowPartialDoesNotStall: a request that is not full and does
// not come back (a network stall) holds the next partial request back for
// its hold only, not until it ends: the partial hold here, as requests
// usually end at once (a second before any request ended). The hold is
// short beside FirstHold, which the wait must stay well under: under CI's
// -race load a wait of 50 ms took 111 ms once (2026-12-06).
func TestSendSlowPartialDoesNotStall(t *testing.T) {
	const hold = 20 * time.Millisecond
	ordered.SetPartialHold(t, hold)
	ctx := sendCtx(t)
	d := newSendDriver()
	stuck := make(chan struct{})
	defer close(stuck)
	d.fail = func(_ int, bodies [][]byte) error {
		for _, b := range bodies {
			if bytes.HasSuffix(b, []byte("stuck")) {
				<-stuck
			}
		}
		return nil
	}
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{Concurrency: 4}})
	require.NoError(t, q.Send(ctx, "a", []byte("usual")))
	_, err := q.SendAsync(ctx, "a", []byte("stuck"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return d.calls.Load() == 2 }, 5*time.Second, time.Millisecond, "the stuck request")
	start := time.Now()
	r, err := q.SendAsync(ctx, "b", []byte("later"))
	require.NoError(t, err)
	require.NoError(t, r.Wait(ctx), "a message waits behind a stuck partial request")
	waited := time.Since(start)
	assert.GreaterOrEqual(t, waited, hold/2, "it waited for the hold (less the time the stuck request had already)")
	assert.Less(t, waited, batcher.FirstHold*3/4, "it waited longer than the hold")
}

func TestSendMarksFlushAfterInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newTestStore()
		d := newSendDriver()
		q, err := ordered.New(t.Context(), d, store, &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Second}})
		require.NoError(t, err)
		require.NoError(t, q.Send(t.Context(), "g", []byte("x")))
		require.NoError(t, q.SendBatch(t.Context(), "h", [][]byte{[]byte("y"), []byte("z")}))
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 3, store.journalLen(), "marks wait for MarkInterval")
		assert.Zero(t, q.Stats().Requests.Sent, "no Sent call yet")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.Zero(t, store.journalLen(), "marks flushed after MarkInterval")
		assert.Equal(t, int64(1), q.Stats().Requests.Sent, "one Sent call for both groups")
		require.NoError(t, q.Close(t.Context()))
	})
}

// TestSendAdmissionFirstComeFirstServed: a batch waiting for room is not
// overtaken by a smaller send that would fit.
func TestSendAdmissionFirstComeFirstServed(t *testing.T) {
	d := newSendDriver()
	d.block = make(chan struct{})
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{MaxInFlight: 4}})
	// A bound that never gives room back must fail the test, with a
	// message, not hang it until go test's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		_, err := q.SendAsync(ctx, "g", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	batch := make(chan error, 1)
	go func() { batch <- q.SendBatch(ctx, "g", [][]byte{[]byte("b1"), []byte("b2")}) }()
	time.Sleep(20 * time.Millisecond) // the batch is waiting: 3+2 > 4
	require.EqualValues(t, 3, q.Stats().Send.InFlight, "the batch of 2 is not admitted on top of 3 with MaxInFlight 4")
	short, cancelShort := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancelShort()
	_, err := q.SendAsync(short, "g", []byte("small"))
	require.ErrorIs(t, err, context.DeadlineExceeded, "3+1 fits, but the waiting batch comes first")
	close(d.block)
	require.NoError(t, <-batch, "the waiting batch is admitted and sent once the driver is unblocked (within 10s)")
	msgs := checkStreams(t, d)["g"]
	require.Len(t, msgs, 5)
	assert.Equal(t, "b1", msgs[3].Payload)
}

func TestSendNoRecover(t *testing.T) {
	store := newTestStore()
	_, err := storeReserve(t.Context(), store, seqstore.Stream{Queue: "default", Group: "g"}, 1, [][]byte{[]byte("left")})
	require.NoError(t, err)
	d := newSendDriver()
	q := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{NoRecover: true}})
	closeQueue(t, q)
	assert.Empty(t, d.sent(), "NoRecover: New sends nothing")
	assert.Equal(t, 1, store.journalLen())

	q2 := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{NoRecover: true}})
	n, err := q2.Recover(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, n, "Recover still works on demand")
	closeQueue(t, q2)
	require.Len(t, d.sent(), 1)
	assert.Equal(t, "left", d.sent()[0].Payload)
}

func TestSendGroupStateIsDropped(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	q := newSendQueue(t, d, newTestStore(), nil)
	const groups = 5000
	var results []*ordered.SendResult
	for i := range groups {
		r, err := q.SendAsync(ctx, "group-"+strconv.Itoa(i), []byte("x"))
		require.NoError(t, err)
		results = append(results, r)
	}
	assert.Positive(t, q.Stats().Send.Groups, "groups in flight have state")
	for _, r := range results {
		require.NoError(t, r.Wait(ctx))
	}
	require.Eventually(t, func() bool { return q.Stats().Send.Groups == 0 }, 5*time.Second, time.Millisecond,
		"idle groups keep no send state; %d left", q.Stats().Send.Groups)
	assert.Len(t, d.byGroup(), groups)
}

// TestSendReservesManyGroupsPerCall: groups that become ready while a
// reservation call is in flight are reserved together in the next one, one
// store call for many groups ("the sender batches across groups").
func TestSendReservesManyGroupsPerCall(t *testing.T) {
	ctx := sendCtx(t)
	store := newTestStore()
	store.delay = 20 * time.Millisecond
	d := newSendDriver()
	q := newSendQueue(t, d, store, nil)
	const groups = 200
	results := make([]*ordered.SendResult, groups)
	for i := range groups {
		r, err := q.SendAsync(ctx, fmt.Sprintf("g%03d", i), []byte("x"))
		require.NoError(t, err)
		results[i] = r
	}
	for i, r := range results {
		require.NoError(t, r.Wait(ctx), "send to group %d", i)
	}
	sizes := store.callSizes()
	t.Logf("Reserve calls and their requests: %v", sizes)
	assert.LessOrEqual(t, len(sizes), 5, "200 groups ready at once take a few Reserve calls, not one each")
	assert.GreaterOrEqual(t, slices.Max(sizes), groups/2, "one call reserves for most of the waiting groups")
	assert.Equal(t, int64(len(sizes)), q.Stats().Requests.Reserve, "every store call is counted")
	for g, msgs := range d.byGroup() {
		assert.Len(t, msgs, 1, "group %s: one message", g)
	}
}

// TestSendReserveRetriesAborted: when the store refuses one group's request
// in a multi-group call (corrupt state, say) and aborts the others, the
// others are reserved again without it and sent; only the bad group's
// send fails, with the store's error.
func TestSendReserveRetriesAborted(t *testing.T) {
	ctx := sendCtx(t)
	store := newTestStore()
	store.delay = 20 * time.Millisecond
	store.failGroup = "bad"
	d := newSendDriver()
	q := newSendQueue(t, d, store, nil)
	first, err := q.SendAsync(ctx, "first", []byte("x")) // keeps the store busy while the others pile up
	require.NoError(t, err)
	require.Eventually(t, func() bool { return store.entered.Load() == 1 }, 5*time.Second, time.Millisecond,
		"the first Reserve call is in the store before the others are queued")
	groups := []string{"a", "b", "bad", "c", "d"}
	results := map[string]*ordered.SendResult{}
	for _, g := range groups {
		r, err := q.SendAsync(ctx, g, []byte(g))
		require.NoError(t, err)
		results[g] = r
	}
	require.NoError(t, first.Wait(ctx))
	for _, g := range groups {
		err := results[g].Wait(ctx)
		if g == "bad" {
			assert.ErrorIs(t, err, errBadGroup, "the bad group fails with the store's error for it")
			continue
		}
		assert.NoError(t, err, "group %s was only aborted: it must be reserved again and sent", g)
	}
	sent := d.byGroup()
	assert.NotContains(t, sent, "bad")
	for _, g := range []string{"a", "b", "c", "d"} {
		assert.Len(t, sent[g], 1, "group %s sent once", g)
	}
	assert.Contains(t, store.callSizes(), len(groups), "the five groups were reserved in one call first")
}
