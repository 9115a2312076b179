package reorder

import (
	"math"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// held is one item placed in a Buffer before the step under test.
type held struct {
	seq  uint64
	item string
	size int
}

// fill inserts items and requires that each one is held.
func fill(t *testing.T, b *Buffer[string], items ...held) {
	t.Helper()
	for _, h := range items {
		r, _ := b.Insert(h.seq, h.item, h.size)
		require.Containsf(t, []Result{Ready, Buffered}, r, "setup insert of seq %d: want Ready or Buffered, got %v", h.seq, r)
	}
}

// requireEmptySlots checks that no slot of the ring still references an item
// or claims a seq that is not held.
func requireEmptySlots(t *testing.T, b *Buffer[string]) {
	t.Helper()
	var n int
	for i, s := range b.ring {
		if s.seq == 0 {
			require.Equalf(t, slot[string]{}, s, "slot %d is free but not zeroed", i)
			continue
		}
		n++
		require.GreaterOrEqualf(t, s.seq, b.next, "slot %d holds seq %d below Next() %d", i, s.seq, b.next)
	}
	require.Equalf(t, b.Len(), n, "Len() and the occupied slots disagree")
}

func TestResultString(t *testing.T) {
	for r, want := range map[Result]string{
		Buffered:    "Buffered",
		Ready:       "Ready",
		Duplicate:   "Duplicate",
		Replaced:    "Replaced",
		TooFarAhead: "TooFarAhead",
		0:           "Result(0)",
		42:          "Result(42)",
	} {
		assert.Equalf(t, want, r.String(), "String() of Result(%d)", uint8(r))
	}
}

func TestNewPanicsOnInvalidArguments(t *testing.T) {
	assert.PanicsWithValue(t, "reorder: next must be >= 1", func() { New[int](0, 1, 1) })
	assert.PanicsWithValue(t, "reorder: window must be >= 1", func() { New[int](1, 0, 1) })
	assert.PanicsWithValue(t, "reorder: maxBytes must be >= 1", func() { New[int](1, 1, 0) })
	assert.PanicsWithValue(t, "reorder: negative size", func() { New[int](1, 1, 1).Insert(1, 0, -1) })
	assert.PanicsWithValue(t, "reorder: next must be >= 1", func() { New[int](1, 1, 1).Reset(0, nil) })
}

func TestNewKeepsItsBounds(t *testing.T) {
	b := New[int](7, 16, 300)
	assert.Equal(t, uint64(7), b.Next(), "Next()")
	assert.Equal(t, 16, b.Window(), "Window()")
	assert.Equal(t, 300, b.MaxBytes(), "MaxBytes()")
	assert.Equal(t, maxWindow, New[int](1, math.MaxInt, 1).Window(), "a huge window is clamped")
}

func TestInsert(t *testing.T) {
	const top = math.MaxUint64
	tests := []struct {
		name     string
		next     uint64
		window   int
		maxBytes int
		setup    []held
		seq      uint64
		size     int
		want     Result
		wantOld  string // item returned by Insert
		wantGot  string // Get(seq) afterwards; "" when not held
		wantLen  int
		wantByte int
		ready    bool
	}{
		{name: "next on empty is Ready", next: 5, window: 4, maxBytes: 100,
			seq: 5, size: 3, want: Ready, wantGot: "new", wantLen: 1, wantByte: 3, ready: true},
		{name: "above next is Buffered", next: 5, window: 4, maxBytes: 100,
			seq: 6, size: 3, want: Buffered, wantGot: "new", wantLen: 1, wantByte: 3},
		{name: "below next is Duplicate", next: 5, window: 4, maxBytes: 100,
			seq: 4, size: 3, want: Duplicate},
		{name: "seq 0 is Duplicate", next: 1, window: 4, maxBytes: 100,
			seq: 0, size: 3, want: Duplicate},
		{name: "held seq is Replaced", next: 5, window: 4, maxBytes: 100,
			setup: []held{{7, "old", 10}},
			seq:   7, size: 3, want: Replaced, wantOld: "old", wantGot: "new", wantLen: 1, wantByte: 3},
		{name: "held next is Replaced and stays Ready", next: 5, window: 4, maxBytes: 100,
			setup: []held{{5, "old", 10}, {6, "six", 1}},
			seq:   5, size: 30, want: Replaced, wantOld: "old", wantGot: "new", wantLen: 2, wantByte: 31, ready: true},
		{name: "last seq of the window is Buffered", next: 5, window: 4, maxBytes: 100,
			seq: 8, size: 1, want: Buffered, wantGot: "new", wantLen: 1, wantByte: 1},
		{name: "first seq past the window is TooFarAhead", next: 5, window: 4, maxBytes: 100,
			seq: 9, size: 1, want: TooFarAhead},
		{name: "window 1 holds next", next: 5, window: 1, maxBytes: 100,
			seq: 5, size: 1, want: Ready, wantGot: "new", wantLen: 1, wantByte: 1, ready: true},
		{name: "window 1 refuses next+1", next: 5, window: 1, maxBytes: 100,
			setup: []held{{5, "five", 1}},
			seq:   6, size: 1, want: TooFarAhead, wantLen: 1, wantByte: 1, ready: true},
		{name: "maxBytes exactly reached is Buffered", next: 1, window: 8, maxBytes: 10,
			setup: []held{{2, "two", 4}},
			seq:   3, size: 6, want: Buffered, wantGot: "new", wantLen: 2, wantByte: 10},
		{name: "maxBytes exceeded by one is TooFarAhead", next: 1, window: 8, maxBytes: 10,
			setup: []held{{2, "two", 4}},
			seq:   3, size: 7, want: TooFarAhead, wantLen: 1, wantByte: 4},
		{name: "zero size fits a full buffer", next: 1, window: 8, maxBytes: 10,
			setup: []held{{2, "two", 10}},
			seq:   3, size: 0, want: Buffered, wantGot: "new", wantLen: 2, wantByte: 10},
		{name: "next is exempt from maxBytes", next: 1, window: 8, maxBytes: 10,
			setup: []held{{2, "two", 10}},
			seq:   1, size: 50, want: Ready, wantGot: "new", wantLen: 2, wantByte: 60, ready: true},
		{name: "nothing above next fits while next holds more than maxBytes", next: 1, window: 8, maxBytes: 10,
			setup: []held{{1, "one", 50}},
			seq:   2, size: 0, want: TooFarAhead, wantLen: 1, wantByte: 50, ready: true},
		{name: "Replaced that grows to exactly maxBytes", next: 1, window: 8, maxBytes: 10,
			setup: []held{{2, "two", 4}, {3, "old", 2}},
			seq:   3, size: 6, want: Replaced, wantOld: "old", wantGot: "new", wantLen: 2, wantByte: 10},
		{name: "Replaced that would exceed maxBytes is TooFarAhead and keeps the old item", next: 1, window: 8, maxBytes: 10,
			setup: []held{{2, "two", 4}, {3, "old", 2}},
			seq:   3, size: 7, want: TooFarAhead, wantGot: "old", wantLen: 2, wantByte: 6},
		{name: "Replaced that shrinks frees bytes", next: 1, window: 8, maxBytes: 10,
			setup: []held{{2, "two", 4}, {3, "old", 6}},
			seq:   3, size: 1, want: Replaced, wantOld: "old", wantGot: "new", wantLen: 2, wantByte: 5},
		{name: "near 2^64 the window does not wrap", next: top - 3, window: 1 << 20, maxBytes: 100,
			seq: top - 1, size: 1, want: Buffered, wantGot: "new", wantLen: 1, wantByte: 1},
		{name: "the largest uint64 is never held", next: top - 3, window: 1 << 20, maxBytes: 100,
			seq: top, size: 1, want: TooFarAhead},
		{name: "a far seq is refused, not wrapped into the window", next: 1, window: 1 << 20, maxBytes: 100,
			seq: top - 1, size: 1, want: TooFarAhead},
		{name: "a huge window is clamped", next: 1, window: math.MaxInt, maxBytes: 100,
			seq: maxWindow + 1, size: 1, want: TooFarAhead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New[string](tt.next, tt.window, tt.maxBytes)
			fill(t, b, tt.setup...)
			got, old := b.Insert(tt.seq, "new", tt.size)
			assert.Equalf(t, tt.want, got, "Insert(%d) result", tt.seq)
			assert.Equalf(t, tt.wantOld, old, "Insert(%d) returned item", tt.seq)
			item, ok := b.Get(tt.seq)
			assert.Equalf(t, tt.wantGot != "", ok, "Get(%d) ok", tt.seq)
			assert.Equalf(t, tt.wantGot, item, "Get(%d) item", tt.seq)
			assert.Equal(t, tt.wantLen, b.Len(), "Len()")
			assert.Equal(t, tt.wantByte, b.Bytes(), "Bytes()")
			assert.Equal(t, tt.ready, b.Ready(), "Ready()")
			assert.Equal(t, tt.next, b.Next(), "Insert must not move Next()")
			requireEmptySlots(t, b)
		})
	}
}

