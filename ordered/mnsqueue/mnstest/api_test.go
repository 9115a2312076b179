package mnstest_test

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

func TestBatchSendReceiveDelete(t *testing.T) {
	srv := newServer(t, nil)
	name, q := newQueue(t, srv, nil)
	resp, err := q.BatchSendMessage(msgs("m", 16)...)
	require.NoError(t, err, "BatchSendMessage of 16")
	require.Len(t, resp.Messages, 16, "one result per entry")
	ids := map[string]bool{}
	for i, m := range resp.Messages {
		assert.Empty(t, m.ErrorCode, "entry %d", i)
		assert.NotEmpty(t, m.MessageId, "entry %d", i)
		ids[m.MessageId] = true
	}
	require.Len(t, ids, 16, "message ids must be unique")

	got, err := batchReceive(q, 16, 1)
	require.NoError(t, err, "BatchReceiveMessage")
	require.Len(t, got, 16, "all 16 visible messages in one batch")
	var bodies, handles []string
	for _, m := range got {
		bodies = append(bodies, m.MessageBody)
		handles = append(handles, m.ReceiptHandle)
		assert.True(t, ids[m.MessageId], "received id %s was sent", m.MessageId)
		assert.EqualValues(t, 1, m.DequeueCount)
		assert.EqualValues(t, 8, m.Priority)
		assert.Greater(t, m.NextVisibleTime, m.EnqueueTime, "next visible after enqueue")
		assert.GreaterOrEqual(t, m.FirstDequeueTime, m.EnqueueTime)
	}
	sort.Strings(bodies)
	want := make([]string, 16)
	for i := range want {
		want[i] = fmt.Sprintf("m%d", i)
	}
	sort.Strings(want)
	assert.Equal(t, want, bodies, "each sent body received once")

	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 0, info.Active, "active after receiving all")
	assert.Equal(t, 16, info.Inactive, "inactive after receiving all")

	del, err := q.BatchDeleteMessage(handles...)
	require.NoError(t, err, "BatchDeleteMessage")
	assert.Empty(t, del.FailedMessages)
	info, err = srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 0, info.Active+info.Inactive+info.Delayed, "queue empty after delete")
	st := srv.Stats()
	assert.EqualValues(t, 16, st.Sent)
	assert.EqualValues(t, 16, st.Deleted)
	assert.EqualValues(t, 1, st.Requests["BatchSendMessage"])
	assert.EqualValues(t, 1, st.Requests["BatchDeleteMessage"])
}

func TestBatchLimits(t *testing.T) {
	srv := newServer(t, nil)
	name, q := newQueue(t, srv, nil)
	_, err := q.BatchSendMessage(msgs("x", 17)...)
	requireCode(t, codeInvalidArgument, err, "batch send of 17")

	big := strings.Repeat("a", 5000)
	var many []ali_mns.MessageSendRequest
	for range 14 {
		many = append(many, msg(big)) // 70000 bytes in all
	}
	_, err = q.BatchSendMessage(many...)
	requireCode(t, codeInvalidArgument, err, "batch send over 64 KiB")

	_, err = batchReceive(q, 17, 1)
	requireCode(t, codeInvalidArgument, err, "batch receive of 17")

	_, err = q.BatchDeleteMessage(make([]string, 17)...)
	requireCode(t, codeInvalidArgument, err, "batch delete of 17")

	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 0, info.Active, "rejected batches store nothing")
}

func TestMaximumMessageSize(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, &mnstest.QueueAttributes{MaximumMessageSize: 1024})
	_, err := q.SendMessage(msg(strings.Repeat("a", 1024)))
	require.NoError(t, err, "a body of exactly the maximum")
	_, err = q.SendMessage(msg(strings.Repeat("a", 1025)))
	requireCode(t, codeInvalidArgument, err, "a body one byte over the maximum")

	resp, err := q.BatchSendMessage(msg("ok"), msg(strings.Repeat("b", 2000)), msg("ok2"))
	requireCode(t, codeBatchOpFail, err, "batch with one oversized entry")
	require.Len(t, resp.Messages, 3)
	assert.Empty(t, resp.Messages[0].ErrorCode)
	assert.Equal(t, "InvalidArgument", resp.Messages[1].ErrorCode)
	assert.Empty(t, resp.Messages[2].ErrorCode)
	assert.NotEmpty(t, resp.Messages[2].MessageId, "good entries are stored")
	assert.Zero(t, srv.Stats().Errors5xx, "a rejected entry is not an injected fault")
}

