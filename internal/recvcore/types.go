package recvcore

import (
	"errors"
	"fmt"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Mode is the delivery mode (see package ordered).
type Mode uint8

// Delivery modes.
const (
	AtLeastOnce Mode = iota
	AtMostOnce
	ExactlyOnce
)

// GapPolicy decides what a group does when its next seq is missing.
type GapPolicy uint8

// Gap policies.
const (
	GapWait GapPolicy = iota
	GapSkip
)

// StartPolicy decides where a group with no stored cursor starts.
type StartPolicy uint8

// Start policies.
const (
	StartFirst StartPolicy = iota
	StartLowest
)

// UntaggedPolicy decides what happens to a body without a valid header.
type UntaggedPolicy uint8

// Untagged policies.
const (
	UntaggedDeliver UntaggedPolicy = iota
	UntaggedDeadLetter
	UntaggedReject
)

// PoisonPolicy decides what happens to a message after MaxAttempts.
type PoisonPolicy uint8

// Poison policies.
const (
	PoisonBlock PoisonPolicy = iota
	PoisonDeadLetter
)

// Config configures a Core. Package ordered fills it from its options, with
// their documented defaults; New checks it.
type Config struct {
	Queue string // the stream queue name (seqstore.Stream.Queue)

	Mode        Mode
	GapPolicy   GapPolicy
	GapTimeout  time.Duration
	Start       StartPolicy
	StartSettle time.Duration
	Untagged    UntaggedPolicy
	Poison      PoisonPolicy
	MaxAttempts int
	DeadLetter  bool // a dead-letter queue is configured

	// RetryInitial and RetryMax bound the exponential backoff, with full
	// jitter, of handler retries and of failed store and queue calls.
	RetryInitial, RetryMax time.Duration
	Seed                   uint64 // seeds the jitter: the Core is deterministic

	// Window bounds how far ahead of a group's next seq a message is held
	// in memory; farther ones are parked (or released).
	Window int
	// MaxHeld caps the messages received and not yet deleted.
	MaxHeld int
	// MaxMemory is the memory budget, in bytes, of everything held.
	MaxMemory int
	// MaxUndeletedRate bounds, in messages per second, the net rate of
	// receipts not followed by a delete.
	MaxUndeletedRate float64

	MaxBatch       int           // the driver's batch size (deletes, dead letters)
	MaxAdvances    int           // cursor advances per store write
	MaxParks       int           // parked bodies per store write
	CommitInterval time.Duration // minimum time between two commits' starts
	ReapInterval   time.Duration // longest wait of a partial delete batch

	// Visibility is the queue's visibility timeout; VisibilityMargin is how
	// long before a held message becomes visible again its visibility is
	// extended (negative: never), to VisibilityExtend; ShortVisibility is
	// the timeout given to a released message so that it comes back soon.
	// MaxVisibilityRate bounds visibility changes per second.
	Visibility, VisibilityMargin, VisibilityExtend, ShortVisibility time.Duration
	MaxVisibilityRate                                               float64

	IdleEvict time.Duration // negative: never

	// MaxHold bounds how long a message stays received and not deleted
	// (the service throttles a queue where one is held for 30 minutes):
	// a visibility extension that would carry a message past it is not
	// made. A held message is then parked (when it can be) or left to
	// come back; one out to a handler is reported. 0: no bound.
	MaxHold time.Duration

	// Park enables parking in the store (it implements the capability);
	// ParkLimits bounds what is parked (see parkcap.go).
	Park       bool
	ParkLimits ParkLimits
	// ParkEarly parks every early arrival at once (with Park): for a
	// queue that orders each group itself and hands out none of a group's
	// later messages while one is held (an MNS FIFO queue), an arrival
	// held while it waits for an earlier seq would wait for ever.
	ParkEarly bool

	// Keys, when not empty, authenticate headers: a header without a MAC
	// valid under one of them is untagged. They are the keys of the
	// stream's MAC context (envelope.ContextKey): a body signed for another
	// queue does not verify. With or without keys, an epoch more than
	// MaxEpochAhead ahead of the clock is untagged.
	Keys          [][]byte
	MaxEpochAhead time.Duration
}

func (c *Config) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("recvcore: config: "+format, args...)
	}
	switch {
	case c.Queue == "":
		return bad("empty Queue")
	case c.MaxAttempts < 1:
		return bad("MaxAttempts %d", c.MaxAttempts)
	case c.RetryInitial <= 0 || c.RetryMax < c.RetryInitial:
		return bad("retry %v..%v", c.RetryInitial, c.RetryMax)
	case c.Window < 1 || c.MaxHeld < 1 || c.MaxMemory < 1 || c.MaxBatch < 1 || c.MaxAdvances < 1 || c.MaxParks < 1:
		return bad("Window %d, MaxHeld %d, MaxMemory %d, MaxBatch %d, MaxAdvances %d, MaxParks %d must be positive",
			c.Window, c.MaxHeld, c.MaxMemory, c.MaxBatch, c.MaxAdvances, c.MaxParks)
	case !(c.MaxVisibilityRate > 0) || !(c.MaxUndeletedRate > 0):
		return bad("rates must be positive")
	case c.Visibility <= 0 || c.VisibilityExtend <= 0 || c.ShortVisibility <= 0:
		return bad("visibility timeouts must be positive")
	case c.Mode > ExactlyOnce || c.GapPolicy > GapSkip || c.Start > StartLowest || c.Untagged > UntaggedReject || c.Poison > PoisonDeadLetter:
		return bad("unknown policy")
	case !c.DeadLetter && (c.Poison == PoisonDeadLetter || c.Untagged == UntaggedDeadLetter):
		return bad("PoisonDeadLetter and UntaggedDeadLetter need a dead-letter queue")
	case c.MaxHold < 0:
		return bad("MaxHold %v", c.MaxHold)
	case c.MaxEpochAhead <= 0:
		return bad("MaxEpochAhead %v", c.MaxEpochAhead)
	}
	return nil
}

