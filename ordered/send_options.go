package ordered

import (
	"fmt"
	"time"

	"github.com/inorder/inorder/ordered/driver"
)

// SendMode says what a successful Send guarantees.
type SendMode int

const (
	// SendDurable (the default) reserves the seqs and journals the payloads
	// in one store write before anything is handed to the queue. A Send that
	// returned nil was accepted by the queue; one that failed, or whose
	// process crashed before the queue accepted it, stays in the journal and
	// is sent again by recovery (New, Queue.Recover) with the same epoch and
	// seq, so receivers drop any copy.
	SendDurable SendMode = iota
	// SendFast makes only the counter durable. A crash between the
	// reservation and the queue's acceptance leaves a hole in the stream,
	// which receivers close by their gap policy.
	SendFast
)

func (m SendMode) String() string {
	switch m {
	case SendDurable:
		return "durable"
	case SendFast:
		return "fast"
	}
	return fmt.Sprintf("SendMode(%d)", int(m))
}

// Format selects the wire header written in front of each payload.
type Format int

const (
	// FormatDefault writes `#v1;<epoch>;<seq>;<group>#<payload>`: any group,
	// with the sender's epoch.
	FormatDefault Format = iota
	// FormatLegacy writes `#<seq>#<payload>`, byte-compatible with the MNS
	// ordered-queue sample's senders and receivers. It carries no group and
	// no epoch, so only the default group "" can be sent, and a receiver
	// cannot detect a sender that lost its state.
	FormatLegacy
)

