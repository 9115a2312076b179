package recvcore

import (
	"slices"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// where is the place of a message in the Core: exactly one at a time.
type where uint8

const (
	wHeld    where = iota + 1 // waiting for its turn: g.held, g.newer, g.pending, or an Unordered one in the ring
	wOut                      // handed out, or waiting to be handed out again (g.out)
	wSettled                  // acked or a duplicate: waits for the durable cursor past it (g.settled)
	wDelete                   // queued for delete, or being deleted
	wDead                     // being dead-lettered
	wPark                     // being parked
	wGone                     // deleted, released or dropped: no longer held
)

// msg flags.
const (
	fRedelivered uint8 = 1 << iota
	fDup               // a copy of a handled message
	fLate              // an older epoch or a skipped seq
	fUntagged          // no valid header
	fStored            // read back from the park: no receipt, not in the queue
	fLapsed            // its visibility ended: the receipt may be stale
	fSpare             // made by unsettle: recycled once gone (see Core.take)
	fNoPark            // the store refused to park it for good: never parked again
)

// msg is one message held by the Core.
type msg struct {
	g          *group // nil for an Unordered message
	name       string // group name (also for Unordered ones)
	epoch, seq uint64
	raw        []byte // the body as received (dropped once acked)
	payload    []byte // raw without the header
	id         string
	receipt    string
	dequeue    int
	visibleAt  time.Time
	cost       int
	attempt    int
	tries      int // failed deletes, dead letters or parks
	where      where
	flags      uint8
	out        outState // while wOut
	gen        uint32   // counts the msg's reuses: a Delivery of an earlier use no longer matches
	retryAt    time.Time
	ticket     Ticket // AtMostOnce: the hand-out waiting for its commit or delete

	vprev, vnext *msg // the visibility list, while it holds a live receipt
	inVis        bool
}

func (m *msg) has(f uint8) bool { return m.flags&f != 0 }

// live reports whether m holds a receipt of a message not yet deleted.
func (m *msg) live() bool { return !m.has(fStored) && m.where != wGone }

// outState refines wOut.
type outState uint8

const (
	outHanded    outState = iota + 1 // with the application
	outRetry                         // waiting for its retry backoff
	outReady                         // waits to be handed out (a retry that is due, or an owed AtMostOnce message)
	outCommit                        // AtMostOnce: handed out once its cursor advance is durable
	outOwed                          // AtMostOnce: committed, but the Receive waiting for it gave up
	outAbandoned                     // AtMostOnce: the Receive gave up while the commit was in flight
	outDead                          // being dead-lettered (PoisonDeadLetter)
	outDelete                        // AtMostOnce Unordered: handed out once deleted
	outSkipped                       // AtMostOnce: given up at close, marked skipped in the cursor
)

// phase is a group's state; transitions are the become* methods.
type phase uint8

const (
	phLoading   phase = iota + 1 // its cursor is being read
	phFresh                      // no stored cursor: StartLowest settling, or waiting for a first arrival
	phActive                     // handing out
	phResolving                  // re-reading its cursor after a conflict or an ambiguous write
	phFailed                     // a permanent store error: retried after RetryMax
	phEvicted                    // dropped from memory
)

func (p phase) String() string {
	return [...]string{"", "loading", "fresh", "active", "resolving", "failed", "evicted"}[p]
}

// group is the state of one stream in memory.
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

	epoch, next uint64         // current epoch, next seq to hand out
	held        []*msg         // current epoch, seqs >= next, sorted
	settled     []settledEntry // acked messages and duplicates, waiting for the durable cursor
	out         *msg
	outGen      uint32

	started      bool // something was handed out since the cursor was read
	forced       bool // ExactlyOnce: the Core writes this cursor itself (a dead letter)
	inRing       bool
	dirty        bool
	toRead       bool // in Core.reads
	gapTold      bool
	gapTimer     bool // a tGap timer is pending
	conflictTold bool
	probed       bool // see groupCold
	unparking    bool
	idle         bool

	idlePrev, idleNext *group
	idleSince          time.Time
	idleAt             time.Time // when the group last went idle (compaction)
	compactQueued      bool
	cost               int

	// The state a group needs only while it works: nil while it is idle
	// (see Core.compact), so that a million idle groups fit a modest heap.
	*groupCold
}

