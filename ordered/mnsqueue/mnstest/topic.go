package mnstest

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Notify content formats: what a subscribed queue receives for a publish
// (the service's NotifyContentFormat; XML is its default).
const (
	// FormatXML: a <Notification> document whose <Message> holds the
	// published body, XML-escaped.
	FormatXML = "XML"
	// FormatJSON: a JSON object whose "Message" holds the published body;
	// every value is a string.
	FormatJSON = "JSON"
	// FormatSimplified: the published body itself, nothing else.
	FormatSimplified = "SIMPLIFIED"
)

// Notify strategies: how the service retries a push it could not deliver
// (BACKOFF_RETRY is its default). The emulator stores them; its own drops
// are decided by Faults.PushDrop.
const (
	StrategyBackoffRetry          = "BACKOFF_RETRY"
	StrategyExponentialDecayRetry = "EXPONENTIAL_DECAY_RETRY"
)

// Limits of topics, as the service documents them.
const (
	maxSubscriptions       = 100 // per topic, not adjustable
	maxTagLen              = 16  // MessageTag and FilterTag
	maxSubscriptionNameLen = 255
	topicRetentionSeconds  = 86400
	// DefaultAccountID is the account id the server reports as topic owner
	// and subscriber when Options.AccountID is empty.
	DefaultAccountID = "1234567890"
)

// TopicAttributes are a topic's settings. A zero field means the service's
// default.
type TopicAttributes struct {
	// MaximumMessageSize is the largest published body in bytes
	// (1024..65536, default 65536).
	MaximumMessageSize int
	// LoggingEnabled is stored and reported; it has no other effect.
	LoggingEnabled bool
	// TopicType is TopicTypeFIFO or, for a normal topic, "" (the default;
	// TopicTypeNormal is taken as "", and GetTopicAttributes answers
	// "normal"). It is set when the topic is created and never changes. A FIFO topic
	// requires a MessageGroupId on every publish, pushes the messages of
	// each group to each subscribed queue in publish order (Faults.PushDelay
	// delays them without reordering), and a FIFO queue it pushes to keeps
	// the group. A normal topic cannot subscribe a FIFO queue.
	TopicType string
}

func (a TopicAttributes) withDefaults() TopicAttributes {
	if a.MaximumMessageSize == 0 {
		a.MaximumMessageSize = defaultMaxMessageSize
	}
	if a.TopicType == TopicTypeNormal {
		a.TopicType = ""
	}
	return a
}

// topicType is the TopicType the REST API answers.
func (a *TopicAttributes) topicType() string {
	if a.TopicType == "" {
		return TopicTypeNormal
	}
	return a.TopicType
}

func (a TopicAttributes) check() *apiError {
	if a.MaximumMessageSize < minMaxMessageSize || a.MaximumMessageSize > defaultMaxMessageSize {
		return rangeError("MaximumMessageSize", minMaxMessageSize, defaultMaxMessageSize, "bytes")
	}
	if a.TopicType != "" && a.TopicType != TopicTypeFIFO {
		return invalidArgument("The value of TopicType should be normal or fifo.")
	}
	return nil
}

// Subscription is a subscription's settings.
type Subscription struct {
	// Endpoint is where pushes go. A queue endpoint,
	// "acs:mns:{region}:{account}:queues/{name}", makes every matching
	// publish a new message of the queue {name} (region and account are
	// not checked: the Go SDK's GenerateQueueEndpoint derives them from the
	// endpoint string, "acs:mns:0:127:queues/q" for the emulator's).
	// "http://", "https://", "mail:directmail:" and "sms:directsms:"
	// endpoints are accepted and stored; nothing is pushed to them.
	Endpoint string
	// FilterTag, if set, limits the pushes to publishes whose MessageTag
	// equals it (at most 16 characters).
	FilterTag string
	// NotifyStrategy is StrategyBackoffRetry (default) or
	// StrategyExponentialDecayRetry.
	NotifyStrategy string
	// NotifyContentFormat is FormatXML (default), FormatJSON or
	// FormatSimplified.
	NotifyContentFormat string
}

func (s Subscription) withDefaults() Subscription {
	if s.NotifyStrategy == "" {
		s.NotifyStrategy = StrategyBackoffRetry
	}
	if s.NotifyContentFormat == "" {
		s.NotifyContentFormat = FormatXML
	}
	return s
}

