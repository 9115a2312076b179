package mnstest

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Topics and subscriptions: the server's side (shared by the REST API and
// the Go API), then the REST handlers.

// CreateTopic creates a topic as the CreateTopic API does: nil attrs means
// the defaults; an existing topic with the same attributes is success, with
// other attributes ErrTopicExists.
func (s *Server) CreateTopic(name string, attrs *TopicAttributes) error {
	var a TopicAttributes
	if attrs != nil {
		a = *attrs
	}
	if s.closed() {
		return ErrClosed
	}
	_, err := s.createTopic(name, a.withDefaults())
	return goError("create topic", name, err)
}

// goError turns an answer of the REST API into an error of the Go API.
func goError(op, name string, err *apiError) error {
	switch err {
	case nil:
		return nil
	case errQueueExists:
		return fmt.Errorf("mnstest: %s %q: %w", op, name, ErrQueueExists)
	case errTopicExists:
		return fmt.Errorf("mnstest: %s %q: %w", op, name, ErrTopicExists)
	case errSubExists:
		return fmt.Errorf("mnstest: %s %q: %w", op, name, ErrSubscriptionExists)
	case errTopicNotExist:
		return fmt.Errorf("mnstest: %s %q: %w", op, name, ErrTopicNotExist)
	case errQueueLimit, errTopicLimit, errSubLimit:
		return fmt.Errorf("mnstest: %s %q: %s: %w", op, name, err.message, ErrLimitExceeded)
	}
	return fmt.Errorf("mnstest: %s %q: %s: %w", op, name, err.message, ErrInvalidArgument)
}

