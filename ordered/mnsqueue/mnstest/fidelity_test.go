package mnstest_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// Tests of what issue 14 found the emulator doing differently from the
// service, each against the real SDK.

// TestMessageIDShape: message ids are 32 upper-case hex digits, as the
// service issues them today, and unique.
func TestMessageIDShape(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, nil)
	_, q2 := newQueue(t, srv, nil)
	shape := regexp.MustCompile(`^[0-9A-F]{32}$`)
	seen := map[string]bool{}
	for _, q := range []ali_mns.AliMNSQueue{q, q2} {
		for range 4 {
			resp, err := q.BatchSendMessage(msgs("id", 16)...)
			require.NoError(t, err)
			for _, m := range resp.Messages {
				assert.Regexp(t, shape, m.MessageId, "message id shape")
				assert.False(t, seen[m.MessageId], "message id %s issued twice", m.MessageId)
				seen[m.MessageId] = true
			}
		}
	}
	got, err := batchReceive(q, 16)
	require.NoError(t, err)
	for _, m := range got {
		assert.True(t, seen[m.MessageId], "received id %s is the id the send answered", m.MessageId)
	}
}

// TestReceiptHandlesURLSafe: the service's handles need no escaping in a
// query string; the emulator's did (standard base64: 20 of 200 had a '+',
// which clients that do not escape turned into a space). Every handle of
// 400 deliveries is URL-safe, and deleting with it unescaped works.
func TestReceiptHandlesURLSafe(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, nil)
	for range 25 {
		_, err := q.BatchSendMessage(msgs("h", 16)...)
		require.NoError(t, err)
	}
	var handles []string
	for len(handles) < 400 {
		got, err := batchReceive(q, 16)
		require.NoError(t, err, "receive %d of 400", len(handles))
		for _, m := range got {
			handles = append(handles, m.ReceiptHandle)
		}
	}
	urlSafe := regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	for _, h := range handles {
		require.Regexp(t, urlSafe, h, "handle %q must be URL-safe", h)
		require.Equal(t, h, url.QueryEscape(h), "handle %q must need no escaping", h)
	}
	// ChangeVisibility's new handle too.
	resp, err := q.ChangeMessageVisibility(handles[0], 60)
	require.NoError(t, err)
	assert.Regexp(t, urlSafe, resp.ReceiptHandle, "handle from ChangeVisibility")
}

// TestRetentionDeletesInFlight: the service deletes a message when its
// retention period ends, "regardless of whether received"; the emulator
// used to keep an in-flight one until its visibility lapsed.
func TestRetentionDeletesInFlight(t *testing.T) {
	srv := newServer(t, nil)
	name, q := newQueue(t, srv, &mnstest.QueueAttributes{MessageRetentionPeriod: 60, VisibilityTimeout: 3600})
	_, err := q.BatchSendMessage(msg("held"), msg("extended"))
	require.NoError(t, err)
	got, err := batchReceive(q, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	srv.Advance(30 * time.Second)
	// One is held by its first receive, the other by a visibility change.
	_, err = q.ChangeMessageVisibility(got[1].ReceiptHandle, 3600)
	require.NoError(t, err, "still held within retention")
	info, err := srv.Queue(name)
	require.NoError(t, err)
	require.Equal(t, 2, info.Inactive, "in flight before retention ends")

	srv.Advance(31 * time.Second)
	info, err = srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 0, info.Active+info.Inactive+info.Delayed, "deleted at the end of retention although in flight for an hour")
	assert.EqualValues(t, 2, srv.Stats().Expired, "counted as expired")
	requireCode(t, codeMessageNotExist, q.DeleteMessage(got[0].ReceiptHandle), "delete after retention ended")
}

// TestQueueAttributeRanges: VisibilityTimeout 0 is refused (1..43200, not
// "the default"), and MessageRetentionPeriod stops at 604800 (7 days) as
// the service documents today.
func TestQueueAttributeRanges(t *testing.T) {
	srv := newServer(t, nil)
	assert.ErrorIs(t, srv.CreateQueue("r1", &mnstest.QueueAttributes{MessageRetentionPeriod: 604801}), mnstest.ErrInvalidArgument,
		"retention one second over 7 days")
	assert.NoError(t, srv.CreateQueue("r2", &mnstest.QueueAttributes{MessageRetentionPeriod: 604800}), "retention of 7 days")
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	requireCode(t, codeInvalidArgument, mgr.SetQueueAttributesWithOptions("r2", ali_mns.WithMessageRetentionPeriod(1296000)),
		"the SDK allows 15 days; the service no longer does")
}

