package recvcore

import (
	"slices"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// group is the state of one stream in memory. Its phase changes only in
// phase.go.
type group struct {
	name  string
	phase phase

	// dur is the cursor the store holds as far as this Core knows; ack is
	// the cursor the handled messages justify (dur <= ack). uncertain is
	// the target of a write whose outcome is unknown: nothing is written
	// for the group until a read settles it.
	dur, ack  seqstore.Cursor
	uncertain *seqstore.Cursor
	writing   bool // a commit of this group is in flight
	repairing bool // a repair waits on an event of the group (Core.repairs)
	pinned    bool // late arrivals to carve: Core.carves holds them (carve.go)
	kept      bool // stopped by a store error, kept what was acknowledged: until it is durable (keepsAcked)

	epoch, next uint64         // current epoch, next seq to hand out
	held        []*msg         // current epoch, seqs >= next, sorted
	settled     []settledEntry // acked messages and duplicates, waiting for the durable cursor
	out         *msg
	outGen      uint32

	started      bool // something was handed out since the cursor was read
	forced       bool // ExactlyOnce: the Core writes this cursor itself (a dead letter)
	inRing       bool
	dirty        bool
	toRead       bool // in the read lane's queue
	gapTold      bool
	gapTimer     bool // a tGap timer is pending
	conflictTold bool
	probed       bool // the park was read from next on since it last changed (see parkView)
	unparking    bool // in the unpark lane
	list         listKind
	holding      bool  // in the budget's heap of groups that hold messages (see Core.makeRoom)
	settledDue   int64 // the earliest visibility end among the settled entries to extend (see visLane.watch): 0 none

	lprev, lnext  *group // the idle or quiet list
	idleSince     time.Time
	idleAt        time.Time // when the group last went idle (compaction)
	compactQueued bool
	cost          int

	// The state a group needs only while it works: nil while it is idle
	// (see Core.compact), so that a million idle groups fit a modest heap.
	*groupCold
}

// listKind says which list of the Core a group is on.
type listKind uint8

const (
	onNoList listKind = iota
	onIdle            // holds and waits for nothing: evicted after IdleEvict, or first when memory is short (Core.idle)
	onQuiet           // holds nothing in memory but waits (a hole, its park): shed when memory is short (Core.quiet)
)

// groupCold is the part of a group's state that an idle group does not
// need. Its fields are promoted: a group's code reads g.newer, and the Core
// makes sure (wake) that a group it touches has one.
type groupCold struct {
	since time.Time // start of the current phase, or of the stuck condition

	newer   []*msg // newer epochs, in arrival order
	pending []*msg // arrivals while loading, fresh (StartLowest) or resolving
	tickets []syncWait

	gapSince     time.Time
	newerSince   time.Time
	newerEpoch   uint64    // the lowest newer epoch seen (its messages may have been evicted): 0 none
	startAt      time.Time // StartLowest: end of the settle time
	settleRounds uint8     // StartLowest: settle times so far (see maxSettleRounds)
	stuck        string    // "", "gap", "poison", "conflict", "store"
	stuckErr     error

	park parkView

	// farLow and farHigh bound the seqs of the current epoch released
	// because they were too far ahead (or evicted): they are in the queue,
	// and the group waits for them (a hole) and never passes over them
	// when it switches epochs.
	farLow, farHigh uint64
	// farAt is when the last of them was released: it is back in the
	// queue within a visibility timeout of that.
	farAt time.Time

	// owed holds the ranges skipOwed marked and no commit made durable
	// yet: a conflict carries them over to the other receiver's cursor
	// (the messages are ours, committed and never handed out).
	owed []seqstore.Range
}

// parkView is what a group knows of its parked messages. low is the lowest
// parked seq of the current epoch at or above next that is not in memory
// (0: none known), high bounds the parked seqs above it; group.probed says
// a read found what is parked from next on. gen counts parks that became
// durable, unparkGen its value when the read in flight was asked for;
// parking counts the group's messages on their way to the park.
type parkView struct {
	low, high      uint64
	gen, unparkGen uint64
	parking        int
	probedAt       time.Time // when a park read last ended (GapSkip skips only what one saw since the hole began)
}

// known reports whether the group knows of parked seqs.
func (p *parkView) known() bool { return p.low != 0 || p.high != 0 }

// forget drops what the group knew of its park (a new cursor or epoch).
func (g *group) forgetPark() {
	g.park.low, g.park.high, g.probed = 0, 0, false
}

// wake gives g its working state back.
func (g *group) wake() {
	if g.groupCold == nil {
		g.groupCold = &groupCold{}
	}
}

// cold reports whether g's working state was dropped (an idle group).
func (g *group) cold() bool { return g.groupCold == nil }

// settledEntry is an acknowledged message, or a duplicate, waiting for the
// durable cursor past it: what deleting it and keeping its visibility
// alive take. flags: fDup, fLapsed (its visibility ended), fVisBusy (an
// extension is in flight), fDelWait (deleted once the extension ends).
type settledEntry struct {
	epoch, seq uint64
	receipt    string
	visible    int64 // Unix nanoseconds
	since      int64 // when it was received (see Config.MaxHold)
	flags      uint16
}

// settledCost is what a settledEntry costs in a group's slice.
const settledCost = 56

// watched reports whether e's visibility is to be extended: it has a
// receipt to extend and no extension in flight.
func (e *settledEntry) watched() bool { return e.flags&(fLapsed|fVisBusy) == 0 }

// settledIndex returns the position of the settled entry of epoch and seq
// whose receipt is receipt, -1 if none.
func (g *group) settledIndex(epoch, seq uint64, receipt string) int {
	for i := range g.settled {
		if e := &g.settled[i]; e.epoch == epoch && e.seq == seq && e.receipt == receipt {
			return i
		}
	}
	return -1
}

// syncWait is a SyncAck waiting for the durable cursor to reach target.
type syncWait struct {
	target seqstore.Cursor
	t      Ticket
}

// below reports whether seq of epoch is below cursor c: handled.
func below(c seqstore.Cursor, epoch, seq uint64) bool {
	return c.Epoch > epoch || c.Epoch == epoch && seq < c.Next
}

// behind reports whether cursor a is strictly behind b.
func behind(a, b seqstore.Cursor) bool {
	return a.Epoch < b.Epoch || a.Epoch == b.Epoch && a.Next < b.Next
}

func cloneCursor(c seqstore.Cursor) seqstore.Cursor {
	c.Skipped = slices.Clone(c.Skipped)
	return c
}

// sameCursor reports whether a and b are equal, skipped ranges included.
func sameCursor(a, b seqstore.Cursor) bool {
	return a.Same(b) && slices.Equal(a.Skipped, b.Skipped)
}

// heldIndex returns the position of seq in g.held and whether it is there.
func (g *group) heldIndex(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(g.held, seq, func(m *msg, s uint64) int {
		switch {
		case m.seq < s:
			return -1
		case m.seq > s:
			return 1
		}
		return 0
	})
}

func insertAt(s []*msg, i int, m *msg) []*msg {
	s = append(s, nil)
	copy(s[i+1:], s[i:])
	s[i] = m
	return s
}

// ready reports whether the group can hand a message out now.
func (g *group) ready(now time.Time) bool {
	if g.phase != phActive || g.forced {
		return false
	}
	if m := g.out; m != nil {
		return m.out == outReady || m.out == outOwed
	}
	return len(g.held) > 0 && g.held[0].seq == g.next
}

// blocked reports whether the group cannot progress on its own: what the
// Core evicts first when it must make room.
func (g *group) blocked() bool {
	return g.stuck != "" || g.phase != phActive
}

// buffered counts the messages g holds waiting for their turn.
func (g *group) buffered() int { return len(g.held) + len(g.newer) + len(g.pending) }

// empty reports whether the group holds nothing and waits for nothing.
func (g *group) empty() bool {
	return g.out == nil && g.buffered() == 0 && g.newerEpoch == 0 &&
		len(g.settled) == 0 && len(g.tickets) == 0 && !g.repairing && !g.writing && g.uncertain == nil &&
		!g.dirty && !g.toRead && !g.inRing && !g.unparking && g.park.parking == 0 && !g.park.known() && g.farHigh == 0 &&
		g.startAt.IsZero() && !behind(g.dur, g.ack) && g.phase == phActive && !g.pinned
}

// quiet reports whether the group holds nothing in memory and has nothing
// in flight: dropping it loses nothing that its cursor, its park and the
// queue do not hold (see Core.shed).
func (g *group) quiet() bool {
	return g.out == nil && g.buffered() == 0 && len(g.settled)+len(g.tickets) == 0 && !g.repairing &&
		!g.dirty && !g.writing && g.uncertain == nil && !g.toRead && !g.unparking && !g.inRing &&
		(g.phase == phActive || g.phase == phFailed || g.phase == phFresh) && !behind(g.dur, g.ack) && !g.pinned &&
		len(g.owed) == 0 // (a mark a store error kept from its write: dropped, it would be lost)
}

// knowParked records that seq of g's current epoch is parked and not in
// memory.
func (g *group) knowParked(seq uint64) {
	if seq >= g.next && (g.park.low == 0 || seq < g.park.low) {
		g.park.low = seq
	}
	g.park.high = max(g.park.high, seq)
}

// passParked forgets what next has passed of the park: when more may be
// parked beyond, the park is read again once next is missing.
func (g *group) passParked() {
	if g.park.low != 0 && g.park.low < g.next {
		g.park.low = 0
		if g.park.high >= g.next {
			g.probed = false
		}
	}
	if g.park.high < g.next {
		g.park.high = 0
	}
}

// noteFar records that seq of g's current epoch was released at now.
func (g *group) noteFar(seq uint64, now time.Time) {
	if g.farLow == 0 || seq < g.farLow {
		g.farLow = seq
	}
	g.farHigh = max(g.farHigh, seq)
	g.farAt = maxTime(g.farAt, now)
}

// forgetFar drops what next has passed of the released range: below
// farHigh, the lowest released seq is then unknown.
func (g *group) forgetFar() {
	switch {
	case g.farHigh < g.next:
		g.farLow, g.farHigh = 0, 0
	case g.farLow < g.next:
		g.farLow = 0
	}
}

// waiting reports whether g's next seq is missing while later seqs of its
// epoch are known (held, parked, or seen too far ahead).
func (g *group) waiting() bool {
	return g.out == nil && (len(g.held) > 0 || g.park.low != 0 || g.farHigh != 0 && g.farHigh >= g.next)
}

// lowestKnown returns the lowest seq of g's epoch above next that g holds,
// knows parked, or saw too far ahead.
func (g *group) lowestKnown() uint64 {
	low := uint64(0)
	for _, s := range [...]uint64{g.park.low, g.farLow} {
		if s != 0 && (low == 0 || s < low) {
			low = s
		}
	}
	if len(g.held) > 0 && (low == 0 || g.held[0].seq < low) {
		low = g.held[0].seq
	}
	return low
}

// dropHeld lets go of every message g holds in memory, other than the one
// out: fn decides each one's fate (release, delete, re-route).
func (c *Core) dropHeld(g *group, fn func(*msg)) {
	c.dropBuffered(g, fn)
	c.dropSettled(g, fn)
}

// dropBuffered is dropHeld without the acknowledged messages.
func (c *Core) dropBuffered(g *group, fn func(*msg)) {
	var all []*msg
	all = append(all, g.held...)
	all = append(all, g.newer...)
	all = append(all, g.pending...)
	clear(g.held)
	clear(g.newer)
	clear(g.pending)
	g.held, g.newer, g.pending = g.held[:0], g.newer[:0], g.pending[:0]
	for _, m := range all {
		c.budget.unbuffer(m)
		fn(m)
	}
	g.gapSince, g.gapTold = time.Time{}, false
	g.newerSince, g.newerEpoch = time.Time{}, 0
	g.farLow, g.farHigh = 0, 0
	g.inRing = false // the ring is lazy: a group popped while not ready is skipped
}

// dropSettled is dropHeld for the acknowledged messages only.
func (c *Core) dropSettled(g *group, fn func(*msg)) {
	settled := g.settled
	g.settled = nil
	g.settledDue = 0
	for _, e := range settled {
		fn(c.unsettle(c.now, e))
	}
}

// unhold removes a held message from its group's lists.
func (c *Core) unhold(m *msg) {
	g := m.g
	if g == nil {
		return
	}
	if i, ok := g.heldIndex(m.seq); ok && g.held[i] == m {
		g.held = slices.Delete(g.held, i, i+1)
	} else if i := slices.Index(g.newer, m); i >= 0 {
		g.newer = slices.Delete(g.newer, i, i+1)
	} else if i := slices.Index(g.pending, m); i >= 0 {
		g.pending = slices.Delete(g.pending, i, i+1)
	}
	c.budget.unbuffer(m)
}
