package memstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.Parker = (*Store)(nil)

// parked is one parked body, with the CRC-32C that Unpark checks.
type parked struct {
	epoch, seq uint64
	body       []byte
	sum        uint32
}

// pos is a parked entry's place: epoch, then seq.
type pos struct{ epoch, seq uint64 }

// parkList is one stream's park: the entries by position, and their
// positions in order, sorted when read after a Park added some (a deep
// shuffled backlog parks in random order: keeping a slice sorted on every
// insert cost O(n) each).
type parkList struct {
	m     map[pos]*parked
	keys  []pos
	dirty bool // keys not sorted
}

func comparePosKey(a, b pos) int {
	return cmp.Or(cmp.Compare(a.epoch, b.epoch), cmp.Compare(a.seq, b.seq))
}

// sorted returns the positions in order.
func (l *parkList) sorted() []pos {
	if l.dirty {
		slices.SortFunc(l.keys, comparePosKey)
		l.dirty = false
	}
	return l.keys
}

// search returns the index of the first position at or after p.
func (l *parkList) search(p pos) int {
	i, _ := slices.BinarySearchFunc(l.sorted(), p, comparePosKey)
	return i
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// parkSum is the CRC-32C of a parked entry: stream key, epoch, seq, body.
func parkSum(s seqstore.Stream, epoch, seq uint64, body []byte) uint32 {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], epoch)
	binary.BigEndian.PutUint64(b[8:], seq)
	sum := crc32.Update(0, castagnoli, []byte(s.Key()))
	sum = crc32.Update(sum, castagnoli, b[:])
	return crc32.Update(sum, castagnoli, body)
}

// Park stores entries, all or none; see seqstore.Parker.
func (st *Store) Park(ctx context.Context, entries []seqstore.Parked) error {
	if err := st.lock(ctx, "park"); err != nil {
		return err
	}
	defer st.mu.Unlock()
	if err := seqstore.CheckPark(entries); err != nil {
		return fmt.Errorf("memstore: park: %w", err)
	}
	errs := make([]error, len(entries))
	for i, p := range entries {
		if c := st.cursors[p.Stream]; c.Below(p.Epoch, p.Seq) {
			errs[i] = fmt.Errorf("%w: park of %s %d/%d: the cursor is at %d/%d",
				seqstore.ErrConflict, p.Stream, p.Epoch, p.Seq, c.Epoch, c.Next)
		}
	}
	if err := seqstore.Abort(errs); err != nil {
		return fmt.Errorf("memstore: park: %w", err)
	}
	for _, p := range entries {
		e := &parked{epoch: p.Epoch, seq: p.Seq, body: slices.Clone(p.Body), sum: parkSum(p.Stream, p.Epoch, p.Seq, p.Body)}
		l := st.parks[p.Stream]
		if l == nil {
			l = &parkList{m: make(map[pos]*parked)}
			st.parks[p.Stream] = l
		}
		k := pos{p.Epoch, p.Seq}
		if _, found := l.m[k]; !found {
			l.keys = append(l.keys, k)
			l.dirty = l.dirty || len(l.keys) > 1 && comparePosKey(l.keys[len(l.keys)-2], k) > 0
		}
		l.m[k] = e
	}
	return nil
}

// Unpark returns parked entries per query; see seqstore.Parker. A body
// whose checksum fails fails its query alone, with seqstore.ErrCorrupt.
func (st *Store) Unpark(ctx context.Context, queries []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	if err := st.lock(ctx, "unpark"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	errs := make([]error, len(queries))
	for i, q := range queries {
		errs[i] = q.Check()
	}
	if err := seqstore.Abort(errs); err != nil {
		return nil, fmt.Errorf("memstore: unpark: %w", err)
	}
	out := make([][]seqstore.Parked, len(queries))
	failed := false
	for i, q := range queries {
		l := st.parks[q.Stream]
		if l == nil {
			continue
		}
		// Never an entry the cursor passed (dropPassed may not have got
		// to it yet).
		from := pos{q.Epoch, q.From}
		if c := st.cursors[q.Stream]; comparePosKey(from, pos{c.Epoch, c.Next}) < 0 {
			from = pos{c.Epoch, c.Next}
		}
		keys := l.sorted()
		for k := l.search(from); k < len(keys) && keys[k].epoch == q.Epoch && len(out[i]) < q.Max; k++ {
			p := l.m[keys[k]]
			if p.epoch != keys[k].epoch || p.seq != keys[k].seq || parkSum(q.Stream, keys[k].epoch, keys[k].seq, p.body) != p.sum {
				errs[i] = fmt.Errorf("%w: parked %s %d/%d fails its checksum", seqstore.ErrCorrupt, q.Stream, p.epoch, p.seq)
				out[i], failed = nil, true
				break
			}
			out[i] = append(out[i], seqstore.Parked{Stream: q.Stream, Epoch: p.epoch, Seq: p.seq, Body: slices.Clone(p.body)})
		}
	}
	if failed {
		return out, fmt.Errorf("memstore: unpark: %w", &seqstore.BatchError{Errs: errs})
	}
	return out, nil
}

// ParkedStreams lists the streams of queue with parked entries, ordered by
// stream key; see seqstore.Parker.
func (st *Store) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	if err := st.lock(ctx, "parked streams"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("memstore: parked streams: %w", err)
	}
	var out []seqstore.Stream
	for s, l := range st.parks {
		// A stream whose entries the cursor all passed is not listed
		// (dropPassed may not have got to them yet).
		if c := st.cursors[s]; s.Queue == queue && l.search(pos{c.Epoch, c.Next}) < len(l.keys) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b seqstore.Stream) int { return cmp.Compare(a.Key(), b.Key()) })
	return out, nil
}

// dropChunk bounds the parked entries one mutex hold drops one by one:
// Advance drops up to dropChunk of a stream's passed entries with its
// cursor move, and dropPassed the rest, dropChunk per hold, so that other
// callers wait for at most one chunk.
const dropChunk = 1000

// dropParked drops, from the lowest, at most dropChunk parked entries of s
// that cursor c has passed (all of them at once when the cursor passed
// the whole park: the list goes in one step), and reports whether passed
// entries may be left. The caller holds the mutex.
func (st *Store) dropParked(s seqstore.Stream, c seqstore.Cursor) (more bool) {
	l := st.parks[s]
	if l == nil {
		return false
	}
	n := l.search(pos{c.Epoch, c.Next})
	if n == 0 {
		return false
	}
	if n == len(l.keys) {
		delete(st.parks, s)
		return false
	}
	k := min(n, dropChunk)
	for _, key := range l.keys[:k] {
		delete(l.m, key)
	}
	if st.onDrop != nil {
		st.onDrop(k)
	}
	// Parks are handed out from the front: reslice, and let append
	// reallocate once the dropped prefix is worth reclaiming.
	l.keys = l.keys[k:]
	return k < n
}

// dropPassed drops the parked entries of s that its cursor passed,
// dropChunk per mutex hold, until none is left or the store closes.
func (st *Store) dropPassed(s seqstore.Stream) {
	for {
		st.mu.Lock()
		more := !st.closed && st.dropParked(s, st.cursors[s])
		st.mu.Unlock()
		if !more {
			return
		}
	}
}
