// Package journal holds a sender's unsent journal entries for one stream,
// in seq order, for the stores that keep them in memory (memstore, and
// filestore's state).
//
// A sender's seqs only grow and are mostly marked sent in the order they
// were reserved, so the entries are a slice appended at its end and trimmed
// at its front, not a map: a map used as a FIFO fills with tombstones (Go's
// swiss tables) and each insert then probes past them (Reserve's journal
// was 6% of the CPU of an ordered message in the bench's memstore row). An
// entry marked sent out of order stays as a hole, its seq kept so the slice
// stays sorted, until the front reaches it or holes are more than half of
// the slice, which is then compacted: it holds at most twice its live
// entries, plus 16.
package journal

import (
	"cmp"
	"iter"
	"slices"
)

// Journal is one stream's unsent entries. The zero value is empty and
// ready to use. It is not safe for concurrent use.
type Journal struct {
	entries []entry
	live    int
}

type entry struct {
	seq  uint64
	body []byte
	sent bool // a hole
}

// Add adds seq with body. A sender's seqs only grow: seq is normally above
// every seq added before, and appended. Otherwise (a store replaying what
// it holds) it is put in its place, and replaces the body of a seq held.
func (j *Journal) Add(seq uint64, body []byte) {
	if n := len(j.entries); n == 0 || j.entries[n-1].seq < seq {
		j.entries = append(j.entries, entry{seq: seq, body: body})
		j.live++
		return
	}
	i, found := j.search(seq)
	if !found {
		j.entries = slices.Insert(j.entries, i, entry{seq: seq, body: body})
		j.live++
		return
	}
	if j.entries[i].sent {
		j.live++
	}
	j.entries[i] = entry{seq: seq, body: body}
}

func (j *Journal) search(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(j.entries, seq, func(e entry, seq uint64) int { return cmp.Compare(e.seq, seq) })
}

// Remove marks seq sent and returns its body; ok is false for a seq not
// held (never added, or removed already).
func (j *Journal) Remove(seq uint64) (body []byte, ok bool) {
	i, found := j.search(seq)
	if !found || j.entries[i].sent {
		return nil, false
	}
	body = j.entries[i].body
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
	return body, true
}

// Len returns how many entries are held.
func (j *Journal) Len() int { return j.live }

// Slots returns how many entries the slice holds, holes included: at most
// 2*Len()+16.
func (j *Journal) Slots() int { return len(j.entries) }

// All yields the entries held, in seq order.
func (j *Journal) All() iter.Seq2[uint64, []byte] {
	return func(yield func(uint64, []byte) bool) {
		for _, e := range j.entries {
			if !e.sent && !yield(e.seq, e.body) {
				return
			}
		}
	}
}
