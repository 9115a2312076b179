package ordered

// sendWindow is the bookkeeping of one group's disorder bound
// (SendOptions.MaxDisorder): it decides when a reserved message may be handed
// to the send workers. It is pure (no lock, no clock, no goroutine); the
// sender calls it under its mutex.
//
// The group's messages take positions 0, 1, 2, ... in the order of their
// seqs (while one process sends to a stream, a position is its seq minus a
// constant). A position is reserved, then released (handed to the workers, so
// in flight to the queue), then finished (accepted by the queue, or failed
// for good). The window keeps
//
//	newest released - oldest unfinished <= limit
//
// so on a FIFO-like queue no message of the group lands more than limit places
// behind one sent after it. A message whose send is retried stays unfinished
// until its last attempt, so it keeps its place: everything more than limit
// positions after it waits. Releasing is maximal: after release, either
// nothing is held or the next held position is beyond the bound. The oldest
// unfinished position is always released or the next to release, so when
// the released messages finish, everything held is eventually released.
type sendWindow struct {
	limit    uint64
	oldest   uint64 // lowest unfinished position; == released when nothing is in flight
	released uint64 // positions below are released
	reserved uint64 // positions below are reserved

	// done holds the finished flags of positions oldest..released-1, as a
	// ring of bits: position p is bit p mod (64*len(done)). The span
	// released-oldest never exceeds limit+1, and the ring grows (doubling)
	// only as far as the span needs, so a large limit costs memory only
	// when that many messages are in flight.
	done []uint64
}

// reset empties w for a new group with the given limit, keeping the ring's
// memory.
func (w *sendWindow) reset(limit uint64) {
	done := w.done
	clear(done)
	*w = sendWindow{limit: limit, done: done}
}

// reserve appends n positions, held, and returns the first.
func (w *sendWindow) reserve(n int) uint64 {
	first := w.reserved
	w.reserved += uint64(n)
	return first
}

// held is the number of positions reserved and not released.
func (w *sendWindow) held() int { return int(w.reserved - w.released) }

// idle reports whether every reserved position is finished.
func (w *sendWindow) idle() bool { return w.oldest == w.reserved }

// release releases as many held positions as the bound allows, in order,
// and returns how many: they are the last n positions below w.released.
func (w *sendWindow) release() int {
	n := 0
	for w.released < w.reserved && w.released-w.oldest <= w.limit {
		if w.released-w.oldest == uint64(len(w.done))*64 {
			w.grow()
		}
		w.released++
		n++
	}
	return n
}

// finish records that released position p is done (accepted or failed for
// good) and reports whether held positions may now be released.
func (w *sendWindow) finish(p uint64) bool {
	if p != w.oldest {
		w.set(p)
		return false
	}
	w.oldest++
	for w.oldest < w.released && w.isSet(w.oldest) {
		w.unset(w.oldest)
		w.oldest++
	}
	return w.released < w.reserved
}

func (w *sendWindow) bit(p uint64) (word int, mask uint64) {
	i := p % (uint64(len(w.done)) * 64)
	return int(i / 64), 1 << (i % 64)
}

func (w *sendWindow) set(p uint64) {
	i, m := w.bit(p)
	w.done[i] |= m
}

func (w *sendWindow) unset(p uint64) {
	i, m := w.bit(p)
	w.done[i] &^= m
}

func (w *sendWindow) isSet(p uint64) bool {
	i, m := w.bit(p)
	return w.done[i]&m != 0
}

// grow doubles the ring, moving the flags of the positions in flight.
func (w *sendWindow) grow() {
	old := *w
	w.done = make([]uint64, max(1, 2*len(old.done)))
	for p := old.oldest; p < old.released; p++ {
		if old.isSet(p) {
			w.set(p)
		}
	}
}
