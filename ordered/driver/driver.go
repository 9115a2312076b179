// Package driver defines the small interface that a queue adapter implements
// so that package ordered can run on top of it, in the way database/sql/driver
// serves database/sql.
//
// Application code does not call a driver directly except to construct it and
// hand it to ordered.New. The portable layer (package ordered) owns retries,
// batching, ordering and logging; a driver is thin and honest:
//
//   - it never retries: every method makes at most one attempt at the service
//     and reports what happened; IsRetryable tells the caller whether trying
//     again may help;
//   - every method is safe for concurrent use by many goroutines;
//   - it keeps no reference to the slices passed to it after the call returns,
//     and the caller must not modify them during the call;
//   - every method honours ctx: when ctx is done the method returns promptly
//     with an error that wraps ctx.Err(). For a send that was already on the
//     wire, the outcome is then unknown (the message may or may not have been
//     enqueued); the portable layer tolerates such duplicates.
//
// The conformance suite in package drivertest checks these rules; every driver
// runs it from a one-line test.
package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Drivers wrap them (fmt.Errorf("...: %w", ErrX)) so that
// callers test them with errors.Is; service-specific errors stay reachable
// with errors.As.
var (
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("driver: queue closed")
	// ErrStaleReceipt means a receipt handle no longer designates a message
	// held by this receiver: its visibility timeout expired, the message was
	// received again (which rotates the handle) or it was already deleted.
	ErrStaleReceipt = errors.New("driver: stale receipt handle")
	// ErrBadReceipt means a receipt handle is malformed or was never issued
	// by this queue.
	ErrBadReceipt = errors.New("driver: invalid receipt handle")
	// ErrQueueNotFound means the queue does not exist.
	ErrQueueNotFound = errors.New("driver: queue not found")
	// ErrTooLarge means a body exceeds Limits.MaxBody, or a batch exceeds
	// Limits.MaxBatch.
	ErrTooLarge = errors.New("driver: message or batch too large")
	// ErrThrottled means the service refused the call for its rate: too
	// many requests (MNS: 429 TooManyRequests, or 400 QpsLimitExceeded in
	// older versions), or, for a receive, a consumer that receives
	// messages and does not delete them (MNS throttles such "abnormal
	// consumption"). A driver wraps it in an error that IsRetryable
	// reports retryable: the call may succeed later, after a backoff
	// longer than for other transient errors.
	ErrThrottled = errors.New("driver: throttled by the service")
)

// Message is a message as received from the queue.
type Message struct {
	// Body is the message body exactly as it was passed to SendBatch. It
	// belongs to the caller, and shares no memory with other bodies: a
	// receiver that keeps it charges its budget len(Body), and a body
	// that pinned its batch's other bodies would break that bound.
	Body []byte
	// ID is the service's message id. Every delivery of one message carries
	// the same ID.
	ID string
	// Receipt is the handle of this delivery. It is needed to delete the
	// message or change its visibility, and it goes stale when the message
	// is delivered again.
	Receipt string
	// DequeueCount counts deliveries of this message, 1 for the first.
	DequeueCount int
	// EnqueueTime is when the message was sent, if the service reports it.
	EnqueueTime time.Time
	// NextVisible is when the message becomes visible to receivers again
	// unless it is deleted or its visibility is changed before.
	NextVisible time.Time
	// Group is the message group the service returned with the message
	// (an MNS FIFO queue's MessageGroupId), "" on a queue without groups.
	Group string
}

// Limits describes what a queue accepts. The values are fixed for the life of
// a driver.
type Limits struct {
	// MaxBatch is the largest number of entries in one SendBatch,
	// ReceiveBatch or DeleteBatch call (MNS: 16).
	MaxBatch int
	// MaxBody is the largest body, in bytes as passed to SendBatch, that the
	// queue accepts after any encoding the driver applies (MNS with base64:
	// 49152).
	MaxBody int
	// MaxBatchBytes is the largest sum of body sizes in one SendBatch, in
	// bytes as passed to SendBatch (MNS: 64 KiB on the wire, so 49152 with
	// base64). Zero means MaxBatch * MaxBody.
	MaxBatchBytes int
	// MaxWait is the longest wait ReceiveBatch honours (MNS: 30s).
	MaxWait time.Duration
	// Visibility is the queue's visibility timeout: how long a received
	// message stays invisible to other receivers.
	Visibility time.Duration
	// MinVisibility and MaxVisibility bound the timeout that ChangeVisibility
	// accepts (MNS: 1s and 12h).
	MinVisibility, MaxVisibility time.Duration
}

