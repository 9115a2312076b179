package reorder

import (
	"maps"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// genBase draws the first seq of a stream: 1, somewhere in the middle, or so
// close to 2^64 that n more seqs still fit below the largest uint64 (which is
// never held).
func genBase(t *rapid.T, n int) uint64 {
	switch rapid.IntRange(0, 2).Draw(t, "baseKind") {
	case 0:
		return 1
	case 1:
		return rapid.Uint64Range(2, 1<<62).Draw(t, "base")
	default:
		return math.MaxUint64 - 1 - uint64(n)
	}
}

// TestPropertyPermutationPopsInOrder: any arrival order of seqs 1..N, with
// duplicates mixed in, comes out as 1..N, each once, in order, and leaves the
// buffer empty.
func TestPropertyPermutationPopsInOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 300).Draw(t, "n")
		base := genBase(t, n)
		seqs := make([]uint64, n)
		for i := range seqs {
			seqs[i] = base + uint64(i)
		}
		arrivals := rapid.Permutation(seqs).Draw(t, "order")
		dups := rapid.SliceOfN(rapid.IntRange(0, n-1), 0, n).Draw(t, "dups")
		for _, d := range dups {
			at := rapid.IntRange(0, len(arrivals)).Draw(t, "dupAt")
			arrivals = slices.Insert(arrivals, at, base+uint64(d))
		}
		window := rapid.IntRange(n, 2*n).Draw(t, "window")

		b := New[uint64](base, window, math.MaxInt)
		var popped []uint64
		for _, seq := range arrivals {
			r, old := b.Insert(seq, seq, int(seq%7))
			switch r {
			case Ready, Buffered, Duplicate:
			case Replaced:
				if old != seq {
					t.Fatalf("Insert(%d) replaced item %d, want the item for seq %d", seq, old, seq)
				}
			default:
				t.Fatalf("Insert(%d) with Next()=%d and window %d: got %v", seq, b.Next(), window, r)
			}
			for b.Ready() {
				s, item, ok := b.Pop()
				if !ok || s != item {
					t.Fatalf("Pop() = (%d, %d, %v) after Ready()", s, item, ok)
				}
				popped = append(popped, s)
			}
		}
		if !slices.Equal(seqs, popped) {
			t.Fatalf("popped %v, want %v", popped, seqs)
		}
		if b.Len() != 0 || b.Bytes() != 0 {
			t.Fatalf("at the end Len()=%d Bytes()=%d, want 0 and 0", b.Len(), b.Bytes())
		}
		if b.Next() != base+uint64(n) {
			t.Fatalf("Next()=%d, want %d", b.Next(), base+uint64(n))
		}
	})
}

// TestPropertyRedeliveryUnderTightBounds: with a small window and byte bound,
// items refused as TooFarAhead are delivered again later (as a queue would
// after the visibility timeout), and the stream still comes out complete and in
// order: the bounds cost retries, never order or liveness.
func TestPropertyRedeliveryUnderTightBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 200).Draw(t, "n")
		base := genBase(t, n)
		seqs := make([]uint64, n)
		for i := range seqs {
			seqs[i] = base + uint64(i)
		}
		queue := rapid.Permutation(seqs).Draw(t, "order")
		window := rapid.IntRange(1, 16).Draw(t, "window")
		maxBytes := rapid.IntRange(1, 64).Draw(t, "maxBytes")
		sizes := rapid.SliceOfN(rapid.IntRange(0, 32), n, n).Draw(t, "sizes")

		b := New[uint64](base, window, maxBytes)
		var popped []uint64
		for steps := 0; len(queue) > 0; steps++ {
			if steps > n*n+n {
				t.Fatalf("no progress after %d deliveries: Next()=%d, Len()=%d, %d left", steps, b.Next(), b.Len(), len(queue))
			}
			seq := queue[0]
			queue = queue[1:]
			r, _ := b.Insert(seq, seq, sizes[seq-base])
			switch r {
			case TooFarAhead:
				queue = append(queue, seq) // redelivered later
			case Ready, Buffered:
			default:
				t.Fatalf("Insert(%d): got %v, want Ready, Buffered or TooFarAhead", seq, r)
			}
			if b.Len() > window {
				t.Fatalf("Len()=%d exceeds the window %d", b.Len(), window)
			}
			for b.Ready() {
				s, _, _ := b.Pop()
				popped = append(popped, s)
			}
		}
		if !slices.Equal(seqs, popped) {
			t.Fatalf("popped %v, want %v", popped, seqs)
		}
		if b.Len() != 0 || b.Bytes() != 0 {
			t.Fatalf("at the end Len()=%d Bytes()=%d, want 0 and 0", b.Len(), b.Bytes())
		}
	})
}