// TestDeadLetterPolicy: a queue with a dead-letter policy moves a message
// that was received MaxReceiveCount times, instead of delivering it again,
// to its dead-letter queue, with the same id and body.
func TestDeadLetterPolicy(t *testing.T) {
	srv := newServer(t, nil)
	require.NoError(t, srv.CreateQueue("dlq", nil))
	require.NoError(t, srv.CreateQueue("src", &mnstest.QueueAttributes{VisibilityTimeout: 1, DeadLetterQueue: "dlq", MaxReceiveCount: 2}))
	src := ali_mns.NewMNSQueue("src", newClient(srv))
	dlq := ali_mns.NewMNSQueue("dlq", newClient(srv))
	sent, err := src.SendMessage(msg("poison"))
	require.NoError(t, err)
	for i := 1; i <= 2; i++ {
		m, err := receive(src)
		require.NoError(t, err, "receive %d of 2 is allowed", i)
		assert.EqualValues(t, i, m.DequeueCount)
		srv.Advance(2 * time.Second) // not deleted: its visibility lapses
	}
	_, err = receive(src)
	requireCode(t, codeMessageNotExist, err, "the third receive finds it moved")
	m, err := receive(dlq)
	require.NoError(t, err, "the message is in the dead-letter queue")
	assert.Equal(t, "poison", m.MessageBody)
	assert.Equal(t, sent.MessageId, m.MessageId, "same message id")
	assert.EqualValues(t, 1, m.DequeueCount, "received afresh from the dead-letter queue")
	st := srv.Stats()
	assert.EqualValues(t, 1, st.DeadLettered)
	assert.Zero(t, st.DeadLetterDropped)
	info, err := srv.Queue("src")
	require.NoError(t, err)
	assert.Zero(t, info.Active+info.Inactive+info.Delayed, "nothing left in the source queue")

	// A dead-letter queue deleted after the policy was set: the message
	// goes nowhere, and is counted.
	require.NoError(t, srv.DeleteQueue("dlq"))
	_, err = src.SendMessage(msg("orphan"))
	require.NoError(t, err)
	for range 2 {
		_, err := receive(src)
		require.NoError(t, err)
		srv.Advance(2 * time.Second)
	}
	_, err = receive(src)
	requireCode(t, codeMessageNotExist, err, "moved out although its dead-letter queue is gone")
	assert.EqualValues(t, 1, srv.Stats().DeadLetterDropped, "counted as dropped")

	assert.ErrorIs(t, srv.CreateQueue("self", &mnstest.QueueAttributes{DeadLetterQueue: "self", MaxReceiveCount: 3}), mnstest.ErrInvalidArgument,
		"a queue cannot be its own dead-letter queue")
	assert.ErrorIs(t, srv.CreateQueue("orphan", &mnstest.QueueAttributes{DeadLetterQueue: "missing", MaxReceiveCount: 3}), mnstest.ErrInvalidArgument,
		"the dead-letter queue must exist")
	assert.ErrorIs(t, srv.CreateQueue("half", &mnstest.QueueAttributes{DeadLetterQueue: "src"}), mnstest.ErrInvalidArgument,
		"a policy needs a MaxReceiveCount")
}

// TestCaps: the emulator's memory is bounded: queues (the service's quota
// of 1,000 by default) and stored messages and bytes. Refused creates and
// sends store nothing; deletes and DeleteQueue give room back.
func TestCaps(t *testing.T) {
	srv := newServer(t, &mnstest.Options{MaxQueues: 2, MaxMessages: 20, MaxMessageBytes: 2000})
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	require.NoError(t, mgr.CreateSimpleQueue("c1"))
	require.NoError(t, mgr.CreateSimpleQueue("c2"))
	err := mgr.CreateSimpleQueue("c3")
	require.Error(t, err, "a third queue over MaxQueues 2")
	assert.Contains(t, err.Error(), "code: QueueNumExceededLimit,")
	assert.ErrorIs(t, srv.CreateQueue("c3", nil), mnstest.ErrLimitExceeded, "the Go API says so too")
	requireCode(t, codeSameAttr, mgr.CreateSimpleQueue("c1"), "re-creating an existing queue is not a new one")

	q1 := ali_mns.NewMNSQueue("c1", newClient(srv))
	q2 := ali_mns.NewMNSQueue("c2", newClient(srv))
	_, err = q1.BatchSendMessage(msgs("m", 16)...)
	require.NoError(t, err)
	resp, err := q2.BatchSendMessage(msgs("n", 8)...)
	requireCode(t, codeBatchOpFail, err, "a batch that crosses MaxMessages 20 across queues")
	accepted := 0
	for _, e := range resp.Messages {
		if e.ErrorCode == "" {
			accepted++
		} else {
			assert.Equal(t, "MessageNumExceededLimit", e.ErrorCode)
		}
	}
	assert.Equal(t, 4, accepted, "the entries that fit are stored")
	_, err = q2.SendMessage(msg("over"))
	require.Error(t, err, "a single send when full")
	assert.Contains(t, err.Error(), "code: MessageNumExceededLimit,")

	got, err := batchReceive(q1, 16)
	require.NoError(t, err)
	var hs []string
	for _, m := range got {
		hs = append(hs, m.ReceiptHandle)
	}
	_, err = q1.BatchDeleteMessage(hs...)
	require.NoError(t, err)
	_, err = q2.SendMessage(msg("room again"))
	assert.NoError(t, err, "deletes gave room back")
	require.NoError(t, mgr.DeleteQueue("c2"))
	_, err = q1.SendMessage(ali_mns.MessageSendRequest{MessageBody: strings.Repeat("b", 1999), Priority: 8})
	assert.NoError(t, err, "DeleteQueue gave its messages' room back")
	_, err = q1.SendMessage(msg("xx"))
	require.Error(t, err, "over MaxMessageBytes 2000")
	assert.Contains(t, err.Error(), "code: MessageNumExceededLimit,")
}
