package mnsqueue

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"

	"github.com/inorder/inorder/ordered/driver"
)

// Limits of the service, as driver.Limits reports them.
const (
	// MaxBatch is the most entries of one batch send, receive or delete.
	MaxBatch = 16
	// MaxWait is the longest long-poll wait.
	MaxWait = 30 * time.Second
	// MinVisibility and MaxVisibility bound visibility timeouts.
	MinVisibility = time.Second
	MaxVisibility = 12 * time.Hour
	// MaxMessageSize is the largest message body the service stores, after
	// encoding, and the largest sum of bodies in one batch send.
	MaxMessageSize = 65536
)

// Queue is a driver.Queue over one MNS queue, through the Alibaba Cloud MNS Go
// SDK v1.0.11. It is safe for concurrent use. Create it with New.
type Queue struct {
	*session
	name      string
	queues    sync.Pool // of ali_mns.AliMNSQueue: one is used by one goroutine at a time
	limits    driver.Limits
	shortPoll bool // the queue's PollingWaitSeconds is known to be 0
	fifo      bool // a FIFO queue: every message is sent with its group
}

var _ driver.Queue = (*Queue)(nil)

// New returns a driver for the queue named queue at endpoint, for example
// "http://1234567890.mns.cn-hangzhou.aliyuncs.com". The SDK accepts only
// endpoints with exactly four dots; for a host given as an IPv4 address (a
// local emulator such as package mnstest) append "/.":
// "http://127.0.0.1:8080/.".
//
// Unless opts.Visibility is set, New reads the queue's attributes, so it
// fails with an error wrapping driver.ErrQueueNotFound when the queue does
// not exist. Every panic of the SDK's constructors (bad endpoint, empty key)
// is returned as an error.
func New(ctx context.Context, endpoint, queue string, cred Credentials, opts *Options) (*Queue, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	q, err := open(endpoint, queue, cred, o)
	if err != nil {
		return nil, err
	}
	vis, pollWait, maxSize := o.Visibility, -1, MaxMessageSize
	q.fifo = o.QueueType == QueueTypeFIFO
	if vis == 0 {
		attr, err := q.readAttributes(ctx)
		if err == nil && o.QueueType != "" && queueTypeOf(attr) != o.QueueType {
			err = fmt.Errorf("mnsqueue: queue %s is of type %q, Options.QueueType says %q: %w", q.name, queueTypeOf(attr), o.QueueType, ErrQueueType)
		}
		if err != nil {
			q.Close()
			return nil, err
		}
		q.fifo = queueTypeOf(attr) == QueueTypeFIFO
		vis = time.Duration(attr.VisibilityTimeout) * time.Second
		if vis == 0 {
			vis = 30 * time.Second
		}
		pollWait = int(attr.PollingWaitSeconds)
		if attr.MaxMessageSize > 0 {
			maxSize = int(min(attr.MaxMessageSize, MaxMessageSize))
		}
	}
	q.shortPoll = pollWait == 0
	batchBytes := q.batchBytes()
	q.limits = driver.Limits{
		MaxBatch:      MaxBatch,
		MaxBody:       min(decodedSize(maxSize, q.opts.Raw), batchBytes),
		MaxBatchBytes: batchBytes,
		MaxWait:       MaxWait,
		Visibility:    vis,
		MinVisibility: MinVisibility,
		MaxVisibility: MaxVisibility,
	}
	return q, nil
}

// open builds the SDK client and the Queue, without any request.
func open(endpoint, queue string, cred Credentials, o Options) (*Queue, error) {
	if err := checkName("queue", queue); err != nil {
		return nil, err
	}
	s, err := newSession(endpoint, cred, o, "queue", queue)
	if err != nil {
		return nil, err
	}
	q := &Queue{session: s, name: queue}
	q.queues.New = func() any {
		// The SDK's client-side QPS throttle counts per queue object, so with
		// a pool it throttles nothing useful; it is set out of reach and the
		// service's own limit (QpsLimitExceeded) is reported as retryable.
		return ali_mns.NewMNSQueue(q.name, q.client, math.MaxInt32)
	}
	return q, nil
}

// decodedSize is the largest body that encodes to at most n bytes, in raw
// mode or with base64.
func decodedSize(n int, raw bool) int {
	if raw {
		return n
	}
	return n / 4 * 3
}

