package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/driver"
)

// Harness tells the suite how to make the driver under test and what it can
// do.
type Harness struct {
	// New returns a driver over a fresh, empty queue unique to this (sub)test, whose visibility timeout
	// is about visibility (drivers may round up to what the service allows; Limits().Visibility reports
	// the real value). The harness registers its own cleanup (t.Cleanup); the suite also calls Close.
	New func(t *testing.T, visibility time.Duration) driver.Queue
	// Capabilities missing from a driver turn the tests that need them into t.Skip with a reason.
	NoStaleReceipts bool // the driver cannot tell a stale receipt from a valid one
	NoVisibility    bool // ChangeVisibility is unsupported
	// Slow marks a remote service: the suite uses fewer messages and longer waits.
	Slow bool
	// NewThrottled, when set, returns a driver over a fresh queue that the service throttles at a few
	// requests per second, so that a burst of sends meets throttling. Nil skips the Throttled test.
	NewThrottled func(t *testing.T) driver.Queue
}

// timing holds the sizes and durations of one run of the suite.
type timing struct {
	vis      time.Duration // short visibility, for the tests that wait for redelivery
	longVis  time.Duration // long visibility, for the tests that must see no redelivery
	poll     time.Duration // wait of one polling receive
	slack    time.Duration // scheduling and network delay tolerated on top of a wait
	early    time.Duration // how much earlier than promised a message may reappear (clock granularity)
	skew     time.Duration // tolerance on times reported by the service (clock skew)
	longWait time.Duration // a wait that must be cut short by an event
	empty    time.Duration // wait of a receive on an empty queue, long against slack
	deadline time.Duration // how long a test may take to collect its messages
	bulk     int           // messages in the bulk test
	senders  int           // senders in the concurrency test
	perSend  int           // messages per sender in the concurrency test
}

var (
	fastTiming = timing{
		vis: 300 * time.Millisecond, longVis: 60 * time.Second, poll: 50 * time.Millisecond,
		slack: time.Second, early: 20 * time.Millisecond, skew: 2 * time.Second,
		longWait: 10 * time.Second, empty: 1500 * time.Millisecond, deadline: 20 * time.Second,
		bulk: 300, senders: 8, perSend: 250,
	}
	slowTiming = timing{
		vis: 2 * time.Second, longVis: 120 * time.Second, poll: time.Second,
		slack: 4 * time.Second, early: 1100 * time.Millisecond, skew: 2 * time.Minute,
		longWait: 20 * time.Second, empty: 5 * time.Second, deadline: 2 * time.Minute,
		bulk: 40, senders: 8, perSend: 6,
	}
)

// suite is the state shared by the tests of one RunConformanceTests call.
type suite struct {
	h  Harness
	tm timing
}

// RunConformanceTests runs the conformance suite against the driver that h
// makes. The tests run as parallel subtests of one subtest named
// "Conformance", which returns when all of them are done.
func RunConformanceTests(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("drivertest: Harness.New is nil")
	}
	s := &suite{h: h, tm: fastTiming}
	if h.Slow {
		s.tm = slowTiming
	}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Limits", s.testLimits},
		{"RoundTrip", s.testRoundTrip},
		{"TooLarge", s.testTooLarge},
		{"BatchLimits", s.testBatchLimits},
		{"EveryMessageOnce", s.testEveryMessageOnce},
		{"DeleteIsFinal", s.testDeleteIsFinal},
		{"DeleteBatchMixed", s.testDeleteBatchMixed},
		{"BadReceipt", s.testBadReceipt},
		{"StaleAfterRedelivery", s.testStaleAfterRedelivery},
		{"ChangeVisibilityDelays", s.testChangeVisibilityDelays},
		{"ChangeVisibilityShortens", s.testChangeVisibilityShortens},
		{"EmptyWait", s.testEmptyWait},
		{"WaitEndsOnSend", s.testWaitEndsOnSend},
		{"CancelledContext", s.testCancelledContext},
		{"CancelDuringWait", s.testCancelDuringWait},
		{"Closed", s.testClosed},
		{"Concurrent", s.testConcurrent},
		{"IsRetryable", s.testIsRetryable},
		{"Throttled", s.testThrottled},
	}
	t.Run("Conformance", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t)
			})
		}
	})
}

// newQueue makes a driver with h.New and closes it when the test ends.
func (s *suite) newQueue(t *testing.T, visibility time.Duration) driver.Queue {
	t.Helper()
	q := s.h.New(t, visibility)
	require.NotNil(t, q, "Harness.New returned a nil driver")
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("Close at the end of the test: want nil, got %v", err)
		}
	})
	return q
}

// ctx returns a context that ends with the test or after the test deadline.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*s.tm.deadline)
	t.Cleanup(cancel)
	return ctx
}

func batchBytes(l driver.Limits) int {
	if l.MaxBatchBytes > 0 {
		return l.MaxBatchBytes
	}
	return l.MaxBatch * l.MaxBody
}