// check validates s and returns the queue its endpoint names, or "".
func (s Subscription) check() (queue string, _ *apiError) {
	switch s.NotifyStrategy {
	case StrategyBackoffRetry, StrategyExponentialDecayRetry:
	default:
		return "", invalidArgument("NotifyStrategy must be BACKOFF_RETRY or EXPONENTIAL_DECAY_RETRY.")
	}
	switch s.NotifyContentFormat {
	case FormatXML, FormatJSON, FormatSimplified:
	default:
		return "", invalidArgument("NotifyContentFormat must be XML, JSON or SIMPLIFIED.")
	}
	if len(s.FilterTag) > maxTagLen {
		return "", rangeError("FilterTag length", 0, maxTagLen, "characters")
	}
	return endpointQueue(s.Endpoint)
}

// endpointQueue parses an endpoint: the queue name of a queue endpoint, ""
// for the other kinds, EndpointInvalid for anything else.
func endpointQueue(ep string) (string, *apiError) {
	switch {
	case strings.HasPrefix(ep, "http://") && len(ep) > len("http://"),
		strings.HasPrefix(ep, "https://") && len(ep) > len("https://"),
		strings.HasPrefix(ep, "mail:directmail:") && len(ep) > len("mail:directmail:"),
		strings.HasPrefix(ep, "sms:directsms:") && len(ep) > len("sms:directsms:"):
		return "", nil
	}
	parts := strings.Split(ep, ":") // acs:mns:{region}:{account}:queues/{name}
	if len(parts) == 5 && parts[0] == "acs" && parts[1] == "mns" && parts[2] != "" && parts[3] != "" {
		if name, ok := strings.CutPrefix(parts[4], "queues/"); ok && checkQueueName(name) == nil {
			return name, nil
		}
	}
	return "", errEndpointInvalid
}

// checkTopicName validates a topic name as queue names are validated: the
// service's limits page allows 120 characters (its API pages say 256; the
// stricter rule is kept).
func checkTopicName(name string) *apiError {
	if err := checkQueueName(name); err != nil {
		if err.code == CodeQueueNameLengthError {
			return newAPIError(http.StatusBadRequest, CodeTopicNameLengthError, "The length of topic name should be between 1 and 120.")
		}
		return newAPIError(http.StatusBadRequest, CodeTopicNameInvalid, "The topic name you provided is not valid.")
	}
	return nil
}

// checkSubscriptionName: 1..255 letters, digits and '-', starting with a
// letter or digit (Subscribe documentation).
func checkSubscriptionName(name string) *apiError {
	if len(name) == 0 || len(name) > maxSubscriptionNameLen {
		return newAPIError(http.StatusBadRequest, CodeSubscriptionNameLengthError, "The length of subscription name should be between 1 and 255.")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-') {
			return newAPIError(http.StatusBadRequest, CodeSubscriptionNameInvalid, "The subscription name you provided is not valid.")
		}
	}
	return nil
}

// subscription is one subscription's state, guarded by its topic's mutex.
type subscription struct {
	name              string
	Subscription             // with defaults
	queue             string // the queue its endpoint names, or ""
	created, modified int64  // server clock, ns
	// lastDue is when the last push of a FIFO topic to the queue lands:
	// the next lands later, so that pushes keep the publish order.
	lastDue int64
}

// topic is one topic's state, guarded by mu. It never takes a queue's lock:
// publish returns the pushes, and the caller delivers them.
type topic struct {
	name string
	id   uint32
	// fifo is attrs.TopicType == TopicTypeFIFO, which never changes.
	// pushMu, taken before mu and held until the pushes of a publish are
	// on their way, keeps a FIFO topic's pushes in publish order.
	fifo              bool
	pushMu            sync.Mutex
	mu                sync.Mutex
	attrs             TopicAttributes
	created, modified int64
	deleted           bool
	subs              map[string]*subscription
	nextSeq           uint64
	rate              bucket // Throttle.RequestRate
}

func newTopic(name string, id uint32, attrs TopicAttributes, now int64) *topic {
	return &topic{name: name, id: id, attrs: attrs, fifo: attrs.TopicType == TopicTypeFIFO, created: now, modified: now,
		subs: make(map[string]*subscription)}
}

// published is one PublishMessage, validated.
type published struct {
	id, body, md5, tag string
	group              string // MessageGroupId, on a FIFO topic
	time               int64  // server clock, ns
}

// push is one message a publish makes in a subscribed queue.
type push struct {
	queue string
	body  string
	group string // MessageGroupId, from a FIFO topic
	delay int64  // ns after the publish
	sub   string
}

// chaos draws the push faults of one publish (Faults.PushDelay,
// PushDuplicate, PushDrop) from the server's seeded fault stream.
type chaos struct {
	draw  func(p float64) bool
	drawN func(n int64) int64
}

