package mnsqueue

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
)

// ErrQueueExists means CreateQueue found a queue of that name with other
// attributes.
var ErrQueueExists = errors.New("mnsqueue: queue exists with other attributes")

// QueueAttributes are the settings of a new queue. A zero field means the
// service's default.
type QueueAttributes struct {
	// Delay postpones the delivery of every new message (default 0, up to
	// 7 days).
	Delay time.Duration
	// MaxMessageSize is the largest body in bytes after encoding
	// (1024..65536, default 65536).
	MaxMessageSize int
	// Retention is how long a message lives (60s..7 days, default 4 days;
	// older service documents said 15 days).
	Retention time.Duration
	// Visibility is the visibility timeout (1s..12h, default 30s).
	Visibility time.Duration
	// PollingWait is the wait of a receive that names none (0..30s,
	// default 0). Keep it 0 so that ReceiveBatch with no wait is a short
	// poll.
	PollingWait time.Duration
	// QueueType is QueueTypeNormal (the default) or QueueTypeFIFO. The
	// service fixes it at creation.
	QueueType string
}

// options turns a into the SDK's queue options, checking whole seconds.
func (a *QueueAttributes) options() ([]ali_mns.QueueOption, error) {
	if a == nil {
		return nil, nil
	}
	if a.QueueType != "" && a.QueueType != QueueTypeNormal && a.QueueType != QueueTypeFIFO {
		return nil, fmt.Errorf("mnsqueue: queue attribute QueueType %q must be %q or %q", a.QueueType, QueueTypeNormal, QueueTypeFIFO)
	}
	var opts []ali_mns.QueueOption
	secs := func(name string, d time.Duration, add func(int32) ali_mns.QueueOption) error {
		if d == 0 {
			return nil
		}
		if d < 0 || d%time.Second != 0 || d/time.Second > 1<<31-1 {
			return fmt.Errorf("mnsqueue: queue attribute %s %v must be a positive number of whole seconds", name, d)
		}
		opts = append(opts, add(int32(d/time.Second)))
		return nil
	}
	if err := errors.Join(
		secs("Delay", a.Delay, ali_mns.WithDelaySeconds),
		secs("Retention", a.Retention, ali_mns.WithMessageRetentionPeriod),
		secs("Visibility", a.Visibility, ali_mns.WithVisibilityTimeout),
		secs("PollingWait", a.PollingWait, ali_mns.WithPollingWaitSeconds),
	); err != nil {
		return nil, err
	}
	if a.MaxMessageSize != 0 {
		if a.MaxMessageSize < 1024 || a.MaxMessageSize > MaxMessageSize {
			return nil, fmt.Errorf("mnsqueue: queue attribute MaxMessageSize %d out of range 1024..%d", a.MaxMessageSize, MaxMessageSize)
		}
		opts = append(opts, ali_mns.WithMaxMessageSize(int32(a.MaxMessageSize)))
	}
	return opts, nil
}

// admin runs one management call through a short-lived client; kind and
// name ("queue", "orders") are checked first.
func admin(ctx context.Context, endpoint string, cred Credentials, kind, name, op string, fn func(ali_mns.MNSClient) error) error {
	if err := checkName(kind, name); err != nil {
		return err
	}
	o, err := (*Options)(nil).withDefaults()
	if err != nil {
		return err
	}
	s, err := newSession(endpoint, cred, o, kind, name)
	if err != nil {
		return err
	}
	defer s.close()
	r, err := run(s, ctx, op, func() error { return fn(s.client) }, nil)
	if err != nil {
		return err
	}
	return r
}

// outcome turns the SDK's answer to a create or delete into the driver's:
// nil for success and for the codes in ok, a wrap of exists for the code
// meaning "exists with other attributes", else the classified error.
func outcome(op, name string, err error, exists error, existsCode uint64, ok ...uint64) error {
	code := sdkCode(err)
	switch {
	case err == nil:
		return nil
	case code == 0:
		return fmt.Errorf("mnsqueue: %s %s: %w", op, name, err)
	case slices.Contains(ok, code):
		return nil
	case exists != nil && code == existsCode:
		return fmt.Errorf("mnsqueue: %s %s: %w: %w", op, name, exists, err)
	}
	return classify(op, opOther, err)
}

