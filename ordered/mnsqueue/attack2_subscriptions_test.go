package mnsqueue_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// TestAttack2ListSubscriptionsOtherAccount: a subscription that pushes into
// a queue of the same name in another account (or region) is listed with
// Queue set to that name, as if it were the subscriber's own queue. What a
// user sees: scaleout.CheckTopicSubscriptions (and CheckTopicTags) pass
// for a sharded subscriber one of whose tags is subscribed into, say, the
// staging account's "orders-3" (a copied setup script, a wrong account in
// the endpoint): every group of that tag goes to the other account and
// never arrives, which is what the check exists to catch. Cause:
// endpointQueue keeps only the part after ":queues/" and drops the region
// and account of "acs:mns:{region}:{account}:queues/{name}". Suggested
// fix: report the endpoint's region and account (or Queue "" when they
// are not the topic owner's), and have the checks compare them.
func TestAttack2ListSubscriptionsOtherAccount(t *testing.T) {
	srv := newServer(t, nil)
	ctx := t.Context()
	cred := serverCred(srv)
	topic, q := uniqueName("topic"), uniqueName("q")
	require.NoError(t, mnsqueue.CreateTopic(ctx, srv.Endpoint(), cred, topic, 0))
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), cred, q, nil))
	require.NoError(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), cred, topic, "mine", q, &mnsqueue.Subscription{FilterTag: "shard-0"}))
	other := "acs:mns:cn-beijing:9999999999999999:queues/" + q
	require.NoError(t, srv.Subscribe(topic, "theirs", mnstest.Subscription{Endpoint: other, FilterTag: "shard-1"}))

	got, err := mnsqueue.ListSubscriptions(ctx, srv.Endpoint(), cred, topic)
	require.NoError(t, err)
	require.Len(t, got, 2)
	byName := map[string]mnsqueue.SubscriptionInfo{}
	for _, s := range got {
		byName[s.Name] = s
	}
	assert.Equal(t, q, byName["mine"].Queue)
	assert.NotEqual(t, q, byName["theirs"].Queue, "a subscription into another account's queue %q is listed as this account's queue", other)
}