func TestPopReleasesInOrderAndStopsAtGaps(t *testing.T) {
	b := New[string](10, 8, 100)
	seq, item, ok := b.Pop()
	assert.False(t, ok, "Pop on an empty buffer must report ok=false")
	assert.Zero(t, seq)
	assert.Zero(t, item)

	fill(t, b, held{12, "c", 3}, held{11, "b", 2}, held{14, "e", 5})
	_, _, ok = b.Pop()
	assert.False(t, ok, "Pop must not skip the missing seq 10")
	assert.Equal(t, uint64(10), b.Next(), "a failed Pop must not move Next()")

	fill(t, b, held{10, "a", 1})
	var got []string
	for b.Ready() {
		seq, item, ok := b.Pop()
		require.True(t, ok, "Ready() was true but Pop failed")
		assert.Equalf(t, b.Next()-1, seq, "Pop returned seq %d but Next() is now %d", seq, b.Next())
		got = append(got, item)
	}
	assert.Equal(t, []string{"a", "b", "c"}, got, "items popped up to the gap at 13")
	assert.Equal(t, uint64(13), b.Next())
	assert.Equal(t, 1, b.Len())
	assert.Equal(t, 5, b.Bytes())
	requireEmptySlots(t, b)

	r, _ := b.Insert(12, "again", 1)
	assert.Equal(t, Duplicate, r, "a popped seq inserted again")
}