// send sends bodies in as few batches as the limits allow.
func send(t *testing.T, ctx context.Context, q driver.Queue, bodies ...[]byte) {
	t.Helper()
	l := q.Limits()
	for len(bodies) > 0 {
		n, size := 0, 0
		for n < len(bodies) && n < l.MaxBatch && (n == 0 || size+len(bodies[n]) <= batchBytes(l)) {
			size += len(bodies[n])
			n++
		}
		require.NoError(t, q.SendBatch(ctx, bodies[:n]), "SendBatch of %d bodies (%d bytes)", n, size)
		bodies = bodies[n:]
	}
}

// checkMessage checks the fields of a message just received at about now.
func (s *suite) checkMessage(t *testing.T, m *driver.Message, before, after time.Time) {
	t.Helper()
	require.NotNil(t, m, "ReceiveBatch returned a nil *Message")
	assert.NotEmpty(t, m.ID, "message ID")
	assert.NotEmpty(t, m.Receipt, "message receipt handle")
	assert.GreaterOrEqual(t, m.DequeueCount, 1, "DequeueCount of message %s", m.ID)
	if !m.EnqueueTime.IsZero() {
		assert.False(t, m.EnqueueTime.After(after.Add(s.tm.skew)),
			"EnqueueTime %v of message %s is after the receive returned (%v) beyond the tolerated skew %v", m.EnqueueTime, m.ID, after, s.tm.skew)
	}
	if !m.NextVisible.IsZero() {
		assert.False(t, m.NextVisible.Before(before.Add(-s.tm.skew)),
			"NextVisible %v of message %s is before the receive began (%v)", m.NextVisible, m.ID, before)
	}
}

// receive calls ReceiveBatch once and checks what came.
func (s *suite) receive(t *testing.T, ctx context.Context, q driver.Queue, max int, wait time.Duration) []*driver.Message {
	t.Helper()
	before := time.Now()
	msgs, err := q.ReceiveBatch(ctx, max, wait)
	require.NoError(t, err, "ReceiveBatch(max %d, wait %v)", max, wait)
	after := time.Now()
	require.LessOrEqual(t, len(msgs), max, "ReceiveBatch(max %d) returned more messages than max", max)
	for _, m := range msgs {
		s.checkMessage(t, m, before, after)
	}
	return msgs
}

// receiveN receives until n messages came or the deadline passed, and fails
// if fewer came.
func (s *suite) receiveN(t *testing.T, ctx context.Context, q driver.Queue, n int) []*driver.Message {
	t.Helper()
	var got []*driver.Message
	end := time.Now().Add(s.tm.deadline)
	for len(got) < n && time.Now().Before(end) {
		got = append(got, s.receive(t, ctx, q, min(q.Limits().MaxBatch, n-len(got)), s.tm.poll)...)
	}
	require.Len(t, got, n, "messages received within %v", s.tm.deadline)
	return got
}

// receiveOne receives one message, waiting up to within for it, and returns
// it with the time the successful ReceiveBatch call began (the message
// became invisible no earlier). It returns nil if none came.
func (s *suite) receiveOne(t *testing.T, ctx context.Context, q driver.Queue, within time.Duration) (*driver.Message, time.Time) {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		before := time.Now()
		if msgs := s.receive(t, ctx, q, 1, s.tm.poll); len(msgs) > 0 {
			return msgs[0], before
		}
	}
	return nil, time.Time{}
}

// expectNone polls for d and fails if any message comes.
func (s *suite) expectNone(t *testing.T, ctx context.Context, q driver.Queue, d time.Duration, why string) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		msgs := s.receive(t, ctx, q, q.Limits().MaxBatch, min(s.tm.poll, time.Until(end).Round(time.Millisecond)))
		for _, m := range msgs {
			t.Errorf("%s: want no message, got %q (id %s, dequeue count %d)", why, m.Body, m.ID, m.DequeueCount)
		}
	}
}

// deleteAll deletes the messages in batches and fails on any error.
func deleteAll(t *testing.T, ctx context.Context, q driver.Queue, msgs []*driver.Message) {
	t.Helper()
	max := q.Limits().MaxBatch
	for len(msgs) > 0 {
		n := min(max, len(msgs))
		receipts := make([]string, n)
		for i, m := range msgs[:n] {
			receipts[i] = m.Receipt
		}
		require.NoError(t, q.DeleteBatch(ctx, receipts), "DeleteBatch of %d fresh receipts", n)
		msgs = msgs[n:]
	}
}

// requireBatchErr checks that err is a *driver.BatchError with n entries and
// returns it.
func requireBatchErr(t *testing.T, err error, n int) *driver.BatchError {
	t.Helper()
	var be *driver.BatchError
	require.ErrorAs(t, err, &be, "want a *driver.BatchError, got %v", err)
	require.Len(t, be.Errs, n, "BatchError.Errs must have one entry per batch entry")
	return be
}

