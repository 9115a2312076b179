package mnstest

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FIFO queues and topics, driven through HTTP with raw signed requests: the
// Go SDK v1.0.11 has no MessageGroupId. See the package documentation,
// # FIFO queues and topics, and /work/shared/reference/mns-fifo.md.

// fifoClient speaks HTTP to a server over loopback (not in process, so that
// dropped connections and long polls behave as on the wire).
type fifoClient struct {
	t    testing.TB
	s    *Server
	http *http.Client
}

func newFIFOClient(t testing.TB, s *Server) *fifoClient {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &fifoClient{t: t, s: s, http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// fifoAnswer is one answer: status, body and, for errors, the code.
type fifoAnswer struct {
	status int
	body   string
	code   string
}

// try sends one signed request; err is a transport error (a dropped
// connection).
func (c *fifoClient) try(method, uri, body string) (fifoAnswer, error) {
	r, err := http.NewRequestWithContext(context.Background(), method, "http://"+c.s.Addr()+uri, strings.NewReader(body))
	require.NoError(c.t, err)
	signRequest(r, []byte(body), c.s.AccessKeyID(), c.s.AccessKeySecret())
	res, err := c.http.Do(r)
	if err != nil {
		return fifoAnswer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return fifoAnswer{}, err
	}
	a := fifoAnswer{status: res.StatusCode, body: string(b)}
	if a.status >= 300 {
		var e struct {
			Code string `xml:"Code"`
		}
		if xml.Unmarshal(b, &e) == nil {
			a.code = e.Code
		}
	}
	return a, nil
}

// do sends one request that must get an answer.
func (c *fifoClient) do(method, uri, body string) fifoAnswer {
	c.t.Helper()
	a, err := c.try(method, uri, body)
	require.NoError(c.t, err, "%s %s", method, uri)
	return a
}

// fifoMsg is a received message; Group is nil when the answer has no
// <MessageGroupId>.
type fifoMsg struct {
	ID           string  `xml:"MessageId"`
	Handle       string  `xml:"ReceiptHandle"`
	Body         string  `xml:"MessageBody"`
	DequeueCount int     `xml:"DequeueCount"`
	Group        *string `xml:"MessageGroupId"`
}

func (m fifoMsg) group() string {
	if m.Group == nil {
		return "<none>"
	}
	return *m.Group
}

// receive receives up to n messages (n > 1: BatchReceiveMessage) without
// waiting; none is an empty slice.
func (c *fifoClient) receive(queue string, n int) []fifoMsg {
	c.t.Helper()
	a := c.do("GET", receiveURI(queue, n), "")
	if a.status == http.StatusNotFound && a.code == CodeMessageNotExist {
		return nil
	}
	require.Equal(c.t, http.StatusOK, a.status, "receive from %s: %s", queue, a.body)
	return parseMessages(c.t, a.body, n)
}

func receiveURI(queue string, n int) string {
	if n > 1 {
		return fmt.Sprintf("/queues/%s/messages?numOfMessages=%d&waitseconds=0", queue, n)
	}
	return "/queues/" + queue + "/messages?waitseconds=0"
}

func parseMessages(t testing.TB, body string, n int) []fifoMsg {
	if n > 1 {
		var ms struct {
			Messages []fifoMsg `xml:"Message"`
		}
		require.NoError(t, xml.Unmarshal([]byte(body), &ms), body)
		return ms.Messages
	}
	var m fifoMsg
	require.NoError(t, xml.Unmarshal([]byte(body), &m), body)
	return []fifoMsg{m}
}

func (c *fifoClient) delete(queue, handle string) fifoAnswer {
	c.t.Helper()
	return c.do("DELETE", "/queues/"+queue+"/messages?ReceiptHandle="+url.QueryEscape(handle), "")
}

// send sends one message with the group (none when group is "-").
func (c *fifoClient) send(queue, body, group string, delay int) fifoAnswer {
	c.t.Helper()
	return c.do("POST", "/queues/"+queue+"/messages", messageXML(body, group, delay))
}

// messageXML writes a <Message> as the Java SDK does: MessageGroupId last.
func messageXML(body, group string, delay int) string {
	x := "<Message><MessageBody>" + body + "</MessageBody><DelaySeconds>" + fmt.Sprint(delay) + "</DelaySeconds><Priority>8</Priority>"
	if group != "-" {
		x += "<MessageGroupId>" + group + "</MessageGroupId>"
	}
	return x + "</Message>"
}

func newFIFOServer(t testing.TB, opts *Options) (*Server, *fifoClient) {
	t.Helper()
	s, err := NewServer(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, newFIFOClient(t, s)
}

func bodies(ms []fifoMsg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Body
	}
	return out
}

func TestFIFOTypes(t *testing.T) {
	s, c := newFIFOServer(t, nil)
	a := c.do("PUT", "/queues/f", "<Queue><VisibilityTimeout>30</VisibilityTimeout><QueueType>fifo</QueueType></Queue>")
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = c.do("PUT", "/queues/f", "<Queue><QueueType>fifo</QueueType></Queue>")
	assert.Equal(t, http.StatusNoContent, a.status, "the same FIFO queue again: %s", a.body)
	a = c.do("PUT", "/queues/f", "<Queue><QueueType>normal</QueueType></Queue>")
	assert.Equal(t, CodeQueueAlreadyExist, a.code, "the name again as a normal queue: %s", a.body)
	a = c.do("PUT", "/queues/n", "")
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = c.do("PUT", "/queues/n", "<Queue><QueueType>normal</QueueType></Queue>")
	assert.Equal(t, http.StatusNoContent, a.status, "normal is the default, so the same attributes: %s", a.body)
	a = c.do("PUT", "/queues/bad", "<Queue><QueueType>lifo</QueueType></Queue>")
	assert.Equal(t, CodeInvalidArgument, a.code, a.body)
	a = c.do("PUT", "/queues/f?metaoverride=true", "<Queue><QueueType>normal</QueueType></Queue>")
	assert.Equal(t, CodeInvalidArgument, a.code, "the type cannot change: %s", a.body)
	require.NoError(t, s.CreateQueue("g", &QueueAttributes{QueueType: QueueTypeFIFO}), "Go API")

	var qa struct {
		QueueType string `xml:"QueueType"`
	}
	for name, want := range map[string]string{"f": "fifo", "n": "normal", "g": "fifo"} {
		a = c.do("GET", "/queues/"+name, "")
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.NoError(t, xml.Unmarshal([]byte(a.body), &qa))
		assert.Equal(t, want, qa.QueueType, "GetQueueAttributes of %s: %s", name, a.body)
	}
	info, err := s.Queue("f")
	require.NoError(t, err)
	assert.Equal(t, QueueTypeFIFO, info.Attributes.QueueType, "QueueInfo")

	req, err := http.NewRequest("GET", "http://"+s.Addr()+"/queues", nil)
	require.NoError(t, err)
	req.Header.Set("x-mns-with-meta", "true")
	signRequest(req, nil, s.AccessKeyID(), s.AccessKeySecret())
	res, err := c.http.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var list struct {
		Queues []struct {
			QueueName, QueueType string
		} `xml:"Queue"`
	}
	require.NoError(t, xml.Unmarshal(b, &list), string(b))
	got := map[string]string{}
	for _, q := range list.Queues {
		got[q.QueueName] = q.QueueType
	}
	assert.Equal(t, map[string]string{"f": "fifo", "g": "fifo", "n": "normal"}, got, "ListQueue with meta: %s", b)

	// Topics.
	a = c.do("PUT", "/topics/ft", "<Topic><TopicType>fifo</TopicType></Topic>")
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = c.do("PUT", "/topics/ft", "<Topic><TopicType>normal</TopicType></Topic>")
	assert.Equal(t, CodeTopicAlreadyExist, a.code, a.body)
	a = c.do("PUT", "/topics/nt", "")
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = c.do("PUT", "/topics/ft?metaoverride=true", "<Topic><TopicType>normal</TopicType></Topic>")
	assert.Equal(t, CodeInvalidArgument, a.code, a.body)
	a = c.do("PUT", "/topics/bt", "<Topic><TopicType>lifo</TopicType></Topic>")
	assert.Equal(t, CodeInvalidArgument, a.code, a.body)
	var ta struct {
		TopicType string `xml:"TopicType"`
	}
	for name, want := range map[string]string{"ft": "fifo", "nt": "normal"} {
		a = c.do("GET", "/topics/"+name, "")
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.NoError(t, xml.Unmarshal([]byte(a.body), &ta))
		assert.Equal(t, want, ta.TopicType, "GetTopicAttributes of %s", name)
	}
	req, err = http.NewRequest("GET", "http://"+s.Addr()+"/topics", nil)
	require.NoError(t, err)
	req.Header.Set("x-mns-with-meta", "true")
	signRequest(req, nil, s.AccessKeyID(), s.AccessKeySecret())
	res, err = c.http.Do(req)
	require.NoError(t, err)
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	var tlist struct {
		Topics []struct{ TopicName, TopicType string } `xml:"Topic"`
	}
	require.NoError(t, xml.Unmarshal(b, &tlist), string(b))
	require.Len(t, tlist.Topics, 2, string(b))
	assert.Equal(t, "fifo", tlist.Topics[0].TopicType, "ListTopic with meta: %s", b)
	assert.Equal(t, "normal", tlist.Topics[1].TopicType, "ListTopic with meta: %s", b)
	ti, err := s.Topic("ft")
	require.NoError(t, err)
	assert.Equal(t, TopicTypeFIFO, ti.Attributes.TopicType, "TopicInfo")
}

func TestFIFOMissingGroupID(t *testing.T) {
	s, c := newFIFOServer(t, nil)
	require.NoError(t, s.CreateQueue("f", &QueueAttributes{QueueType: QueueTypeFIFO}))
	require.NoError(t, s.CreateQueue("n", nil))

	a := c.send("f", "x", "-", 0)
	assert.Equal(t, http.StatusBadRequest, a.status, a.body)
	assert.Equal(t, CodeFifoMissingMessageGroupID, a.code, "send without MessageGroupId: %s", a.body)
	a = c.send("f", "x", "", 0)
	assert.Equal(t, CodeFifoMissingMessageGroupID, a.code, "an empty MessageGroupId is none: %s", a.body)

	batch := "<Messages>" + messageXML("b0", "g", 0) + messageXML("b1", "-", 0) + messageXML("b2", "g", 0) + "</Messages>"
	a = c.do("POST", "/queues/f/messages", batch)
	var res struct {
		Messages []struct{ ErrorCode, MessageId string } `xml:"Message"`
	}
	require.NoError(t, xml.Unmarshal([]byte(a.body), &res), a.body)
	require.Len(t, res.Messages, 3, a.body)
	assert.Empty(t, res.Messages[0].ErrorCode, "entry with a group")
	assert.Equal(t, CodeFifoMissingMessageGroupID, res.Messages[1].ErrorCode, "batch entry without a group: %s", a.body)
	assert.Empty(t, res.Messages[2].ErrorCode, "entry with a group")
	assert.Equal(t, []string{"b0"}, bodies(c.receive("f", 16)), "only the entries with a group were stored, one of group g at a time")
	assert.EqualValues(t, 2, s.Stats().Errors[CodeFifoMissingMessageGroupID], "the two single sends' errors are counted")

	// A standard queue ignores a MessageGroupId.
	a = c.send("n", "plain", "g", 0)
	require.Equal(t, http.StatusCreated, a.status, a.body)
	got := c.receive("n", 1)
	require.Len(t, got, 1)
	assert.Nil(t, got[0].Group, "a standard queue's message has no MessageGroupId")

	// Publish.
	a = c.do("PUT", "/topics/ft", "<Topic><TopicType>fifo</TopicType></Topic>")
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = c.do("POST", "/topics/ft/messages", "<Message><MessageBody>p</MessageBody></Message>")
	assert.Equal(t, http.StatusBadRequest, a.status, a.body)
	assert.Equal(t, CodeFifoMissingMessageGroupID, a.code, "publish to a FIFO topic without MessageGroupId: %s", a.body)
	a = c.do("POST", "/topics/ft/messages", "<Message><MessageBody>p</MessageBody><MessageGroupId>g</MessageGroupId></Message>")
	assert.Equal(t, http.StatusCreated, a.status, a.body)
	a = c.do("PUT", "/topics/nt", "")
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = c.do("POST", "/topics/nt/messages", "<Message><MessageBody>p</MessageBody><MessageGroupId>g</MessageGroupId></Message>")
	assert.Equal(t, http.StatusCreated, a.status, "a normal topic ignores MessageGroupId: %s", a.body)
}

// TestFIFOGroupLock: while a group's message is received and invisible,
// the group's next message goes to no one, while other groups' do; the
// lock ends with the delete or with the visibility timeout, and then the
// same message comes again, first in its group.
func TestFIFOGroupLock(t *testing.T) {
	// One shard and a 0 window would deliver in arrival order anyway; four
	// shards and a wide window let a missing lock show.
	s, c := newFIFOServer(t, &Options{Shards: 4, ReorderWindow: 64})
	require.NoError(t, s.CreateQueue("f", &QueueAttributes{QueueType: QueueTypeFIFO, VisibilityTimeout: 30}))
	for _, m := range []struct{ body, group string }{{"a1", "A"}, {"a2", "A"}, {"b1", "B"}} {
		require.Equal(t, http.StatusCreated, c.send("f", m.body, m.group, 0).status)
	}
	first := c.receive("f", 1)
	require.Len(t, first, 1)
	assert.Equal(t, "a1", first[0].Body, "the oldest message of the oldest group")
	assert.Equal(t, "A", first[0].group(), "the answer carries the MessageGroupId")
	second := c.receive("f", 1)
	require.Len(t, second, 1)
	assert.Equal(t, "b1", second[0].Body, "group A is locked by a1: the next receive gets group B's message, not a2")
	assert.Equal(t, "B", second[0].group())
	assert.Empty(t, bodies(c.receive("f", 16)), "a2 waits while a1 is in flight")

	info, err := s.Queue("f")
	require.NoError(t, err)
	assert.Equal(t, 2, info.LockedGroups, "both groups locked: %+v", info)
	groups, err := s.Groups("f")
	require.NoError(t, err)
	require.Len(t, groups, 2)
	assert.Equal(t, GroupInfo{ID: "A", Messages: 2, HeadID: first[0].ID, Locked: true, MessageIDs: groups[0].MessageIDs}, groups[0])
	assert.Equal(t, first[0].ID, groups[0].MessageIDs[0])

	// The lock ends with the delete.
	require.Equal(t, http.StatusNoContent, c.delete("f", first[0].Handle).status)
	got := c.receive("f", 16)
	assert.Equal(t, []string{"a2"}, bodies(got), "a1 deleted: a2 comes")

	// The lock ends with the visibility timeout: b1 again, before b2.
	require.Equal(t, http.StatusCreated, c.send("f", "b2", "B", 0).status)
	assert.Empty(t, bodies(c.receive("f", 16)), "b1 and a2 in flight: nothing to hand out")
	s.Advance(31 * time.Second)
	again := c.receive("f", 16)
	assert.Equal(t, []string{"a2", "b1"}, sortedBodies(again), "both heads come back, not b2")
	for _, m := range again {
		assert.Equal(t, 2, m.DequeueCount, "%s is delivered a second time", m.Body)
	}
	// A delete with the first, now stale, handle is lost: b1 stays the head.
	assert.Equal(t, CodeMessageNotExist, c.delete("f", second[0].Handle).code, "the old handle of b1 is stale")
	assert.Empty(t, bodies(c.receive("f", 16)), "b1 in flight again: b2 waits")
	for _, m := range again {
		require.Equal(t, http.StatusNoContent, c.delete("f", m.Handle).status)
	}
	assert.Equal(t, []string{"b2"}, bodies(c.receive("f", 16)))
}

func sortedBodies(ms []fifoMsg) []string {
	b := bodies(ms)
	for i := range b {
		for j := i + 1; j < len(b); j++ {
			if b[j] < b[i] {
				b[i], b[j] = b[j], b[i]
			}
		}
	}
	return b
}

// TestFIFORedeliveryKeepsOrder: a group's head comes back after every
// visibility timeout, and nothing behind it is delivered before it is
// deleted; a delayed head blocks its group until its delay ends.
func TestFIFORedeliveryKeepsOrder(t *testing.T) {
	s, c := newFIFOServer(t, &Options{Shards: 4, ReorderWindow: 64})
	require.NoError(t, s.CreateQueue("f", &QueueAttributes{QueueType: QueueTypeFIFO, VisibilityTimeout: 5}))
	require.Equal(t, http.StatusCreated, c.send("f", "m0", "G", 3).status, "a delayed head")
	for i := 1; i < 5; i++ {
		require.Equal(t, http.StatusCreated, c.send("f", fmt.Sprint("m", i), "G", 0).status)
	}
	assert.Empty(t, bodies(c.receive("f", 16)), "the delayed head blocks its group")
	groups, err := s.Groups("f")
	require.NoError(t, err)
	require.Len(t, groups, 1)
	assert.True(t, groups[0].Delayed, "the head is delayed: %+v", groups[0])
	s.Advance(3 * time.Second)
	for i := range 5 {
		want := fmt.Sprint("m", i)
		for round := 1; round <= 3; round++ {
			got := c.receive("f", 16)
			require.Equal(t, []string{want}, bodies(got), "round %d: the head again, alone", round)
			assert.Equal(t, round, got[0].DequeueCount)
			if round < 3 {
				s.Advance(5 * time.Second) // no delete: the visibility timeout lapses
				continue
			}
			require.Equal(t, http.StatusNoContent, c.delete("f", got[0].Handle).status)
		}
	}
	info, err := s.Queue("f")
	require.NoError(t, err)
	assert.Zero(t, info.Active+info.Inactive+info.Delayed+info.Groups, "drained: %+v", info)
}

func TestFIFONoPeek(t *testing.T) {
	s, c := newFIFOServer(t, nil)
	require.NoError(t, s.CreateQueue("f", &QueueAttributes{QueueType: QueueTypeFIFO}))
	require.Equal(t, http.StatusCreated, c.send("f", "x", "g", 0).status)
	for _, uri := range []string{"/queues/f/messages?peekonly=true", "/queues/f/messages?peekonly=true&numOfMessages=4"} {
		a := c.do("GET", uri, "")
		assert.Equal(t, http.StatusBadRequest, a.status, "%s: %s", uri, a.body)
		assert.Equal(t, CodeUnsupportedOperation, a.code, "%s: %s", uri, a.body)
	}
	assert.Equal(t, []string{"x"}, bodies(c.receive("f", 1)), "the message is still there")
}

func TestFIFOTypesMustMatch(t *testing.T) {
	s, c := newFIFOServer(t, nil)
	require.NoError(t, s.CreateQueue("fdlq", &QueueAttributes{QueueType: QueueTypeFIFO}))
	require.NoError(t, s.CreateQueue("ndlq", nil))
	dlq := func(target string) string {
		return "<DlqPolicy><Enabled>true</Enabled><DeadLetterTargetQueue>" + target +
			"</DeadLetterTargetQueue><MaxReceiveCount>1</MaxReceiveCount></DlqPolicy>"
	}
	for _, tc := range []struct{ queue, body string }{
		{"f1", "<Queue><QueueType>fifo</QueueType>" + dlq("ndlq") + "</Queue>"},
		{"n1", "<Queue>" + dlq("fdlq") + "</Queue>"},
	} {
		a := c.do("PUT", "/queues/"+tc.queue, tc.body)
		assert.Equal(t, http.StatusBadRequest, a.status, a.body)
		assert.Equal(t, CodeInvalidArgument, a.code, "%s: %s", tc.body, a.body)
		assert.Contains(t, a.body, "dead-letter queue must be of the queue&#39;s type", a.body)
	}
	err := s.CreateQueue("f2", &QueueAttributes{QueueType: QueueTypeFIFO, DeadLetterQueue: "ndlq", MaxReceiveCount: 1})
	require.ErrorIs(t, err, ErrInvalidArgument, "Go API, FIFO queue with a standard DLQ")
	require.NoError(t, s.CreateQueue("f3", &QueueAttributes{QueueType: QueueTypeFIFO}))
	a := c.do("PUT", "/queues/f3?metaoverride=true", "<Queue>"+dlq("ndlq")+"</Queue>")
	assert.Equal(t, CodeInvalidArgument, a.code, "SetQueueAttributes, FIFO queue with a standard DLQ: %s", a.body)

	// A FIFO queue's FIFO dead-letter queue keeps the group.
	a = c.do("PUT", "/queues/f3?metaoverride=true", "<Queue>"+dlq("fdlq")+"</Queue>")
	require.Equal(t, http.StatusNoContent, a.status, a.body)
	require.Equal(t, http.StatusCreated, c.send("f3", "d", "G", 0).status)
	require.Len(t, c.receive("f3", 1), 1)
	s.Advance(31 * time.Second)
	assert.Empty(t, c.receive("f3", 1), "received once: moved to the dead-letter queue")
	got := c.receive("fdlq", 1)
	require.Len(t, got, 1)
	assert.Equal(t, "G", got[0].group(), "the dead-lettered message keeps its group")

	// Subscriptions: a normal topic cannot subscribe a FIFO queue.
	require.NoError(t, s.CreateTopic("nt", nil))
	require.NoError(t, s.CreateTopic("ft", &TopicAttributes{TopicType: TopicTypeFIFO}))
	sub := "<Subscription><Endpoint>" + s.QueueEndpoint("fdlq") + "</Endpoint></Subscription>"
	a = c.do("PUT", "/topics/nt/subscriptions/s", sub)
	assert.Equal(t, http.StatusBadRequest, a.status, a.body)
	assert.Equal(t, CodeInvalidArgument, a.code, "normal topic, FIFO queue: %s", a.body)
	require.ErrorIs(t, s.Subscribe("nt", "s", Subscription{Endpoint: s.QueueEndpoint("fdlq")}), ErrInvalidArgument, "Go API")
	a = c.do("PUT", "/topics/ft/subscriptions/s", sub)
	assert.Equal(t, http.StatusCreated, a.status, "FIFO topic, FIFO queue: %s", a.body)
	a = c.do("PUT", "/topics/nt/subscriptions/s2", "<Subscription><Endpoint>"+s.QueueEndpoint("ndlq")+"</Endpoint></Subscription>")
	assert.Equal(t, http.StatusCreated, a.status, "normal topic, normal queue: %s", a.body)
}

// TestFIFOTopicPushesKeepOrder: a FIFO topic's pushes to a FIFO queue keep
// the publish order of each group, however Faults.PushDelay delays them,
// and carry the MessageGroupId.
func TestFIFOTopicPushesKeepOrder(t *testing.T) {
	s, c := newFIFOServer(t, &Options{Seed: 11, Faults: Faults{PushDelay: 50 * time.Millisecond}})
	require.NoError(t, s.CreateQueue("f", &QueueAttributes{QueueType: QueueTypeFIFO}))
	require.NoError(t, s.CreateTopic("ft", &TopicAttributes{TopicType: TopicTypeFIFO}))
	require.NoError(t, s.Subscribe("ft", "s", Subscription{Endpoint: s.QueueEndpoint("f"), NotifyContentFormat: FormatSimplified}))
	const n = 40
	for i := range n {
		a := c.do("POST", "/topics/ft/messages", fmt.Sprintf("<Message><MessageBody>%d</MessageBody><MessageGroupId>G</MessageGroupId></Message>", i))
		require.Equal(t, http.StatusCreated, a.status, a.body)
	}
	s.Advance(time.Second) // every push lands
	for i := range n {
		got := c.receive("f", 16)
		require.Len(t, got, 1, "one message of the group at a time")
		require.Equal(t, fmt.Sprint(i), got[0].Body, "publish order kept")
		assert.Equal(t, "G", got[0].group(), "the push keeps its MessageGroupId")
		require.Equal(t, http.StatusNoContent, c.delete("f", got[0].Handle).status)
	}
}

// TestFIFOOrderUnderChaos sends many groups' messages in interleaved
// batches and consumes them with concurrent batch receives, under the
// Chaos preset plus more redelivery, four shards and a wide reorder
// window: per group, the deliveries follow the arrival order (a message
// once delivered is never followed by an older one of its group), every
// message arrives, and batches mix groups.
func TestFIFOOrderUnderChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run skipped in -short mode")
	}
	faults, throttle := Chaos()
	faults.Redeliver = 0.2
	faults.Error5xx = 0.05
	s, c := newFIFOServer(t, &Options{Seed: 5, Shards: 4, ReorderWindow: 64, Faults: faults, Throttle: throttle})
	require.NoError(t, s.CreateQueue("f", &QueueAttributes{QueueType: QueueTypeFIFO, VisibilityTimeout: 1}))
	const groups, perGroup = 24, 20
	// Interleaved batches of 16; a failed batch is sent again whole, so
	// duplicates arrive, in their group's order, after their original.
	var pending []string
	for i := range perGroup {
		for g := range groups {
			pending = append(pending, messageXML(fmt.Sprintf("g%d-%d", g, i), fmt.Sprint("g", g), 0))
		}
	}
	for len(pending) > 0 {
		k := min(16, len(pending))
		a, err := c.try("POST", "/queues/f/messages", "<Messages>"+strings.Join(pending[:k], "")+"</Messages>")
		if err == nil && a.status == http.StatusCreated {
			pending = pending[k:]
		}
		// Else a drop, a 500 or a partial failure, and some entries may
		// be stored: send the batch again. The copies are duplicates that
		// arrive after their originals; the expected order is the one the
		// server recorded.
	}
	// The arrival order the server recorded, duplicates included.
	arrival := map[string]int{} // message id -> index in its group
	groupOf := map[string]string{}
	gs, err := s.Groups("f")
	require.NoError(t, err)
	require.Len(t, gs, groups)
	total := 0
	for _, g := range gs {
		for i, id := range g.MessageIDs {
			arrival[id], groupOf[id] = i, g.ID
		}
		total += len(g.MessageIDs)
	}

	// A delivery of message j is proven to have been handed out after one of
	// k > j (same group) when j's receive request started after k's answer
	// came back; deliveries whose requests overlap prove nothing, as a
	// receiver may read its answer late.
	type delivered struct {
		idx  int
		done time.Time // when the answer came back
	}
	var mu sync.Mutex
	history := map[string][]delivered{} // by group
	seen := map[string]bool{}
	var violations []string
	mixed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			rc := newFIFOClient(t, s)
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				a, err := rc.try("GET", receiveURI("f", 16), "")
				done := time.Now()
				if err != nil || a.status != http.StatusOK {
					continue // dropped, 500, throttled or empty
				}
				ms := parseMessages(t, a.body, 16)
				mu.Lock()
				inBatch := map[string]bool{}
				for _, m := range ms {
					g := groupOf[m.ID]
					if m.group() != g {
						violations = append(violations, fmt.Sprintf("%s: MessageGroupId %q, sent as %q", m.Body, m.group(), g))
					}
					if inBatch[g] {
						violations = append(violations, fmt.Sprintf("%s: a second message of group %s in one batch", m.Body, g))
					}
					inBatch[g] = true
					idx := arrival[m.ID]
					for _, d := range history[g] {
						if d.idx > idx && d.done.Before(start) {
							violations = append(violations, fmt.Sprintf("group %s: %s (arrival %d) delivered after arrival %d", g, m.Body, idx, d.idx))
							break
						}
					}
					history[g] = append(history[g], delivered{idx: idx, done: done})
					seen[m.ID] = true
				}
				if len(inBatch) > 1 {
					mixed++
				}
				mu.Unlock()
				for _, m := range ms {
					_, _ = rc.try("DELETE", "/queues/f/messages?ReceiptHandle="+url.QueryEscape(m.Handle), "")
				}
			}
		})
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		info, err := s.Queue("f")
		require.NoError(t, err)
		if info.Active+info.Inactive+info.Delayed == 0 {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("queue not drained in time: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, violations[:min(len(violations), 10)], "per-group order (first 10 of %d violations)", len(violations))
	assert.Len(t, seen, total, "every stored message delivered")
	assert.Positive(t, mixed, "batches mix groups")
	st := s.Stats()
	assert.Positive(t, st.Redelivered, "redelivery fault fired")
	assert.Positive(t, st.Errors5xx, "5xx fault fired")
	assert.Positive(t, st.Drops, "drop fault fired")
	t.Logf("%d messages (%d sent), %d mixed batches; stats %+v", total, groups*perGroup, mixed, st)
}

// TestFIFOWithGoSDK: the Go SDK v1.0.11, which knows no MessageGroupId,
// receives and deletes a FIFO queue's messages unchanged (it skips the
// element), and its sends are refused with FifoMissingMessageGroupId.
func TestFIFOWithGoSDK(t *testing.T) {
	s, c := newFIFOServer(t, nil)
	require.NoError(t, s.CreateQueue("f", &QueueAttributes{QueueType: QueueTypeFIFO}))
	require.Equal(t, http.StatusCreated, c.send("f", "m1", "G", 0).status)
	require.Equal(t, http.StatusCreated, c.send("f", "m2", "G", 0).status)
	q := ali_mns.NewMNSQueue("f", ali_mns.NewAliMNSClientWithConfig(ali_mns.AliMNSClientConfig{
		EndPoint: s.Endpoint(), AccessKeyId: s.AccessKeyID(), AccessKeySecret: s.AccessKeySecret(), TimeoutSecond: 10,
	}))
	_, err := q.SendMessage(ali_mns.MessageSendRequest{MessageBody: "x", Priority: 8})
	require.Error(t, err, "an SDK send has no MessageGroupId")
	assert.Contains(t, err.Error(), CodeFifoMissingMessageGroupID)
	for _, want := range []string{"m1", "m2"} {
		rc := make(chan ali_mns.BatchMessageReceiveResponse, 1)
		ec := make(chan error, 1)
		q.BatchReceiveMessage(rc, ec, 16, 1) // a wait of 0 sends nothing
		select {
		case r := <-rc:
			require.Len(t, r.Messages, 1, "one message of the group at a time")
			assert.Equal(t, want, r.Messages[0].MessageBody)
			require.NoError(t, q.DeleteMessage(r.Messages[0].ReceiptHandle))
		case err := <-ec:
			require.NoError(t, err, "BatchReceiveMessage")
		}
	}
}