func (f Format) String() string {
	switch f {
	case FormatDefault:
		return "default"
	case FormatLegacy:
		return "legacy"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// SendOptions configures the send side of a Queue. Zero fields select the
// documented defaults.
type SendOptions struct {
	// Mode is SendDurable (default) or SendFast.
	Mode SendMode

	// Format is FormatDefault (default) or FormatLegacy.
	Format Format

	// MaxInFlight bounds the messages admitted but not yet sent (or failed).
	// Send, SendBatch and SendAsync block while the bound is reached, which
	// is how a fast producer is slowed to the queue's pace. A SendBatch
	// larger than the bound is admitted once nothing else is in flight.
	// Default 4096.
	MaxInFlight int

	// MaxInFlightBytes bounds the payload bytes (and encoded metadata, see
	// SendWithMetadata) admitted but not yet sent, like MaxInFlight.
	// Default 64 MiB.
	MaxInFlightBytes int

	// Concurrency is how many send requests to the driver may be in flight
	// at once. Each request carries up to the driver's MaxBatch messages,
	// of any groups. A request that is not full goes out only while no
	// other such request is in flight, so that under load messages leave
	// in full batches (Nagle's rule; MNS bills by the request) while an
	// idle Queue sends at once; a request in flight four times longer than
	// requests usually take (the median of the last 16, retries included;
	// at least 5 ms, and 100 ms before any request ended) is taken as
	// stuck and no longer holds the next one back. Default 16.
	Concurrency int

	// Reservations bounds the reservation calls to the store in flight at
	// once. One call reserves for up to 256 groups, all their messages
	// admitted meanwhile (a group is in at most one call at a time), and
	// another call starts only when more groups wait than one call takes,
	// so a fast store sees one call at a time and a slow one a few, which
	// its group commit batches further. Default 16.
	Reservations int

	// MaxAttempts bounds the attempts to send one message when the driver
	// reports retryable errors; the waits between attempts follow
	// Options.Retry. After the last attempt the message fails (in durable
	// mode it stays journaled for recovery). Default 8.
	MaxAttempts int

	// NoRecover stops New from re-sending the journal (durable mode).
	// Recovery sends every journaled entry not marked sent and not in
	// flight in this process; with a store shared by several processes
	// (Redis, SQL) that includes the messages other processes have in
	// flight, which are then sent twice (receivers drop the copies, at the
	// cost of requests). Set it in all but one of them, or in all and call
	// Queue.Recover when a sender is known to have died. A filestore is
	// never shared: it is locked by one process.
	NoRecover bool

	// MaxDisorder bounds, per group, how far ahead of the group's oldest
	// unfinished message (reserved, not yet accepted by the queue nor failed
	// for good) a message may be handed to the queue: a message whose seq is
	// more than MaxDisorder past it is held (counted in SendStats.Held)
	// until the oldest one finishes. A message being retried stays
	// unfinished, so it keeps its place and later ones wait behind it.
	// Concurrent requests and retries then never land a group more than
	// MaxDisorder out of order on a FIFO-like queue.
	//
	// Why: a receiver holds at most ReceiveOptions.MaxUndeleted messages
	// received and not deleted; an early arrival beyond that must be parked
	// in the store (or, with a store that cannot park, given back to the
	// queue). A group that never lands more than MaxDisorder out of order,
	// with MaxDisorder well under the receiver's cap, drains a deep backlog
	// with no parking at all.
	//
	// Holding does not block SendAsync (only MaxInFlight does): the held
	// message is admitted and reserved, and its result waits. If the
	// caller's ctx ends while it is held, Send and SendResult.Wait return
	// an error saying so; the message is not withdrawn and is sent when its
	// turn comes (Close waits for it like for any message in flight).
	//
	// Default max(1, Receive.MaxUndeleted/4) with the receive defaults
	// applied first (1000); -1 turns the bound off. Messages re-sent by
	// recovery are not held.
	MaxDisorder int

	// MarkInterval is how long the record that messages were sent may be
	// delayed so that many marks share one store call (durable mode). A
	// mark lost in a crash only makes recovery send a copy, which receivers
	// drop. Default 100ms.
	MarkInterval time.Duration
}

// setDefaults fills in the defaults; maxUndeleted is the receive side's cap
// (ReceiveOptions.MaxUndeleted, its default applied), from which
// MaxDisorder's default derives.
func (o *SendOptions) setDefaults(limits driver.Limits, maxUndeleted int) error {
	switch o.Mode {
	case SendDurable, SendFast:
	default:
		return fmt.Errorf("ordered: options: send: unknown mode %d", int(o.Mode))
	}
	switch o.Format {
	case FormatDefault, FormatLegacy:
	default:
		return fmt.Errorf("ordered: options: send: unknown format %d", int(o.Format))
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 4096
	}
	if o.MaxInFlightBytes == 0 {
		o.MaxInFlightBytes = 64 << 20
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.Reservations == 0 {
		o.Reservations = 16
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 8
	}
	if o.MarkInterval == 0 {
		o.MarkInterval = 100 * time.Millisecond
	}
	if o.MaxDisorder == 0 {
		o.MaxDisorder = max(1, maxUndeleted/4)
	}
	return o.validate(limits)
}

func (o *SendOptions) validate(limits driver.Limits) error {
	switch {
	case o.MaxInFlight < 1:
		return fmt.Errorf("ordered: options: send: MaxInFlight must be >= 1, got %d", o.MaxInFlight)
	case o.MaxInFlightBytes < 1:
		return fmt.Errorf("ordered: options: send: MaxInFlightBytes must be >= 1, got %d", o.MaxInFlightBytes)
	case o.Concurrency < 1:
		return fmt.Errorf("ordered: options: send: Concurrency must be >= 1, got %d", o.Concurrency)
	case o.Reservations < 1:
		return fmt.Errorf("ordered: options: send: Reservations must be >= 1, got %d", o.Reservations)
	case o.MaxAttempts < 1:
		return fmt.Errorf("ordered: options: send: MaxAttempts must be >= 1, got %d", o.MaxAttempts)
	case o.MaxDisorder < -1:
		return fmt.Errorf("ordered: options: send: MaxDisorder must be >= 1, or -1 for no bound, got %d", o.MaxDisorder)
	case o.MarkInterval < 0:
		return fmt.Errorf("ordered: options: send: MarkInterval must be >= 0, got %v", o.MarkInterval)
	case maxBatchBytes(limits) < 1:
		return fmt.Errorf("ordered: options: send: driver MaxBatchBytes must be >= 0, got %d", limits.MaxBatchBytes)
	}
	return nil
}

// maxBatchBytes is the driver's bound on the bodies of one SendBatch.
func maxBatchBytes(l driver.Limits) int {
	if l.MaxBatchBytes == 0 {
		return l.MaxBatch * l.MaxBody
	}
	return l.MaxBatchBytes
}