// batchBytes is the largest sum of body sizes of a batch whose encoded bodies
// fit MaxMessageSize together. Base64 pads each body to a multiple of 3
// bytes, so 16 bodies may encode to 4/3 of their size plus 2 bytes each:
// 49120 bytes, not 49152, is what always fits.
func (q *Queue) batchBytes() int {
	if q.opts.Raw {
		return MaxMessageSize
	}
	return (MaxMessageSize/4*3 - 2*MaxBatch)
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Limits implements driver.Queue.
func (q *Queue) Limits() driver.Limits { return q.limits }

// result is the outcome of an SDK call.
type result[T any] struct {
	v   T
	err error
}

// queueCall runs fn with a queue object of the pool: the SDK's queue objects
// are not safe for concurrent use.
func queueCall[T any](q *Queue, fn func(ali_mns.AliMNSQueue) T) func() T {
	return func() T {
		aq := q.queues.Get().(ali_mns.AliMNSQueue)
		defer q.queues.Put(aq)
		return fn(aq)
	}
}

// SendBatch implements driver.Queue. Bodies are base64-encoded unless
// Options.Raw is set, and sent with Options.Priority. A request whose outcome
// is unknown (a network error or a timeout after it was written) may have
// enqueued the messages.
func (q *Queue) SendBatch(ctx context.Context, bodies [][]byte) error {
	const op = "SendBatch"
	if q.fifo {
		return fmt.Errorf("mnsqueue: %s: %s is a FIFO queue: every message needs its group (SendGroups): %w", op, q.name, driver.ErrInvalidGroup)
	}
	return q.send(ctx, op, bodies, nil)
}

// send sends bodies, with groups to a FIFO queue.
func (q *Queue) send(ctx context.Context, op string, bodies [][]byte, groups []string) error {
	if q.isClosed() {
		return fmt.Errorf("mnsqueue: %s: %w", op, driver.ErrClosed)
	}
	if len(bodies) == 0 {
		return fmt.Errorf("mnsqueue: %s: empty batch", op)
	}
	if len(bodies) > MaxBatch {
		return fmt.Errorf("mnsqueue: %s: %d bodies, at most %d: %w", op, len(bodies), MaxBatch, driver.ErrTooLarge)
	}
	reqs := make([]ali_mns.MessageSendRequest, len(bodies))
	total := 0
	for i, b := range bodies {
		if len(b) > q.limits.MaxBody {
			return fmt.Errorf("mnsqueue: %s: body %d has %d bytes, at most %d: %w", op, i, len(b), q.limits.MaxBody, driver.ErrTooLarge)
		}
		total += len(b)
		s, err := q.encodeBody(b)
		if err != nil {
			return fmt.Errorf("mnsqueue: %s: body %d: %w", op, i, err)
		}
		reqs[i] = ali_mns.MessageSendRequest{MessageBody: s, Priority: q.opts.Priority}
	}
	if total > q.limits.MaxBatchBytes {
		return fmt.Errorf("mnsqueue: %s: %d bytes in all, at most %d: %w", op, total, q.limits.MaxBatchBytes, driver.ErrTooLarge)
	}
	r, err := run(q.session, ctx, op, queueCall(q, func(aq ali_mns.AliMNSQueue) result[ali_mns.BatchMessageSendResponse] {
		if groups != nil {
			resp, err := q.sendFIFO(reqs, groups)
			return result[ali_mns.BatchMessageSendResponse]{resp, err}
		}
		resp, err := aq.BatchSendMessage(reqs...)
		return result[ali_mns.BatchMessageSendResponse]{resp, err}
	}), nil)
	if err != nil {
		return err
	}
	if r.err == nil {
		return nil
	}
	if sdkCode(r.err) != sdkBatchFailed {
		return q.sdkError(op, opOther, r.err)
	}
	entries := r.v.Messages
	if len(entries) != len(bodies) {
		// The answer cannot be matched to the batch: every entry's outcome is unknown.
		e := classify(op, opOther, r.err)
		e.retryable = true
		return e
	}
	be := &driver.BatchError{Errs: make([]error, len(bodies))}
	failed := false
	for i, m := range entries {
		if m.ErrorCode != "" {
			be.Errs[i] = entryError(op, opOther, m.ErrorCode, m.ErrorMessage)
			failed = true
		}
	}
	if !failed {
		return nil
	}
	return be
}

// validXMLText reports whether b is UTF-8 made only of characters that XML
// 1.0 allows, which is what survives the SDK's XML encoding unchanged.
func validXMLText(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		ok := r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF ||
			r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
		if !ok {
			return false
		}
		b = b[n:]
	}
	return true
}

