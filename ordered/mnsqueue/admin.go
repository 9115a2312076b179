package mnsqueue

import (
	"context"
	"errors"
	"fmt"
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
	// Retention is how long a message lives (60s..7 days, default 4 days; older service documents said 15 days).
	Retention time.Duration
	// Visibility is the visibility timeout (1s..12h, default 30s).
	Visibility time.Duration
	// PollingWait is the wait of a receive that names none (0..30s,
	// default 0). Keep it 0 so that ReceiveBatch with no wait is a short
	// poll.
	PollingWait time.Duration
}

// options turns a into the SDK's queue options, checking whole seconds.
func (a *QueueAttributes) options() ([]ali_mns.QueueOption, error) {
	if a == nil {
		return nil, nil
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

// admin runs one queue-management call through a short-lived client.
func admin(ctx context.Context, endpoint string, cred Credentials, name, op string, fn func(ali_mns.AliQueueManager) error) error {
	o, err := (*Options)(nil).withDefaults()
	if err != nil {
		return err
	}
	q, err := open(endpoint, name, cred, o)
	if err != nil {
		return err
	}
	defer q.Close()
	r, err := run(q.session, ctx, op, func() error {
		return fn(ali_mns.NewMNSQueueManager(q.client))
	}, nil)
	if err != nil {
		return err
	}
	return r
}

// CreateQueue creates the queue name with attrs (nil: the service's
// defaults). It is idempotent: a queue that exists with the same attributes
// is success; one with other attributes fails with ErrQueueExists.
func CreateQueue(ctx context.Context, endpoint string, cred Credentials, name string, attrs *QueueAttributes) error {
	opts, err := attrs.options()
	if err != nil {
		return err
	}
	return admin(ctx, endpoint, cred, name, "CreateQueue", func(m ali_mns.AliQueueManager) error {
		err := m.CreateQueueWithOptions(name, opts...)
		switch sdkCode(err) {
		case 0:
			if err != nil {
				return fmt.Errorf("mnsqueue: CreateQueue %s: %w", name, err)
			}
			return nil
		case sdkSameAttributes:
			return nil
		case sdkQueueExists:
			return fmt.Errorf("mnsqueue: CreateQueue %s: %w: %w", name, ErrQueueExists, err)
		default:
			return classify("CreateQueue", opOther, err)
		}
	})
}

// DeleteQueue deletes the queue name and its messages. A queue that does not
// exist is success.
func DeleteQueue(ctx context.Context, endpoint string, cred Credentials, name string) error {
	return admin(ctx, endpoint, cred, name, "DeleteQueue", func(m ali_mns.AliQueueManager) error {
		err := m.DeleteQueue(name)
		switch sdkCode(err) {
		case 0:
			if err != nil {
				return fmt.Errorf("mnsqueue: DeleteQueue %s: %w", name, err)
			}
			return nil
		case sdkQueueNotExist:
			return nil
		default:
			return classify("DeleteQueue", opOther, err)
		}
	})
}
