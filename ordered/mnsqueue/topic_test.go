package mnsqueue_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// fanOut is a topic with one subscribed queue per format, on the emulator.
type fanOut struct {
	srv    *mnstest.Server
	cred   mnsqueue.Credentials
	topic  string
	queues map[string]string // format -> queue name
}

var formats = []string{mnsqueue.FormatSimplified, mnsqueue.FormatXML, mnsqueue.FormatJSON}

// newFanOut creates a topic and one queue per format subscribed to it,
// through the driver's helpers.
func newFanOut(t *testing.T, srv *mnstest.Server) *fanOut {
	t.Helper()
	ctx := t.Context()
	f := &fanOut{srv: srv, cred: serverCred(srv), topic: uniqueName("topic"), queues: map[string]string{}}
	require.NoError(t, mnsqueue.CreateTopic(ctx, srv.Endpoint(), f.cred, f.topic, 0), "CreateTopic")
	require.NoError(t, mnsqueue.CreateTopic(ctx, srv.Endpoint(), f.cred, f.topic, 0), "CreateTopic again: idempotent")
	for _, format := range formats {
		q := uniqueName(strings.ToLower(format))
		require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), f.cred, q, &mnsqueue.QueueAttributes{Visibility: 10 * time.Second}))
		sub := &mnsqueue.Subscription{Format: format}
		require.NoError(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), f.cred, f.topic, "to-"+q, q, sub), "Subscribe %s", format)
		require.NoError(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), f.cred, f.topic, "to-"+q, q, sub), "Subscribe again: idempotent")
		f.queues[format] = q
	}
	return f
}

func (f *fanOut) publisher(t *testing.T, opts *mnsqueue.Options) *mnsqueue.Topic {
	t.Helper()
	tp, err := mnsqueue.NewTopic(t.Context(), f.srv.Endpoint(), f.topic, f.cred, opts)
	require.NoError(t, err, "NewTopic")
	t.Cleanup(func() { assert.NoError(t, tp.Close(), "Topic.Close") })
	return tp
}

func (f *fanOut) subscriber(t *testing.T, format string, opts *mnsqueue.Options) *mnsqueue.Queue {
	t.Helper()
	q, err := mnsqueue.New(t.Context(), f.srv.Endpoint(), f.queues[format], f.cred, opts)
	require.NoError(t, err, "New on the %s queue", format)
	t.Cleanup(func() { assert.NoError(t, q.Close(), "Queue.Close") })
	return q
}

// receiveAll receives until n messages came or d passed, deleting them.
func receiveAll(t *testing.T, q driver.Queue, n int, d time.Duration) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var bodies [][]byte
	for len(bodies) < n && ctx.Err() == nil {
		msgs, err := q.ReceiveBatch(ctx, 16, time.Second)
		if ctx.Err() != nil {
			break
		}
		require.NoError(t, err)
		var receipts []string
		for _, m := range msgs {
			bodies = append(bodies, m.Body)
			receipts = append(receipts, m.Receipt)
		}
		if len(receipts) > 0 {
			require.NoError(t, q.DeleteBatch(ctx, receipts))
		}
	}
	return bodies
}

// TestTopicRoundTrip: bodies published through a Topic, binary ones
// included, come out of every subscribed queue's Queue unchanged, whatever
// the subscription's format: the Queue unwraps XML and JSON notifications
// and decodes base64.
func TestTopicRoundTrip(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Shards: 1})
	f := newFanOut(t, srv)
	tp := f.publisher(t, nil)
	l := tp.Limits()
	assert.Equal(t, 1, l.MaxBatch, "no batch publish")
	assert.Equal(t, (65536-mnsqueue.NotificationReserve)/4*3, l.MaxBody, "topic size less the notification's room, before base64")
	bodies := [][]byte{[]byte("#1#plain"), []byte("binary \x00\x01\xff and <xml> & \"json\""), bytes.Repeat([]byte{0xAB}, l.MaxBody)}
	for _, b := range bodies {
		require.NoError(t, tp.SendBatch(t.Context(), [][]byte{b}), "publish %d bytes", len(b))
	}
	for _, format := range formats {
		got := receiveAll(t, f.subscriber(t, format, nil), len(bodies), 10*time.Second)
		assert.Equal(t, bodies, got, "%s subscription: the published bodies, in order (one shard, no push faults)", format)
	}
}

// TestTopicRawRoundTrip: raw publishers and raw subscribers (text peers)
// see the text as published in every format.
func TestTopicRawRoundTrip(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Shards: 1})
	f := newFanOut(t, srv)
	tp := f.publisher(t, &mnsqueue.Options{Raw: true, MessageTag: "orders"})
	body := []byte("#7#a<b&c\n\"q\" é")
	require.NoError(t, tp.SendBatch(t.Context(), [][]byte{body}))
	assert.ErrorIs(t, tp.SendBatch(t.Context(), [][]byte{[]byte("\x00")}), mnsqueue.ErrInvalidBody, "raw text that XML cannot carry")
	for _, format := range formats {
		got := receiveAll(t, f.subscriber(t, format, &mnsqueue.Options{Raw: true}), 1, 10*time.Second)
		assert.Equal(t, [][]byte{body}, got, "%s subscription, raw", format)
	}
	// A subscriber in base64 mode reads a raw '#' envelope as it is.
	require.NoError(t, tp.SendBatch(t.Context(), [][]byte{body}))
	got := receiveAll(t, f.subscriber(t, mnsqueue.FormatXML, nil), 1, 10*time.Second)
	assert.Equal(t, [][]byte{body}, got, "a raw envelope read by a base64-mode Queue")
}