func TestLongPollWaitsWhenEmpty(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, nil)
	start := time.Now()
	_, err := batchReceive(q, 16, 2)
	took := since(start)
	requireCode(t, codeMessageNotExist, err, "long poll on empty queue")
	assert.GreaterOrEqual(t, took, 2*time.Second-50*time.Millisecond, "waited waitseconds")
	assert.Less(t, took, 3*time.Second, "did not wait much longer")
}

func TestLongPollReturnsEarlyOnSend(t *testing.T) {
	srv := newServer(t, nil)
	name, q := newQueue(t, srv, nil)
	sender := ali_mns.NewMNSQueue(name, newClient(srv))
	done := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, err := sender.SendMessage(msg("late"))
		done <- err
	}()
	start := time.Now()
	got, err := batchReceive(q, 16, 10)
	took := since(start)
	require.NoError(t, <-done, "send during the wait")
	require.NoError(t, err, "long poll")
	require.Len(t, got, 1)
	assert.Equal(t, "late", got[0].MessageBody)
	assert.Less(t, took, 2*time.Second, "returned when the message came, not after 10 s")
	assert.GreaterOrEqual(t, took, 250*time.Millisecond, "did not return before the send")
}

func TestQueuePollingWaitSecondsApplies(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, &mnstest.QueueAttributes{PollingWaitSeconds: 1})
	start := time.Now()
	_, err := receive(q) // no waitseconds: the queue's PollingWaitSeconds
	requireCode(t, codeMessageNotExist, err, "receive on empty queue")
	assert.GreaterOrEqual(t, since(start), 950*time.Millisecond, "queue polling wait honoured")
}

func TestShortPollReturnsAtOnce(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, nil)
	start := time.Now()
	_, err := receive(q)
	requireCode(t, codeMessageNotExist, err, "short poll on empty queue")
	assert.Less(t, since(start), 500*time.Millisecond)
}

func TestCloseEndsLongPoll(t *testing.T) {
	srv, err := mnstest.NewServer(nil)
	require.NoError(t, err)
	_, q := newQueue(t, srv, nil)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := batchReceive(q, 16, 30)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, srv.Close())
	err = <-done
	require.Error(t, err, "a poll cut short by Close answers an error")
	assert.Less(t, since(start), 5*time.Second, "Close ended the 30 s poll")
	require.NoError(t, srv.Close(), "second Close")
}

func TestChangeVisibilityRotatesHandle(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, nil)
	_, err := q.SendMessage(msg("v"))
	require.NoError(t, err)
	r, err := receive(q, 1)
	require.NoError(t, err)

	cv, err := q.ChangeMessageVisibility(r.ReceiptHandle, 60)
	require.NoError(t, err, "ChangeMessageVisibility")
	assert.NotEqual(t, r.ReceiptHandle, cv.ReceiptHandle, "a new handle")
	assert.Greater(t, cv.NextVisibleTime, r.NextVisibleTime, "visible later than before")

	_, err = q.ChangeMessageVisibility(r.ReceiptHandle, 60)
	requireCode(t, codeMessageNotExist, err, "change visibility with the old handle")
	requireCode(t, codeMessageNotExist, q.DeleteMessage(r.ReceiptHandle), "delete with the old handle")

	_, err = q.ChangeMessageVisibility(cv.ReceiptHandle, 0)
	requireCode(t, codeInvalidArgument, err, "visibility 0")
	_, err = q.ChangeMessageVisibility(cv.ReceiptHandle, 43201)
	requireCode(t, codeInvalidArgument, err, "visibility 43201")

	srv.Advance(61 * time.Second)
	r2, err := receive(q, 1)
	require.NoError(t, err, "visible again after the new timeout")
	assert.EqualValues(t, 2, r2.DequeueCount)
	assert.Equal(t, r.FirstDequeueTime, r2.FirstDequeueTime, "first dequeue time kept")
	requireCode(t, codeMessageNotExist, q.DeleteMessage(cv.ReceiptHandle), "delete with the handle before redelivery")
	require.NoError(t, q.DeleteMessage(r2.ReceiptHandle), "delete with the current handle")
}