func (s *Server) createTopic(name string, a TopicAttributes) (created bool, _ *apiError) {
	if err := checkTopicName(name); err != nil {
		return false, err
	}
	if err := a.check(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.topics[name]; ok {
		t.mu.Lock()
		same := t.attrs == a
		t.mu.Unlock()
		if same {
			return false, nil
		}
		return false, errTopicExists
	}
	if len(s.topics) >= s.opts.MaxTopics {
		return false, errTopicLimit
	}
	s.entityID++
	s.topics[name] = newTopic(name, s.entityID, a, s.now())
	return true, nil
}

// DeleteTopic deletes a topic and its subscriptions. Pushes already on
// their way to subscribed queues still arrive.
func (s *Server) DeleteTopic(name string) error {
	if !s.deleteTopic(name) {
		return fmt.Errorf("mnstest: delete topic %q: %w", name, ErrTopicNotExist)
	}
	return nil
}

func (s *Server) deleteTopic(name string) bool {
	s.mu.Lock()
	t, ok := s.topics[name]
	delete(s.topics, name)
	s.mu.Unlock()
	if ok {
		t.mu.Lock()
		t.deleted = true
		t.mu.Unlock()
	}
	return ok
}

func (s *Server) topic(name string) *topic {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.topics[name]
}

// lockedTopic returns the topic, locked, or TopicNotExist.
func (s *Server) lockedTopic(name string) (*topic, *apiError) {
	t := s.topic(name)
	if t == nil {
		return nil, errTopicNotExist
	}
	t.mu.Lock()
	if t.deleted {
		t.mu.Unlock()
		return nil, errTopicNotExist
	}
	return t, nil
}

// Topic describes a topic and its subscriptions.
func (s *Server) Topic(name string) (TopicInfo, error) {
	t, err := s.lockedTopic(name)
	if err != nil {
		return TopicInfo{}, goError("topic", name, err)
	}
	defer t.mu.Unlock()
	return t.info(), nil
}

// Topics describes every topic, sorted by name.
func (s *Server) Topics() []TopicInfo {
	s.mu.RLock()
	ts := make([]*topic, 0, len(s.topics))
	for _, t := range s.topics {
		ts = append(ts, t)
	}
	s.mu.RUnlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	out := make([]TopicInfo, len(ts))
	for i, t := range ts {
		t.mu.Lock()
		out[i] = t.info()
		t.mu.Unlock()
	}
	return out
}

// QueueEndpoint returns the subscription endpoint of a queue of this server,
// "acs:mns:local:<AccountID>:queues/<queue>", in the shape of the service's
// queue endpoints.
func (s *Server) QueueEndpoint(queue string) string {
	return "acs:mns:local:" + s.opts.AccountID + ":queues/" + queue
}

// Subscribe subscribes name to a topic as the Subscribe API does: the same
// subscription again is success, one with other settings
// ErrSubscriptionExists. A queue endpoint must name an existing queue whose
// MaximumMessageSize is at least the topic's (the service refuses smaller
// ones).
func (s *Server) Subscribe(topicName, name string, sub Subscription) error {
	if s.closed() {
		return ErrClosed
	}
	_, err := s.subscribe(topicName, name, sub.withDefaults())
	return goError("subscribe", topicName+"/"+name, err)
}

func (s *Server) subscribe(topicName, name string, sub Subscription) (created bool, _ *apiError) {
	if err := checkSubscriptionName(name); err != nil {
		return false, err
	}
	qname, err := sub.check()
	if err != nil {
		return false, err
	}
	qsize, qfifo := 0, false
	if qname != "" {
		// The queue is looked at before the topic is locked: a queue lock
		// is never taken inside a topic lock.
		q := s.queue(qname)
		if q == nil {
			return false, newAPIError(http.StatusBadRequest, CodeEndpointInvalid, "The queue "+qname+" of the endpoint does not exist.")
		}
		q.mu.Lock()
		qsize, qfifo = q.attrs.MaximumMessageSize, q.fifo
		q.mu.Unlock()
	}
	t, err := s.lockedTopic(topicName)
	if err != nil {
		return false, err
	}
	defer t.mu.Unlock()
	if qname != "" && qsize < t.attrs.MaximumMessageSize {
		return false, invalidArgument("The MaximumMessageSize of queue " + qname + " is smaller than the topic's.")
	}
	if qfifo && !t.fifo {
		return false, invalidArgument("A normal topic cannot subscribe the fifo queue " + qname + ".")
	}
	if old, ok := t.subs[name]; ok {
		if old.Subscription == sub {
			return false, nil
		}
		return false, errSubExists
	}
	if len(t.subs) >= maxSubscriptions {
		return false, errSubLimit
	}
	now := s.now()
	t.subs[name] = &subscription{name: name, Subscription: sub, queue: qname, created: now, modified: now}
	return true, nil
}

// Unsubscribe removes a subscription; one that does not exist is success,
// as in the service.
func (s *Server) Unsubscribe(topicName, name string) error {
	return goError("unsubscribe", topicName+"/"+name, s.unsubscribe(topicName, name))
}

func (s *Server) unsubscribe(topicName, name string) *apiError {
	t, err := s.lockedTopic(topicName)
	if err != nil {
		return err
	}
	delete(t.subs, name)
	t.mu.Unlock()
	return nil
}

// deliver sends the pushes of a publish on their way: each lands in its
// queue after its delay and becomes a new message there, with the queue's
// delay (queue.land). A queue that is gone or a body over the queue's
// MaximumMessageSize fails the push, and so does a full emulator when it
// lands (counted in Stats.PushFailed), as the service drops a push whose
// retries fail. It returns the pushes that failed at once.
func (s *Server) deliver(pushes []push, now int64) (failed []push, reasons []string) {
	for _, p := range pushes {
		q := s.queue(p.queue)
		reason := "no queue"
		if q != nil {
			q.mu.Lock()
			switch {
			case q.deleted:
			case len(p.body) > q.attrs.MaximumMessageSize:
				reason = "too large"
			default:
				reason = ""
				q.expect(p.body, p.group, now+p.delay)
				q.advance(now)
			}
			q.mu.Unlock()
		}
		if reason != "" {
			s.stats.pushFailed.Add(1)
			failed, reasons = append(failed, p), append(reasons, reason)
		}
	}
	return failed, reasons
}

// lost reports pushes that never reached their queue to Options.OnPushLost.
// The caller holds no lock.
func (s *Server) lost(topicName string, p *published, pushes []push, reason func(i int) string) {
	if s.opts.OnPushLost == nil {
		return
	}
	for i, ps := range pushes {
		s.opts.OnPushLost(LostPush{Topic: topicName, Subscription: ps.sub, Queue: ps.queue, MessageID: p.id, Body: p.body, Reason: reason(i)})
	}
}

// REST handlers.

// topicBody is a CreateTopic or SetTopicAttributes body.
type topicBody struct {
	XMLName            xml.Name
	MaximumMessageSize *string `xml:"MaximumMessageSize"`
	LoggingEnabled     *string `xml:"LoggingEnabled"`
	TopicType          *string `xml:"TopicType"`
}

func (b *topicBody) apply(a *TopicAttributes) *apiError {
	if b.MaximumMessageSize != nil {
		n, err := strconv.Atoi(strings.TrimSpace(*b.MaximumMessageSize))
		if err != nil {
			return invalidArgument("The value of MaximumMessageSize is not a valid integer.")
		}
		a.MaximumMessageSize = n
	}
	if b.LoggingEnabled != nil {
		v, err := strconv.ParseBool(strings.TrimSpace(*b.LoggingEnabled))
		if err != nil {
			return invalidArgument("The value of LoggingEnabled is not a valid boolean.")
		}
		a.LoggingEnabled = v
	}
	if b.TopicType != nil {
		a.TopicType = strings.TrimSpace(*b.TopicType)
		if a.TopicType == TopicTypeNormal {
			a.TopicType = "" // as withDefaults has it
		}
	}
	return nil
}

// subscriptionBody is a Subscribe or SetSubscriptionAttributes body.
type subscriptionBody struct {
	XMLName             xml.Name
	Endpoint            string `xml:"Endpoint"`
	FilterTag           string `xml:"FilterTag"`
	NotifyStrategy      string `xml:"NotifyStrategy"`
	NotifyContentFormat string `xml:"NotifyContentFormat"`
}

// publishBody is a PublishMessage body; elements other SDKs add
// (MessageAttributes, UserProperties, ...) are ignored, and so is
// MessageGroupId on a normal topic.
type publishBody struct {
	XMLName        xml.Name
	MessageBody    *string `xml:"MessageBody"`
	MessageTag     string  `xml:"MessageTag"`
	MessageGroupID *string `xml:"MessageGroupId"`
}

// location answers the Location header the service sends on CreateTopic
// and Subscribe (the Python SDK reads it).
func (c *call) location(path string) {
	c.w.Header().Set("Location", "http://"+c.r.Host+path)
}

func (c *call) createTopic() *apiError {
	a := TopicAttributes{}.withDefaults()
	if len(strings.TrimSpace(string(c.body))) > 0 {
		var tb topicBody
		if err := decode(c.body, &tb, &tb.XMLName, "Topic"); err != nil {
			return err
		}
		if err := tb.apply(&a); err != nil {
			return err
		}
	}
	created, err := c.s.createTopic(c.tname, a)
	if err != nil {
		return err
	}
	c.location("/topics/" + c.tname)
	c.status = http.StatusNoContent
	if created {
		c.status = http.StatusCreated
	}
	return nil
}

func (c *call) setTopicAttributes() *apiError {
	var tb topicBody
	if err := decode(c.body, &tb, &tb.XMLName, "Topic"); err != nil {
		return err
	}
	t, err := c.s.lockedTopic(c.tname)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	a := t.attrs
	if err := tb.apply(&a); err != nil {
		return err
	}
	if err := a.check(); err != nil {
		return err
	}
	if a.TopicType != t.attrs.TopicType {
		return invalidArgument("The TopicType of a topic cannot be changed.")
	}
	t.attrs, t.modified = a, c.s.now()
	c.status = http.StatusNoContent
	return nil
}

func (c *call) getTopicAttributes() *apiError {
	info, err := c.s.Topic(c.tname)
	if err != nil {
		return errTopicNotExist
	}
	c.out = append(c.out, xmlHeader...)
	c.out = appendTopicAttrs(c.out, &info, true, "")
	c.status = http.StatusOK
	return nil
}

func (c *call) listTopics() *apiError {
	l, err := c.listing()
	if err != nil {
		return err
	}
	infos := c.s.Topics()
	names := make([]string, len(infos))
	for i := range infos {
		names[i] = infos[i].Name
	}
	idx, next := l.page(names)
	c.writeList("Topics", idx, next, func(b []byte, i int) []byte {
		url := "http://" + c.r.Host + "/topics/" + infos[i].Name
		if l.withMeta {
			return appendTopicAttrs(b, &infos[i], false, url)
		}
		return appendURLItem(b, "Topic", "TopicURL", url)
	})
	return nil
}

func (c *call) subscribe() *apiError {
	var sb subscriptionBody
	if err := decode(c.body, &sb, &sb.XMLName, "Subscription"); err != nil {
		return err
	}
	sub := Subscription{
		Endpoint:            strings.TrimSpace(sb.Endpoint),
		FilterTag:           sb.FilterTag,
		NotifyStrategy:      strings.TrimSpace(sb.NotifyStrategy),
		NotifyContentFormat: strings.TrimSpace(sb.NotifyContentFormat),
	}.withDefaults()
	created, err := c.s.subscribe(c.tname, c.sname, sub)
	if err != nil {
		return err
	}
	c.location("/topics/" + c.tname + "/subscriptions/" + c.sname)
	c.status = http.StatusNoContent
	if created {
		c.status = http.StatusCreated
	}
	return nil
}

// setSubscriptionAttributes changes what the service lets it change: the
// NotifyStrategy.
func (c *call) setSubscriptionAttributes() *apiError {
	var sb subscriptionBody
	if err := decode(c.body, &sb, &sb.XMLName, "Subscription"); err != nil {
		return err
	}
	t, err := c.s.lockedTopic(c.tname)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	s := t.subs[c.sname]
	if s == nil {
		return errSubNotExist
	}
	if v := strings.TrimSpace(sb.NotifyStrategy); v != "" {
		ns := s.Subscription
		ns.NotifyStrategy = v
		if _, err := ns.check(); err != nil {
			return err
		}
		s.Subscription, s.modified = ns, c.s.now()
	}
	c.status = http.StatusNoContent
	return nil
}

func (c *call) getSubscriptionAttributes() *apiError {
	t, err := c.s.lockedTopic(c.tname)
	if err != nil {
		return err
	}
	s := t.subs[c.sname]
	if s == nil {
		t.mu.Unlock()
		return errSubNotExist
	}
	b := append(c.out, xmlHeader...)
	c.out = appendSubscriptionAttrs(b, t.name, s, c.s.opts.AccountID, true, "")
	t.mu.Unlock()
	c.status = http.StatusOK
	return nil
}

func (c *call) unsubscribe() *apiError {
	if err := c.s.unsubscribe(c.tname, c.sname); err != nil {
		return err
	}
	c.status = http.StatusNoContent
	return nil
}

func (c *call) listSubscriptions() *apiError {
	l, err := c.listing()
	if err != nil {
		return err
	}
	t, err := c.s.lockedTopic(c.tname)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.subs))
	for n := range t.subs {
		names = append(names, n)
	}
	sort.Strings(names)
	idx, next := l.page(names)
	c.writeList("Subscriptions", idx, next, func(b []byte, i int) []byte {
		url := "http://" + c.r.Host + "/topics/" + t.name + "/subscriptions/" + names[i]
		if l.withMeta {
			return appendSubscriptionAttrs(b, t.name, t.subs[names[i]], c.s.opts.AccountID, false, url)
		}
		return appendURLItem(b, "Subscription", "SubscriptionURL", url)
	})
	return nil
}