func TestGet(t *testing.T) {
	b := New[string](5, 64, 100)
	_, ok := b.Get(5)
	assert.False(t, ok, "Get on a buffer without a ring")
	fill(t, b, held{5, "five", 1}, held{7, "seven", 1})
	for _, tc := range []struct {
		seq  uint64
		want string
	}{{4, ""}, {5, "five"}, {6, ""}, {7, "seven"}, {8, ""}, {5 + 64, ""}, {math.MaxUint64, ""}} {
		item, ok := b.Get(tc.seq)
		assert.Equalf(t, tc.want != "", ok, "Get(%d) ok", tc.seq)
		assert.Equalf(t, tc.want, item, "Get(%d) item", tc.seq)
	}
	b.Pop()
	_, ok = b.Get(5)
	assert.False(t, ok, "Get of a popped seq")
}

func TestLowest(t *testing.T) {
	b := New[string](1, 64, 100)
	_, ok := b.Lowest()
	assert.False(t, ok, "Lowest on an empty buffer")

	fill(t, b, held{9, "", 0})
	low, ok := b.Lowest()
	assert.True(t, ok)
	assert.Equal(t, uint64(9), low, "single held seq")

	fill(t, b, held{4, "", 0}, held{6, "", 0})
	low, _ = b.Lowest()
	assert.Equal(t, uint64(4), low, "a lower insert moves Lowest down")

	fill(t, b, held{1, "", 0})
	b.Pop()
	low, _ = b.Lowest()
	assert.Equal(t, uint64(4), low, "after popping 1 the gap is 2..3")

	b.SkipTo(5, nil)
	low, _ = b.Lowest()
	assert.Equal(t, uint64(6), low, "after skipping to 5, 4 is gone")

	b.SkipTo(7, nil)
	low, _ = b.Lowest()
	assert.Equal(t, uint64(9), low)

	fill(t, b, held{7, "", 0})
	b.Pop()
	low, _ = b.Lowest()
	assert.Equal(t, uint64(9), low, "after popping 7 the gap is 8")
	fill(t, b, held{8, "", 0})
	b.Pop()
	low, _ = b.Lowest()
	assert.Equal(t, uint64(9), low, "9 is Next() and held")
	b.Pop()
	_, ok = b.Lowest()
	assert.False(t, ok, "everything popped")
}