func TestStaleReceiptAfterRedelivery(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 5})
	_, err := q.SendMessage(msg("r"))
	require.NoError(t, err)
	r1, err := receive(q, 1)
	require.NoError(t, err)
	srv.Advance(6 * time.Second)
	// Lapsed but not yet received again: the handle is stale already.
	_, err = q.ChangeMessageVisibility(r1.ReceiptHandle, 10)
	requireCode(t, codeMessageNotExist, err, "change visibility after the timeout lapsed")
	r2, err := receive(q, 1)
	require.NoError(t, err)
	assert.Equal(t, r1.MessageId, r2.MessageId, "same message redelivered")
	assert.EqualValues(t, 2, r2.DequeueCount)
	assert.NotEqual(t, r1.ReceiptHandle, r2.ReceiptHandle)
	requireCode(t, codeMessageNotExist, q.DeleteMessage(r1.ReceiptHandle), "delete with the first handle")
	_, err = q.ChangeMessageVisibility(r1.ReceiptHandle, 10)
	requireCode(t, codeMessageNotExist, err, "change visibility with the first handle")
	require.NoError(t, q.DeleteMessage(r2.ReceiptHandle))
	requireCode(t, codeMessageNotExist, q.DeleteMessage(r2.ReceiptHandle), "delete twice")
}

func TestMalformedAndForeignHandles(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, nil)
	_, q2 := newQueue(t, srv, nil)
	other := newServer(t, nil)
	_, qo := newQueue(t, other, nil)
	_, err := qo.SendMessage(msg("o"))
	require.NoError(t, err)
	ro, err := receive(qo, 1)
	require.NoError(t, err)
	_, err = q2.SendMessage(msg("x"))
	require.NoError(t, err)
	r2, err := receive(q2, 1)
	require.NoError(t, err)

	for _, h := range []string{"garbage", "1-ODU4OTkzNDU5My0xNDM1MTk3NjAwLTItNg==", ro.ReceiptHandle, r2.ReceiptHandle} {
		requireCode(t, codeReceiptHandle, q.DeleteMessage(h), "delete with handle "+h)
		_, err := q.ChangeMessageVisibility(h, 10)
		requireCode(t, codeReceiptHandle, err, "change visibility with handle "+h)
	}
}

func TestPartialBatchDelete(t *testing.T) {
	srv := newServer(t, nil)
	name, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 5})
	_, err := q.BatchSendMessage(msgs("p", 4)...)
	require.NoError(t, err)
	got, err := batchReceive(q, 4, 1)
	require.NoError(t, err)
	require.Len(t, got, 4)
	// Let one message lapse and be received again: its first handle is stale.
	cv, err := q.ChangeMessageVisibility(got[0].ReceiptHandle, 1)
	require.NoError(t, err)
	srv.Advance(2 * time.Second)
	again, err := receive(q, 1)
	require.NoError(t, err)
	require.Equal(t, got[0].MessageId, again.MessageId)

	handles := []string{got[1].ReceiptHandle, cv.ReceiptHandle, got[2].ReceiptHandle, "bogus", got[3].ReceiptHandle}
	resp, err := q.BatchDeleteMessage(handles...)
	requireCode(t, codeBatchOpFail, err, "batch delete with a stale and a bad handle")
	require.Len(t, resp.FailedMessages, 2, "two failures reported")
	assert.Equal(t, cv.ReceiptHandle, resp.FailedMessages[0].ReceiptHandle)
	assert.Equal(t, "MessageNotExist", resp.FailedMessages[0].ErrorCode)
	assert.Equal(t, "bogus", resp.FailedMessages[1].ReceiptHandle)
	assert.Equal(t, "ReceiptHandleError", resp.FailedMessages[1].ErrorCode)
	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 1, info.Inactive, "the good handles deleted, the redelivered message remains")
	assert.Equal(t, 0, info.Active)
}