// publishMessage answers 201 with the topic message's id and body MD5, and
// makes the pushes to the subscribed queues.
func (c *call) publishMessage() *apiError {
	var pb publishBody
	if err := decode(c.body, &pb, &pb.XMLName, "Message"); err != nil {
		return err
	}
	if pb.MessageBody == nil {
		return invalidArgument("MessageBody is required.")
	}
	if len(pb.MessageTag) > maxTagLen {
		return rangeError("MessageTag length", 0, maxTagLen, "characters")
	}
	if tp := c.s.topic(c.tname); tp != nil && tp.fifo {
		// Held until the pushes are on their way: a later publish's
		// pushes cannot land first.
		tp.pushMu.Lock()
		defer tp.pushMu.Unlock()
	}
	t, err := c.s.lockedTopic(c.tname)
	if err != nil {
		return err
	}
	if len(*pb.MessageBody) > t.attrs.MaximumMessageSize {
		t.mu.Unlock()
		return rangeError("MessageBody", 1, int64(t.attrs.MaximumMessageSize), "bytes")
	}
	group := ""
	if t.fifo {
		if pb.MessageGroupID == nil || strings.TrimSpace(*pb.MessageGroupID) == "" {
			t.mu.Unlock()
			return errMissingGroup
		}
		group = *pb.MessageGroupID
	}
	now := c.s.now()
	if err := admitRate(&t.rate, now, &c.s.opts.Throttle, 1, &c.s.stats); err != nil {
		t.mu.Unlock()
		return err
	}
	p := published{body: *pb.MessageBody, md5: md5Hex(*pb.MessageBody), tag: pb.MessageTag, group: group, time: now}
	t.nextSeq++
	p.id = c.s.messageID(t.id, t.nextSeq)
	out := t.publish(&p, c.s.opts.AccountID, c.faults, chaos{draw: c.s.draw, drawN: c.s.drawN})
	t.mu.Unlock()
	c.s.stats.published.Add(1)
	c.s.stats.pushDropped.Add(int64(len(out.dropped)))
	c.s.stats.pushDuplicated.Add(int64(out.duplicated))
	failed, reasons := c.s.deliver(out.pushes, now)
	c.s.lost(t.name, &p, out.dropped, func(int) string { return "dropped" })
	c.s.lost(t.name, &p, failed, func(i int) string { return reasons[i] })

	b := append(c.out, xmlHeader...)
	b = append(b, "<Message"+xmlNS+">"...)
	b = appendElem(b, "MessageId", p.id)
	b = appendElem(b, "MessageBodyMD5", p.md5)
	c.out = append(b, "</Message>"...)
	c.status = http.StatusCreated
	return nil
}

