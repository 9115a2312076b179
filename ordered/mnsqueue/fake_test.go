package mnsqueue_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/mnsqueue"
)

// fake is a throw-away MNS endpoint that answers every request with what its
// test says and records the requests.
type fake struct {
	mu     sync.Mutex
	reqs   []string // "METHOD /path?query"
	bodies []string
	answer func(w http.ResponseWriter, r *http.Request)
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, r.Method+" "+r.RequestURI)
	f.bodies = append(f.bodies, string(b))
	answer := f.answer
	f.mu.Unlock()
	answer(w, r)
}

func (f *fake) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

func (f *fake) lastBody() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[len(f.bodies)-1]
}

func (f *fake) set(answer func(w http.ResponseWriter, r *http.Request)) {
	f.mu.Lock()
	f.answer = answer
	f.mu.Unlock()
}

// reply answers with status and an XML body.
func reply(status int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/xml;charset=utf-8")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func errorXML(code string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Error xmlns="http://mns.aliyuncs.com/doc/v1/"><Code>` + code +
		`</Code><Message>m</Message><RequestId>R</RequestId><HostId>H</HostId></Error>`
}

// newFake starts a fake endpoint and a driver on it. Options.Visibility is
// set, so New makes no request.
func newFake(t *testing.T, opts *mnsqueue.Options) (*fake, *mnsqueue.Queue) {
	t.Helper()
	f := &fake{answer: reply(500, errorXML("InternalError"))}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	o := mnsqueue.Options{Visibility: 30 * time.Second}
	if opts != nil {
		o = *opts
	}
	q, err := mnsqueue.New(t.Context(), srv.URL+"/.", "q", mnsqueue.Credentials{AccessKeyID: "id", AccessKeySecret: "secret"}, &o)
	require.NoError(t, err, "New on a fake endpoint")
	t.Cleanup(func() { q.Close() })
	return f, q
}

// coded is what SDK errors implement.
type coded interface {
	Code() uint64
	Namespace() string
}