// TestKeepNotifications: with KeepNotifications the XML notification is
// delivered as it came.
func TestKeepNotifications(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Shards: 1})
	f := newFanOut(t, srv)
	tp := f.publisher(t, &mnsqueue.Options{Raw: true, MessageTag: "orders"})
	require.NoError(t, tp.SendBatch(t.Context(), [][]byte{[]byte("#1#x")}))
	got := receiveAll(t, f.subscriber(t, mnsqueue.FormatXML, &mnsqueue.Options{Raw: true, KeepNotifications: true}), 1, 10*time.Second)
	require.Len(t, got, 1)
	assert.True(t, bytes.HasPrefix(got[0], []byte(`<?xml`)), "the notification itself: %s", got[0])
	assert.Contains(t, string(got[0]), "<Message>#1#x</Message>")
	assert.Contains(t, string(got[0]), "<MessageTag>orders</MessageTag>", "published with Options.MessageTag")
}

// TestTopicDriverContract: a Topic is send-only, sends one body at a time,
// reports a missing topic as driver.ErrQueueNotFound, and closes like a
// Queue.
func TestTopicDriverContract(t *testing.T) {
	srv := newServer(t, nil)
	f := newFanOut(t, srv)
	ctx := t.Context()
	_, err := mnsqueue.NewTopic(ctx, srv.Endpoint(), "missing", f.cred, nil)
	assert.ErrorIs(t, err, driver.ErrQueueNotFound, "NewTopic of a missing topic")
	_, err = mnsqueue.NewTopic(ctx, srv.Endpoint(), "bad/name", f.cred, nil)
	assert.Error(t, err, "a name that cannot be one")
	_, err = mnsqueue.NewTopic(ctx, srv.Endpoint(), f.topic, f.cred, &mnsqueue.Options{MessageTag: strings.Repeat("t", 17)})
	assert.Error(t, err, "a tag over 16 characters")

	tp := f.publisher(t, nil)
	assert.Equal(t, f.topic, tp.Name())
	assert.ErrorIs(t, tp.SendBatch(ctx, [][]byte{[]byte("a"), []byte("b")}), driver.ErrTooLarge, "two bodies")
	assert.ErrorIs(t, tp.SendBatch(ctx, [][]byte{make([]byte, tp.Limits().MaxBody+1)}), driver.ErrTooLarge, "a body over MaxBody")
	_, err = tp.ReceiveBatch(ctx, 1, 0)
	assert.ErrorIs(t, err, mnsqueue.ErrSendOnly)
	assert.ErrorIs(t, tp.DeleteBatch(ctx, []string{"r"}), mnsqueue.ErrSendOnly)
	_, err = tp.ChangeVisibility(ctx, "r", time.Second)
	assert.ErrorIs(t, err, mnsqueue.ErrSendOnly)
	assert.False(t, tp.IsRetryable(err), "send-only is not transient")

	require.NoError(t, srv.DeleteTopic(f.topic))
	err = tp.SendBatch(ctx, [][]byte{[]byte("late")})
	assert.ErrorIs(t, err, driver.ErrQueueNotFound, "publish to a deleted topic")
	require.NoError(t, tp.Close())
	assert.ErrorIs(t, tp.SendBatch(ctx, [][]byte{[]byte("x")}), driver.ErrClosed)

	require.NoError(t, mnsqueue.DeleteTopic(ctx, srv.Endpoint(), f.cred, f.topic), "DeleteTopic of a missing topic is success")
}

// TestTopicHelpers: CreateTopic and Subscribe are idempotent and say when a
// name is taken with other settings.
func TestTopicHelpers(t *testing.T) {
	srv := newServer(t, nil)
	cred := serverCred(srv)
	ctx := t.Context()
	name := uniqueName("topic")
	require.NoError(t, mnsqueue.CreateTopic(ctx, srv.Endpoint(), cred, name, 4096))
	assert.ErrorIs(t, mnsqueue.CreateTopic(ctx, srv.Endpoint(), cred, name, 8192), mnsqueue.ErrTopicExists)
	assert.Error(t, mnsqueue.CreateTopic(ctx, srv.Endpoint(), cred, name, 100), "a size under 1024")
	q := uniqueName("q")
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), cred, q, nil))
	require.NoError(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), cred, name, "s", q, nil))
	info, err := srv.Topic(name)
	require.NoError(t, err)
	assert.Equal(t, mnstest.Subscription{Endpoint: "acs:mns:0:127:queues/" + q, NotifyStrategy: mnstest.StrategyExponentialDecayRetry,
		NotifyContentFormat: mnstest.FormatSimplified}, info.Subscriptions["s"], "the helper's defaults")
	assert.ErrorIs(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), cred, name, "s", q, &mnsqueue.Subscription{Format: mnsqueue.FormatXML}),
		mnsqueue.ErrSubscriptionExists)
	assert.Error(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), cred, name, "s2", q, &mnsqueue.Subscription{Format: "YAML"}))
	assert.Error(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), cred, name, "s2", "missing", nil), "a queue that does not exist")
	require.NoError(t, mnsqueue.Unsubscribe(ctx, srv.Endpoint(), cred, name, "s"))
	require.NoError(t, mnsqueue.Unsubscribe(ctx, srv.Endpoint(), cred, name, "s"), "again: success")
	require.NoError(t, mnsqueue.DeleteTopic(ctx, srv.Endpoint(), cred, name))
	_, err = srv.Topic(name)
	assert.ErrorIs(t, err, mnstest.ErrTopicNotExist)
}
