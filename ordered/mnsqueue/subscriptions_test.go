package mnsqueue_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// ListSubscriptions lists every subscription of a topic with its queue
// (parsed from a queue endpoint, "" for others), filter and format.
func TestListSubscriptions(t *testing.T) {
	srv := newServer(t, nil)
	ctx := t.Context()
	cred := serverCred(srv)
	topic, q := uniqueName("topic"), uniqueName("q")
	require.NoError(t, mnsqueue.CreateTopic(ctx, srv.Endpoint(), cred, topic, 0))
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), cred, q, nil))
	require.NoError(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), cred, topic, "a-tagged", q, &mnsqueue.Subscription{FilterTag: "shard-3"}))
	require.NoError(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), cred, topic, "b-all", q, &mnsqueue.Subscription{Format: mnsqueue.FormatXML}))
	require.NoError(t, srv.Subscribe(topic, "c-http", mnstest.Subscription{Endpoint: "http://example.com/push"}))

	got, err := mnsqueue.ListSubscriptions(ctx, srv.Endpoint(), cred, topic)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, mnsqueue.SubscriptionInfo{Name: "a-tagged", Endpoint: got[0].Endpoint, Queue: q, FilterTag: "shard-3", Format: mnsqueue.FormatSimplified}, got[0])
	assert.Contains(t, got[0].Endpoint, ":queues/"+q)
	assert.Equal(t, mnsqueue.SubscriptionInfo{Name: "b-all", Endpoint: got[1].Endpoint, Queue: q, Format: mnsqueue.FormatXML}, got[1])
	assert.Equal(t, mnsqueue.SubscriptionInfo{Name: "c-http", Endpoint: "http://example.com/push", Format: mnsqueue.FormatXML}, got[2], "not a queue")

	_, err = mnsqueue.ListSubscriptions(ctx, srv.Endpoint(), cred, uniqueName("missing"))
	assert.Error(t, err, "a topic that does not exist")
}
