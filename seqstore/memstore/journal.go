package memstore

import (
	"cmp"
	"iter"
	"slices"
)

// journal holds one stream's unsent entries in seq order. A sender's seqs
// only grow and are mostly marked sent in the order they were reserved, so
// the entries are a slice appended at its end and trimmed at its front, not
// a map: a map used as a FIFO fills with tombstones (Go's swiss tables) and
// each insert then probes past them (Reserve's journal was 6% of the CPU of
// an ordered message in the bench's memstore row). An entry marked sent out
// of order stays as a hole, its seq kept so the slice stays sorted, until
// the front reaches it or holes are more than half of the slice, which is
// then compacted: it holds at most twice its live entries, plus a few.
type journal struct {
	entries []entry
	live    int
}

type entry struct {
	seq  uint64
	body []byte
	sent bool // a hole
}

// add appends seq, which is above every seq added before.
func (j *journal) add(seq uint64, body []byte) {
	j.entries = append(j.entries, entry{seq: seq, body: body})
	j.live++
}

// remove marks seq sent; a seq not held is ignored.
func (j *journal) remove(seq uint64) {
	i, ok := slices.BinarySearchFunc(j.entries, seq, func(e entry, seq uint64) int { return cmp.Compare(e.seq, seq) })
	if !ok || j.entries[i].sent {
		return
	}
	j.entries[i] = entry{seq: seq, sent: true}
	j.live--
	switch {
	case j.live == 0:
		j.entries = nil
	case len(j.entries) > 2*j.live+16:
		j.entries = slices.DeleteFunc(j.entries, func(e entry) bool { return e.sent })
	default:
		for j.entries[0].sent { // live > 0: a live entry ends the loop
			j.entries = j.entries[1:]
		}
	}
}

// all yields the unsent entries in seq order.
func (j *journal) all() iter.Seq2[uint64, []byte] {
	return func(yield func(uint64, []byte) bool) {
		for _, e := range j.entries {
			if !e.sent && !yield(e.seq, e.body) {
				return
			}
		}
	}
}