// Incoming is a message as the queue returned it.
type Incoming struct {
	Body         []byte
	ID           string
	Receipt      string
	DequeueCount int
	NextVisible  time.Time // zero: now + Config.Visibility
}

// Ticket names a wait that a later Ready resolves: an AtMostOnce hand-out
// waiting for its commit, or a SyncAck waiting for durability. 0 is none.
type Ticket uint64

// Delivery is a message handed out by Next.
type Delivery struct {
	Group       string
	Epoch, Seq  uint64
	Body        []byte // the payload, without the header
	Raw         []byte // the body as it was on the queue
	ID          string
	Attempt     int
	Unordered   bool
	Redelivered bool
	// Advance is the cursor move that settles the message in ExactlyOnce
	// mode (the application applies it in its own transaction).
	Advance seqstore.Advance
	// Await, when not 0, must resolve without error before the message is
	// given to the application: in AtMostOnce mode its cursor advance (or,
	// for an Unordered message, its delete) must be durable first. Give
	// up with Abandon.
	Await Ticket

	m    *msg
	gen  uint32 // the group's hand-out count
	mgen uint32 // m.gen at the hand-out
}

// Resolution ends the wait of a Ticket.
type Resolution struct {
	Ticket Ticket
	Err    error // nil, ErrConflict, ErrClosed, or the cause
}

// Read asks for the cursors of Streams (seqstore.Store.Cursors).
type Read struct {
	ID      uint64
	Streams []seqstore.Stream
}

// Commit asks for one store write of Advances (seqstore.Store.Advance).
type Commit struct {
	ID       uint64
	Advances []seqstore.Advance
}

// Delete asks to delete Receipts in one request. Receipts belongs to the
// Core again once [Core.Deleted] reports the outcome: copy what must
// outlive that.
type Delete struct {
	ID       uint64
	Receipts []string
}