func TestSkipTo(t *testing.T) {
	type drop struct {
		seq  uint64
		item string
	}
	tests := []struct {
		name        string
		next        uint64
		setup       []held
		to          uint64
		first, last uint64
		missing     int
		dropped     []drop
		wantNext    uint64
		wantLen     int
		wantBytes   int
		ready       bool
	}{
		{name: "to Next() is a no-op", next: 5, setup: []held{{5, "five", 1}},
			to: 5, wantNext: 5, wantLen: 1, wantBytes: 1, ready: true},
		{name: "backwards is a no-op", next: 5, setup: []held{{6, "six", 1}},
			to: 2, wantNext: 5, wantLen: 1, wantBytes: 1},
		{name: "over a gap onto a held seq", next: 5, setup: []held{{8, "eight", 2}, {9, "nine", 3}},
			to: 8, first: 5, last: 7, missing: 3, wantNext: 8, wantLen: 2, wantBytes: 5, ready: true},
		{name: "over held items", next: 5, setup: []held{{5, "five", 1}, {7, "seven", 2}, {9, "nine", 4}, {12, "twelve", 8}},
			to: 10, first: 5, last: 9, missing: 2,
			dropped:  []drop{{5, "five"}, {7, "seven"}, {9, "nine"}},
			wantNext: 10, wantLen: 1, wantBytes: 8},
		{name: "past everything held", next: 5, setup: []held{{6, "six", 1}, {20, "twenty", 2}},
			to: 1000, first: 5, last: 999, missing: 993,
			dropped:  []drop{{6, "six"}, {20, "twenty"}},
			wantNext: 1000},
		{name: "to the largest uint64 clamps the missing count", next: 1,
			to: math.MaxUint64, first: 1, last: math.MaxUint64 - 1, missing: math.MaxInt,
			wantNext: math.MaxUint64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New[string](tt.next, 64, 100)
			fill(t, b, tt.setup...)
			var got []drop
			first, last, missing := b.SkipTo(tt.to, func(seq uint64, item string) {
				got = append(got, drop{seq, item})
			})
			assert.Equal(t, tt.first, first, "first")
			assert.Equal(t, tt.last, last, "last")
			assert.Equal(t, tt.missing, missing, "missing")
			assert.Equal(t, tt.dropped, got, "dropped items, in seq order")
			assert.Equal(t, tt.wantNext, b.Next(), "Next()")
			assert.Equal(t, tt.wantLen, b.Len(), "Len()")
			assert.Equal(t, tt.wantBytes, b.Bytes(), "Bytes()")
			assert.Equal(t, tt.ready, b.Ready(), "Ready()")
			requireEmptySlots(t, b)
		})
	}

	b := New[string](1, 8, 100)
	fill(t, b, held{2, "two", 1})
	first, last, missing := b.SkipTo(3, nil)
	assert.Equal(t, [3]uint64{1, 2, 1}, [3]uint64{first, last, uint64(missing)}, "SkipTo with a nil dropped func")
	assert.Zero(t, b.Len())
}

func TestSkipToMaxThenEverythingIsRefused(t *testing.T) {
	b := New[string](1, 8, 100)
	b.SkipTo(math.MaxUint64, nil)
	r, _ := b.Insert(math.MaxUint64-1, "x", 1)
	assert.Equal(t, Duplicate, r)
	r, _ = b.Insert(math.MaxUint64, "x", 1)
	assert.Equal(t, TooFarAhead, r, "the largest uint64 is never held, even at Next()")
	_, _, ok := b.Pop()
	assert.False(t, ok)
	assert.Equal(t, uint64(math.MaxUint64), b.Next())
}

func TestPopNear2To64(t *testing.T) {
	const top = math.MaxUint64
	b := New[string](top-4, 4, 100)
	fill(t, b, held{top - 1, "d", 1}, held{top - 3, "b", 1}, held{top - 2, "c", 1}, held{top - 4, "a", 1})
	var got []uint64
	for b.Ready() {
		seq, _, _ := b.Pop()
		got = append(got, seq)
	}
	assert.Equal(t, []uint64{top - 4, top - 3, top - 2, top - 1}, got)
	assert.Equal(t, uint64(top), b.Next())
}

