package recvcore

import "time"

// The small containers the Core is built from: a queue, a timer heap, the
// intrusive lists of idle groups and of messages whose visibility is kept
// alive, and the heap of released messages.

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

// all returns the items queued, oldest first (not a copy).
func (q *fifo[T]) all() []T { return q.items[q.head:] }

// timer kinds: each checks, when it fires, that what it was set for still
// holds (timers are never cancelled).
type timerKind uint8

const (
	tRetry  timerKind = iota + 1 // a Nacked message's backoff ended
	tGap                         // a hole may have reached GapTimeout
	tEpoch                       // a newer epoch may be ready to switch to
	tStart                       // StartLowest settle time ended
	tFailed                      // a failed group's retry
)

// timer names its group (not a pointer: a shed group is not kept in memory
// by its timers) or its message (with m's generation: m may be reused).
type timer struct {
	at      time.Time
	kind    timerKind
	name    string // the group
	m       *msg
	gen     uint32 // m.gen when set
	attempt int32  // tRetry: m.attempt when set (a later Nack sets its own)
}

// timerCost is what a timer is charged while it waits: its slot, and the
// name it keeps.
func timerCost(t *timer) int { return 64 + len(t.name) }

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

// groupList is an intrusive list of groups, oldest first: the idle groups,
// and the quiet ones that wait with nothing in memory (see Core.shed).
type groupList struct{ head, tail *group }

func (l *groupList) push(g *group) {
	g.lprev, g.lnext = l.tail, nil
	if l.tail != nil {
		l.tail.lnext = g
	} else {
		l.head = g
	}
	l.tail = g
}

func (l *groupList) remove(g *group) {
	if g.lprev != nil {
		g.lprev.lnext = g.lnext
	} else {
		l.head = g.lnext
	}
	if g.lnext != nil {
		g.lnext.lprev = g.lprev
	} else {
		l.tail = g.lprev
	}
	g.lprev, g.lnext = nil, nil
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
	m.flags |= fInVis
}

func (l *visList) remove(m *msg) {
	if !m.has(fInVis) {
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
	m.vprev, m.vnext = nil, nil
	m.flags &^= fInVis
}

// holdList lists messages by when they were received (see Core.watchHold).
type holdList struct{ head, tail *msg }

func (l *holdList) push(m *msg) {
	m.hprev, m.hnext = l.tail, nil
	if l.tail != nil {
		l.tail.hnext = m
	} else {
		l.head = m
	}
	l.tail = m
	m.flags |= fInHold
}

func (l *holdList) remove(m *msg) {
	if !m.has(fInHold) {
		return
	}
	if m.hprev != nil {
		m.hprev.hnext = m.hnext
	} else {
		l.head = m.hnext
	}
	if m.hnext != nil {
		m.hnext.hprev = m.hprev
	} else {
		l.tail = m.hprev
	}
	m.hprev, m.hnext = nil, nil
	m.flags &^= fInHold
}

// relEntry is a message given back to the queue: received, not deleted,
// and invisible until a time. The service counts it until then.
type relEntry struct {
	until       time.Time
	receipt, id string
	index       int
}

// relHeap is a min-heap of released messages by time.
type relHeap []*relEntry

func (h relHeap) less(i, j int) bool { return h[i].until.Before(h[j].until) }

func (h relHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *relHeap) push(e *relEntry) {
	e.index = len(*h)
	*h = append(*h, e)
	h.up(e.index)
}

func (h *relHeap) pop() *relEntry {
	s := *h
	e := s[0]
	n := len(s) - 1
	s.swap(0, n)
	s[n] = nil
	*h = s[:n]
	h.down(0)
	e.index = -1
	return e
}

// remove takes e off the heap.
func (h *relHeap) remove(e *relEntry) {
	s := *h
	i, n := e.index, len(s)-1
	if i < 0 || i > n || s[i] != e {
		return
	}
	if i != n {
		s.swap(i, n)
	}
	s[n] = nil
	*h = s[:n]
	if i != n {
		h.fix(i)
	}
	e.index = -1
}

// fix restores the heap after the time of the entry at i changed.
func (h relHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h relHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h relHeap) down(i0 int) bool {
	i, n := i0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > i0
}
