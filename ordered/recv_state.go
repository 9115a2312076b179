package ordered

import (
	"container/heap"
	"time"

	"github.com/inorder/inorder/internal/reorder"
	"github.com/inorder/inorder/seqstore"
)

// entry is one message held by the receiver: buffered, handed out, or acked
// and waiting for its delete.
type entry struct {
	g           *group // nil for an Unordered message
	group       string // group name of an Unordered message
	epoch, seq  uint64
	body        []byte // the whole body as received (for dead letters)
	payload     []byte // body without the header
	id          string
	receipt     string
	dequeue     int
	nextVisible time.Time
	size        int
	attempt     int
	retries     int  // failed delete attempts
	redelivered bool // a second copy arrived, or DequeueCount > 1
	dup         bool // deleted as a duplicate
	stale       bool // late arrival
}

// group is the in-memory state of one stream. Idle groups keep only the
// fields above x; everything a busy group needs lives in x.
type group struct {
	name string
	// next is the next seq to hand out while buf is nil.
	next  uint64
	epoch uint64
	buf   *reorder.Buffer[*entry]
	out   *entry // the message out (handed out, or waiting for its retry)
	// dur is the cursor known to be durable in the store, ack the cursor
	// that the acks so far justify. dur <= ack.
	dur, ack seqstore.Cursor
	// unflushed holds acked messages and duplicates whose seq is below
	// ack but maybe not below dur: deleted after the next commit.
	unflushed []*entry
	x         *groupExtra

	outGen uint32
	run    uint32 // buffered seqs held consecutively from next: deliverable backlog
	flags  uint16

	idlePrev, idleNext *group
	idleSince          time.Time
}

const (
	gLoading    uint16 = 1 << iota // cursor being read from the store
	gFresh                         // no cursor stored and no epoch adopted yet
	gInRing                        // in the ready ring
	gDirty                         // in r.dirty
	gCommitting                    // an Advance for it is in flight
	gConflict                      // Advance found the cursor moved: no hand-outs
	gResolving                     // in r.resolve or being resolved
	gHanded                        // out was handed to the application (not a pending AtMostOnce)
	gIdle                          // in the idle list
	gEvicted                       // dropped from r.groups
	gAwait                         // out waits for its AtMostOnce commit or its dead-letter send
	gStarted                       // something was handed out since the group was loaded
)

func (g *group) has(f uint16) bool { return g.flags&f != 0 }
func (g *group) set(f uint16)      { g.flags |= f }
func (g *group) clear(f uint16)    { g.flags &^= f }

// groupExtra is the state a group needs only while it holds something.
type groupExtra struct {
	waiting    []*entry // arrivals while loading
	newer      []*entry // arrivals of a newer epoch
	newerSince time.Time
	pending    []*entry // StartLowest: arrivals while settling
	startAt    time.Time
	startEpoch uint64
	startLow   uint64
	waiters    []durWaiter
	gapSince   time.Time
	gapTimer   bool
	gapReport  bool
	farLow     uint64 // lowest seq seen too far ahead since the last progress
	retryAt    time.Time
	stuckErr   error
}

func (x *groupExtra) empty() bool {
	return len(x.waiting) == 0 && len(x.newer) == 0 && len(x.pending) == 0 && len(x.waiters) == 0 &&
		x.retryAt.IsZero() && x.startAt.IsZero() && x.farLow == 0
}

func (g *group) extra() *groupExtra {
	if g.x == nil {
		g.x = &groupExtra{}
	}
	return g.x
}

// nextSeq is the next seq of the current epoch to hand out.
func (g *group) nextSeq() uint64 {
	if g.buf != nil {
		return g.buf.Next()
	}
	return g.next
}

// bufLen is the number of messages in the reorder buffer.
func (g *group) bufLen() int {
	if g.buf == nil {
		return 0
	}
	return g.buf.Len()
}

// ready reports whether the group can hand a message out now.
func (g *group) ready() bool {
	if g.has(gLoading | gConflict | gFresh) {
		return false
	}
	if g.out != nil {
		return !g.has(gHanded|gAwait) && (g.x == nil || g.x.retryAt.IsZero())
	}
	return g.buf != nil && g.buf.Ready()
}

// below reports whether seq of epoch lies below cursor c: handled.
func below(c seqstore.Cursor, epoch, seq uint64) bool {
	return c.Epoch > epoch || c.Epoch == epoch && seq < c.Next
}

// cursorBefore reports whether cursor a is strictly behind b.
func cursorBefore(a, b seqstore.Cursor) bool {
	return a.Epoch < b.Epoch || a.Epoch == b.Epoch && a.Next < b.Next
}

func cloneCursor(c seqstore.Cursor) seqstore.Cursor {
	if c.Skipped != nil {
		c.Skipped = append([]seqstore.Range(nil), c.Skipped...)
	}
	return c
}

// addSkipped appends r to the skipped ranges of c, dropping the oldest.
func addSkipped(c *seqstore.Cursor, r seqstore.Range) {
	s := append(c.Skipped[:len(c.Skipped):len(c.Skipped)], r)
	if len(s) > seqstore.MaxSkipped {
		s = s[len(s)-seqstore.MaxSkipped:]
	}
	c.Skipped = s
}

// ringItem is a ready group, or a ready Unordered message.
type ringItem struct {
	g *group
	e *entry
}

// ring is the FIFO of ready groups: groups take turns.
type ring struct {
	items []ringItem
	head  int
}

func (q *ring) len() int { return len(q.items) - q.head }

func (q *ring) push(it ringItem) { q.items = append(q.items, it) }

func (q *ring) pop() (ringItem, bool) {
	if q.head == len(q.items) {
		return ringItem{}, false
	}
	it := q.items[q.head]
	q.items[q.head] = ringItem{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return it, true
}

// timer kinds.
const (
	tRetry uint8 = iota + 1 // a Nacked message's backoff ended
	tGap                    // a hole may have reached GapTimeout
	tEpoch                  // a newer epoch may be ready to switch to
	tStart                  // StartLowest settle time ended
	tLoose                  // an Unordered message's backoff ended
)

type timer struct {
	at   time.Time
	g    *group
	e    *entry
	kind uint8
}

type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = timer{}
	*h = old[:len(old)-1]
	return t
}

func (r *receiver) addTimerLocked(t timer) {
	first := len(r.timers) == 0 || t.at.Before(r.timers[0].at)
	heap.Push(&r.timers, t)
	if first {
		signal(r.keeperWake)
	}
}

// idleList is an intrusive list of idle groups, oldest first.
type idleList struct{ head, tail *group }

func (l *idleList) pushBack(g *group) {
	g.idlePrev, g.idleNext = l.tail, nil
	if l.tail != nil {
		l.tail.idleNext = g
	} else {
		l.head = g
	}
	l.tail = g
}

func (l *idleList) remove(g *group) {
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
	g.idlePrev, g.idleNext = nil, nil
}

// durWaiter waits until a group's durable cursor reaches target.
type durWaiter struct {
	target seqstore.Cursor
	ch     chan error // cap 1
}