func TestReset(t *testing.T) {
	b := New[string](10, 16, 100)
	fill(t, b, held{10, "a", 1}, held{13, "b", 2}, held{20, "c", 3})
	var dropped []uint64
	b.Reset(1, func(seq uint64, _ string) { dropped = append(dropped, seq) })
	assert.Equal(t, []uint64{10, 13, 20}, dropped, "Reset hands every held item to dropped in seq order")
	assert.Equal(t, uint64(1), b.Next(), "Reset may move Next() backwards (new epoch)")
	assert.Zero(t, b.Len())
	assert.Zero(t, b.Bytes())
	assert.False(t, b.Ready())
	_, ok := b.Lowest()
	assert.False(t, ok)
	requireEmptySlots(t, b)

	r, _ := b.Insert(1, "new epoch", 1)
	assert.Equal(t, Ready, r, "seq 1 of the new epoch")
	b.Reset(1000, nil)
	assert.Equal(t, uint64(1000), b.Next())
	assert.Zero(t, b.Len())
}

func TestEach(t *testing.T) {
	b := New[string](3, 64, 100)
	b.Each(func(uint64, string) bool {
		t.Fatal("Each called fn on an empty buffer")
		return false
	})
	fill(t, b, held{40, "d", 0}, held{5, "b", 0}, held{3, "a", 0}, held{6, "c", 0})
	var seqs []uint64
	var items []string
	b.Each(func(seq uint64, item string) bool {
		seqs = append(seqs, seq)
		items = append(items, item)
		return true
	})
	assert.Equal(t, []uint64{3, 5, 6, 40}, seqs)
	assert.Equal(t, []string{"a", "b", "c", "d"}, items)

	seqs = seqs[:0]
	b.Each(func(seq uint64, _ string) bool {
		seqs = append(seqs, seq)
		return seq < 5
	})
	assert.Equal(t, []uint64{3, 5}, seqs, "Each stops when fn returns false")
}

func TestRingGrowsByDoublingUpToTheWindow(t *testing.T) {
	b := New[string](1, 100, 1<<20)
	assert.Nil(t, b.ring, "New must not allocate the ring")
	fill(t, b, held{1, "", 0})
	assert.Len(t, b.ring, 1)
	fill(t, b, held{2, "", 0})
	assert.Len(t, b.ring, 2)
	fill(t, b, held{3, "", 0})
	assert.Len(t, b.ring, 4)
	fill(t, b, held{30, "", 0})
	assert.Len(t, b.ring, 32, "a jump grows to the next power of two")
	fill(t, b, held{100, "", 0})
	assert.Len(t, b.ring, 128, "the ring stops at the window rounded up to a power of two")
	requireEmptySlots(t, b)
	var seqs []uint64
	b.Each(func(seq uint64, _ string) bool { seqs = append(seqs, seq); return true })
	assert.Equal(t, []uint64{1, 2, 3, 30, 100}, seqs, "items keep their seqs across growth")

	w1 := New[string](7, 1, 10)
	fill(t, w1, held{7, "", 0})
	assert.Len(t, w1.ring, 1, "window 1 needs one slot")
}

func TestTrim(t *testing.T) {
	b := New[string](1, 16, 100)
	fill(t, b, held{2, "x", 1})
	b.Trim()
	assert.NotNil(t, b.ring, "Trim must keep the ring while items are held")
	b.SkipTo(3, nil)
	b.Trim()
	assert.Nil(t, b.ring, "Trim releases the ring of an empty buffer")
	r, _ := b.Insert(3, "y", 1)
	assert.Equal(t, Ready, r, "a trimmed buffer works as before")
}

// sink keeps New's result on the heap, as a map of streams would.
var sink *Buffer[*int]

func TestMemory(t *testing.T) {
	if strconv.IntSize == 64 {
		assert.Equal(t, uintptr(64), unsafe.Sizeof(Buffer[*int]{}), "size of an empty Buffer")
	}
	allocs := testing.AllocsPerRun(100, func() { sink = New[*int](1, 1024, 1<<20) })
	assert.Equal(t, 1.0, allocs, "New allocates only the Buffer")

	b := New[*int](1, 16, 1<<20)
	x := new(int)
	// Warm up: the ring reaches its steady size.
	for i := range uint64(16) {
		b.Insert(1+i, x, 1)
	}
	b.SkipTo(17, nil)
	seq := b.Next()
	allocs = testing.AllocsPerRun(1000, func() {
		b.Insert(seq+1, x, 10)
		b.Insert(seq, x, 10)
		b.Pop()
		b.Pop()
		seq += 2
	})
	assert.Equal(t, 0.0, allocs, "steady-state Insert and Pop must not allocate")
}