func randomBody(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func (s *suite) testLimits(t *testing.T) {
	q := s.newQueue(t, s.tm.vis)
	l := q.Limits()
	assert.GreaterOrEqual(t, l.MaxBatch, 1, "MaxBatch")
	assert.GreaterOrEqual(t, l.MaxBody, 1, "MaxBody")
	assert.GreaterOrEqual(t, l.MaxBatchBytes, 0, "MaxBatchBytes")
	if l.MaxBatchBytes > 0 {
		assert.GreaterOrEqual(t, l.MaxBatchBytes, l.MaxBody, "MaxBatchBytes must admit one body of MaxBody")
	}
	assert.GreaterOrEqual(t, l.MaxWait, time.Duration(0), "MaxWait")
	assert.Positive(t, l.MinVisibility, "MinVisibility")
	assert.LessOrEqual(t, l.MinVisibility, l.MaxVisibility, "MinVisibility <= MaxVisibility")
	assert.GreaterOrEqual(t, l.Visibility, s.tm.vis, "Visibility may be rounded up from the requested %v, not down", s.tm.vis)
	assert.LessOrEqual(t, l.Visibility, l.MaxVisibility, "Visibility <= MaxVisibility")
	assert.Equal(t, l, q.Limits(), "Limits must be fixed for the life of the driver")
}

func (s *suite) testRoundTrip(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()
	binary := make([]byte, min(512, l.MaxBody))
	for i := range binary {
		binary[i] = byte(i)
	}
	want := map[string][]byte{
		"binary": bytes.Clone(binary),
		"empty":  {},
		"text":   []byte("héllo, wörld <&> #1#"),
		"max":    randomBody(1, l.MaxBody),
	}
	sent := [][]byte{binary, {}, bytes.Clone(want["text"])}
	send(t, ctx, q, sent...)
	// The driver must not keep the caller's slices.
	for i := range binary {
		binary[i] = 0xff
	}
	send(t, ctx, q, bytes.Clone(want["max"]))

	got := s.receiveN(t, ctx, q, len(want))
	seen := map[string]bool{}
	for _, m := range got {
		name := ""
		for k, w := range want {
			if bytes.Equal(m.Body, w) {
				name = k
			}
		}
		if name == "" {
			t.Errorf("received a body that was never sent (%d bytes, first bytes %q)", len(m.Body), m.Body[:min(len(m.Body), 16)])
			continue
		}
		assert.False(t, seen[name], "body %q received twice", name)
		seen[name] = true
		assert.Equal(t, 1, m.DequeueCount, "DequeueCount of the first delivery of body %q", name)
	}
	assert.Len(t, seen, len(want), "distinct bodies received")
	deleteAll(t, ctx, q, got)
}

func (s *suite) testTooLarge(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()

	check := func(what string, err error) {
		t.Helper()
		require.Error(t, err, "%s: want ErrTooLarge, got nil", what)
		assert.ErrorIs(t, err, driver.ErrTooLarge, "%s", what)
		assert.False(t, q.IsRetryable(err), "%s: IsRetryable(%v) must be false", what, err)
	}
	check("body of MaxBody+1", q.SendBatch(ctx, [][]byte{make([]byte, l.MaxBody+1)}))
	check("batch with one body of MaxBody+1", q.SendBatch(ctx, [][]byte{[]byte("ok"), make([]byte, l.MaxBody+1)}))
	over := make([][]byte, l.MaxBatch+1)
	for i := range over {
		over[i] = []byte("x")
	}
	check("batch of MaxBatch+1 bodies", q.SendBatch(ctx, over))
	if l.MaxBatchBytes > 0 && l.MaxBatchBytes < l.MaxBatch*l.MaxBody {
		var bodies [][]byte
		for left := l.MaxBatchBytes + 1; left > 0; left -= l.MaxBody {
			bodies = append(bodies, make([]byte, min(left, l.MaxBody)))
		}
		if len(bodies) <= l.MaxBatch {
			check("batch of MaxBatchBytes+1 bytes", q.SendBatch(ctx, bodies))
		}
	}
	receipts := make([]string, l.MaxBatch+1)
	for i := range receipts {
		receipts[i] = fmt.Sprintf("receipt-%d", i)
	}
	check("DeleteBatch of MaxBatch+1 receipts", q.DeleteBatch(ctx, receipts))
	// A receive asking for more than MaxBatch may fail or be cut to MaxBatch.
	if msgs, err := q.ReceiveBatch(ctx, l.MaxBatch+1, 0); err == nil {
		assert.LessOrEqual(t, len(msgs), l.MaxBatch, "ReceiveBatch(MaxBatch+1)")
	}
	s.expectNone(t, ctx, q, s.tm.poll+s.tm.slack/2, "nothing may be sent by a batch rejected as too large")
}

func (s *suite) testBatchLimits(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()
	want := map[string]bool{}
	bodies := make([][]byte, l.MaxBatch)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, "batch-%d", i)
		want[string(bodies[i])] = true
	}
	require.NoError(t, q.SendBatch(ctx, bodies), "SendBatch of exactly MaxBatch (%d) bodies", l.MaxBatch)

	var got []*driver.Message
	end := time.Now().Add(s.tm.deadline)
	for _, max := range []int{1, 2, l.MaxBatch} {
		for len(got) < l.MaxBatch && time.Now().Before(end) {
			msgs := s.receive(t, ctx, q, min(max, l.MaxBatch), s.tm.poll)
			got = append(got, msgs...)
			if len(msgs) > 0 && max < l.MaxBatch {
				break
			}
		}
	}
	require.Len(t, got, l.MaxBatch, "messages received within %v", s.tm.deadline)
	for _, m := range got {
		assert.True(t, want[string(m.Body)], "body %q received twice or never sent", m.Body)
		delete(want, string(m.Body))
	}
	receipts := make([]string, len(got))
	for i, m := range got {
		receipts[i] = m.Receipt
	}
	require.NoError(t, q.DeleteBatch(ctx, receipts), "DeleteBatch of exactly MaxBatch receipts")
}

