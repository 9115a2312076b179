package ordered

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// Errors of the receive side.
var (
	// ErrAcked is returned by Ack and Nack on a message that was already
	// acknowledged or rejected.
	ErrAcked = errors.New("ordered: message already acked or nacked")
	// ErrConflict is returned by a SyncAck Ack when the store refused the
	// cursor advance because someone else moved the stream's cursor (and
	// re-reading it showed it was not this receiver's own write). It wraps
	// seqstore.ErrConflict.
	ErrConflict = fmt.Errorf("ordered: cursor moved by another receiver: %w", seqstore.ErrConflict)
)

// Handler processes one message for Run. It returns nil to acknowledge the
// message or an error to reject it (Nack): it is then retried in place after a
// backoff, and the poison policy applies after MaxAttempts.
type Handler func(ctx context.Context, m *Message) error

// Message is a message handed out by Receive or Run. Exactly one of Ack and
// Nack must be called for it, once. While a message of a group is out, no
// other message of that group is handed out.
type Message struct {
	// Group is the message's group; "" is the default group.
	Group string
	// Epoch and Seq place the message in its stream (both 0 when Unordered
	// and untagged).
	Epoch, Seq uint64
	// Body is the payload, without the header.
	Body []byte
	// ID is the queue's message id.
	ID string
	// Attempt is 1 for the first hand-out in this process and grows by one
	// per retry after a Nack.
	Attempt int
	// Unordered marks a message that is not part of its group's order: an
	// untagged body, or a late arrival of a skipped seq or of an older
	// epoch. Acking it deletes it and moves no cursor.
	Unordered bool
	// Redelivered reports that the queue delivered the message more than
	// once (its dequeue count is above 1, or a second copy arrived).
	Redelivered bool

	r   *receiver
	d   recvcore.Delivery
	out time.Time // the hand-out, when Hooks.OnSettle is set
}

// Ack acknowledges the message. In AtLeastOnce mode the group is unlocked at
// once and a committer makes the cursor advance durable in the background,
// after which the message is deleted from the queue; with
// ReceiveOptions.SyncAck, Ack waits (bounded by ctx) until the advance is
// durable. In ExactlyOnce mode the application must have applied
// CursorAdvance in its own transaction before calling Ack. Ack returns
// ErrAcked when called twice and ErrClosed after the Queue closed: the
// message is then delivered again by a later receiver once its visibility
// ends (Close gives back what it holds, not what the application still
// has: that stays invisible for at most the queue's visibility timeout, so
// that nobody else handles it meanwhile). With ReceiveOptions.Lease, an Ack
// the lease refuses before Close has the message given back at Close.
func (m *Message) Ack(ctx context.Context) error {
	return m.r.ack(ctx, m)
}

// Nack rejects the message because of err: it is handed out again after a
// backoff (its group stays locked meanwhile, so order is kept). After
// MaxAttempts the poison policy applies. In AtMostOnce mode the message is
// not retried: it is deleted, or dead-lettered under PoisonDeadLetter. In
// ExactlyOnce mode, a Nack whose err wraps seqstore.ErrConflict (the
// application's cursor advance failed its compare-and-set) makes the group
// re-read its cursor.
func (m *Message) Nack(ctx context.Context, err error) error {
	return m.r.nack(ctx, m, err)
}

// Metadata returns the metadata the sender attached to m
// (Queue.SendWithMetadata), in a new map, or nil when it attached none. An
// untagged message carries none: metadata is part of the header, which an
// untagged body lacks (or, with Options.Key, whose MAC did not verify). With
// Options.Key, the metadata is authenticated with the rest of the header.
func (m *Message) Metadata() map[string]string {
	return envelope.DecodeMetadata(m.meta())
}

// TraceParent returns the W3C traceparent the sender carried in m's
// metadata (key "traceparent", as package otelinorder injects it), or "".
func (m *Message) TraceParent() string {
	v, _ := envelope.LookupMetadata(m.meta(), "traceparent")
	return v
}

// meta returns m's metadata block, found again in its body as it was on the
// queue: the header is what precedes the payload. Nothing is kept per
// message for it until asked.
func (m *Message) meta() []byte {
	raw := m.d.Raw
	if len(raw) <= len(m.d.Body) {
		return nil // untagged: no header
	}
	h, _, ok := envelope.Parse(raw)
	if !ok {
		return nil
	}
	return h.Meta
}

// QueueName returns the name of the Queue that handed m out (Queue.Name).
func (m *Message) QueueName() string { return m.r.q.opts.Name }

// CursorAdvance returns the compare-and-set that moves the stream's cursor
// past m, for ExactlyOnce processing: apply it inside the application's
// transaction (for example sqlstore's AdvanceTx), commit, then call Ack. It
// also carries any skipped range or epoch switch decided before m. For an
// Unordered message, or in other modes, it is the zero Advance.
func (m *Message) CursorAdvance() seqstore.Advance {
	return m.d.Advance
}