// TestErrorAnswers drives every method against crafted answers and checks
// how the driver reports them.
func TestErrorAnswers(t *testing.T) {
	type want struct {
		sentinel  error
		retryable bool
		sdkCode   uint64 // 0: do not check
		empty     bool   // ReceiveBatch: no error, no message
	}
	ops := map[string]func(ctx context.Context, q *mnsqueue.Queue) error{
		"send": func(ctx context.Context, q *mnsqueue.Queue) error {
			return q.SendBatch(ctx, [][]byte{[]byte("a")})
		},
		"receive": func(ctx context.Context, q *mnsqueue.Queue) error {
			msgs, err := q.ReceiveBatch(ctx, 16, time.Second)
			if err == nil && len(msgs) != 0 {
				return errors.New("unexpected messages")
			}
			return err
		},
		"visibility": func(ctx context.Context, q *mnsqueue.Queue) error {
			_, err := q.ChangeVisibility(ctx, "h", time.Second)
			return err
		},
		"delete": func(ctx context.Context, q *mnsqueue.Queue) error {
			return q.DeleteBatch(ctx, []string{"h1", "h2"})
		},
	}
	tests := []struct {
		name   string
		op     string
		status int
		body   string
		want   want
	}{
		{"empty queue", "receive", 404, errorXML("MessageNotExist"), want{empty: true}},
		{"stale receipt on visibility", "visibility", 404, errorXML("MessageNotExist"), want{sentinel: driver.ErrStaleReceipt, sdkCode: 115}},
		{"bad receipt on visibility", "visibility", 400, errorXML("ReceiptHandleError"), want{sentinel: driver.ErrBadReceipt, sdkCode: 123}},
		{"stale receipts on delete", "delete", 404, errorXML("MessageNotExist"), want{sentinel: driver.ErrStaleReceipt, sdkCode: 115}},
		{"queue gone on send", "send", 404, errorXML("QueueNotExist"), want{sentinel: driver.ErrQueueNotFound, sdkCode: 122}},
		{"queue gone on receive", "receive", 404, errorXML("QueueNotExist"), want{sentinel: driver.ErrQueueNotFound, sdkCode: 122}},
		{"queue gone on delete", "delete", 404, errorXML("QueueNotExist"), want{sentinel: driver.ErrQueueNotFound, sdkCode: 122}},
		{"internal error", "send", 500, errorXML("InternalError"), want{retryable: true, sdkCode: 102}},
		{"internal error on receive", "receive", 500, errorXML("InternalError"), want{retryable: true, sdkCode: 102}},
		{"qps limit", "send", 503, errorXML("QpsLimitExceeded"), want{retryable: true, sdkCode: 134}},
		{"5xx without a body", "send", 502, "", want{retryable: true, sdkCode: 7}},
		{"html error page", "visibility", 503, "<html>busy</html>", want{retryable: true, sdkCode: 7}},
		{"success that does not parse", "receive", 200, "garbage", want{retryable: true, sdkCode: 8}},
		{"invalid argument", "send", 400, errorXML("InvalidArgument"), want{sdkCode: 105}},
		{"signature", "receive", 403, errorXML("SignatureDoesNotMatch"), want{sdkCode: 124}},
		{"unmapped code", "send", 400, errorXML("FifoMissingMessageGroupId"), want{sdkCode: 135}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, q := newFake(t, nil)
			f.set(reply(tc.status, tc.body))
			err := ops[tc.op](t.Context(), q)
			if tc.want.empty {
				assert.NoError(t, err, "%s answered %d %s", tc.op, tc.status, tc.body)
				return
			}
			require.Error(t, err, "%s answered %d %s", tc.op, tc.status, tc.body)
			assert.Equal(t, tc.want.retryable, q.IsRetryable(err), "IsRetryable(%v)", err)
			for _, s := range []error{driver.ErrStaleReceipt, driver.ErrBadReceipt, driver.ErrQueueNotFound, driver.ErrClosed, driver.ErrTooLarge} {
				assert.Equal(t, s == tc.want.sentinel, errors.Is(err, s), "errors.Is(%v, %v)", err, s)
			}
			if tc.want.sentinel == driver.ErrStaleReceipt || tc.want.sentinel == driver.ErrBadReceipt {
				if tc.op == "delete" {
					var be *driver.BatchError
					require.ErrorAs(t, err, &be, "a receipt failure of a delete is a *BatchError")
					assert.Len(t, be.Errs, 2, "one entry per receipt")
				}
			}
			var c coded
			require.True(t, errors.As(err, &c), "the SDK error must be reachable with errors.As, got %T %v", err, err)
			if tc.want.sdkCode != 0 {
				assert.Equal(t, tc.want.sdkCode, c.Code(), "SDK code of %v", err)
			}
			var me *mnsqueue.Error
			require.ErrorAs(t, err, &me, "a *mnsqueue.Error")
			assert.Equal(t, tc.want.retryable, me.Retryable(), "Error.Retryable")
			assert.Len(t, f.requests(), 1, "requests made: %v", f.requests())
		})
	}
}