func (s *suite) testEveryMessageOnce(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	n := s.tm.bulk
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, "message %d of %d", i, n)
	}
	send(t, ctx, q, bodies...)
	got := s.receiveN(t, ctx, q, n)

	ids, receipts, seen := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, m := range got {
		assert.False(t, seen[string(m.Body)], "body %q received twice", m.Body)
		seen[string(m.Body)] = true
		assert.False(t, ids[m.ID], "message id %s given to two messages", m.ID)
		ids[m.ID] = true
		assert.False(t, receipts[m.Receipt], "receipt %s given to two deliveries", m.Receipt)
		receipts[m.Receipt] = true
		assert.Equal(t, 1, m.DequeueCount, "DequeueCount of %q", m.Body)
	}
	for _, b := range bodies {
		assert.True(t, seen[string(b)], "body %q sent but never received", b)
	}
	s.expectNone(t, ctx, q, s.tm.poll+s.tm.slack/2, "every message is in flight")
	deleteAll(t, ctx, q, got)
}

func (s *suite) testDeleteIsFinal(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.vis)
	vis := q.Limits().Visibility
	send(t, ctx, q, []byte("deleted"), []byte("kept"))
	got := s.receiveN(t, ctx, q, 2)
	t0 := time.Now()
	if string(got[0].Body) != "deleted" {
		got[0], got[1] = got[1], got[0]
	}
	deleteAll(t, ctx, q, got[:1])

	// "kept" comes back after its visibility timeout; "deleted" never does.
	var back *driver.Message
	end := t0.Add(vis + 2*s.tm.slack)
	for time.Now().Before(end) {
		for _, m := range s.receive(t, ctx, q, q.Limits().MaxBatch, s.tm.poll) {
			switch string(m.Body) {
			case "deleted":
				t.Errorf("deleted message came back after %v (dequeue count %d)", time.Since(t0), m.DequeueCount)
			case "kept":
				assert.Nil(t, back, "message redelivered although deleted after its first redelivery")
				assert.Equal(t, 2, m.DequeueCount, "DequeueCount of the redelivery")
				back = m
				deleteAll(t, ctx, q, []*driver.Message{m})
			}
		}
	}
	require.NotNil(t, back, "the message not deleted must come back within visibility %v + %v", vis, 2*s.tm.slack)
	if !s.h.NoStaleReceipts {
		err := q.DeleteBatch(ctx, []string{got[0].Receipt})
		be := requireBatchErr(t, err, 1)
		assert.ErrorIs(t, be.Errs[0], driver.ErrStaleReceipt, "deleting an already deleted message")
	}
}

func (s *suite) testDeleteBatchMixed(t *testing.T) {
	if s.h.NoStaleReceipts {
		t.Skip("driver cannot tell stale receipts (Harness.NoStaleReceipts)")
	}
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	send(t, ctx, q, []byte("a"), []byte("b"))
	got := s.receiveN(t, ctx, q, 2)
	deleteAll(t, ctx, q, got[:1])

	err := q.DeleteBatch(ctx, []string{got[0].Receipt, got[1].Receipt})
	be := requireBatchErr(t, err, 2)
	assert.ErrorIs(t, be.Errs[0], driver.ErrStaleReceipt, "entry 0: receipt of a deleted message")
	assert.NoError(t, be.Errs[1], "entry 1: fresh receipt")
	assert.ErrorIs(t, err, driver.ErrStaleReceipt, "errors.Is on the *BatchError must find the entry's sentinel")
	assert.False(t, q.IsRetryable(err), "IsRetryable(%v) must be false", err)

	// Entry 1 was deleted: deleting it again is stale too.
	err = q.DeleteBatch(ctx, []string{got[1].Receipt})
	be = requireBatchErr(t, err, 1)
	assert.ErrorIs(t, be.Errs[0], driver.ErrStaleReceipt, "receipt of the message deleted by the mixed batch")
	s.expectNone(t, ctx, q, s.tm.poll, "both messages are deleted")
}

