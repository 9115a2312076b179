package mnstest_test

import (
	"crypto/md5"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// SDK error codes of topic calls (namespace "MNS").
const (
	codeTopicNotExist     = 202
	codeTopicExists       = 203
	codeSubscriptionExist = 206
	codeInvalidEndpoint   = 207
	codeTopicSameAttr     = 209
	codeSubSameAttr       = 210
)

// Every topic call of the Go SDK v1.0.11, unchanged, against the emulator:
// the topic manager's seven calls, then the topic object's.

func TestSDKTopicManager(t *testing.T) {
	srv := newServer(t, nil)
	mgr := ali_mns.NewMNSTopicManager(newClient(srv))

	require.NoError(t, mgr.CreateSimpleTopic("orders"), "CreateSimpleTopic: 201")
	requireCode(t, codeTopicSameAttr, mgr.CreateSimpleTopic("orders"), "CreateSimpleTopic again: 204, which the SDK reports as MNS#209")
	requireCode(t, codeTopicSameAttr, mgr.CreateTopic("orders", 0, false), "a 0 size is not sent: the default, so the same attributes")
	requireCode(t, codeTopicExists, mgr.CreateTopic("orders", 2048, false), "CreateTopic with another size: 409 TopicAlreadyExist")
	require.NoError(t, mgr.CreateTopic("small", 1024, true), "CreateTopic")

	attr, err := mgr.GetTopicAttributes("orders")
	require.NoError(t, err, "GetTopicAttributes")
	assert.Equal(t, "orders", attr.TopicName)
	assert.EqualValues(t, 65536, attr.MaxMessageSize)
	assert.EqualValues(t, 86400, attr.MessageRetentionPeriod, "the service's one-day topic retention")
	assert.False(t, attr.LoggingEnabled)
	assert.NotZero(t, attr.CreateTime)

	require.NoError(t, mgr.SetTopicAttributes("orders", 4096, true), "SetTopicAttributes")
	attr, err = mgr.GetTopicAttributes("orders")
	require.NoError(t, err)
	assert.EqualValues(t, 4096, attr.MaxMessageSize, "size after SetTopicAttributes")
	assert.True(t, attr.LoggingEnabled, "logging after SetTopicAttributes")
	requireCode(t, codeInvalidArgument, mgr.SetTopicAttributes("orders", 100, false), "a size under 1024")

	for i := range 3 {
		require.NoError(t, mgr.CreateSimpleTopic(fmt.Sprintf("page-%d", i)))
	}
	page, err := mgr.ListTopic("", 2, "page-")
	require.NoError(t, err, "ListTopic")
	require.Len(t, page.Topics, 2)
	assert.True(t, strings.HasSuffix(page.Topics[0].TopicURL, "/topics/page-0"), page.Topics[0].TopicURL)
	assert.Equal(t, "page-2", page.NextMarker, "marker of the next page")
	page, err = mgr.ListTopic(page.NextMarker, 2, "page-")
	require.NoError(t, err)
	require.Len(t, page.Topics, 1)
	assert.Empty(t, page.NextMarker, "no NextMarker on the last page")
	detail, err := mgr.ListTopicDetail("", 10, "")
	require.NoError(t, err, "ListTopicDetail")
	var names []string
	for _, a := range detail.Attrs {
		names = append(names, a.TopicName)
	}
	assert.Equal(t, []string{"orders", "page-0", "page-1", "page-2", "small"}, names)
	assert.EqualValues(t, 1024, detail.Attrs[4].MaxMessageSize)

	require.NoError(t, mgr.DeleteTopic("orders"), "DeleteTopic")
	_, err = mgr.GetTopicAttributes("orders")
	requireCode(t, codeTopicNotExist, err, "GetTopicAttributes after DeleteTopic")
	requireCode(t, codeTopicNotExist, mgr.DeleteTopic("orders"), "DeleteTopic of a missing topic")
	requireCode(t, 204, mgr.CreateSimpleTopic("bad_name"), "an invalid topic name")
}

func TestSDKTopicObject(t *testing.T) {
	srv := newServer(t, nil)
	client := newClient(srv)
	require.NoError(t, ali_mns.NewMNSTopicManager(client).CreateSimpleTopic("orders"))
	require.NoError(t, srv.CreateQueue("q1", nil))
	topic := ali_mns.NewMNSTopic("orders", client)
	assert.Equal(t, "orders", topic.Name())
	ep := topic.GenerateQueueEndpoint("q1")
	assert.Equal(t, "acs:mns:0:127:queues/q1", ep, "what the SDK derives from the loopback endpoint")

	sub := ali_mns.MessageSubsribeRequest{Endpoint: ep, NotifyContentFormat: ali_mns.SIMPLIFIED}
	require.NoError(t, topic.Subscribe("s1", sub), "Subscribe: 201")
	requireCode(t, codeSubSameAttr, topic.Subscribe("s1", sub), "Subscribe again: 204, reported as MNS#210")
	requireCode(t, codeSubscriptionExist, topic.Subscribe("s1", ali_mns.MessageSubsribeRequest{Endpoint: ep}),
		"Subscribe with another format: 409 SubscriptionAlreadyExist")
	require.NoError(t, topic.Subscribe("s2", ali_mns.MessageSubsribeRequest{Endpoint: ep, FilterTag: "red",
		NotifyStrategy: ali_mns.EXPONENTIAL_DECAY_RETRY, NotifyContentFormat: ali_mns.NotifyContentFormatType("JSON")}))
	require.NoError(t, topic.Subscribe("mail", ali_mns.MessageSubsribeRequest{Endpoint: topic.GenerateMailEndpoint("a@example.com")}))

	attr, err := topic.GetSubscriptionAttributes("s1")
	require.NoError(t, err, "GetSubscriptionAttributes")
	assert.Equal(t, "s1", attr.SubscriptionName)
	assert.Equal(t, "orders", attr.TopicName)
	assert.Equal(t, ep, attr.Endpoint)
	assert.Equal(t, ali_mns.BACKOFF_RETRY, attr.NotifyStrategy, "default strategy")
	assert.Equal(t, ali_mns.SIMPLIFIED, attr.NotifyContentFormat)
	assert.Equal(t, mnstest.DefaultAccountID, attr.TopicOwner)
	assert.Equal(t, mnstest.DefaultAccountID, attr.Subscriber)
	assert.NotZero(t, attr.CreateTime)

	require.NoError(t, topic.SetSubscriptionAttributes("s1", ali_mns.EXPONENTIAL_DECAY_RETRY), "SetSubscriptionAttributes")
	attr, err = topic.GetSubscriptionAttributes("s1")
	require.NoError(t, err)
	assert.Equal(t, ali_mns.EXPONENTIAL_DECAY_RETRY, attr.NotifyStrategy, "strategy after SetSubscriptionAttributes")
	assert.Equal(t, ali_mns.SIMPLIFIED, attr.NotifyContentFormat, "format unchanged")
	err = topic.SetSubscriptionAttributes("nope", ali_mns.BACKOFF_RETRY)
	requireCode(t, codeUnknownCode, err, "SubscriptionNotExist is not in the SDK's table")
	assert.Contains(t, err.Error(), "code: SubscriptionNotExist,")

	subs, err := topic.ListSubscriptionByTopic("", 2, "")
	require.NoError(t, err, "ListSubscriptionByTopic")
	require.Len(t, subs.Subscriptions, 2)
	assert.True(t, strings.HasSuffix(subs.Subscriptions[0].SubscriptionURL, "/topics/orders/subscriptions/mail"), subs.Subscriptions[0].SubscriptionURL)
	assert.Equal(t, "s2", subs.NextMarker)
	details, err := topic.ListSubscriptionDetailByTopic("", 10, "s")
	require.NoError(t, err, "ListSubscriptionDetailByTopic")
	require.Len(t, details.Attrs, 2)
	assert.Equal(t, "red", details.Attrs[1].FilterTag)
	assert.Equal(t, ali_mns.NotifyContentFormatType("JSON"), details.Attrs[1].NotifyContentFormat)

	resp, err := topic.PublishMessage(ali_mns.MessagePublishRequest{MessageBody: "#1#hello", MessageTag: "red"})
	require.NoError(t, err, "PublishMessage")
	assert.Regexp(t, `^[0-9A-F]{32}$`, resp.MessageId)
	assert.Equal(t, upperMD5("#1#hello"), resp.MessageBodyMD5)

	require.NoError(t, topic.Unsubscribe("s1"), "Unsubscribe")
	require.NoError(t, topic.Unsubscribe("s1"), "Unsubscribe of a missing subscription: 204")
	_, err = topic.GetSubscriptionAttributes("s1")
	assert.Contains(t, err.Error(), "code: SubscriptionNotExist,", "after Unsubscribe")
	info, err := srv.Topic("orders")
	require.NoError(t, err)
	assert.Len(t, info.Subscriptions, 2, "s2 and mail left")
}

// upperMD5 is the upper-case hex MD5 the service reports.
func upperMD5(s string) string { return fmt.Sprintf("%X", md5.Sum([]byte(s))) }

// TestFanOutFormats publishes through the SDK to three queues subscribed
// with the three formats, and a fourth with a FilterTag, and checks each
// body exactly as the service writes it.
func TestFanOutFormats(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Shards: 1})
	client := newClient(srv)
	require.NoError(t, srv.CreateTopic("orders", nil))
	formats := []string{mnstest.FormatSimplified, mnstest.FormatXML, mnstest.FormatJSON}
	for _, f := range formats {
		q := "q-" + strings.ToLower(f)
		require.NoError(t, srv.CreateQueue(q, nil))
		require.NoError(t, srv.Subscribe("orders", "to-"+q, mnstest.Subscription{Endpoint: srv.QueueEndpoint(q), NotifyContentFormat: f}))
	}
	require.NoError(t, srv.CreateQueue("q-red", nil))
	require.NoError(t, srv.Subscribe("orders", "to-red", mnstest.Subscription{Endpoint: srv.QueueEndpoint("q-red"), FilterTag: "red",
		NotifyContentFormat: mnstest.FormatSimplified}))

	topic := ali_mns.NewMNSTopic("orders", client)
	const body = "#17#a<b&c\n\"q\" é"
	before := time.Now().UnixMilli()
	resp, err := topic.PublishMessage(ali_mns.MessagePublishRequest{MessageBody: body, MessageTag: "red"})
	require.NoError(t, err)
	after := time.Now().UnixMilli()
	_, err = topic.PublishMessage(ali_mns.MessagePublishRequest{MessageBody: "#18#untagged"})
	require.NoError(t, err)
	sum := upperMD5(body)

	got := func(q string) []string {
		t.Helper()
		ms, err := batchReceive(ali_mns.NewMNSQueue(q, client), 16)
		require.NoError(t, err, "receive from %s", q)
		var bodies []string
		for _, m := range ms {
			bodies = append(bodies, m.MessageBody)
			assert.Equal(t, upperMD5(m.MessageBody), m.MessageBodyMD5, "queue message MD5 is of the stored body")
		}
		return bodies
	}
	simple := got("q-simplified")
	assert.Equal(t, []string{body, "#18#untagged"}, simple, "SIMPLIFIED: the published bodies, verbatim")
	assert.Equal(t, []string{body}, got("q-red"), "FilterTag red: only the tagged publish")

	xmlBodies := got("q-xml")
	require.Len(t, xmlBodies, 2)
	x := xmlBodies[0]
	var n struct {
		XMLName                                 xml.Name `xml:"Notification"`
		TopicOwner, TopicName, Subscriber       string
		SubscriptionName, MessageId, MessageMD5 string
		MessageTag, Message                     string
		PublishTime                             int64
	}
	require.NoError(t, xml.Unmarshal([]byte(x), &n), "an XML notification: %s", x)
	assert.Equal(t, body, n.Message, "the published body in <Message>")
	assert.Equal(t, resp.MessageId, n.MessageId, "the topic message's id")
	assert.Equal(t, sum, n.MessageMD5)
	assert.Equal(t, "red", n.MessageTag)
	assert.Equal(t, "orders", n.TopicName)
	assert.Equal(t, "to-q-xml", n.SubscriptionName)
	assert.Equal(t, mnstest.DefaultAccountID, n.TopicOwner)
	assert.Equal(t, mnstest.DefaultAccountID, n.Subscriber)
	assert.True(t, n.PublishTime >= before && n.PublishTime <= after, "PublishTime %d in ms within [%d, %d]", n.PublishTime, before, after)
	// The exact bytes, as the service lays them out.
	want := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<Notification xmlns="http://mns.aliyuncs.com/doc/v1/">` + "\n" +
		"  <TopicOwner>1234567890</TopicOwner>\n" +
		"  <TopicName>orders</TopicName>\n" +
		"  <Subscriber>1234567890</Subscriber>\n" +
		"  <SubscriptionName>to-q-xml</SubscriptionName>\n" +
		"  <MessageId>" + resp.MessageId + "</MessageId>\n" +
		"  <MessageMD5>" + sum + "</MessageMD5>\n" +
		"  <MessageTag>red</MessageTag>\n" +
		"  <Message>#17#a&lt;b&amp;c&#xA;&#34;q&#34; é</Message>\n" +
		"  <PublishTime>" + strconv.FormatInt(n.PublishTime, 10) + "</PublishTime>\n" +
		"</Notification>"
	assert.Equal(t, want, x, "XML notification bytes")
	assert.NotContains(t, xmlBodies[1], "<MessageTag>", "no tag element for an untagged publish")

	jsonBodies := got("q-json")
	require.Len(t, jsonBodies, 2)
	var j map[string]any
	require.NoError(t, json.Unmarshal([]byte(jsonBodies[0]), &j), "a JSON notification: %s", jsonBodies[0])
	assert.Equal(t, map[string]any{
		"TopicOwner": "1234567890", "TopicName": "orders", "Subscriber": "1234567890", "SubscriptionName": "to-q-json",
		"MessageId": resp.MessageId, "Message": body, "MessageMD5": sum, "MessageTag": "red",
		"PublishTime": strconv.FormatInt(n.PublishTime, 10),
	}, j, "JSON notification: every value a string")
	assert.True(t, strings.HasPrefix(jsonBodies[0], `{"TopicOwner":"1234567890","TopicName":"orders","Subscriber":`), "key order of the service's example: %s", jsonBodies[0])
	var untagged map[string]any
	require.NoError(t, json.Unmarshal([]byte(jsonBodies[1]), &untagged))
	_, tagged := untagged["MessageTag"]
	assert.False(t, tagged, "no MessageTag key for an untagged publish")

	st := srv.Stats()
	assert.EqualValues(t, 2, st.Published)
	assert.EqualValues(t, 7, st.Pushed, "3 formats x 2 publishes + 1 filtered")
	assert.EqualValues(t, 2, st.Requests["PublishMessage"])
}

// TestPushChaos: with push faults on, pushes are delayed (so they overtake
// each other), some come twice and some never; the counters say exactly
// how many, and a seed replays the same faults.
func TestPushChaos(t *testing.T) {
	const n = 300
	var mu sync.Mutex
	var lost []mnstest.LostPush
	run := func(seed int64) (bodies []string, st mnstest.Stats) {
		lost = nil
		srv := newServer(t, &mnstest.Options{Seed: seed, Shards: 1, Faults: mnstest.Faults{
			PushDelay: 2 * time.Second, PushDuplicate: 0.1, PushDrop: 0.1},
			OnPushLost: func(l mnstest.LostPush) { mu.Lock(); lost = append(lost, l); mu.Unlock() }})
		client := newClient(srv)
		require.NoError(t, srv.CreateTopic("t", nil))
		require.NoError(t, srv.CreateQueue("q", nil))
		require.NoError(t, srv.Subscribe("t", "s", mnstest.Subscription{Endpoint: srv.QueueEndpoint("q"), NotifyContentFormat: mnstest.FormatSimplified}))
		topic := ali_mns.NewMNSTopic("t", client)
		for i := range n {
			_, err := topic.PublishMessage(ali_mns.MessagePublishRequest{MessageBody: strconv.Itoa(i)})
			require.NoError(t, err)
		}
		srv.Advance(3 * time.Second) // every delayed push has landed
		q := ali_mns.NewMNSQueue("q", client)
		for {
			ms, err := batchReceive(q, 16)
			if mnsCode(err) == codeMessageNotExist {
				break
			}
			require.NoError(t, err)
			for _, m := range ms {
				bodies = append(bodies, m.MessageBody)
			}
		}
		return bodies, srv.Stats()
	}
	bodies, st := run(7)
	assert.EqualValues(t, n, st.Published)
	assert.Positive(t, st.PushDropped, "some pushes dropped")
	assert.Positive(t, st.PushDuplicated, "some pushes duplicated")
	assert.EqualValues(t, n-st.PushDropped+st.PushDuplicated, len(bodies), "received = published - dropped + duplicated")
	assert.EqualValues(t, len(bodies), st.Pushed)
	seen := map[string]int{}
	inversions := 0
	last := -1
	for _, b := range bodies {
		seen[b]++
		v, err := strconv.Atoi(b)
		require.NoError(t, err)
		if v < last {
			inversions++
		}
		last = v
	}
	assert.EqualValues(t, n-st.PushDropped, len(seen), "distinct bodies = published - dropped")
	dups := 0
	for _, c := range seen {
		assert.LessOrEqual(t, c, 2, "a push comes at most twice")
		if c == 2 {
			dups++
		}
	}
	assert.EqualValues(t, st.PushDuplicated, dups)
	mu.Lock()
	assert.EqualValues(t, st.PushDropped, len(lost), "OnPushLost called once per dropped push")
	for _, l := range lost {
		assert.Zero(t, seen[l.Body], "body %s reported lost was received", l.Body)
		assert.Equal(t, "dropped", l.Reason)
		assert.Equal(t, "q", l.Queue)
		assert.Equal(t, "s", l.Subscription)
		assert.Regexp(t, `^[0-9A-F]{32}$`, l.MessageID)
		seen[l.Body]++
	}
	mu.Unlock()
	assert.Len(t, seen, n, "every published body was received or reported lost")
	assert.Positive(t, inversions, "delayed pushes overtake each other (one shard: only the push delay reorders)")
	again, _ := run(7)
	// A push to a queue deleted since the subscription is lost too.
	srv := newServer(t, &mnstest.Options{OnPushLost: func(l mnstest.LostPush) { mu.Lock(); lost = append(lost, l); mu.Unlock() }})
	require.NoError(t, srv.CreateTopic("t", nil))
	require.NoError(t, srv.CreateQueue("gone", nil))
	require.NoError(t, srv.Subscribe("t", "s", mnstest.Subscription{Endpoint: srv.QueueEndpoint("gone")}))
	require.NoError(t, srv.DeleteQueue("gone"))
	lost = nil
	_, err := ali_mns.NewMNSTopic("t", newClient(srv)).PublishMessage(ali_mns.MessagePublishRequest{MessageBody: "x"})
	require.NoError(t, err)
	mu.Lock()
	require.Len(t, lost, 1, "the push to the deleted queue is reported")
	assert.Equal(t, "no queue", lost[0].Reason)
	mu.Unlock()
	assert.EqualValues(t, 1, srv.Stats().PushFailed)
	slices.Sort(bodies)
	slices.Sort(again)
	assert.Equal(t, bodies, again, "the same seed drops and duplicates the same pushes (their order follows the wall clock)")
}

// TestTopicFanOutPastFailedPush: a publish fans out to every subscribed
// queue, each push on its own. With four subscriptions in name order, the
// first to a queue deleted since and the third to a queue shrunk below the
// notification's size, the second and the fourth still get the message,
// and each failed push is reported: OnPushLost with its reason, and
// Stats.PushFailed.
func TestTopicFanOutPastFailedPush(t *testing.T) {
	var mu sync.Mutex
	var lost []mnstest.LostPush
	srv := newServer(t, &mnstest.Options{OnPushLost: func(l mnstest.LostPush) { mu.Lock(); lost = append(lost, l); mu.Unlock() }})
	client := newClient(srv)
	require.NoError(t, srv.CreateTopic("t", nil))
	for _, q := range []string{"gone", "live1", "small", "live2"} {
		require.NoError(t, srv.CreateQueue(q, nil))
	}
	for sub, q := range map[string]string{"a": "gone", "b": "live1", "c": "small", "d": "live2"} {
		require.NoError(t, srv.Subscribe("t", sub, mnstest.Subscription{Endpoint: srv.QueueEndpoint(q), NotifyContentFormat: mnstest.FormatSimplified}))
	}
	require.NoError(t, srv.DeleteQueue("gone"))
	require.NoError(t, ali_mns.NewMNSQueueManager(client).SetQueueAttributesWithOptions("small", ali_mns.WithMaxMessageSize(1024)),
		"the queue shrinks below the topic's size after it was subscribed")
	body := strings.Repeat("x", 2000)
	_, err := ali_mns.NewMNSTopic("t", client).PublishMessage(ali_mns.MessagePublishRequest{MessageBody: body})
	require.NoError(t, err)

	for _, q := range []string{"live1", "live2"} {
		m, err := receive(ali_mns.NewMNSQueue(q, client))
		require.NoError(t, err, "queue %s, subscribed after a failed push, gets the message", q)
		assert.Equal(t, body, m.MessageBody, "queue %s", q)
	}
	mu.Lock()
	defer mu.Unlock()
	got := map[string]string{}
	for _, l := range lost {
		got[l.Subscription] = l.Reason
	}
	assert.Equal(t, map[string]string{"a": "no queue", "c": "too large"}, got, "each failed push is reported once, with its reason")
	assert.Len(t, lost, 2, "OnPushLost calls")
	st := srv.Stats()
	assert.EqualValues(t, 2, st.PushFailed, "Stats.PushFailed counts the failed pushes")
	assert.EqualValues(t, 2, st.Pushed, "Stats.Pushed counts the pushes that landed")
}

// TestTopicErrors: what the service refuses, as the SDK reports it.
func TestTopicErrors(t *testing.T) {
	srv := newServer(t, nil)
	client := newClient(srv)
	require.NoError(t, srv.CreateTopic("small", &mnstest.TopicAttributes{MaximumMessageSize: 1024}))
	require.NoError(t, srv.CreateQueue("q", nil))
	require.NoError(t, srv.CreateQueue("tiny", &mnstest.QueueAttributes{MaximumMessageSize: 1024}))
	missing := ali_mns.NewMNSTopic("missing", client)
	_, err := missing.PublishMessage(ali_mns.MessagePublishRequest{MessageBody: "x"})
	requireCode(t, codeTopicNotExist, err, "publish to a missing topic")
	requireCode(t, codeTopicNotExist, missing.Subscribe("s", ali_mns.MessageSubsribeRequest{Endpoint: missing.GenerateQueueEndpoint("q")}),
		"subscribe to a missing topic")

	topic := ali_mns.NewMNSTopic("small", client)
	_, err = topic.PublishMessage(ali_mns.MessagePublishRequest{MessageBody: strings.Repeat("b", 1025)})
	requireCode(t, codeInvalidArgument, err, "a body over the topic's MaximumMessageSize")
	_, err = topic.PublishMessage(ali_mns.MessagePublishRequest{MessageBody: "x", MessageTag: strings.Repeat("t", 17)})
	requireCode(t, codeInvalidArgument, err, "a tag over 16 characters")
	requireCode(t, codeInvalidEndpoint, topic.Subscribe("s", ali_mns.MessageSubsribeRequest{Endpoint: "ftp://x"}), "an endpoint of no known kind")
	requireCode(t, codeInvalidEndpoint, topic.Subscribe("s", ali_mns.MessageSubsribeRequest{Endpoint: topic.GenerateQueueEndpoint("nope")}),
		"a queue that does not exist")
	requireCode(t, codeInvalidArgument, topic.Subscribe("s", ali_mns.MessageSubsribeRequest{Endpoint: topic.GenerateQueueEndpoint("q"),
		NotifyContentFormat: "YAML"}), "an unknown format")
	requireCode(t, codeInvalidArgument, topic.Subscribe("s", ali_mns.MessageSubsribeRequest{Endpoint: topic.GenerateQueueEndpoint("q"),
		FilterTag: strings.Repeat("f", 17)}), "a filter tag over 16 characters")
	require.NoError(t, topic.Subscribe("s", ali_mns.MessageSubsribeRequest{Endpoint: topic.GenerateQueueEndpoint("tiny")}),
		"a queue as large as the topic")

	big := ali_mns.NewMNSTopic("big", client)
	require.NoError(t, srv.CreateTopic("big", nil))
	requireCode(t, codeInvalidArgument, big.Subscribe("s", ali_mns.MessageSubsribeRequest{Endpoint: big.GenerateQueueEndpoint("tiny")}),
		"a queue smaller than the topic: the service refuses the subscription")
	for i := range 100 {
		require.NoError(t, big.Subscribe(fmt.Sprintf("s%03d", i), ali_mns.MessageSubsribeRequest{Endpoint: big.GenerateQueueEndpoint("q")}))
	}
	err = big.Subscribe("s100", ali_mns.MessageSubsribeRequest{Endpoint: big.GenerateQueueEndpoint("q")})
	require.Error(t, err, "the 101st subscription")
	assert.Contains(t, err.Error(), "code: SubscriptionNumExceededLimit,")
	assert.ErrorIs(t, srv.Subscribe("big", "s101", mnstest.Subscription{Endpoint: srv.QueueEndpoint("q")}), mnstest.ErrLimitExceeded)
}

// TestTopicNamesAndSubscriptionNames: names are validated as the service
// does.
func TestTopicNamesAndSubscriptionNames(t *testing.T) {
	srv := newServer(t, nil)
	assert.ErrorIs(t, srv.CreateTopic("has_underscore", nil), mnstest.ErrInvalidArgument)
	assert.ErrorIs(t, srv.CreateTopic(strings.Repeat("a", 121), nil), mnstest.ErrInvalidArgument)
	require.NoError(t, srv.CreateTopic("t", nil))
	require.NoError(t, srv.CreateQueue("q", nil))
	assert.ErrorIs(t, srv.Subscribe("t", "-lead", mnstest.Subscription{Endpoint: srv.QueueEndpoint("q")}), mnstest.ErrInvalidArgument)
	assert.ErrorIs(t, srv.Subscribe("t", strings.Repeat("s", 256), mnstest.Subscription{Endpoint: srv.QueueEndpoint("q")}), mnstest.ErrInvalidArgument)
	require.NoError(t, srv.Subscribe("t", strings.Repeat("s", 255), mnstest.Subscription{Endpoint: srv.QueueEndpoint("q")}))
	assert.ErrorIs(t, srv.Subscribe("nope", "s", mnstest.Subscription{Endpoint: srv.QueueEndpoint("q")}), mnstest.ErrTopicNotExist)
}