// CreateQueue creates the queue name with attrs (nil: the service's
// defaults). It is idempotent: a queue that exists with the same attributes
// is success; one with other attributes fails with ErrQueueExists.
func CreateQueue(ctx context.Context, endpoint string, cred Credentials, name string, attrs *QueueAttributes) error {
	opts, err := attrs.options()
	if err != nil {
		return err
	}
	return admin(ctx, endpoint, cred, "queue", name, "CreateQueue", func(c ali_mns.MNSClient) error {
		var err error
		if attrs != nil && attrs.QueueType == QueueTypeFIFO {
			err = rawSend(c, ali_mns.NewAliMNSDecoder(), ali_mns.PUT, attrs.fifoRequest(), "queues/"+name, nil)
		} else {
			err = ali_mns.NewMNSQueueManager(c).CreateQueueWithOptions(name, opts...)
		}
		return outcome("CreateQueue", name, err, ErrQueueExists, sdkQueueExists, sdkSameAttributes)
	})
}

// createFIFORequest is a CreateQueue request with a QueueType, which the
// SDK v1.0.11's CreateQueueRequest lacks: its fields, then QueueType.
type createFIFORequest struct {
	XMLName                xml.Name `xml:"Queue"`
	DelaySeconds           int32    `xml:"DelaySeconds"`
	MaxMessageSize         int32    `xml:"MaximumMessageSize,omitempty"`
	MessageRetentionPeriod int32    `xml:"MessageRetentionPeriod,omitempty"`
	VisibilityTimeout      int32    `xml:"VisibilityTimeout,omitempty"`
	PollingWaitSeconds     int32    `xml:"PollingWaitSeconds"`
	LoggingEnabled         bool     `xml:"LoggingEnabled"`
	QueueType              string   `xml:"QueueType"`
}

// fifoRequest is a's CreateQueue request (a checked by options).
func (a *QueueAttributes) fifoRequest() *createFIFORequest {
	secs := func(d time.Duration) int32 { return int32(d / time.Second) }
	return &createFIFORequest{
		DelaySeconds: secs(a.Delay), MaxMessageSize: int32(a.MaxMessageSize), MessageRetentionPeriod: secs(a.Retention),
		VisibilityTimeout: secs(a.Visibility), PollingWaitSeconds: secs(a.PollingWait), QueueType: a.QueueType,
	}
}

// DeleteQueue deletes the queue name and its messages. A queue that does not
// exist is success.
func DeleteQueue(ctx context.Context, endpoint string, cred Credentials, name string) error {
	return admin(ctx, endpoint, cred, "queue", name, "DeleteQueue", func(c ali_mns.MNSClient) error {
		err := ali_mns.NewMNSQueueManager(c).DeleteQueue(name)
		return outcome("DeleteQueue", name, err, nil, 0, sdkQueueNotExist)
	})
}

// ErrTopicExists means CreateTopic found a topic of that name with another
// MaximumMessageSize; ErrSubscriptionExists means Subscribe found a
// subscription of that name with other settings.
var (
	ErrTopicExists        = errors.New("mnsqueue: topic exists with other attributes")
	ErrSubscriptionExists = errors.New("mnsqueue: subscription exists with other settings")
)

// CreateTopic creates the topic name whose messages have at most
// maxMessageSize bytes after encoding (1024..65536; 0: the service's
// default, 65536). It is idempotent: a topic that exists with the same size
// is success; one with another fails with ErrTopicExists.
func CreateTopic(ctx context.Context, endpoint string, cred Credentials, name string, maxMessageSize int) error {
	if maxMessageSize != 0 && (maxMessageSize < 1024 || maxMessageSize > MaxMessageSize) {
		return fmt.Errorf("mnsqueue: topic MaximumMessageSize %d out of range 1024..%d", maxMessageSize, MaxMessageSize)
	}
	return admin(ctx, endpoint, cred, "topic", name, "CreateTopic", func(c ali_mns.MNSClient) error {
		err := ali_mns.NewMNSTopicManager(c).CreateTopic(name, int32(maxMessageSize), false)
		return outcome("CreateTopic", name, err, ErrTopicExists, sdkTopicExists, sdkTopicSameAttrs)
	})
}