// model is the obvious map-based reorder buffer that Buffer must behave like.
type model struct {
	next     uint64
	window   uint64
	maxBytes int
	items    map[uint64]modelItem
}

type modelItem struct {
	val  int
	size int
}

func (m *model) bytes() int {
	var n int
	for _, it := range m.items {
		n += it.size
	}
	return n
}

func (m *model) insert(seq uint64, val, size int) (Result, int) {
	switch {
	case seq < m.next:
		return Duplicate, 0
	case seq-m.next >= m.window || seq == math.MaxUint64:
		return TooFarAhead, 0
	}
	bytes := m.bytes()
	old, held := m.items[seq]
	if held {
		bytes -= old.size
	}
	if seq != m.next && bytes+size > m.maxBytes {
		return TooFarAhead, 0
	}
	m.items[seq] = modelItem{val, size}
	switch {
	case held:
		return Replaced, old.val
	case seq == m.next:
		return Ready, 0
	}
	return Buffered, 0
}

func (m *model) sorted() []uint64 {
	return slices.Sorted(maps.Keys(m.items))
}

// seqNear draws a seq around the interesting range [next-4, next+window+4],
// clamped to uint64.
func seqNear(t *rapid.T, m *model, label string) uint64 {
	lo := uint64(0)
	if m.next > 4 {
		lo = m.next - 4
	}
	hi := uint64(math.MaxUint64)
	if m.next+m.window+4 > m.next { // no overflow
		hi = m.next + m.window + 4
	}
	return rapid.Uint64Range(lo, hi).Draw(t, label)
}