func TestSignatureRejected(t *testing.T) {
	srv := newServer(t, nil)
	name, _ := newQueue(t, srv, nil)
	bad := ali_mns.NewMNSQueue(name, newClientWith(srv, srv.AccessKeyID(), "wrong-secret"))
	_, err := bad.SendMessage(msg("x"))
	requireCode(t, codeSignature, err, "send with the wrong secret")
	unknown := ali_mns.NewMNSQueue(name, newClientWith(srv, "someone-else", srv.AccessKeySecret()))
	_, err = unknown.SendMessage(msg("x"))
	requireCode(t, codeInvalidAccessKey, err, "send with an unknown key")
	_, err = batchReceive(bad, 16, 1)
	requireCode(t, codeSignature, err, "receive with the wrong secret")
	mgr := ali_mns.NewMNSQueueManager(newClientWith(srv, srv.AccessKeyID(), "wrong-secret"))
	requireCode(t, codeSignature, mgr.CreateSimpleQueue("other"), "create queue with the wrong secret")
	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 0, info.Active, "rejected sends store nothing")
	assert.EqualValues(t, 3, srv.Stats().Errors["SignatureDoesNotMatch"])
}

func TestQueueNotExist(t *testing.T) {
	srv := newServer(t, nil)
	q := ali_mns.NewMNSQueue("missing", newClient(srv))
	_, err := q.SendMessage(msg("x"))
	requireCode(t, codeQueueNotExist, err, "send")
	_, err = q.BatchSendMessage(msgs("x", 2)...)
	requireCode(t, codeQueueNotExist, err, "batch send")
	_, err = batchReceive(q, 16, 1)
	requireCode(t, codeQueueNotExist, err, "batch receive")
	_, err = peek(q)
	requireCode(t, codeQueueNotExist, err, "peek")
	_, err = q.BatchDeleteMessage("h")
	requireCode(t, codeQueueNotExist, err, "batch delete")
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	_, err = mgr.GetQueueAttributes("missing")
	requireCode(t, codeQueueNotExist, err, "get attributes")
	requireCode(t, codeQueueNotExist, mgr.DeleteQueue("missing"), "delete queue")
}

func TestPeekChangesNothing(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Shards: 1})
	name, q := newQueue(t, srv, nil)
	_, err := q.BatchSendMessage(msgs("k", 3)...)
	require.NoError(t, err)
	p, err := peek(q)
	require.NoError(t, err, "PeekMessage")
	assert.Equal(t, "k0", p.MessageBody, "one shard: FIFO")
	assert.Empty(t, p.ReceiptHandle, "peek gives no handle")
	assert.EqualValues(t, 0, p.DequeueCount)
	ps, err := batchPeek(q, 16)
	require.NoError(t, err, "BatchPeekMessage")
	require.Len(t, ps, 3)
	for i, m := range ps {
		assert.Equal(t, fmt.Sprintf("k%d", i), m.MessageBody)
	}
	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 3, info.Active, "all still visible after peeks")
	got, err := batchReceive(q, 16, 1)
	require.NoError(t, err)
	assert.Len(t, got, 3)
	for _, m := range got {
		assert.EqualValues(t, 1, m.DequeueCount, "peeks do not count as dequeues")
	}
	_, err = peek(q)
	requireCode(t, codeMessageNotExist, err, "peek with everything in flight")
}

func TestBodiesRoundTrip(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Shards: 1})
	_, q := newQueue(t, srv, nil)
	bodies := []string{
		`a<b>&c"d'e` + "\tf\ng\rh\r\ni",
		"ü 日本 😀 \u2028",
		"]]> and <![CDATA[x]]>",
		"&amp; &#65; literally",
		"",
		strings.Repeat("x", 65536),
	}
	for _, b := range bodies[:3] {
		_, err := q.SendMessage(msg(b))
		require.NoError(t, err, "send %q", b)
	}
	_, err := q.BatchSendMessage(msg(bodies[3]), msg(bodies[4]))
	require.NoError(t, err)
	_, err = q.SendMessage(msg(bodies[5]))
	require.NoError(t, err, "a body of exactly 64 KiB")
	got, err := batchReceive(q, 16, 1)
	require.NoError(t, err)
	require.Len(t, got, len(bodies))
	for i, m := range got {
		assert.Equal(t, bodies[i], m.MessageBody, "body %d comes back byte for byte", i)
		sum := md5.Sum([]byte(bodies[i]))
		assert.Equal(t, strings.ToUpper(hex.EncodeToString(sum[:])), m.MessageBodyMD5, "MD5 of body %d", i)
	}
}