// waitSeconds turns a wait into the SDK's waitseconds argument: none (the
// queue's PollingWaitSeconds applies) for a zero wait on a queue known to
// have PollingWaitSeconds 0, else whole seconds rounded up, 1..30. The SDK
// makes no request for a waitseconds of 0, so that is never passed.
func (q *Queue) waitSeconds(wait time.Duration) []int64 {
	if wait <= 0 && q.shortPoll {
		return nil
	}
	s := int64((min(wait, MaxWait) + time.Second - 1) / time.Second)
	return []int64{max(s, 1)}
}

// ReceiveBatch implements driver.Queue. The service counts the wait in whole
// seconds: a wait is rounded up to the next second (so at least 1s), except a
// zero wait on a queue whose PollingWaitSeconds is 0, which is a short poll.
// A wait that would outlast ctx's deadline is cut to the whole seconds left.
// A max above MaxBatch is cut to MaxBatch.
//
// When ctx ends during the wait, ReceiveBatch returns at once while the
// request goes on; messages it brings are then made visible again
// (ChangeVisibility to MinVisibility), best effort.
func (q *Queue) ReceiveBatch(ctx context.Context, maxN int, wait time.Duration) ([]*driver.Message, error) {
	const op = "ReceiveBatch"
	if maxN < 1 {
		return nil, fmt.Errorf("mnsqueue: %s: max %d must be positive", op, maxN)
	}
	maxN = min(maxN, MaxBatch)
	if dl, ok := ctx.Deadline(); ok {
		// Ask the service to answer before the deadline, so that the call
		// is not abandoned with messages in flight.
		if left := time.Until(dl).Truncate(time.Second); left < wait {
			wait = max(left, 0)
		}
	}
	ws := q.waitSeconds(wait)
	if q.fifo {
		return q.receiveFIFO(ctx, maxN, ws)
	}
	type recv = result[ali_mns.BatchMessageReceiveResponse]
	r, err := run(q.session, ctx, op, queueCall(q, func(aq ali_mns.AliMNSQueue) recv {
		// Buffered: the SDK sends its result before returning.
		respc := make(chan ali_mns.BatchMessageReceiveResponse, 1)
		errc := make(chan error, 1)
		aq.BatchReceiveMessage(respc, errc, int32(maxN), ws...)
		select {
		case resp := <-respc:
			return recv{v: resp}
		case err := <-errc:
			return recv{err: err}
		default:
			return recv{err: errors.New("the SDK returned neither messages nor an error")}
		}
	}), q.release)
	if err != nil {
		return nil, err
	}
	if r.err != nil {
		if sdkCode(r.err) == sdkMessageNotExist {
			return nil, nil // nothing came within the wait
		}
		return nil, q.sdkError(op, opOther, r.err)
	}
	msgs := make([]*driver.Message, len(r.v.Messages))
	for i := range r.v.Messages {
		msgs[i] = q.message(&r.v.Messages[i], "")
	}
	return msgs, nil
}

// message is the driver's form of m, received with group.
func (q *Queue) message(m *ali_mns.MessageReceiveResponse, group string) *driver.Message {
	dm := &driver.Message{
		Body:         q.decode(m),
		ID:           m.MessageId,
		Receipt:      m.ReceiptHandle,
		DequeueCount: int(m.DequeueCount),
		NextVisible:  time.UnixMilli(m.NextVisibleTime),
		Group:        group,
	}
	if m.EnqueueTime > 0 {
		dm.EnqueueTime = time.UnixMilli(m.EnqueueTime)
	}
	return dm
}

// decode returns the body of m. A topic notification (what a queue
// subscribed in the XML or JSON format receives) is unwrapped to the
// published body first, unless Options.KeepNotifications. Then, in base64
// mode, a body that starts with '#' is a raw envelope (base64 never does)
// and is taken as it is; any other is base64-decoded, or, when it is not
// base64 (sent by a text-only peer), returned as it came rather than lost:
// package ordered then sees it as untagged.
func (q *Queue) decode(m *ali_mns.MessageReceiveResponse) []byte {
	body := m.MessageBody
	if !q.opts.KeepNotifications {
		if inner, ok := unwrapNotification(body); ok {
			body = inner
		}
	}
	if q.opts.Raw || strings.HasPrefix(body, "#") {
		return []byte(body)
	}
	b, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		q.log.Warn("mnsqueue: body is not base64, delivered as received", "id", m.MessageId, "err", err)
		return []byte(body)
	}
	return b
}

// release makes the messages of an abandoned receive visible again soon,
// rather than after the queue's whole visibility timeout.
func (q *Queue) release(r result[ali_mns.BatchMessageReceiveResponse]) {
	if r.err != nil {
		return
	}
	for _, m := range r.v.Messages {
		q.releaseOne(m.MessageId, m.ReceiptHandle)
	}
}