func TestBatchSendPartialFailure(t *testing.T) {
	f, q := newFake(t, nil)
	f.set(reply(500, `<?xml version="1.0" encoding="UTF-8"?><Messages xmlns="http://mns.aliyuncs.com/doc/v1/">`+
		`<Message><ErrorCode>InternalError</ErrorCode><ErrorMessage>boom</ErrorMessage></Message>`+
		`<Message><MessageId>M2</MessageId><MessageBodyMD5>X</MessageBodyMD5></Message>`+
		`<Message><ErrorCode>InvalidArgument</ErrorCode><ErrorMessage>too big</ErrorMessage></Message></Messages>`))
	err := q.SendBatch(t.Context(), [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	var be *driver.BatchError
	require.ErrorAs(t, err, &be, "partial failure of a batch send")
	require.Len(t, be.Errs, 3)
	assert.True(t, q.IsRetryable(be.Errs[0]), "entry 0 (InternalError) retryable: %v", be.Errs[0])
	assert.NoError(t, be.Errs[1], "entry 1 was accepted")
	assert.False(t, q.IsRetryable(be.Errs[2]), "entry 2 (InvalidArgument) not retryable: %v", be.Errs[2])
	assert.False(t, q.IsRetryable(err), "a batch with a final failure is not retryable as a whole")
	var me *mnsqueue.Error
	require.ErrorAs(t, be.Errs[2], &me)
	assert.Equal(t, "InvalidArgument", me.Code, "service code of entry 2")

	// An answer that does not match the batch: every entry's fate is unknown.
	f.set(reply(500, `<Messages><Message><ErrorCode>InternalError</ErrorCode><ErrorMessage>x</ErrorMessage></Message></Messages>`))
	err = q.SendBatch(t.Context(), [][]byte{[]byte("a"), []byte("b")})
	require.Error(t, err)
	assert.True(t, q.IsRetryable(err), "unmatched partial answer: retryable, got %v", err)
}

func TestBatchDeletePartialFailure(t *testing.T) {
	f, q := newFake(t, nil)
	f.set(reply(404, `<?xml version="1.0" encoding="UTF-8"?><Errors xmlns="http://mns.aliyuncs.com/doc/v1/">`+
		`<Error><ErrorCode>MessageNotExist</ErrorCode><ErrorMessage>gone</ErrorMessage><ReceiptHandle>h1</ReceiptHandle></Error>`+
		`<Error><ErrorCode>ReceiptHandleError</ErrorCode><ErrorMessage>bad</ErrorMessage><ReceiptHandle>h3</ReceiptHandle></Error></Errors>`))
	err := q.DeleteBatch(t.Context(), []string{"h1", "h2", "h3"})
	var be *driver.BatchError
	require.ErrorAs(t, err, &be, "partial failure of a batch delete")
	require.Len(t, be.Errs, 3)
	assert.ErrorIs(t, be.Errs[0], driver.ErrStaleReceipt, "entry 0")
	assert.NoError(t, be.Errs[1], "entry 1 was deleted")
	assert.ErrorIs(t, be.Errs[2], driver.ErrBadReceipt, "entry 2")
	assert.Equal(t, "DELETE /queues/q/messages", f.requests()[0], "one batch delete request")
	assert.Contains(t, f.lastBody(), "<ReceiptHandle>h2</ReceiptHandle>", "request body")
}

// A batch delete answer whose failures name a receipt that is not in the
// batch (or none) cannot be matched to the entries: the entries it does not
// name may have failed too, so their outcome is unknown and they are
// reported retryable, never deleted. Counted deleted, an entry whose delete
// did not take effect stays in the queue unseen by the receiver, which
// delivers it again once its visibility ends (a blind plant that dropped
// the unmatched case went unseen: TestBatchDeletePartialFailure names only
// receipts of the batch; SendBatch has its counterpart above).
func TestBatchDeleteUnmatchedFailure(t *testing.T) {
	for _, tc := range []struct{ name, failure string }{
		{"foreign receipt", `<Error><ErrorCode>InternalError</ErrorCode><ErrorMessage>x</ErrorMessage><ReceiptHandle>hX</ReceiptHandle></Error>`},
		{"no receipt", `<Error><ErrorCode>InternalError</ErrorCode><ErrorMessage>x</ErrorMessage></Error>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, q := newFake(t, nil)
			f.set(reply(404, `<?xml version="1.0" encoding="UTF-8"?><Errors xmlns="http://mns.aliyuncs.com/doc/v1/">`+
				`<Error><ErrorCode>MessageNotExist</ErrorCode><ErrorMessage>gone</ErrorMessage><ReceiptHandle>h1</ReceiptHandle></Error>`+
				tc.failure+`</Errors>`))
			err := q.DeleteBatch(t.Context(), []string{"h1", "h2", "h3"})
			var be *driver.BatchError
			require.ErrorAs(t, err, &be, "partial failure of a batch delete")
			require.Len(t, be.Errs, 3)
			assert.ErrorIs(t, be.Errs[0], driver.ErrStaleReceipt, "entry 0 is named: its own outcome")
			for _, i := range []int{1, 2} {
				require.Error(t, be.Errs[i], "entry %d: not named by an answer that does not match the batch, its outcome is unknown, not deleted", i)
				assert.True(t, q.IsRetryable(be.Errs[i]), "entry %d: unknown outcome is retryable, got %v", i, be.Errs[i])
			}
		})
	}
}

// TestOneAttempt checks that a request whose connection is closed without an
// answer is made once: fasthttp would repeat it (receives and visibility
// changes up to five times).
func TestOneAttempt(t *testing.T) {
	f, q := newFake(t, nil)
	f.set(func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	ctx := t.Context()
	calls := map[string]func() error{
		"SendBatch":        func() error { return q.SendBatch(ctx, [][]byte{[]byte("x")}) },
		"ReceiveBatch":     func() error { _, err := q.ReceiveBatch(ctx, 16, time.Second); return err },
		"DeleteBatch":      func() error { return q.DeleteBatch(ctx, []string{"h"}) },
		"ChangeVisibility": func() error { _, err := q.ChangeVisibility(ctx, "h", time.Second); return err },
	}
	for name, call := range calls {
		before := len(f.requests())
		err := call()
		require.Error(t, err, "%s on a dropped connection", name)
		assert.True(t, q.IsRetryable(err), "%s: a dropped connection is retryable, got %v", name, err)
		assert.Equal(t, 1, len(f.requests())-before, "%s: requests made, want exactly one: %v", name, f.requests()[before:])
	}
}

func TestReceiveFields(t *testing.T) {
	f, q := newFake(t, nil)
	enc := base64.StdEncoding.EncodeToString([]byte("bin\x00ary"))
	f.set(reply(200, `<?xml version="1.0" encoding="UTF-8"?><Messages xmlns="http://mns.aliyuncs.com/doc/v1/">`+
		`<Message><MessageId>M1</MessageId><ReceiptHandle>R1</ReceiptHandle><MessageBodyMD5>X</MessageBodyMD5><MessageBody>`+enc+`</MessageBody>`+
		`<EnqueueTime>1250700979248</EnqueueTime><NextVisibleTime>1250700999348</NextVisibleTime><FirstDequeueTime>1250700979300</FirstDequeueTime><DequeueCount>3</DequeueCount><Priority>8</Priority></Message>`+
		`<Message><MessageId>M2</MessageId><ReceiptHandle>R2</ReceiptHandle><MessageBodyMD5>X</MessageBodyMD5><MessageBody>plain text, not base64!</MessageBody>`+
		`<EnqueueTime>1250700979248</EnqueueTime><NextVisibleTime>1250700999348</NextVisibleTime><FirstDequeueTime>1250700979300</FirstDequeueTime><DequeueCount>1</DequeueCount><Priority>8</Priority></Message>`+
		`</Messages>`))
	msgs, err := q.ReceiveBatch(t.Context(), 5, 1500*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, "GET /queues/q/messages?numOfMessages=5&waitseconds=2", f.requests()[0], "wait rounded up to whole seconds")
	m := msgs[0]
	assert.Equal(t, []byte("bin\x00ary"), m.Body, "base64 body decoded")
	assert.Equal(t, "M1", m.ID)
	assert.Equal(t, "R1", m.Receipt)
	assert.Equal(t, 3, m.DequeueCount)
	assert.Equal(t, time.UnixMilli(1250700979248), m.EnqueueTime, "EnqueueTime")
	assert.Equal(t, time.UnixMilli(1250700999348), m.NextVisible, "NextVisible")
	assert.Equal(t, []byte("plain text, not base64!"), msgs[1].Body, "a body that is not base64 is delivered as received")
}

func TestSendWire(t *testing.T) {
	f, q := newFake(t, nil)
	f.set(reply(201, `<Messages><Message><MessageId>M1</MessageId><MessageBodyMD5>X</MessageBodyMD5></Message></Messages>`))
	require.NoError(t, q.SendBatch(t.Context(), [][]byte{[]byte("\x00<&>")}))
	assert.Equal(t, "POST /queues/q/messages", f.requests()[0])
	assert.Equal(t, `<Messages><Message><MessageBody>`+base64.StdEncoding.EncodeToString([]byte("\x00<&>"))+
		`</MessageBody><DelaySeconds>0</DelaySeconds><Priority>8</Priority></Message></Messages>`, f.lastBody(), "request body: base64, explicit priority 8")

	f, q = newFake(t, &mnsqueue.Options{Visibility: 30 * time.Second, Raw: true, Priority: 3})
	f.set(reply(201, `<Messages><Message><MessageId>M1</MessageId><MessageBodyMD5>X</MessageBodyMD5></Message></Messages>`))
	require.NoError(t, q.SendBatch(t.Context(), [][]byte{[]byte("a<b")}))
	assert.Equal(t, `<Messages><Message><MessageBody>a&lt;b</MessageBody><DelaySeconds>0</DelaySeconds><Priority>3</Priority></Message></Messages>`, f.lastBody(), "raw body")
	err := q.SendBatch(t.Context(), [][]byte{[]byte("ok"), []byte("nul\x00")})
	assert.ErrorIs(t, err, mnsqueue.ErrInvalidBody, "raw mode refuses a body XML cannot carry")
	err = q.SendBatch(t.Context(), [][]byte{{0xff, 0xfe}})
	assert.ErrorIs(t, err, mnsqueue.ErrInvalidBody, "raw mode refuses invalid UTF-8")
	assert.Len(t, f.requests(), 1, "refused batches send nothing")
	assert.Equal(t, 65536, q.Limits().MaxBody, "raw MaxBody")
}

func TestWaitOnWire(t *testing.T) {
	// Visibility set: New does not read PollingWaitSeconds, so a zero wait
	// cannot be a short poll and becomes 1s.
	f, q := newFake(t, nil)
	f.set(reply(404, errorXML("MessageNotExist")))
	for _, w := range []time.Duration{0, 300 * time.Millisecond, time.Second, 1200 * time.Millisecond, 45 * time.Second} {
		_, err := q.ReceiveBatch(t.Context(), 20, w)
		require.NoError(t, err, "wait %v", w)
	}
	assert.Equal(t, []string{
		"GET /queues/q/messages?numOfMessages=16&waitseconds=1",
		"GET /queues/q/messages?numOfMessages=16&waitseconds=1",
		"GET /queues/q/messages?numOfMessages=16&waitseconds=1",
		"GET /queues/q/messages?numOfMessages=16&waitseconds=2",
		"GET /queues/q/messages?numOfMessages=16&waitseconds=30",
	}, f.requests(), "waits 0, 300ms, 1s, 1.2s, 45s with max 20")

	dctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	_, err := q.ReceiveBatch(dctx, 16, 20*time.Second)
	require.NoError(t, err)
	reqs := f.requests()
	assert.Equal(t, "GET /queues/q/messages?numOfMessages=16&waitseconds=2", reqs[len(reqs)-1], "wait cut to the whole seconds left before the deadline")

	f.set(reply(200, `<ChangeVisibility><ReceiptHandle>new-handle</ReceiptHandle><NextVisibleTime>1</NextVisibleTime></ChangeVisibility>`))
	r, err := q.ChangeVisibility(t.Context(), "a+b/c==", 1500*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, "new-handle", r, "ChangeVisibility returns the new receipt")
	reqs = f.requests()
	assert.Equal(t, "PUT /queues/q/messages?ReceiptHandle=a%2Bb%2Fc%3D%3D&VisibilityTimeout=2", reqs[len(reqs)-1], "timeout rounded up, handle escaped")
}

func TestMaxBodyFromAttributes(t *testing.T) {
	f := &fake{answer: reply(200, `<Queue><QueueName>q</QueueName><VisibilityTimeout>45</VisibilityTimeout><MaximumMessageSize>2048</MaximumMessageSize><PollingWaitSeconds>0</PollingWaitSeconds></Queue>`)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	q, err := mnsqueue.New(t.Context(), srv.URL+"/.", "q", mnsqueue.Credentials{AccessKeyID: "id", AccessKeySecret: "s"}, nil)
	require.NoError(t, err)
	defer q.Close()
	l := q.Limits()
	assert.Equal(t, 45*time.Second, l.Visibility, "visibility read from the queue")
	assert.Equal(t, 1536, l.MaxBody, "2048 bytes after base64")
	assert.Equal(t, 49120, l.MaxBatchBytes, "64 KiB after base64 with the padding of 16 bodies")
	assert.Equal(t, []string{"GET /queues/q"}, f.requests())
	f.set(reply(404, errorXML("MessageNotExist")))
	_, err = q.ReceiveBatch(t.Context(), 1, 0)
	require.NoError(t, err)
	assert.Equal(t, "GET /queues/q/messages?numOfMessages=1", f.requests()[1], "zero wait on a queue with PollingWaitSeconds 0: a short poll")
	assert.True(t, strings.HasPrefix(f.requests()[1], "GET"))
}
