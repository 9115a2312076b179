package reorder

import (
	"math"
	"math/bits"
	"strconv"
)

// Result says what Insert did with an item.
type Result uint8

const (
	// Buffered means the item is held and its seq is above Next(): it waits
	// for the seqs before it.
	Buffered Result = iota + 1
	// Ready means the item is held and its seq is Next(): Pop returns it now.
	Ready
	// Duplicate means the item is not held because its seq is below Next():
	// that seq was already popped or skipped.
	Duplicate
	// Replaced means the seq was already held: the new item replaced the old
	// one, which Insert returns.
	Replaced
	// TooFarAhead means the item is not held because its seq is at or beyond
	// Next()+window (or is the largest uint64), or because holding it would
	// take the held bytes above maxBytes. The caller leaves such an item to
	// be delivered again later.
	TooFarAhead
)

// String returns the name of the result, such as "Buffered".
func (r Result) String() string {
	switch r {
	case Buffered:
		return "Buffered"
	case Ready:
		return "Ready"
	case Duplicate:
		return "Duplicate"
	case Replaced:
		return "Replaced"
	case TooFarAhead:
		return "TooFarAhead"
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

// maxWindow bounds the window so that item counts fit in a uint32 and ring
// capacities in an int on every platform. A larger window is clamped: it
// would need gigabytes of slots to fill anyway.
const maxWindow = 1 << 30

// slot is one cell of the ring. seq 0 marks an empty slot: held seqs are >= 1.
type slot[T any] struct {
	seq  uint64
	size int
	item T
}

// Buffer holds the items of one stream that arrived before their turn and
// releases them in sequence order. The zero value is not usable; create a
// Buffer with New. A Buffer is not safe for concurrent use.
type Buffer[T any] struct {
	ring     []slot[T] // nil until the first insert; len is a power of two
	next     uint64    // next seq to pop, >= 1
	low      uint64    // cached lowest held seq; 0 when unknown or nothing held
	bytes    int       // sum of held sizes
	maxBytes int
	n        uint32 // items held
	window   uint32
}

// New returns an empty Buffer whose next seq to pop is next. It holds seqs in
// [next, next+window) and at most maxBytes of item sizes (the item at Next()
// excepted). It panics if next, window or maxBytes is below 1: those are
// programming errors in the caller. Nothing is allocated besides the Buffer
// itself until the first Insert.
func New[T any](next uint64, window int, maxBytes int) *Buffer[T] {
	if next < 1 {
		panic("reorder: next must be >= 1")
	}
	if window < 1 {
		panic("reorder: window must be >= 1")
	}
	if maxBytes < 1 {
		panic("reorder: maxBytes must be >= 1")
	}
	return &Buffer[T]{next: next, window: uint32(min(window, maxWindow)), maxBytes: maxBytes}
}

// Insert offers the item with the given seq and size (in bytes, >= 0) to the
// Buffer and reports what it did. When the result is Replaced, the second
// value is the item that was held for seq before; otherwise it is the zero
// value. Insert panics on a negative size.
//
// The byte bound applies to the items waiting above Next(): the item at
// Next() is always taken (Ready, or Replaced if already held), whatever its
// size, because it can be popped at once and refusing it would stall the
// stream. Bytes() may therefore exceed maxBytes by at most that one item.
func (b *Buffer[T]) Insert(seq uint64, item T, size int) (Result, T) {
	var zero T
	if size < 0 {
		panic("reorder: negative size")
	}
	if seq < b.next {
		return Duplicate, zero
	}
	dist := seq - b.next // no overflow: seq >= next
	if dist >= uint64(b.window) || seq == math.MaxUint64 {
		return TooFarAhead, zero
	}
	if dist < uint64(len(b.ring)) {
		s := &b.ring[seq&uint64(len(b.ring)-1)]
		if s.seq == seq {
			// size > maxBytes-(bytes-old) without overflow; the item at
			// Next() is exempt, as for a fresh insert.
			if dist != 0 && size-s.size > b.maxBytes-b.bytes {
				return TooFarAhead, zero
			}
			old := s.item
			b.bytes += size - s.size
			s.item, s.size = item, size
			return Replaced, old
		}
	}
	if dist != 0 && size > b.maxBytes-b.bytes {
		return TooFarAhead, zero
	}
	if dist >= uint64(len(b.ring)) {
		b.grow(dist + 1)
	}
	b.ring[seq&uint64(len(b.ring)-1)] = slot[T]{seq: seq, size: size, item: item}
	if b.n == 0 || (b.low != 0 && seq < b.low) {
		b.low = seq
	}
	b.n++
	b.bytes += size
	if dist == 0 {
		return Ready, zero
	}
	return Buffered, zero
}

// grow makes the ring large enough for need consecutive seqs starting at
// Next(): at least double its length, a power of two, and never beyond the
// window rounded up to a power of two.
func (b *Buffer[T]) grow(need uint64) {
	c := max(uint64(len(b.ring))*2, 1)
	if c < need {
		c = 1 << bits.Len64(need-1)
	}
	limit := uint64(1) << bits.Len64(uint64(b.window)-1)
	c = min(c, limit)
	ring := make([]slot[T], c)
	mask := c - 1
	for i := range b.ring {
		if s := b.ring[i]; s.seq != 0 {
			ring[s.seq&mask] = s
		}
	}
	b.ring = ring
}

// Next returns the next seq to pop.
func (b *Buffer[T]) Next() uint64 { return b.next }

// Ready reports whether the item at Next() is held, so that Pop returns it.
func (b *Buffer[T]) Ready() bool {
	return len(b.ring) != 0 && b.ring[b.next&uint64(len(b.ring)-1)].seq == b.next
}

// Pop removes the item at Next(), advances Next() by one and returns the
// seq and item. If that item is not held, Pop changes nothing and ok is
// false.
func (b *Buffer[T]) Pop() (seq uint64, item T, ok bool) {
	if len(b.ring) == 0 {
		return 0, item, false
	}
	mask := uint64(len(b.ring) - 1)
	s := &b.ring[b.next&mask]
	if s.seq != b.next {
		return 0, item, false
	}
	seq, item = s.seq, s.item
	b.bytes -= s.size
	*s = slot[T]{}
	b.n--
	b.next++ // seq < MaxUint64: Insert never holds MaxUint64
	b.low = 0
	if b.n != 0 && b.ring[b.next&mask].seq == b.next {
		b.low = b.next
	}
	return seq, item, true
}

// Get returns the item held for seq, if any.
func (b *Buffer[T]) Get(seq uint64) (item T, ok bool) {
	if seq < b.next || seq-b.next >= uint64(len(b.ring)) {
		return item, false
	}
	s := &b.ring[seq&uint64(len(b.ring)-1)]
	if s.seq != seq {
		return item, false
	}
	return s.item, true
}

// Len returns the number of items held.
func (b *Buffer[T]) Len() int { return int(b.n) }

// Bytes returns the sum of the sizes of the items held.
func (b *Buffer[T]) Bytes() int { return b.bytes }

// Window returns the look-ahead window given to New (clamped to 2^30).
func (b *Buffer[T]) Window() int { return int(b.window) }

// MaxBytes returns the byte bound given to New.
func (b *Buffer[T]) MaxBytes() int { return b.maxBytes }

// Lowest returns the lowest held seq; ok is false when nothing is held. When
// Ready() is false and something is held, the seqs Next() to seq-1 are the gap
// that keeps the held items waiting.
func (b *Buffer[T]) Lowest() (seq uint64, ok bool) {
	if b.n == 0 {
		return 0, false
	}
	if b.low == 0 {
		b.low = b.scan(b.next)
	}
	return b.low, true
}

// scan returns the lowest held seq at or above from, which must be >= Next();
// something must be held at or above from.
func (b *Buffer[T]) scan(from uint64) uint64 {
	mask := uint64(len(b.ring) - 1)
	for seq := from; ; seq++ {
		if b.ring[seq&mask].seq == seq {
			return seq
		}
	}
}

// SkipTo moves Next() forward to seq, giving up on the seqs before it. Items
// held below seq are removed and passed to dropped (which may be nil) in seq
// order; dropped must not call methods of b. SkipTo returns the skipped range
// [first, last] (first is the old Next(), last is seq-1) and how many seqs in
// it were missing rather than held (clamped to math.MaxInt). If seq <= Next(),
// SkipTo does nothing and returns zeros.
func (b *Buffer[T]) SkipTo(seq uint64, dropped func(seq uint64, item T)) (first, last uint64, n int) {
	if seq <= b.next {
		return 0, 0, 0
	}
	first, last = b.next, seq-1
	span := seq - b.next
	held := b.n
	if span >= uint64(len(b.ring)) {
		b.dropAll(dropped)
	} else {
		mask := uint64(len(b.ring) - 1)
		for s := b.next; s < seq && b.n != 0; s++ {
			if sl := &b.ring[s&mask]; sl.seq == s {
				b.remove(sl, dropped)
			}
		}
	}
	missing := span - uint64(held-b.n)
	b.next = seq
	b.low = 0
	return first, last, int(min(missing, math.MaxInt))
}

// Reset drops every held item, passing each to dropped (which may be nil) in
// seq order, and sets Next() to next, which may be lower or higher than
// before: it starts a new epoch of the stream. dropped must not call methods
// of b. Reset keeps the ring for reuse; it panics if next is below 1.
func (b *Buffer[T]) Reset(next uint64, dropped func(seq uint64, item T)) {
	if next < 1 {
		panic("reorder: next must be >= 1")
	}
	b.dropAll(dropped)
	b.next = next
	b.low = 0
}

// Trim releases the ring if nothing is held, so that an idle Buffer costs
// only its own struct. The next Insert allocates a small ring again.
func (b *Buffer[T]) Trim() {
	if b.n == 0 {
		b.ring = nil
	}
}

// dropAll removes every held item in seq order.
func (b *Buffer[T]) dropAll(dropped func(seq uint64, item T)) {
	mask := uint64(len(b.ring) - 1)
	for s := b.next; b.n != 0; s++ {
		if sl := &b.ring[s&mask]; sl.seq == s {
			b.remove(sl, dropped)
		}
	}
}

// remove empties a held slot and hands its item to dropped.
func (b *Buffer[T]) remove(sl *slot[T], dropped func(seq uint64, item T)) {
	seq, item := sl.seq, sl.item
	b.bytes -= sl.size
	b.n--
	*sl = slot[T]{}
	if dropped != nil {
		dropped(seq, item)
	}
}

// Each calls fn for every held item in seq order until fn returns false. fn
// must not call methods of b that change it.
func (b *Buffer[T]) Each(fn func(seq uint64, item T) bool) {
	if b.n == 0 {
		return
	}
	mask := uint64(len(b.ring) - 1)
	left := b.n
	for s := b.next; left != 0; s++ {
		if sl := &b.ring[s&mask]; sl.seq == s {
			left--
			if !fn(s, sl.item) {
				return
			}
		}
	}
}