// DeleteResult is the outcome of deleting one receipt.
type DeleteResult struct {
	Err error
	// Stale: the receipt no longer names a message held by this receiver
	// (it comes back, or was deleted); Retry: the error is transient.
	Stale, Retry bool
}

// ChangeVisibility asks to make one message invisible for Timeout from
// now (an extension, or a shortening for a released message).
type ChangeVisibility struct {
	ID      uint64
	Receipt string
	Timeout time.Duration
}

// NotApplied marks err, the failure of a ChangeVisibility, as one the queue
// certainly did not apply (a stale or invalid receipt): the message's
// visibility is as it was. Any other failure may have taken effect with
// its answer lost, and the Core counts the message against the cap until
// the change's end.
func NotApplied(err error) error { return notApplied{err} }

type notApplied struct{ error }

func (e notApplied) Unwrap() error { return e.error }

// applied reports whether a ChangeVisibility that failed with err may have
// taken effect.
func applied(err error) bool {
	var na notApplied
	return !errors.As(err, &na)
}

// DeadLetter asks to send Bodies, as they were on the queue, to the
// dead-letter queue in one request.
type DeadLetter struct {
	ID     uint64
	Bodies [][]byte
}

// Park asks to park Entries durably in one store write
// (seqstore.Parker.Park).
type Park struct {
	ID      uint64
	Entries []seqstore.Parked
}

// Unpark asks to read parked entries, one query per stream.
type Unpark struct {
	ID      uint64
	Queries []seqstore.ParkQuery
}

// Scan asks for the streams that have parked entries
// (seqstore.Parker.ParkedStreams), once when the Core starts: a receiver
// that crashed after parking leaves messages no longer in the queue.
type Scan struct {
	ID uint64
}

// Requeue asks to send Bodies, as they were on the queue, back to the
// queue in one request (see Core.Close).
type Requeue struct {
	ID     uint64
	Bodies [][]byte
}

// Ready is the batch of actions due, from Core.Ready. The shell executes
// them (in any order, concurrently) and reports each outcome.
type Ready struct {
	Reads       []Read
	Commits     []Commit
	Deletes     []Delete
	Visibility  []ChangeVisibility
	DeadLetters []DeadLetter
	Parks       []Park
	Unparks     []Unpark
	Scans       []Scan
	Requeues    []Requeue
	Reports     []Report
	Resolved    []Resolution

	// What holds until the next event: Available, whether Next may hand a
	// message out; Room, how many messages the fetchers may receive (see
	// Core.Room); Wake, when to Tick (zero: no timer is due).
	Available bool
	Room      int
	Wake      time.Time
}

// Empty reports whether r holds no action, report or resolution.
func (r *Ready) Empty() bool {
	return len(r.Reads) == 0 && len(r.Commits) == 0 && len(r.Deletes) == 0 && len(r.Visibility) == 0 &&
		len(r.DeadLetters) == 0 && len(r.Parks) == 0 && len(r.Unparks) == 0 && len(r.Scans) == 0 &&
		len(r.Requeues) == 0 && len(r.Reports) == 0 && len(r.Resolved) == 0
}

// ReportKind says what a Report is about.
type ReportKind uint8

// Report kinds. Each maps to a hook of package ordered, and to a log line.
const (
	ReportGap        ReportKind = iota + 1 // next seq missing for GapTimeout (GapWait)
	ReportSkip                             // a range skipped (GapSkip, or an AtMostOnce close)
	ReportDuplicate                        // a copy of a message already handled
	ReportRedeliver                        // the queue delivered a message again
	ReportLate                             // an older epoch or a skipped seq arrived
	ReportEpoch                            // the group switched to a newer sender epoch
	ReportDeadLetter                       // a message was dead-lettered
	ReportStuck                            // a group cannot progress (poison or a store error)
	ReportConflict                         // someone else moved the cursor
	ReportUntagged                         // a body without a valid header (Err says why)
	ReportMismatch                         // the same seq arrived with another payload
	ReportWarn                             // a failed call or another condition worth a log line
	ReportRepair                           // a repair was accepted (Action says which; see repair.go)
)

