package recvcore_test

import (
	"slices"
	"strings"

	"github.com/inorder/inorder/seqstore"
)

// This file is the world model's store: cursors and parks as the seqstore
// package documents Store and Parker, written from those contracts alone.
// It shares no code with the Core (it uses seqstore's own validation
// helpers, as every real store does).
//
//   - Advance is an atomic batch of compare-and-set moves: a stored Epoch,
//     Next or Owner other than From refuses the whole batch, the stream at
//     fault with ErrConflict and the others with ErrAborted. To's Skipped
//     list replaces the stored one, and the parked entries of the stream
//     below the new cursor (older epochs included) go in the same write.
//   - Park stores entries all or none; an entry already below its stream's
//     cursor is refused with ErrConflict. Parking a seq again replaces its
//     body.
//   - Unpark reads, ParkedStreams lists; neither removes anything.

type parkKey struct {
	group      string
	epoch, seq uint64
}

type refStore struct {
	queue   string
	cursors map[string]seqstore.Cursor
	park    map[parkKey][]byte
	writes  int // successful advances

	// With leases (world_lease_test.go): the highest token whose fence
	// handed each stream's cursor to its Core, and a check of every change.
	taken map[string]uint64
	watch func(group string, old, c seqstore.Cursor)
}

func newRefStore(queue string) *refStore {
	return &refStore{queue: queue, cursors: map[string]seqstore.Cursor{}, park: map[parkKey][]byte{}}
}

func (s *refStore) cursor(group string) seqstore.Cursor {
	c := s.cursors[group]
	c.Skipped = slices.Clone(c.Skipped)
	return c
}

func (s *refStore) read(streams []seqstore.Stream) []seqstore.Cursor {
	out := make([]seqstore.Cursor, len(streams))
	for i, st := range streams {
		out[i] = s.cursor(st.Group)
	}
	return out
}

// advance applies a batch of compare-and-set moves, all or none.
func (s *refStore) advance(batch []seqstore.Advance) error {
	if err := seqstore.CheckAdvance(batch); err != nil {
		return err
	}
	errs := make([]error, len(batch))
	for i, a := range batch {
		if !s.cursors[a.Stream.Group].Same(a.From) {
			errs[i] = seqstore.ErrConflict
		}
	}
	if err := seqstore.Abort(errs); err != nil {
		return err
	}
	for _, a := range batch {
		s.set(a.Stream.Group, a.To)
	}
	s.writes++
	return nil
}

// set stores cursor c of group and drops the parks it passes.
func (s *refStore) set(group string, c seqstore.Cursor) {
	c.Skipped = slices.Clone(c.Skipped)
	if s.watch != nil {
		s.watch(group, s.cursors[group], c)
	}
	s.cursors[group] = c
	for k := range s.park {
		if k.group == group && c.Below(k.epoch, k.seq) {
			delete(s.park, k)
		}
	}
}

// parkAll stores entries, all or none.
func (s *refStore) parkAll(entries []seqstore.Parked) error {
	if err := seqstore.CheckPark(entries); err != nil {
		return err
	}
	errs := make([]error, len(entries))
	for i, e := range entries {
		if s.cursors[e.Stream.Group].Below(e.Epoch, e.Seq) {
			errs[i] = seqstore.ErrConflict
		}
	}
	if err := seqstore.Abort(errs); err != nil {
		return err
	}
	for _, e := range entries {
		s.park[parkKey{e.Stream.Group, e.Epoch, e.Seq}] = slices.Clone(e.Body)
	}
	return nil
}

func (s *refStore) unpark(queries []seqstore.ParkQuery) [][]seqstore.Parked {
	out := make([][]seqstore.Parked, len(queries))
	for i, q := range queries {
		var seqs []uint64
		for k := range s.park {
			if k.group == q.Stream.Group && k.epoch == q.Epoch && k.seq >= q.From {
				seqs = append(seqs, k.seq)
			}
		}
		slices.Sort(seqs)
		for _, seq := range seqs[:min(len(seqs), q.Max)] {
			out[i] = append(out[i], seqstore.Parked{Stream: q.Stream, Epoch: q.Epoch, Seq: seq,
				Body: slices.Clone(s.park[parkKey{q.Stream.Group, q.Epoch, seq}])})
		}
	}
	return out
}

func (s *refStore) parkedStreams() []string {
	var gs []string
	for k := range s.park {
		if !slices.Contains(gs, k.group) {
			gs = append(gs, k.group)
		}
	}
	slices.SortFunc(gs, func(a, b string) int {
		return strings.Compare(seqstore.Stream{Queue: s.queue, Group: a}.Key(), seqstore.Stream{Queue: s.queue, Group: b}.Key())
	})
	return gs
}

func (s *refStore) parked(k mkey) bool {
	_, ok := s.park[parkKey{k.group, k.epoch, k.seq}]
	return ok
}

// skipMarked reports whether cursor c records k in a skipped range.
func skipMarked(c seqstore.Cursor, k mkey) bool {
	for _, r := range c.Skipped {
		if r.Contains(k.epoch, k.seq) {
			return true
		}
	}
	return false
}

// handledBy reports whether cursor c says that k was handled: a copy of it
// that arrives is a duplicate, deleted unseen. DESIGN.md "Receiving": a seq
// below the cursor is a duplicate unless a skipped range holds it; an older
// epoch is a late arrival unless the switch's record (Range{old, next,
// MaxSeq}) puts the seq below where the old epoch ended.
func handledBy(c seqstore.Cursor, k mkey) bool {
	if !c.Below(k.epoch, k.seq) || skipMarked(c, k) {
		return false
	}
	if k.epoch == c.Epoch {
		return true
	}
	for _, r := range c.Skipped {
		if r.Epoch == k.epoch && r.Last == seqstore.MaxSeq && k.seq < r.First {
			return true
		}
	}
	return false
}