func (s *suite) testBadReceipt(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	send(t, ctx, q, []byte("good"))
	got := s.receiveN(t, ctx, q, 1)
	const bad = "not-a-receipt-handle"

	err := q.DeleteBatch(ctx, []string{bad, got[0].Receipt})
	be := requireBatchErr(t, err, 2)
	assert.ErrorIs(t, be.Errs[0], driver.ErrBadReceipt, "entry 0: malformed receipt %q", bad)
	assert.NoError(t, be.Errs[1], "entry 1: fresh receipt")
	assert.False(t, q.IsRetryable(be.Errs[0]), "IsRetryable(%v) must be false", be.Errs[0])
	if !s.h.NoVisibility {
		_, err := q.ChangeVisibility(ctx, bad, q.Limits().Visibility)
		assert.ErrorIs(t, err, driver.ErrBadReceipt, "ChangeVisibility with malformed receipt %q", bad)
	}

	// A receipt of another queue does not designate a message here.
	other := s.newQueue(t, s.tm.longVis)
	send(t, ctx, other, []byte("other"))
	foreign := s.receiveN(t, ctx, other, 1)
	send(t, ctx, q, []byte("mine"))
	mine := s.receiveN(t, ctx, q, 1)
	err = q.DeleteBatch(ctx, []string{foreign[0].Receipt})
	be = requireBatchErr(t, err, 1)
	if !errors.Is(be.Errs[0], driver.ErrBadReceipt) && !errors.Is(be.Errs[0], driver.ErrStaleReceipt) {
		t.Errorf("receipt of another queue: want ErrBadReceipt or ErrStaleReceipt, got %v", be.Errs[0])
	}
	deleteAll(t, ctx, other, foreign)
	deleteAll(t, ctx, q, mine)
}

func (s *suite) testStaleAfterRedelivery(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.vis)
	vis := q.Limits().Visibility
	body := []byte("redelivered")
	send(t, ctx, q, bytes.Clone(body))
	first, t0 := s.receiveOne(t, ctx, q, s.tm.deadline)
	require.NotNil(t, first, "the message sent, within %v", s.tm.deadline)
	// Changing a received body must not change what is delivered next.
	for i := range first.Body {
		first.Body[i] = 'X'
	}

	second, _ := s.receiveOne(t, ctx, q, vis+2*s.tm.slack)
	require.NotNil(t, second, "the message must be delivered again within visibility %v + %v", vis, 2*s.tm.slack)
	assert.GreaterOrEqual(t, time.Since(t0), vis-s.tm.early, "a message must stay invisible until its visibility timeout ends")
	assert.Equal(t, first.ID, second.ID, "every delivery of one message carries the same ID")
	assert.Equal(t, 2, second.DequeueCount, "DequeueCount of the second delivery")
	assert.NotEqual(t, first.Receipt, second.Receipt, "each delivery has a new receipt handle")
	assert.Equal(t, body, second.Body, "body of the second delivery")

	if !s.h.NoStaleReceipts {
		err := q.DeleteBatch(ctx, []string{first.Receipt})
		be := requireBatchErr(t, err, 1)
		assert.ErrorIs(t, be.Errs[0], driver.ErrStaleReceipt, "delete with the receipt of the first delivery")
		if !s.h.NoVisibility {
			_, err := q.ChangeVisibility(ctx, first.Receipt, vis)
			assert.ErrorIs(t, err, driver.ErrStaleReceipt, "ChangeVisibility with the receipt of the first delivery")
		}
	}
	receipt := second.Receipt
	if !s.h.NoVisibility {
		r, err := q.ChangeVisibility(ctx, receipt, max(vis, q.Limits().MinVisibility))
		require.NoError(t, err, "ChangeVisibility with the receipt of the second delivery")
		require.NotEmpty(t, r, "new receipt from ChangeVisibility")
		receipt = r
	}
	require.NoError(t, q.DeleteBatch(ctx, []string{receipt}), "delete with the current receipt")
}

func (s *suite) testChangeVisibilityDelays(t *testing.T) {
	if s.h.NoVisibility {
		t.Skip("driver does not support ChangeVisibility (Harness.NoVisibility)")
	}
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.vis)
	l := q.Limits()
	send(t, ctx, q, []byte("delayed"))
	m := s.receiveN(t, ctx, q, 1)[0]

	// MaxVisibility must be accepted; the message then stays away until the
	// next change.
	long := l.MaxVisibility
	r2, err := q.ChangeVisibility(ctx, m.Receipt, long)
	require.NoError(t, err, "ChangeVisibility(MaxVisibility %v) with a fresh receipt", long)
	require.NotEmpty(t, r2, "new receipt from ChangeVisibility")
	s.expectNone(t, ctx, q, l.Visibility+s.tm.slack, "visibility was extended")

	short := l.MinVisibility
	t2 := time.Now()
	r3, err := q.ChangeVisibility(ctx, r2, short)
	require.NoError(t, err, "ChangeVisibility(%v) with the receipt returned by the previous change", short)
	require.NotEmpty(t, r3, "new receipt from ChangeVisibility")
	back, _ := s.receiveOne(t, ctx, q, short+2*s.tm.slack)
	require.NotNil(t, back, "after ChangeVisibility(%v) the message must come back within %v", short, short+2*s.tm.slack)
	assert.GreaterOrEqual(t, time.Since(t2), short-s.tm.early, "the message came back before its new timeout")
	assert.Equal(t, m.ID, back.ID, "same message")
	assert.Equal(t, 2, back.DequeueCount, "DequeueCount after one redelivery")
	require.NoError(t, q.DeleteBatch(ctx, []string{back.Receipt}), "delete with the newest receipt")
}