// groupCold is the part of a group's state that an idle group does not
// need. Its fields are promoted: a group's code reads g.newer, and the Core
// makes sure (wake) that a group it touches has one.
type groupCold struct {
	since time.Time // start of the current phase, or of the stuck condition

	newer   []*msg // newer epochs, in arrival order
	pending []*msg // arrivals while loading, fresh (StartLowest) or resolving
	tickets []syncWait

	gapSince   time.Time
	probedAt   time.Time // when a park read last ended (GapSkip skips only what one saw since the hole began)
	newerSince time.Time
	newerEpoch uint64    // the lowest newer epoch seen (its messages may have been evicted): 0 none
	startAt    time.Time // StartLowest: end of the settle time
	stuck      string    // "", "gap", "poison", "conflict", "store"
	stuckErr   error

	// What the Core knows of the park (see knowParked): parkLow is the
	// lowest parked seq of the current epoch at or above next that is not
	// in memory (0: none known), parkHigh bounds the parked seqs above it;
	// probed says a read found what is parked from next on; parkGen counts
	// parks that became durable, unparkGen its value when the read in
	// flight (unparking) was asked for.
	parkLow, parkHigh  uint64
	parkGen, unparkGen uint64
	parking            int // messages of g on their way to the park

	// farLow and farHigh bound the seqs of the current epoch released
	// because they were too far ahead (or evicted): they are in the queue,
	// and the group waits for them (a hole) and never passes over them
	// when it switches epochs.
	farLow, farHigh uint64
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
// durable cursor past it: only what deleting it takes, so that a store
// outage during which acks go on costs a few dozen bytes per message.
type settledEntry struct {
	epoch, seq uint64
	receipt    string
	dup        bool
}

// settledCost is what a settledEntry is charged besides its receipt.
const settledCost = 48

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

// ready reports whether the group can hand a message out now.
func (g *group) ready(now time.Time) bool {
	if g.phase != phActive || g.forced {
		return false
	}
	if m := g.out; m != nil {
		return m.out == outReady || m.out == outOwed || m.out == outRetry && !now.Before(m.retryAt)
	}
	return len(g.held) > 0 && g.held[0].seq == g.next
}

// blocked reports whether the group cannot progress on its own: what the
// Core evicts first when it must make room.
func (g *group) blocked() bool {
	return g.stuck != "" || g.phase != phActive
}

// empty reports whether the group holds nothing and waits for nothing.
func (g *group) empty() bool {
	return g.out == nil && len(g.held) == 0 && len(g.newer) == 0 && g.newerEpoch == 0 && len(g.pending) == 0 &&
		len(g.settled) == 0 && len(g.tickets) == 0 && !g.writing && g.uncertain == nil &&
		!g.dirty && !g.toRead && !g.inRing && !g.unparking && g.parking == 0 && g.parkLow == 0 && g.parkHigh == 0 && g.farHigh == 0 &&
		g.startAt.IsZero() && !behind(g.dur, g.ack) && g.phase == phActive
}

// idleList is an intrusive list of idle groups, oldest first.
type idleList struct{ head, tail *group }

func (l *idleList) push(g *group) {
	g.idlePrev, g.idleNext = l.tail, nil
	if l.tail != nil {
		l.tail.idleNext = g
	} else {
		l.head = g
	}
	l.tail = g
	g.idle = true
}

func (l *idleList) remove(g *group) {
	if !g.idle {
		return
	}
	if g.idlePrev != nil {
		g.idlePrev.idleNext = g.idleNext
	} else {
		l.head = g.idleNext
	}
	if g.idleNext != nil {
		g.idleNext.idlePrev = g.idlePrev
	} else {
		l.tail = g.idlePrev
	}
	g.idlePrev, g.idleNext, g.idle = nil, nil, false
}

// visList lists the messages whose visibility the Core keeps alive, in the
// order their visibility ends (arrivals and extensions are appended, and
// each sets visibleAt to now plus a fixed timeout, so the list stays nearly
// sorted).
type visList struct{ head, tail *msg }

func (l *visList) push(m *msg) {
	m.vprev, m.vnext = l.tail, nil
	if l.tail != nil {
		l.tail.vnext = m
	} else {
		l.head = m
	}
	l.tail = m
	m.inVis = true
}

func (l *visList) remove(m *msg) {
	if !m.inVis {
		return
	}
	if m.vprev != nil {
		m.vprev.vnext = m.vnext
	} else {
		l.head = m.vnext
	}
	if m.vnext != nil {
		m.vnext.vprev = m.vprev
	} else {
		l.tail = m.vprev
	}
	m.vprev, m.vnext, m.inVis = nil, nil, false
}

// ringItem is a ready group, or a ready Unordered message.
type ringItem struct {
	g *group
	m *msg
}

// fifo is a queue of T.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) push(it T) { q.items = append(q.items, it) }

func (q *fifo[T]) pop() (T, bool) {
	var zero T
	if q.head == len(q.items) {
		return zero, false
	}
	it := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
		if cap(q.items) > 1024 { // a burst is over: give its memory back
			q.items = nil
		}
	} else if q.head > 64 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return it, true
}

func (q *fifo[T]) peek() (T, bool) {
	var zero T
	if q.head == len(q.items) {
		return zero, false
	}
	return q.items[q.head], true
}

// timer kinds: each checks, when it fires, that what it was set for still
// holds (timers are never cancelled).
type timerKind uint8

const (
	tRetry     timerKind = iota + 1 // a Nacked message's backoff ended
	tGap                            // a hole may have reached GapTimeout
	tEpoch                          // a newer epoch may be ready to switch to
	tStart                          // StartLowest settle time ended
	tUnordered                      // an Unordered message's backoff ended
	tFailed                         // a failed group's retry
)

type timer struct {
	at   time.Time
	kind timerKind
	g    *group
	m    *msg
}

// timerHeap is a min-heap of timers by time.
type timerHeap []timer

func (h *timerHeap) push(t timer) {
	*h = append(*h, t)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].at.Before(s[p].at) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *timerHeap) pop() timer {
	s := *h
	t := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = timer{}
	s = s[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && s[l].at.Before(s[m].at) {
			m = l
		}
		if r < n && s[r].at.Before(s[m].at) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return t
}