// pushOutcome is what a publish did with its pushes.
type pushOutcome struct {
	pushes, dropped      []push
	duplicated           int
	skipped              int // subscriptions to endpoints that are not queues
	matched, filteredOut int
}

// publish returns the pushes a publish makes: one
// per subscription that exists now and whose FilterTag is empty or equals
// the tag, to a queue endpoint, with the body in the subscription's format.
// Faults decide a delay per push (reordering pushes), a second copy, or a
// drop (as after the service's retries failed). The caller holds t.mu.
func (t *topic) publish(p *published, account string, f *Faults, c chaos) pushOutcome {
	var out pushOutcome
	// Subscriptions in name order, so that a seeded run is reproducible.
	names := make([]string, 0, len(t.subs))
	for n := range t.subs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s := t.subs[n]
		if s.FilterTag != "" && s.FilterTag != p.tag {
			out.filteredOut++
			continue
		}
		out.matched++
		if s.queue == "" {
			out.skipped++
			continue
		}
		body := notification(t.name, s, p, account)
		if c.draw(f.PushDrop) {
			out.dropped = append(out.dropped, push{queue: s.queue, body: body, sub: s.name})
			continue
		}
		copies := 1
		if c.draw(f.PushDuplicate) {
			copies = 2
			out.duplicated++
		}
		for range copies {
			delay := c.drawN(int64(f.PushDelay))
			if t.fifo {
				// Late but in order: each push lands after the last.
				due := max(p.time+delay, s.lastDue+1)
				s.lastDue, delay = due, due-p.time
			}
			out.pushes = append(out.pushes, push{queue: s.queue, body: body, group: p.group, delay: delay, sub: s.name})
		}
	}
	return out
}

// notification builds what the subscribed queue receives, as the service
// writes it for the subscription's NotifyContentFormat.
func notification(topicName string, s *subscription, p *published, account string) string {
	switch s.NotifyContentFormat {
	case FormatSimplified:
		return p.body
	case FormatJSON:
		v := struct {
			TopicOwner       string
			TopicName        string
			Subscriber       string
			SubscriptionName string
			MessageID        string `json:"MessageId"`
			Message          string
			MessageMD5       string
			MessageTag       string `json:",omitempty"`
			PublishTime      string
		}{account, topicName, account, s.name, p.id, p.body, p.md5, p.tag, strconv.FormatInt(ms(p.time), 10)}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v) // strings only: cannot fail
		return strings.TrimSuffix(b.String(), "\n")
	default: // FormatXML
		b := make([]byte, 0, 512+len(p.body)*6/5)
		b = append(b, xmlHeader...)
		b = append(b, "<Notification"+xmlNS+">\n"...)
		for _, e := range []struct{ name, value string }{
			{"TopicOwner", account}, {"TopicName", topicName}, {"Subscriber", account},
			{"SubscriptionName", s.name}, {"MessageId", p.id}, {"MessageMD5", p.md5},
			{"MessageTag", p.tag}, {"Message", p.body},
		} {
			if e.name == "MessageTag" && e.value == "" {
				continue
			}
			b = append(b, "  "...)
			b = appendElem(b, e.name, e.value)
			b = append(b, '\n')
		}
		b = append(b, "  "...)
		b = appendIntElem(b, "PublishTime", ms(p.time))
		b = append(b, "\n</Notification>"...)
		return string(b)
	}
}

// md5Hex is the upper-case hex MD5 the service reports for a body.
func md5Hex(body string) string {
	sum := md5.Sum([]byte(body))
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// info snapshots the topic.
func (t *topic) info() TopicInfo {
	ti := TopicInfo{
		Name:           t.name,
		Attributes:     t.attrs,
		CreateTime:     time.Unix(0, t.created),
		LastModifyTime: time.Unix(0, t.modified),
		Subscriptions:  make(map[string]Subscription, len(t.subs)),
	}
	for n, s := range t.subs {
		ti.Subscriptions[n] = s.Subscription
	}
	return ti
}

// LostPush is a push that never reached its queue, as Options.OnPushLost
// reports it.
type LostPush struct {
	Topic, Subscription, Queue string
	// MessageID and Body are the topic message's id and published body.
	MessageID, Body string
	// Reason is "dropped" (Faults.PushDrop), "no queue" (the queue was
	// deleted) or "too large" (the notification exceeds the queue's
	// MaximumMessageSize).
	Reason string
}

// TopicInfo describes a topic and its subscriptions.
type TopicInfo struct {
	Name                       string
	Attributes                 TopicAttributes
	CreateTime, LastModifyTime time.Time
	// Subscriptions by name, defaults filled in.
	Subscriptions map[string]Subscription
}