// Report is something the shell passes to the application's hooks and
// logs. Fields that do not apply are zero.
type Report struct {
	Kind         ReportKind
	Msg          string // the log message
	Action       string // ReportRepair: the repair (ActionSkipHole, ...)
	Group        string
	Epoch, Seq   uint64
	Last, From   uint64
	ID           string
	DequeueCount int
	Attempt      int
	Age          time.Duration
	Err          error
}

// Errors of the Core. Package ordered wraps or maps them.
var (
	// ErrConflict resolves a ticket whose group's cursor was moved by
	// someone else (a second receiver).
	ErrConflict = fmt.Errorf("recvcore: cursor moved by another receiver: %w", seqstore.ErrConflict)
	// ErrStoreLost is the cause of a conflict where the stored cursor went
	// back: the store lost data, and with it the messages it had parked
	// (their queue copies were deleted once they were parked).
	ErrStoreLost = errors.New("recvcore: the stored cursor went back: the store lost data (messages parked there are lost with it)")
	// ErrClosed resolves the tickets left when the Core closed.
	ErrClosed = errors.New("recvcore: closed")
	// ErrSettled is returned by Ack, Nack and Abandon for a delivery that
	// was already settled or replaced.
	ErrSettled = errors.New("recvcore: delivery already settled")
	// ErrNotReturnable is returned by Return in AtMostOnce mode.
	ErrNotReturnable = errors.New("recvcore: an at-most-once hand-out cannot be returned")
	// ErrLate is the cause of a late arrival's dead letter.
	ErrLate = errors.New("late arrival (older epoch or skipped seq)")
	// ErrUntagged is the cause of an untagged body's report and dead letter.
	ErrUntagged = errors.New("untagged body")
	// ErrBadMAC: a header whose MAC does not verify under Config.Keys.
	ErrBadMAC = errors.New("header MAC missing or invalid")
	// ErrFutureEpoch: an epoch too far ahead of the receiver's clock.
	ErrFutureEpoch = errors.New("epoch too far in the future")
	// ErrPayloadMismatch: two copies of one seq with different payloads.
	ErrPayloadMismatch = errors.New("same seq, different payload")
)

// StuckGroup is a group that cannot progress, from Stats.
type StuckGroup struct {
	Group  string
	Reason string // "gap", "poison", "conflict", "store"
	Since  time.Time
	Err    error
}

// Stats counts the Core's work.
type Stats struct {
	Received, Delivered, Acked, Nacked         int64
	Duplicates, Redelivered, Late, Untagged    int64
	Released                                   int64 // messages given back to the queue unprocessed
	Skipped, Gaps, EpochSwitches, DeadLettered int64
	Conflicts, Mismatches                      int64
	Commits, Committed, CommitFailures         int64
	Deleted, DuplicatesReaped, StaleReceipts   int64
	Extended, Shortened                        int64
	Parked, Unparked                           int64
	ParkFull                                   int64 // early arrivals left in the queue because a park limit was reached
	ParkedNow, ParkedBytes                     int64 // parks counted against Config.ParkLimits (messages, body bytes)
	Requeued                                   int64 // bodies sent back to the queue at Close (see Core.Close)
	GivenBack                                  int64 // messages whose visibility Close shortened, to come back soon
	Evicted                                    int64
	Forgotten                                  int64 // settled Unordered copies forgotten to stay within MaxMemory: one may be handed out again
	Held, MaxHeld                              int   // messages received and not deleted (now, peak)
	Buffered, BufferedBytes, MaxBuffered       int   // messages waiting for their turn in memory (now, bytes, peak)
	Memory                                     int   // bytes charged to the budget
	Groups                                     int
	Stuck                                      []StuckGroup
}