// releaseOne makes the message of receipt, received by an abandoned
// receive, visible again soon.
func (q *Queue) releaseOne(id, receipt string) {
	if q.isClosed() {
		return
	}
	aq := q.queues.Get().(ali_mns.AliMNSQueue)
	defer q.queues.Put(aq)
	if _, err := aq.ChangeMessageVisibility(receipt, int64(MinVisibility/time.Second)); err != nil {
		q.log.Warn("mnsqueue: could not release a message of an abandoned receive", "id", id, "err", err)
	}
}

// DeleteBatch implements driver.Queue.
func (q *Queue) DeleteBatch(ctx context.Context, receipts []string) error {
	const op = "DeleteBatch"
	if q.isClosed() {
		return fmt.Errorf("mnsqueue: %s: %w", op, driver.ErrClosed)
	}
	if len(receipts) == 0 {
		return fmt.Errorf("mnsqueue: %s: empty batch", op)
	}
	if len(receipts) > MaxBatch {
		return fmt.Errorf("mnsqueue: %s: %d receipts, at most %d: %w", op, len(receipts), MaxBatch, driver.ErrTooLarge)
	}
	handles := make([]string, len(receipts))
	copy(handles, receipts)
	r, err := run(q.session, ctx, op, queueCall(q, func(aq ali_mns.AliMNSQueue) result[ali_mns.BatchMessageDeleteErrorResponse] {
		resp, err := aq.BatchDeleteMessage(handles...)
		return result[ali_mns.BatchMessageDeleteErrorResponse]{resp, err}
	}), nil)
	if err != nil {
		return err
	}
	if r.err == nil {
		return nil
	}
	be := &driver.BatchError{Errs: make([]error, len(handles))}
	if sdkCode(r.err) != sdkBatchFailed {
		e := q.sdkError(op, opReceipt, r.err)
		var me *Error
		if !errors.As(e, &me) || me.sentinel != driver.ErrStaleReceipt && me.sentinel != driver.ErrBadReceipt {
			return e
		}
		// One answer about receipts for the whole batch: it holds for each.
		for i := range be.Errs {
			be.Errs[i] = e
		}
		return be
	}
	index := make(map[string][]int, len(handles))
	for i, h := range handles {
		index[h] = append(index[h], i)
	}
	unmatched := false
	for _, f := range r.v.FailedMessages {
		idx, ok := index[f.ReceiptHandle]
		if !ok {
			unmatched = true
			continue
		}
		for _, i := range idx {
			be.Errs[i] = entryError(op, opReceipt, f.ErrorCode, f.ErrorMessage)
		}
	}
	if unmatched {
		// A failure that names no receipt of the batch: the entries not
		// reported failed have an unknown outcome.
		for i, e := range be.Errs {
			if e == nil {
				ue := classify(op, opOther, r.err)
				ue.retryable = true
				be.Errs[i] = ue
			}
		}
	}
	return be
}

// ChangeVisibility implements driver.Queue. The timeout is rounded up to
// whole seconds. The request is never repeated by the HTTP client: a repeat
// would rotate the receipt again and make the returned one stale.
func (q *Queue) ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) (string, error) {
	const op = "ChangeVisibility"
	if q.isClosed() {
		return "", fmt.Errorf("mnsqueue: %s: %w", op, driver.ErrClosed)
	}
	if timeout < MinVisibility || timeout > MaxVisibility {
		return "", fmt.Errorf("mnsqueue: %s: timeout %v out of range %v..%v", op, timeout, MinVisibility, MaxVisibility)
	}
	secs := int64((timeout + time.Second - 1) / time.Second)
	r, err := run(q.session, ctx, op, queueCall(q, func(aq ali_mns.AliMNSQueue) result[ali_mns.MessageVisibilityChangeResponse] {
		resp, err := aq.ChangeMessageVisibility(receipt, secs)
		return result[ali_mns.MessageVisibilityChangeResponse]{resp, err}
	}), nil)
	if err != nil {
		return "", err
	}
	if r.err != nil {
		return "", q.sdkError(op, opReceipt, r.err)
	}
	if r.v.ReceiptHandle == "" {
		return "", &Error{Op: op, Err: errors.New("answer without a receipt handle"), retryable: false}
	}
	return r.v.ReceiptHandle, nil
}

// Close implements driver.Queue. It closes the connections, which ends the
// requests in progress (they report driver.ErrClosed), and waits for their
// goroutines for at most Options.CloseTimeout. It is idempotent.
func (q *Queue) Close() error { return q.close() }