func (s *suite) testChangeVisibilityShortens(t *testing.T) {
	if s.h.NoVisibility {
		t.Skip("driver does not support ChangeVisibility (Harness.NoVisibility)")
	}
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()
	send(t, ctx, q, []byte("sooner"))
	m := s.receiveN(t, ctx, q, 1)[0]
	short := l.MinVisibility
	require.Less(t, short+2*s.tm.slack, l.Visibility, "test needs MinVisibility well below the queue's visibility")
	t0 := time.Now()
	r, err := q.ChangeVisibility(ctx, m.Receipt, short)
	require.NoError(t, err, "ChangeVisibility(%v)", short)
	back, _ := s.receiveOne(t, ctx, q, short+2*s.tm.slack)
	assert.GreaterOrEqual(t, time.Since(t0), short-s.tm.early, "the message came back before its new timeout")
	require.NotNil(t, back, "after ChangeVisibility(%v) on a queue with visibility %v the message must come back within %v", short, l.Visibility, short+2*s.tm.slack)
	assert.Equal(t, m.ID, back.ID, "same message")
	assert.Equal(t, 2, back.DequeueCount, "DequeueCount after one redelivery")
	if !s.h.NoStaleReceipts {
		_, err := q.ChangeVisibility(ctx, r, l.Visibility)
		assert.ErrorIs(t, err, driver.ErrStaleReceipt, "receipt returned by ChangeVisibility after the message was delivered again")
	}
	require.NoError(t, q.DeleteBatch(ctx, []string{back.Receipt}), "delete with the newest receipt")
}

func (s *suite) testEmptyWait(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()
	start := time.Now()
	msgs, err := q.ReceiveBatch(ctx, l.MaxBatch, 0)
	require.NoError(t, err, "ReceiveBatch on an empty queue with no wait")
	assert.Empty(t, msgs, "messages from an empty queue")
	assert.Less(t, time.Since(start), s.tm.slack, "ReceiveBatch with no wait must not wait")

	w := min(l.MaxWait, s.tm.empty)
	if w == 0 {
		t.Skip("driver does not wait (MaxWait 0)")
	}
	start = time.Now()
	msgs, err = q.ReceiveBatch(ctx, l.MaxBatch, w)
	elapsed := time.Since(start)
	require.NoError(t, err, "ReceiveBatch on an empty queue with wait %v", w)
	assert.Empty(t, msgs, "messages from an empty queue")
	assert.LessOrEqual(t, elapsed, w+s.tm.slack, "ReceiveBatch(wait %v) on an empty queue took too long", w)
	t.Logf("empty receive with wait %v returned after %v", w, elapsed)
}

func (s *suite) testWaitEndsOnSend(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()
	w := min(l.MaxWait, s.tm.longWait)
	if w < 2*s.tm.slack {
		t.Skipf("MaxWait %v too short to tell a wait cut short from a full one", l.MaxWait)
	}
	delay := s.tm.slack / 2
	sent := make(chan error, 1)
	start := time.Now()
	go func() {
		time.Sleep(delay)
		sent <- q.SendBatch(ctx, [][]byte{[]byte("wake up")})
	}()
	var got []*driver.Message
	for len(got) == 0 && time.Since(start) < w {
		// A driver may return early with nothing; the test then waits again
		// for what is left of w.
		got = s.receive(t, ctx, q, l.MaxBatch, w-time.Since(start))
	}
	elapsed := time.Since(start)
	require.NoError(t, <-sent, "SendBatch during the wait")
	require.Len(t, got, 1, "the message sent during the wait")
	assert.Less(t, elapsed, delay+s.tm.slack, "a message sent %v into a %v wait must end the wait promptly", delay, w)
	deleteAll(t, ctx, q, got)
}