// TestModel runs random operations on a Buffer and on the map-based model
// and requires that both answer every call alike.
func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &model{
			window:   uint64(rapid.IntRange(1, 40).Draw(t, "window")),
			maxBytes: rapid.IntRange(1, 100).Draw(t, "maxBytes"),
			items:    map[uint64]modelItem{},
		}
		m.next = genBase(t, 300)
		b := New[int](m.next, int(m.window), m.maxBytes)
		val := 0

		actions := map[string]func(*rapid.T){
			"Insert": func(t *rapid.T) {
				seq := seqNear(t, m, "seq")
				size := rapid.IntRange(0, m.maxBytes/2+1).Draw(t, "size")
				val++
				wr, wold := m.insert(seq, val, size)
				gr, gold := b.Insert(seq, val, size)
				if gr != wr || gold != wold {
					t.Fatalf("Insert(%d, size %d) = (%v, %d), model says (%v, %d)", seq, size, gr, gold, wr, wold)
				}
			},
			"Pop": func(t *rapid.T) {
				seq, item, ok := b.Pop()
				want, held := m.items[m.next]
				if ok != held {
					t.Fatalf("Pop() ok=%v, model holds Next()=%d: %v", ok, m.next, held)
				}
				if !held {
					return
				}
				if seq != m.next || item != want.val {
					t.Fatalf("Pop() = (%d, %d), want (%d, %d)", seq, item, m.next, want.val)
				}
				delete(m.items, m.next)
				m.next++
			},
			"SkipTo": func(t *rapid.T) {
				to := seqNear(t, m, "to")
				var got []uint64
				first, last, missing := b.SkipTo(to, func(seq uint64, item int) {
					if want := m.items[seq].val; item != want {
						t.Fatalf("SkipTo(%d) dropped item %d for seq %d, want %d", to, item, seq, want)
					}
					got = append(got, seq)
				})
				var want []uint64
				if to > m.next {
					for _, s := range m.sorted() {
						if s < to {
							want = append(want, s)
							delete(m.items, s)
						}
					}
					wantMissing := int(to-m.next) - len(want)
					if first != m.next || last != to-1 || missing != wantMissing {
						t.Fatalf("SkipTo(%d) = (%d, %d, %d), want (%d, %d, %d)", to, first, last, missing, m.next, to-1, wantMissing)
					}
					m.next = to
				} else if first != 0 || last != 0 || missing != 0 {
					t.Fatalf("SkipTo(%d) below Next()=%d = (%d, %d, %d), want zeros", to, m.next, first, last, missing)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("SkipTo(%d) dropped %v, want %v", to, got, want)
				}
			},
			"Reset": func(t *rapid.T) {
				hi := m.next + m.window
				if hi < m.next {
					hi = math.MaxUint64
				}
				to := rapid.Uint64Range(1, hi).Draw(t, "next")
				var got []uint64
				b.Reset(to, func(seq uint64, _ int) { got = append(got, seq) })
				if want := m.sorted(); !slices.Equal(got, want) {
					t.Fatalf("Reset(%d) dropped %v, want %v", to, got, want)
				}
				clear(m.items)
				m.next = to
			},
			"Get": func(t *rapid.T) {
				seq := seqNear(t, m, "seq")
				item, ok := b.Get(seq)
				want, held := m.items[seq]
				if ok != held || item != want.val {
					t.Fatalf("Get(%d) = (%d, %v), want (%d, %v)", seq, item, ok, want.val, held)
				}
			},
			"Lowest": func(t *rapid.T) {
				seq, ok := b.Lowest()
				keys := m.sorted()
				if ok != (len(keys) > 0) || (ok && seq != keys[0]) {
					t.Fatalf("Lowest() = (%d, %v), model holds %v", seq, ok, keys)
				}
			},
			"Each": func(t *rapid.T) {
				limit := rapid.IntRange(1, 50).Draw(t, "limit")
				var got []uint64
				b.Each(func(seq uint64, item int) bool {
					if want := m.items[seq].val; item != want {
						t.Fatalf("Each gave item %d for seq %d, want %d", item, seq, want)
					}
					got = append(got, seq)
					return len(got) < limit
				})
				want := m.sorted()
				want = want[:min(len(want), limit)]
				if !slices.Equal(got, want) {
					t.Fatalf("Each visited %v, want %v", got, want)
				}
			},
			"Trim": func(t *rapid.T) {
				b.Trim()
			},
		}
		check := func(t *rapid.T) {
			if b.Next() != m.next || b.Len() != len(m.items) || b.Bytes() != m.bytes() {
				t.Fatalf("Next/Len/Bytes = %d/%d/%d, model %d/%d/%d", b.Next(), b.Len(), b.Bytes(), m.next, len(m.items), m.bytes())
			}
			if _, held := m.items[m.next]; b.Ready() != held {
				t.Fatalf("Ready() = %v, model holds Next()=%d: %v", b.Ready(), m.next, held)
			}
			if waiting := m.bytes() - m.items[m.next].size; waiting > m.maxBytes {
				t.Fatalf("items above Next() hold %d bytes, more than maxBytes %d", waiting, m.maxBytes)
			}
			if len(b.ring) > 0 && uint64(len(b.ring)) > max(m.window, 1)*2-1 {
				t.Fatalf("ring has %d slots for a window of %d", len(b.ring), m.window)
			}
			var n int
			for i, s := range b.ring {
				if s.seq == 0 {
					if s != (slot[int]{}) {
						t.Fatalf("free slot %d not zeroed: %+v", i, s)
					}
					continue
				}
				n++
				if _, held := m.items[s.seq]; !held {
					t.Fatalf("slot %d holds seq %d that the model does not", i, s.seq)
				}
			}
			if n != len(m.items) {
				t.Fatalf("%d occupied slots, model holds %d", n, len(m.items))
			}
		}

		// An explicit loop rather than t.Repeat: Repeat averages 30 steps,
		// too few to fill a window of 40 and grow the ring to its limit.
		// Insert and Pop are drawn more often than the rest.
		kinds := []string{"Insert", "Insert", "Insert", "Insert", "Pop", "Pop", "SkipTo", "Reset", "Get", "Lowest", "Each", "Trim"}
		steps := rapid.IntRange(0, 400).Draw(t, "steps")
		check(t)
		for range steps {
			actions[rapid.SampledFrom(kinds).Draw(t, "action")](t)
			check(t)
		}
	})
}
