package mnsqueue

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"

	"github.com/inorder/inorder/ordered/driver"
)

// ErrSendOnly is returned by the receive side of a Topic: a topic is
// published to, and read from the queues subscribed to it.
var ErrSendOnly = errors.New("mnsqueue: a topic is send-only: receive from a queue subscribed to it")

// NotificationReserve is what a Topic keeps free of each message, in bytes
// after encoding, for the XML or JSON notification that carries the
// published body into a subscribed queue (the element names, the topic,
// subscription and message ids, the MD5 and the publish time take a few
// hundred bytes): a message of MaxBody still fits a queue whose
// MaximumMessageSize equals the topic's, as the service requires of
// subscribed queues.
const NotificationReserve = 1024

// Topic is a driver.Queue that publishes to an MNS topic, so that
// package ordered sends through it with its usual header, pipelining and
// durable journal, and every queue subscribed to the topic gets its own copy
// of each group's stream (read it with a Queue on that queue). It is
// send-only: ReceiveBatch, DeleteBatch and ChangeVisibility fail with
// ErrSendOnly, which ordered.Queue never calls unless asked to receive.
// It is safe for concurrent use: each publish uses its own SDK topic
// object (one shared by goroutines races). Create it with NewTopic.
//
// The service has no batch publish, so MaxBatch is 1: each message is one
// PublishMessage request, and throughput comes from requests in flight
// (ordered.SendOptions.Concurrency, default 16; raise it for a distant
// service). Bodies are encoded as a Queue encodes them (base64 unless
// Options.Raw) and published with Options.MessageTag.
type Topic struct {
	*session
	name   string
	topics sync.Pool // of ali_mns.AliMNSTopic: one is used by one goroutine at a time
	limits driver.Limits
}

var _ driver.Queue = (*Topic)(nil)

// NewTopic returns a driver that publishes to the topic named topic at
// endpoint (see New for endpoints). It reads the topic's attributes, so it
// fails with an error wrapping driver.ErrQueueNotFound when the topic does
// not exist. Options.Visibility and Priority do not apply to a topic.
func NewTopic(ctx context.Context, endpoint, topic string, cred Credentials, opts *Options) (*Topic, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	t, err := openTopic(endpoint, topic, cred, o)
	if err != nil {
		return nil, err
	}
	attr, err := run(t.session, ctx, "GetTopicAttributes", func() result[ali_mns.TopicAttribute] {
		a, err := ali_mns.NewMNSTopicManager(t.client).GetTopicAttributes(t.name)
		return result[ali_mns.TopicAttribute]{a, err}
	}, nil)
	if err == nil && attr.err != nil {
		err = classify("GetTopicAttributes", opOther, attr.err)
	}
	if err != nil {
		t.close()
		return nil, err
	}
	size := MaxMessageSize
	if attr.v.MaxMessageSize > 0 {
		size = int(min(attr.v.MaxMessageSize, MaxMessageSize))
	}
	body := decodedSize(size-NotificationReserve, o.Raw)
	t.limits = driver.Limits{
		MaxBatch:      1,
		MaxBody:       body,
		MaxBatchBytes: body,
		MaxWait:       MaxWait,
		Visibility:    30 * time.Second,
		MinVisibility: MinVisibility,
		MaxVisibility: MaxVisibility,
	}
	return t, nil
}

// openTopic builds the SDK client and the Topic, without any request.
func openTopic(endpoint, topic string, cred Credentials, o Options) (*Topic, error) {
	if err := checkName("topic", topic); err != nil {
		return nil, err
	}
	s, err := newSession(endpoint, cred, o, "topic", topic)
	if err != nil {
		return nil, err
	}
	t := &Topic{session: s, name: topic}
	t.topics.New = func() any {
		// As for queues: the SDK's client-side QPS throttle counts per
		// object, so it is set out of reach; the service's own limit is
		// reported as driver.ErrThrottled.
		return ali_mns.NewMNSTopic(t.name, t.client, math.MaxInt32)
	}
	return t, nil
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// Limits implements driver.Queue. MaxBatch is 1 (there is no batch publish);
// MaxBody is the topic's MaximumMessageSize less NotificationReserve, after
// encoding. The receive limits are those of an MNS queue.
func (t *Topic) Limits() driver.Limits { return t.limits }

// SendBatch implements driver.Queue: it publishes its one body. A publish
// whose outcome is unknown (a network error or a timeout after it was
// written) may have reached the subscribers.
func (t *Topic) SendBatch(ctx context.Context, bodies [][]byte) error {
	const op = "PublishMessage"
	if t.isClosed() {
		return fmt.Errorf("mnsqueue: %s: %w", op, driver.ErrClosed)
	}
	if len(bodies) != 1 {
		return fmt.Errorf("mnsqueue: %s: %d bodies, a topic publishes exactly 1: %w", op, len(bodies), driver.ErrTooLarge)
	}
	b := bodies[0]
	if len(b) > t.limits.MaxBody {
		return fmt.Errorf("mnsqueue: %s: body has %d bytes, at most %d: %w", op, len(b), t.limits.MaxBody, driver.ErrTooLarge)
	}
	req := ali_mns.MessagePublishRequest{MessageTag: t.opts.MessageTag}
	if t.opts.Raw {
		if !validXMLText(b) {
			return fmt.Errorf("mnsqueue: %s: %w", op, ErrInvalidBody)
		}
		req.MessageBody = string(b)
	} else {
		req.MessageBody = base64.StdEncoding.EncodeToString(b)
	}
	r, err := run(t.session, ctx, op, func() error {
		at := t.topics.Get().(ali_mns.AliMNSTopic)
		defer t.topics.Put(at)
		_, err := at.PublishMessage(req)
		return err
	}, nil)
	if err != nil {
		return err
	}
	if r != nil {
		return t.sdkError(op, opOther, r)
	}
	return nil
}

// ReceiveBatch fails with ErrSendOnly.
func (t *Topic) ReceiveBatch(context.Context, int, time.Duration) ([]*driver.Message, error) {
	return nil, fmt.Errorf("mnsqueue: ReceiveBatch on topic %s: %w", t.name, ErrSendOnly)
}

// DeleteBatch fails with ErrSendOnly.
func (t *Topic) DeleteBatch(context.Context, []string) error {
	return fmt.Errorf("mnsqueue: DeleteBatch on topic %s: %w", t.name, ErrSendOnly)
}

// ChangeVisibility fails with ErrSendOnly.
func (t *Topic) ChangeVisibility(context.Context, string, time.Duration) (string, error) {
	return "", fmt.Errorf("mnsqueue: ChangeVisibility on topic %s: %w", t.name, ErrSendOnly)
}

// Close implements driver.Queue, as Queue.Close does.
func (t *Topic) Close() error { return t.close() }