// DeleteTopic deletes the topic name and its subscriptions. A topic that
// does not exist is success.
func DeleteTopic(ctx context.Context, endpoint string, cred Credentials, name string) error {
	return admin(ctx, endpoint, cred, "topic", name, "DeleteTopic", func(c ali_mns.MNSClient) error {
		err := ali_mns.NewMNSTopicManager(c).DeleteTopic(name)
		return outcome("DeleteTopic", name, err, nil, 0, sdkTopicNotExist)
	})
}

// Notify content formats of a subscription: what its queue receives for
// each message (see the package documentation, section Topics).
const (
	// FormatSimplified: the published body itself. The envelope's header
	// stays at the front of the body: the format to choose.
	FormatSimplified = "SIMPLIFIED"
	// FormatXML, the service's default: an XML <Notification> around the
	// body. A Queue unwraps it.
	FormatXML = "XML"
	// FormatJSON: a JSON object around the body. A Queue unwraps it.
	FormatJSON = "JSON"
)

// Subscription is how Subscribe subscribes a queue to a topic.
type Subscription struct {
	// Format is FormatSimplified (the default here; the service's own
	// default is FormatXML, which the SDK falls back to when the field is
	// left empty), FormatXML or FormatJSON.
	Format string
	// FilterTag, if set, makes the subscription receive only the messages
	// published with this MessageTag (at most 16 characters).
	FilterTag string
	// BackoffRetry selects the service's BACKOFF_RETRY strategy for pushes
	// that fail (3 retries 10 to 20 seconds apart, then the push is
	// dropped) instead of the default here, EXPONENTIAL_DECAY_RETRY (176
	// retries over a day), which loses a push only after a day of failures.
	BackoffRetry bool
}

// Subscribe subscribes the queue to the topic under the subscription name,
// with sub's settings (nil: SIMPLIFIED, no filter, exponential decay
// retry). The queue must exist, with a MaximumMessageSize at least the
// topic's. It is idempotent: the same subscription is success; one with
// other settings fails with ErrSubscriptionExists. The service starts
// pushing with the messages published after the subscription exists.
func Subscribe(ctx context.Context, endpoint string, cred Credentials, topic, name, queue string, sub *Subscription) error {
	var s Subscription
	if sub != nil {
		s = *sub
	}
	if s.Format == "" {
		s.Format = FormatSimplified
	}
	switch {
	case s.Format != FormatSimplified && s.Format != FormatXML && s.Format != FormatJSON:
		return fmt.Errorf("mnsqueue: subscription format %q: want SIMPLIFIED, XML or JSON", s.Format)
	case len(s.FilterTag) > maxTagLen:
		return fmt.Errorf("mnsqueue: FilterTag %q longer than %d characters", s.FilterTag, maxTagLen)
	}
	if err := errors.Join(checkName("subscription", name), checkName("queue", queue)); err != nil {
		return err
	}
	strategy := ali_mns.EXPONENTIAL_DECAY_RETRY
	if s.BackoffRetry {
		strategy = ali_mns.BACKOFF_RETRY
	}
	return admin(ctx, endpoint, cred, "topic", topic, "Subscribe", func(c ali_mns.MNSClient) error {
		t := ali_mns.NewMNSTopic(topic, c)
		err := t.Subscribe(name, ali_mns.MessageSubsribeRequest{
			// The SDK derives region and account from the endpoint
			// string, as the service wants them for a service endpoint.
			Endpoint:            t.GenerateQueueEndpoint(queue),
			FilterTag:           s.FilterTag,
			NotifyStrategy:      strategy,
			NotifyContentFormat: ali_mns.NotifyContentFormatType(s.Format),
		})
		return outcome("Subscribe", topic+"/"+name, err, ErrSubscriptionExists, sdkSubscriptionExists, sdkSubSameAttrs)
	})
}

// Unsubscribe removes the subscription name from the topic. One that does
// not exist is success, as in the service.
func Unsubscribe(ctx context.Context, endpoint string, cred Credentials, topic, name string) error {
	if err := checkName("subscription", name); err != nil {
		return err
	}
	return admin(ctx, endpoint, cred, "topic", topic, "Unsubscribe", func(c ali_mns.MNSClient) error {
		err := ali_mns.NewMNSTopic(topic, c).Unsubscribe(name)
		return outcome("Unsubscribe", topic+"/"+name, err, nil, 0)
	})
}