func (s *suite) testCancelledContext(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()
	send(t, ctx, q, []byte("held"))
	held := s.receiveN(t, ctx, q, 1)[0]

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"cancelled", cancelled, context.Canceled}, {"deadline exceeded", expired, context.DeadlineExceeded}} {
		calls := []struct {
			name string
			call func() error
		}{
			{"SendBatch", func() error { return q.SendBatch(c.ctx, [][]byte{[]byte("never")}) }},
			{"ReceiveBatch(wait 0)", func() error { _, err := q.ReceiveBatch(c.ctx, 1, 0); return err }},
			{"ReceiveBatch(wait MaxWait)", func() error { _, err := q.ReceiveBatch(c.ctx, 1, l.MaxWait); return err }},
			{"DeleteBatch", func() error { return q.DeleteBatch(c.ctx, []string{held.Receipt}) }},
		}
		if !s.h.NoVisibility {
			calls = append(calls, struct {
				name string
				call func() error
			}{"ChangeVisibility", func() error { _, err := q.ChangeVisibility(c.ctx, held.Receipt, l.Visibility); return err }})
		}
		for _, call := range calls {
			start := time.Now()
			err := call.call()
			assert.ErrorIs(t, err, c.want, "%s with a %s context", call.name, c.name)
			assert.Less(t, time.Since(start), s.tm.slack, "%s with a %s context must return promptly", call.name, c.name)
			if err != nil {
				assert.False(t, q.IsRetryable(err), "IsRetryable(%v) must be false for a context error", err)
			}
		}
	}
}

func (s *suite) testCancelDuringWait(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()
	if l.MaxWait < 2*s.tm.slack {
		t.Skipf("MaxWait %v too short to tell a cancelled wait from a full one", l.MaxWait)
	}
	wctx, cancel := context.WithCancel(ctx)
	delay := s.tm.slack / 2
	timer := time.AfterFunc(delay, cancel)
	defer timer.Stop()
	start := time.Now()
	var err error
	for err == nil && time.Since(start) < l.MaxWait {
		var msgs []*driver.Message
		msgs, err = q.ReceiveBatch(wctx, l.MaxBatch, l.MaxWait)
		require.Empty(t, msgs, "messages from an empty queue")
	}
	elapsed := time.Since(start)
	assert.ErrorIs(t, err, context.Canceled, "ReceiveBatch whose ctx is cancelled during the wait")
	assert.Less(t, elapsed, delay+s.tm.slack, "ReceiveBatch(wait %v) must return promptly when its ctx is cancelled after %v", l.MaxWait, delay)
}

func (s *suite) testClosed(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()
	send(t, ctx, q, []byte("held"))
	held := s.receiveN(t, ctx, q, 1)[0]
	require.NoError(t, q.Close(), "first Close")
	require.NoError(t, q.Close(), "second Close must be a no-op")
	assert.Equal(t, l, q.Limits(), "Limits after Close")

	check := func(name string, err error) {
		t.Helper()
		assert.ErrorIs(t, err, driver.ErrClosed, "%s after Close", name)
		if err != nil {
			assert.False(t, q.IsRetryable(err), "IsRetryable(%v) must be false", err)
		}
	}
	check("SendBatch", q.SendBatch(ctx, [][]byte{[]byte("late")}))
	_, err := q.ReceiveBatch(ctx, 1, 0)
	check("ReceiveBatch", err)
	check("DeleteBatch", q.DeleteBatch(ctx, []string{held.Receipt}))
	if !s.h.NoVisibility {
		_, err = q.ChangeVisibility(ctx, held.Receipt, l.Visibility)
		check("ChangeVisibility", err)
	}
}