// appendTopicAttrs writes a <Topic> with the attributes of info, and first
// its TopicURL when url is not empty (ListTopic with metadata).
func appendTopicAttrs(b []byte, info *TopicInfo, ns bool, url string) []byte {
	b = append(b, "<Topic"...)
	if ns {
		b = append(b, xmlNS...)
	}
	b = append(b, '>')
	if url != "" {
		b = appendElem(b, "TopicURL", url)
	}
	b = appendElem(b, "TopicName", info.Name)
	b = appendIntElem(b, "CreateTime", info.CreateTime.Unix())
	b = appendIntElem(b, "LastModifyTime", info.LastModifyTime.Unix())
	b = appendIntElem(b, "MaximumMessageSize", int64(info.Attributes.MaximumMessageSize))
	b = appendIntElem(b, "MessageRetentionPeriod", topicRetentionSeconds)
	b = appendIntElem(b, "MessageCount", 0)
	b = appendElem(b, "LoggingEnabled", strconv.FormatBool(info.Attributes.LoggingEnabled))
	b = appendElem(b, "TopicType", info.Attributes.topicType())
	return append(b, "</Topic>"...)
}

// appendSubscriptionAttrs writes a <Subscription> with its children in the
// order of the service's example (alphabetical), and first its
// SubscriptionURL when url is not empty (ListSubscriptionByTopic with
// metadata).
func appendSubscriptionAttrs(b []byte, topicName string, s *subscription, account string, ns bool, url string) []byte {
	b = append(b, "<Subscription"...)
	if ns {
		b = append(b, xmlNS...)
	}
	b = append(b, '>')
	if url != "" {
		b = appendElem(b, "SubscriptionURL", url)
	}
	b = appendIntElem(b, "CreateTime", s.created/second)
	b = appendElem(b, "Endpoint", s.Endpoint)
	if s.FilterTag != "" {
		b = appendElem(b, "FilterTag", s.FilterTag)
	}
	b = appendIntElem(b, "LastModifyTime", s.modified/second)
	b = appendElem(b, "NotifyContentFormat", s.NotifyContentFormat)
	b = appendElem(b, "NotifyStrategy", s.NotifyStrategy)
	b = appendElem(b, "SubscriptionName", s.name)
	b = appendElem(b, "Subscriber", account)
	b = appendElem(b, "TopicName", topicName)
	b = appendElem(b, "TopicOwner", account)
	return append(b, "</Subscription>"...)
}