// Queue is the interface a queue adapter implements. All methods are safe for
// concurrent use.
type Queue interface {
	// Limits reports what the queue accepts. It does not block.
	Limits() Limits

	// SendBatch enqueues 1..MaxBatch bodies in one request. It returns nil
	// when every body was accepted. When only some were, it returns a
	// *BatchError whose Errs[i] is nil for each accepted body. A body larger
	// than MaxBody or a batch larger than MaxBatch fails with ErrTooLarge
	// before anything is sent. It blocks for at most one request round trip.
	SendBatch(ctx context.Context, bodies [][]byte) error

	// ReceiveBatch returns up to max (1..MaxBatch) messages, waiting up to
	// wait (0..MaxWait, rounded as the service requires) for at least one to
	// become available. Nothing available within the wait is not an error:
	// it returns an empty slice and nil. It may return before wait elapses
	// even when nothing arrived (services do under load). Each returned
	// message is invisible to other receivers until its NextVisible.
	ReceiveBatch(ctx context.Context, max int, wait time.Duration) ([]*Message, error)

	// DeleteBatch deletes 1..MaxBatch messages by receipt handle. It returns
	// nil when all were deleted; otherwise a *BatchError whose Errs[i] wraps
	// ErrStaleReceipt or ErrBadReceipt (or another cause) for receipt i. It
	// blocks for at most one request round trip.
	DeleteBatch(ctx context.Context, receipts []string) error

	// ChangeVisibility makes the message invisible for timeout from now
	// (MinVisibility..MaxVisibility) and returns its new receipt handle,
	// which replaces the old one (the old handle may go stale). A stale
	// handle fails with ErrStaleReceipt. It blocks for at most one request
	// round trip.
	ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) (newReceipt string, err error)

	// IsRetryable reports whether err, returned by a method of this driver,
	// is transient: the same call may succeed if made again later (network
	// errors, throttling, 5xx). It does not block.
	IsRetryable(err error) bool

	// Close releases the driver's resources. Calls in progress may fail;
	// later calls return ErrClosed. Close is idempotent.
	Close() error
}

// Grouped is implemented by a queue whose service keeps the order of each
// message group itself and requires every message's group (an MNS FIFO
// queue or topic): it hands out one message of a group at a time, in the
// order the group's messages arrived. When Grouped reports true, package
// ordered sends through SendGroups, never SendBatch.
type Grouped interface {
	// Grouped reports whether the queue requires groups. It does not
	// block, and it is fixed for the life of the driver.
	Grouped() bool
	// SendGroups is SendBatch with groups[i] the group of bodies[i]. A
	// group the service would refuse fails with ErrInvalidGroup before
	// anything is sent.
	SendGroups(ctx context.Context, bodies [][]byte, groups []string) error
	// CheckGroup returns an error wrapping ErrInvalidGroup, naming the
	// rule, for a group the service would refuse; nil otherwise. It does
	// not block.
	CheckGroup(group string) error
}

// ErrInvalidGroup: a group the service refuses as a message group (for
// MNS FIFO queues, its MessageGroupId rules).
var ErrInvalidGroup = errors.New("driver: invalid message group")

// BatchError reports a batch call in which some entries failed. Errs has one
// element per entry of the batch, nil for those that succeeded.
type BatchError struct {
	Errs []error
}

func (e *BatchError) Error() string {
	n := 0
	var first error
	for _, err := range e.Errs {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	return fmt.Sprintf("driver: %d of %d batch entries failed (first: %v)", n, len(e.Errs), first)
}

// Unwrap returns the entries' errors so that errors.Is finds a sentinel that
// any entry wraps.
func (e *BatchError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
