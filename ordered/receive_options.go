package ordered

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/ordered/driver"
)

// Mode is a delivery mode of the receive side. See the package documentation,
// section Delivery modes.
type Mode uint8

const (
	// AtLeastOnce (the default) hands a message out, and only after its Ack
	// makes the cursor advance durable and then deletes the message. A crash
	// may deliver again the messages acknowledged since the last durable
	// advance.
	AtLeastOnce Mode = iota
	// AtMostOnce makes the cursor advance past a message durable before the
	// message is handed out. A crash may lose the messages handed out but not
	// yet processed; none is ever delivered twice. A Nack drops the message
	// (or dead-letters it under PoisonDeadLetter) instead of retrying it.
	AtMostOnce
	// ExactlyOnce leaves the cursor to the application: it applies
	// Message.CursorAdvance inside its own transaction (for example with
	// sqlstore's AdvanceTx) and then calls Ack, which records the advance
	// without a store write. The Queue never writes such a stream's cursor.
	ExactlyOnce
)

func (m Mode) String() string {
	switch m {
	case AtLeastOnce:
		return "AtLeastOnce"
	case AtMostOnce:
		return "AtMostOnce"
	case ExactlyOnce:
		return "ExactlyOnce"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// GapPolicy decides what a group does when its next seq is missing while
// later ones wait.
type GapPolicy uint8

const (
	// GapWait (the default) waits for the missing seq as long as it takes and
	// reports the hole through Hooks.OnGap once it is GapTimeout old.
	GapWait GapPolicy = iota
	// GapSkip advances past the hole once it is GapTimeout old, reports the
	// range through Hooks.OnSkip and remembers it in the cursor's Skipped
	// list, so that a late arrival of a skipped seq is recognised.
	GapSkip
)

// StartPolicy decides where a group starts when the store holds no cursor
// for it.
type StartPolicy uint8

const (
	// StartFirst (the default) expects seq 1 of the first epoch seen; if it
	// does not come, the gap policy decides (GapSkip starts at the lowest seq
	// seen after GapTimeout).
	StartFirst StartPolicy = iota
	// StartLowest waits StartSettle after the first arrival and then starts
	// at the lowest seq seen of the lowest epoch seen: a receiver joining a
	// running stream starts near its head without waiting for old seqs.
	StartLowest
)

// UntaggedPolicy decides what happens to a body without a valid header
// (with Options.Key, one whose MAC does not verify counts as such).
type UntaggedPolicy uint8

const (
	// UntaggedDefault (the zero value) is UntaggedDeliver without
	// Options.Key. With a key, a body that is not signed does not reach the
	// handler: it is UntaggedDeadLetter when ReceiveOptions.DeadLetter is
	// set, else UntaggedReject.
	UntaggedDefault UntaggedPolicy = iota
	// UntaggedDeliver hands the message out at once, flagged Unordered; its
	// Ack deletes it. With Options.Key this hands out bodies that anyone who
	// can send to the queue may have written: choose it explicitly only if
	// the handler can tell.
	UntaggedDeliver
	// UntaggedDeadLetter sends the body to ReceiveOptions.DeadLetter, then
	// deletes it.
	UntaggedDeadLetter
	// UntaggedReject leaves the message in the queue (it comes back after
	// its visibility timeout) and reports it through Hooks.OnUntagged.
	UntaggedReject
)

func (p UntaggedPolicy) String() string {
	switch p {
	case UntaggedDefault:
		return "UntaggedDefault"
	case UntaggedDeliver:
		return "UntaggedDeliver"
	case UntaggedDeadLetter:
		return "UntaggedDeadLetter"
	case UntaggedReject:
		return "UntaggedReject"
	}
	return fmt.Sprintf("UntaggedPolicy(%d)", uint8(p))
}

// core is the receive core's spelling of a concrete policy (setDefaults
// resolves UntaggedDefault first).
func (p UntaggedPolicy) core() recvcore.UntaggedPolicy {
	switch p {
	case UntaggedDeadLetter:
		return recvcore.UntaggedDeadLetter
	case UntaggedReject:
		return recvcore.UntaggedReject
	}
	return recvcore.UntaggedDeliver
}

// PoisonPolicy decides what happens to a message that failed MaxAttempts
// times.
type PoisonPolicy uint8

const (
	// PoisonBlock (the default) keeps retrying the message, at the longest
	// backoff, and reports its group as stuck (Hooks.OnStuck,
	// ReceiveStats.Stuck): the group's order is never broken.
	PoisonBlock PoisonPolicy = iota
	// PoisonDeadLetter sends the body as it was on the queue (header
	// included, so group and seq stay visible) to ReceiveOptions.DeadLetter
	// and then moves the cursor past the message, as an Ack would.
	PoisonDeadLetter
)

// ReceiveOptions configures the receive side of a Queue. Zero values select
// the documented defaults.
type ReceiveOptions struct {
	// Mode is the delivery mode. Default AtLeastOnce.
	Mode Mode

	// Concurrency is how many handlers Run executes at once (never more
	// than one per group). Default 16.
	Concurrency int

	// Fetchers is how many long polls are kept open on the driver at once.
	// Default 2.
	Fetchers int

	// Wait is the long-poll wait of each receive request. Default the
	// smaller of 20s and the driver's MaxWait.
	Wait time.Duration

	// Window is how far ahead of a group's next seq a message is held in
	// memory: seqs at or beyond next+Window are parked in the store (see
	// MaxUndeleted) or, with a store that cannot park, left to come back.
	// Default MaxUndeleted: what the cap lets in is held.
	Window int

	// MaxUndeleted caps the messages received and not yet deleted,
	// everything included: waiting for their turn, out to handlers, acked
	// and waiting for their commit. MNS throttles a client whose received
	// and undeleted messages reach 5,000, or that receives without
	// deleting at more than 1,000 messages per second, or does so for 30
	// minutes (Alibaba Cloud, Simple Message Queue, "Throttling policy").
	// Beyond the cap, early arrivals are parked in the store
	// (seqstore.Parker) and deleted from the queue, so each message is
	// received about once. Default 4000.
	MaxUndeleted int

	// NoPark turns parking off: early arrivals beyond a group's Window or
	// the cap are left to come back from the queue instead of being
	// parked in the store. Each such message then costs a visibility
	// timeout and another receive (and brings it closer to the queue's
	// dead-letter limit), and a stuck group's backlog beyond the cap can
	// only wait in the queue.
	NoPark bool

	// ParkLimits bounds what a receiver parks in the store. Beyond a limit,
	// early arrivals are left in the queue to come back, as with NoPark,
	// counted in Stats().Receive.ParkFull and logged (a warning, once a
	// minute at most): a sender that invents groups, or a hole that never
	// fills, cannot fill the store's disk.
	ParkLimits ParkLimits

	// MaxUndeletedRate bounds, in messages per second, the net rate of
	// receipts not followed by a delete (the service's second threshold).
	// Default 900.
	MaxUndeletedRate float64

	// MaxMemory is the memory budget of the receive side, in bytes: it
	// covers everything the receiver holds (bodies, per-group state,
	// acknowledged entries waiting for their commit, Unordered and late
	// copies, the set that deduplicates them), each charged at its size
	// plus a fixed overhead. When it is spent, fetching pauses and the
	// farthest-ahead messages are parked (or left to come back). Default
	// 64 MiB. The heap the receiver holds stays within it plus a constant
	// (TestReceiveMemoryBudget).
	MaxMemory int

	// MaxBufferedBytes is the former name of MaxMemory, which now covers
	// everything held.
	//
	// Deprecated: use MaxMemory.
	MaxBufferedBytes int

	// GapTimeout is how long a hole in a group waits before the gap policy
	// acts (and before a group switches to a newer sender epoch). Default
	// 30s.
	GapTimeout time.Duration

	// GapPolicy decides what happens when a hole reaches GapTimeout.
	// Default GapWait.
	GapPolicy GapPolicy

	// Start decides where a group with no stored cursor starts. Default
	// StartFirst.
	Start StartPolicy

	// StartSettle is how long StartLowest collects arrivals before it picks
	// the lowest seq. Default 2s.
	StartSettle time.Duration

	// Untagged decides what happens to bodies without a valid header.
	// Default UntaggedDefault: UntaggedDeliver without Options.Key; with a
	// key, UntaggedDeadLetter when DeadLetter is set, else UntaggedReject.
	Untagged UntaggedPolicy

	// MaxAttempts is how many times a message is handed out before the
	// poison policy applies. Default 5.
	MaxAttempts int

	// Poison decides what happens to a message after MaxAttempts. Default
	// PoisonBlock.
	Poison PoisonPolicy

	// DeadLetter is the queue that receives poison messages (PoisonDeadLetter),
	// untagged ones (UntaggedDeadLetter) and late arrivals (a seq of an older
	// epoch or of a skipped range), with their body as it was on the queue,
	// header included. Nil: poison and untagged policies must not need it,
	// and late arrivals are handed out flagged Unordered. It stays owned by
	// the caller.
	DeadLetter driver.Queue

	// SyncAck makes Ack wait until its cursor advance is durable.
	SyncAck bool

	// Lease, when set, is asked before each hand-out, Ack and Nack whether
	// this receiver may still hand messages out and settle them: package
	// scaleout sets it to the check of its shard's lease, whose local
	// deadline passes before the store lets another receiver take the
	// shard over. Once it returns an error (scaleout's wraps
	// seqstore.ErrFenced), the Queue hands out nothing more and settles
	// nothing more: Receive, Run, Ack and Nack return an error wrapping
	// it, an Ack makes no advance (its message comes back from the queue,
	// to the next owner), and Hooks.OnConflict reports it once. The Queue
	// still has to be closed. Lease is called often, from the goroutines
	// of Receive, Run and Ack: it must be fast and must not call the
	// Queue.
	Lease func() error

	// CommitInterval delays each cursor commit so that more advances
	// share one store write: with many groups, each commit then carries
	// the acks of every group made in that time, and nothing waits for
	// it but the deletes. Default 5ms in AtLeastOnce mode without
	// SyncAck, else 0 (an Ack, or in AtMostOnce mode a hand-out, waits
	// for its commit); 0 on a queue that orders each group itself (an
	// MNS FIFO queue hands out a group's next message only once this one
	// is deleted, which waits for its commit). -1 (or 0 where 0 is the default): a commit starts
	// as soon as the previous one ended, and the acks made meanwhile
	// share the next one.
	CommitInterval time.Duration

	// ReapInterval is how often the reaper deletes acknowledged messages and
	// duplicates when fewer than a full batch are waiting. Default 200ms;
	// 1ms on a queue that orders each group itself (driver.Grouped: an MNS
	// FIFO queue hands out a group's next message only once the previous
	// one is deleted).
	ReapInterval time.Duration

	// ReapTimeout bounds each delete request of the reaper, and each other
	// store or queue call of the receive side (a call may be given up to a
	// tenth more: calls started close together share one deadline).
	// Default 10s.
	ReapTimeout time.Duration

	// VisibilityMargin: a message the receiver holds (waiting for its turn,
	// out to a handler, or acknowledged and waiting for its commit) whose
	// visibility ends within this margin gets its visibility extended,
	// within MaxVisibilityRate; one that the budget cannot extend is parked
	// (or, without parking, left to come back: its newer receipt then
	// replaces the old one). Default a third of the driver's Visibility.
	// -1 disables extension, and the early return of a message the receiver
	// lets go before Close (one beyond its group's window, say): it comes
	// back when its visibility ends. Close still gives back at once what
	// the receiver holds.
	VisibilityMargin time.Duration

	// VisibilityExtend is the timeout set by each extension. Default the
	// driver's Visibility, within its MinVisibility..MaxVisibility.
	VisibilityExtend time.Duration

	// MaxVisibilityRate bounds visibility changes, in requests per second.
	// Default 50.
	MaxVisibilityRate float64

	// IdleEvict is how long a group with nothing held stays in memory; its
	// cursor stays in the store. Default 1m. -1 keeps groups forever.
	IdleEvict time.Duration

	// MaxHold bounds how long the receiver keeps a message received and
	// not deleted. MNS throttles a queue's receives once one of its
	// messages has been held for 30 minutes without a break (visibility
	// changes included), which one group stuck on a hole or a poison
	// message would otherwise cause for every group. A visibility
	// extension that would carry a message past MaxHold is not made: a
	// message waiting for its turn is parked (or, with a store that cannot
	// park, left to come back and be received again, which starts a new
	// hold); an acknowledged one waiting for its commit comes back as a
	// duplicate; one still out to a handler is reported (its visibility
	// ends, and the queue delivers it again). The last extension ends a
	// tenth of MaxHold (at most a minute) before it, as asked for: the
	// queue may apply it up to ReapTimeout later, and New refuses a MaxHold
	// and ReapTimeout that could carry it past the service's 30 minutes.
	// Default 20m. -1: no bound.
	MaxHold time.Duration
}

func (o *ReceiveOptions) setDefaults(limits driver.Limits) error {
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.Fetchers == 0 {
		o.Fetchers = 2
	}
	switch {
	case o.CommitInterval == -1:
		o.CommitInterval = 0
	case o.CommitInterval == 0 && o.Mode == AtLeastOnce && !o.SyncAck:
		o.CommitInterval = 5 * time.Millisecond
	}
	if o.Wait == 0 {
		o.Wait = 20 * time.Second
		if limits.MaxWait > 0 {
			o.Wait = min(o.Wait, limits.MaxWait)
		}
	}
	if o.MaxUndeleted == 0 {
		o.MaxUndeleted = 4000
	}
	if o.Window == 0 {
		o.Window = o.MaxUndeleted
	}
	if o.MaxUndeletedRate == 0 {
		o.MaxUndeletedRate = 900
	}
	if o.MaxMemory == 0 {
		o.MaxMemory = o.MaxBufferedBytes
	}
	if o.MaxMemory == 0 {
		o.MaxMemory = 64 << 20
	}
	o.ParkLimits.setDefaults()
	if o.GapTimeout == 0 {
		o.GapTimeout = 30 * time.Second
	}
	if o.StartSettle == 0 {
		o.StartSettle = 2 * time.Second
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.ReapInterval == 0 {
		o.ReapInterval = 200 * time.Millisecond
	}
	if o.ReapTimeout == 0 {
		o.ReapTimeout = 10 * time.Second
	}
	vis := visibilityOf(limits)
	if o.VisibilityMargin == 0 {
		o.VisibilityMargin = vis / 3
	}
	if o.VisibilityExtend == 0 {
		o.VisibilityExtend = vis
		if limits.MinVisibility > 0 {
			o.VisibilityExtend = max(o.VisibilityExtend, limits.MinVisibility)
		}
		if limits.MaxVisibility > 0 {
			o.VisibilityExtend = min(o.VisibilityExtend, limits.MaxVisibility)
		}
	}
	if o.MaxVisibilityRate == 0 {
		o.MaxVisibilityRate = 50
	}
	if o.IdleEvict == 0 {
		o.IdleEvict = time.Minute
	}
	if o.MaxHold == 0 {
		o.MaxHold = 20 * time.Minute
	}
	return o.validate(limits)
}

func (o *ReceiveOptions) validate(limits driver.Limits) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("ordered: receive options: "+format, args...)
	}
	switch {
	case o.Mode > ExactlyOnce:
		return bad("unknown Mode %d", o.Mode)
	case o.Concurrency < 1:
		return bad("Concurrency %d must be positive", o.Concurrency)
	case o.Fetchers < 1:
		return bad("Fetchers %d must be positive", o.Fetchers)
	case o.Wait < 0 || limits.MaxWait > 0 && o.Wait > limits.MaxWait:
		return bad("Wait %v out of range 0..%v", o.Wait, limits.MaxWait)
	case o.Window < 1:
		return bad("Window %d must be positive", o.Window)
	case o.MaxMemory < 1 || o.MaxBufferedBytes < 0:
		return bad("MaxMemory %d must be positive", o.MaxMemory)
	case o.MaxUndeleted < 1:
		return bad("MaxUndeleted %d must be positive", o.MaxUndeleted)
	case !(o.MaxUndeletedRate > 0):
		return bad("MaxUndeletedRate %v must be positive", o.MaxUndeletedRate)
	case o.GapTimeout < 0 || o.StartSettle < 0 || o.CommitInterval < 0 ||
		o.ReapInterval < 0 || o.ReapTimeout < 0 || o.VisibilityExtend < 0:
		return bad("durations must not be negative")
	case o.GapPolicy > GapSkip:
		return bad("unknown GapPolicy %d", o.GapPolicy)
	case o.Start > StartLowest:
		return bad("unknown Start %d", o.Start)
	case o.Untagged > UntaggedReject:
		return bad("unknown Untagged %d", o.Untagged)
	case o.Poison > PoisonDeadLetter:
		return bad("unknown Poison %d", o.Poison)
	case o.MaxAttempts < 1:
		return bad("MaxAttempts %d must be positive", o.MaxAttempts)
	case o.VisibilityMargin < -1:
		return bad("VisibilityMargin %v: use -1 to disable", o.VisibilityMargin)
	case o.IdleEvict < -1:
		return bad("IdleEvict %v: use -1 to disable", o.IdleEvict)
	case o.MaxHold < -1 || o.MaxHold >= 30*time.Minute:
		return bad("MaxHold %v: under 30m (the service throttles a queue where a message is held 30 minutes), or -1 to disable", o.MaxHold)
	case o.MaxHold > 0 && o.MaxHold-recvcore.HoldSlack(o.MaxHold)+o.ReapTimeout*11/10 >= 30*time.Minute:
		// The last extension ends by MaxHold less the slack as asked for,
		// and the queue applies it up to the call's timeout later.
		return bad("MaxHold %v with ReapTimeout %v: an extension applied as late as a call may take would end past the service's 30m (lower either)", o.MaxHold, o.ReapTimeout)
	case !(o.MaxVisibilityRate > 0):
		return bad("MaxVisibilityRate %v must be positive", o.MaxVisibilityRate)
	}
	if o.DeadLetter == nil && (o.Poison == PoisonDeadLetter || o.Untagged == UntaggedDeadLetter) {
		return errors.New("ordered: receive options: PoisonDeadLetter and UntaggedDeadLetter need DeadLetter")
	}
	return nil
}

// maxEpochAhead is how far ahead of the clock an epoch may lie: epochs
// carry the sender's wall clock (seqstore.NewEpoch), so one further ahead is
// forged or comes from a tampered store. Receivers untag such a header;
// senders refuse such an epoch from their store (ErrEpochAhead).
const maxEpochAhead = 24 * time.Hour

// coreConfig maps the options to the receive core's configuration.
func (q *Queue) coreConfig() recvcore.Config {
	o := &q.opts.Receive
	limits := q.limits
	return recvcore.Config{
		Queue:             q.opts.Name,
		Mode:              recvcore.Mode(o.Mode),
		GapPolicy:         recvcore.GapPolicy(o.GapPolicy),
		GapTimeout:        o.GapTimeout,
		Start:             recvcore.StartPolicy(o.Start),
		StartSettle:       o.StartSettle,
		Untagged:          o.Untagged.core(),
		Poison:            recvcore.PoisonPolicy(o.Poison),
		MaxAttempts:       o.MaxAttempts,
		DeadLetter:        o.DeadLetter != nil,
		RetryInitial:      q.opts.Retry.Initial,
		RetryMax:          q.opts.Retry.Max,
		Seed:              rand.Uint64(),
		Window:            o.Window,
		MaxHeld:           o.MaxUndeleted,
		MaxMemory:         o.MaxMemory,
		MaxUndeletedRate:  o.MaxUndeletedRate,
		MaxBatch:          limits.MaxBatch,
		MaxAdvances:       maxAdvanceBatch,
		MaxParks:          maxParkBatch,
		CommitInterval:    o.CommitInterval,
		ReapInterval:      o.ReapInterval,
		Visibility:        visibilityOf(limits),
		VisibilityMargin:  o.VisibilityMargin,
		VisibilityExtend:  o.VisibilityExtend,
		ShortVisibility:   max(limits.MinVisibility, time.Second),
		MaxVisibilityRate: o.MaxVisibilityRate,
		IdleEvict:         o.IdleEvict,
		MaxHold:           max(o.MaxHold, 0),
		Park:              !o.NoPark,
		ParkLimits:        o.ParkLimits.core(),
		ParkEarly:         q.groups != nil,
		Keys:              q.opts.macKeys(),
		MaxEpochAhead:     maxEpochAhead,
	}
}

// visibilityOf is the queue's visibility timeout (30s when the driver does
// not say).
func visibilityOf(l driver.Limits) time.Duration {
	if l.Visibility > 0 {
		return l.Visibility
	}
	return 30 * time.Second
}

// Batch bounds of the receive side's store writes.
const (
	maxAdvanceBatch = 4096
	maxParkBatch    = 256
)

// ParkLimits bounds what a receiver parks (ReceiveOptions.NoPark): the
// parked messages and their body bytes, over all groups and per group.
// Zero selects a field's default; a negative value removes its limit.
//
// What is counted is what the receiver parked since it started and no
// durable cursor has passed yet (the store drops a park with the cursor
// write that passes it): parks left by an earlier receiver are not
// counted, so over restarts a store can hold more. The count is kept
// outside MaxMemory (parks cannot be shed to make room for it): about 30
// bytes per counted park and 100 per group that has one, so at most about
// 13 MB with the default Messages; a negative Messages removes that bound.
type ParkLimits struct {
	// Messages and Bytes bound the receiver's parks over all groups.
	// Defaults 100,000 and 1 GiB.
	Messages, Bytes int64
	// GroupMessages and GroupBytes bound one group's parks. Default the
	// receiver's: a legitimate backlog of one group behind a hole parks
	// what it needs (beyond a limit it drains in repeated passes over the
	// queue, each message received again on each pass). Set them lower
	// when the queue's senders are not trusted to keep to their groups.
	GroupMessages, GroupBytes int64
}

func (l *ParkLimits) setDefaults() {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.Messages, 100_000)
	def(&l.Bytes, 1<<30)
	def(&l.GroupMessages, l.Messages)
	def(&l.GroupBytes, l.Bytes)
}

func (l ParkLimits) core() recvcore.ParkLimits {
	return recvcore.ParkLimits{Messages: l.Messages, Bytes: l.Bytes, GroupMessages: l.GroupMessages, GroupBytes: l.GroupBytes}
}