func (s *suite) testConcurrent(t *testing.T) {
	ctx := s.ctx(t)
	q := s.newQueue(t, s.tm.longVis)
	l := q.Limits()
	const receivers, deleters = 4, 2
	total := s.tm.senders * s.tm.perSend

	type record struct {
		dequeues []int // DequeueCount of each delivery
		deleted  int   // successful deletes
	}
	var (
		mu      sync.Mutex
		records = map[string]*record{}
		gone    int // messages deleted at least once
		unknown []string
		failure error
	)
	done := make(chan struct{})
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	receipts := make(chan *driver.Message, 4*l.MaxBatch)
	var wg sync.WaitGroup

	for g := range s.tm.senders {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for i := 0; i < s.tm.perSend; {
				n := min(1+r.IntN(l.MaxBatch), s.tm.perSend-i)
				bodies := make([][]byte, n)
				for k := range bodies {
					bodies[k] = fmt.Appendf(nil, "sender %d message %d", g, i+k)
				}
				if err := q.SendBatch(ctx, bodies); err != nil {
					mu.Lock()
					failure = fmt.Errorf("sender %d: SendBatch: %w", g, err)
					mu.Unlock()
					stop()
					return
				}
				i += n
			}
		})
	}
	var rwg sync.WaitGroup
	for g := range receivers {
		rwg.Go(func() {
			for rctx.Err() == nil {
				msgs, err := q.ReceiveBatch(rctx, l.MaxBatch, s.tm.poll)
				if err != nil {
					if rctx.Err() == nil {
						mu.Lock()
						failure = fmt.Errorf("receiver %d: ReceiveBatch: %w", g, err)
						mu.Unlock()
						stop()
					}
					return
				}
				mu.Lock()
				for _, m := range msgs {
					rec := records[string(m.Body)]
					if rec == nil {
						rec = &record{}
						records[string(m.Body)] = rec
					}
					rec.dequeues = append(rec.dequeues, m.DequeueCount)
				}
				mu.Unlock()
				for _, m := range msgs {
					select {
					case receipts <- m:
					case <-rctx.Done():
						return
					}
				}
			}
		})
	}
	for g := range deleters {
		wg.Go(func() {
			var batch []*driver.Message
			flush := func() {
				rs := make([]string, len(batch))
				for i, m := range batch {
					rs[i] = m.Receipt
				}
				err := q.DeleteBatch(ctx, rs)
				var be *driver.BatchError
				if err != nil && !errors.As(err, &be) {
					mu.Lock()
					failure = fmt.Errorf("deleter %d: DeleteBatch: %w", g, err)
					mu.Unlock()
					stop()
				}
				mu.Lock()
				for i, m := range batch {
					var e error
					if be != nil {
						e = be.Errs[i]
					}
					switch {
					case err == nil || be != nil && e == nil:
						rec := records[string(m.Body)]
						rec.deleted++
						if rec.deleted == 1 {
							gone++
							if gone == total {
								close(done)
							}
						}
					case errors.Is(e, driver.ErrStaleReceipt):
						// The message was delivered again; that delivery deletes it.
					case e != nil:
						unknown = append(unknown, fmt.Sprintf("%q: %v", m.Body, e))
					}
				}
				mu.Unlock()
				batch = batch[:0]
			}
			for {
				select {
				case m := <-receipts:
					batch = append(batch, m)
				more:
					for len(batch) < l.MaxBatch {
						select {
						case m := <-receipts:
							batch = append(batch, m)
						default:
							break more
						}
					}
					flush()
				case <-rctx.Done():
					return
				}
			}
		})
	}

	select {
	case <-done:
	case <-rctx.Done():
	case <-time.After(s.tm.deadline):
	}
	stop()
	rwg.Wait()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.NoError(t, failure)
	assert.Empty(t, unknown, "DeleteBatch entries that failed with neither nil nor ErrStaleReceipt")
	require.Equal(t, total, gone, "messages deleted within %v (received %d distinct)", s.tm.deadline, len(records))
	assert.Len(t, records, total, "distinct bodies received")
	redelivered := 0
	for body, rec := range records {
		if !s.h.NoStaleReceipts {
			assert.Equal(t, 1, rec.deleted, "successful deletes of %q: exactly one delivery's receipt may delete it", body)
		}
		counts := map[int]bool{}
		top := 0
		for _, c := range rec.dequeues {
			assert.False(t, counts[c], "%q delivered twice with DequeueCount %d", body, c)
			counts[c] = true
			top = max(top, c)
		}
		assert.Equal(t, top, len(rec.dequeues), "%q: deliveries seen %v must count 1..n", body, rec.dequeues)
		redelivered += len(rec.dequeues) - 1
	}
	t.Logf("%d messages from %d senders, %d receivers, %d deleters: %d redeliveries", total, s.tm.senders, receivers, deleters, redelivered)
	s.expectNone(t, ctx, q, s.tm.poll, "every message was deleted")
}

func (s *suite) testIsRetryable(t *testing.T) {
	q := s.newQueue(t, s.tm.longVis)
	assert.False(t, q.IsRetryable(nil), "IsRetryable(nil)")
	for _, err := range []error{driver.ErrClosed, context.Canceled, context.DeadlineExceeded, driver.ErrStaleReceipt, driver.ErrBadReceipt, driver.ErrTooLarge} {
		assert.False(t, q.IsRetryable(err), "IsRetryable(%v)", err)
		assert.False(t, q.IsRetryable(fmt.Errorf("wrapped: %w", err)), "IsRetryable(wrapped %v)", err)
	}
}

// testThrottled: a throttling answer wraps driver.ErrThrottled and is
// retryable, and the same call succeeds once the rate allows it.
func (s *suite) testThrottled(t *testing.T) {
	if s.h.NewThrottled == nil {
		t.Skip("Harness.NewThrottled is nil: the driver's service cannot be made to throttle")
	}
	ctx := s.ctx(t)
	q := s.h.NewThrottled(t)
	require.NotNil(t, q, "Harness.NewThrottled returned a nil driver")
	t.Cleanup(func() { assert.NoError(t, q.Close(), "Close at the end of the test") })
	var err error
	sent := 0
	for i := 0; i < 100 && err == nil; i++ {
		if err = q.SendBatch(ctx, [][]byte{[]byte(fmt.Sprint("burst ", i))}); err == nil {
			sent++
		}
	}
	require.Error(t, err, "100 sends in a burst to a queue throttled at a few per second: want a throttling error")
	assert.ErrorIs(t, err, driver.ErrThrottled, "the error of a throttled send")
	assert.True(t, q.IsRetryable(err), "IsRetryable(%v): throttling is transient", err)
	deadline := time.Now().Add(s.tm.deadline)
	for {
		err = q.SendBatch(ctx, [][]byte{[]byte("after the burst")})
		if err == nil || !errors.Is(err, driver.ErrThrottled) || time.Now().After(deadline) {
			break
		}
		time.Sleep(s.tm.poll)
	}
	require.NoError(t, err, "a send after backing off (after %d sends in the burst)", sent)
}
