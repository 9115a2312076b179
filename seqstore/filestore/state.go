package filestore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"github.com/inorder/inorder/internal/journal"
	"github.com/inorder/inorder/seqstore"
)

// streamState is what the store keeps per stream: the sender counter and its
// unsent journal, the receiver cursor and the parked entries. A stream
// whose only state is a plain cursor is kept as a plainCursor instead.
type streamState struct {
	epoch   uint64          // sender epoch; 0 before the first Reserve
	next    uint64          // next seq Reserve hands out; 0 before the first Reserve
	journal journal.Journal // unsent journal bodies
	cursor  seqstore.Cursor
	parks   []parkEntry // parked entries, ordered by (epoch, seq)
}

// parkEntry is where a parked body is: the store keeps bodies on disk, in
// the log frame of their Park call or in the snapshot, and only this in
// memory (48 bytes an entry).
type parkEntry struct {
	epoch, seq uint64
	file       io.ReaderAt // the log or snapshot file holding the body
	off        int64       // of the body in file
	size       uint32
	crc        uint32 // parkCRC of the entry
}

func comparePark(e parkEntry, k [2]uint64) int {
	if c := cmp.Compare(e.epoch, k[0]); c != 0 {
		return c
	}
	return cmp.Compare(e.seq, k[1])
}

// plainCursor is the whole state of a stream that has only a cursor, with
// no owner and no skipped ranges: what a receiver stores for every group
// it has seen, and all that most of them ever need. Kept in the map
// itself, it costs 16 bytes beside the group's name, not a streamState
// (96 bytes and a pointer): a sender inventing group names makes a
// receiver store one cursor per name, for ever.
type plainCursor struct{ epoch, next uint64 }

// plain returns c as a plainCursor, if it is one.
func plain(c seqstore.Cursor) (plainCursor, bool) {
	return plainCursor{c.Epoch, c.Next}, c.Owner == 0 && len(c.Skipped) == 0
}

// groups holds the streams of one queue, each in one of two maps.
type groups struct {
	full  map[string]*streamState // streams with sender state, parked entries, an owner or skipped ranges
	plain map[string]plainCursor  // streams whose only state is a plain cursor (never the zero Cursor)
}

// state is the store's whole content in memory. It is not safe for
// concurrent use; Store guards it with its mutex.
type state struct {
	queues map[string]*groups // by queue

	streams      int   // number of streamStates
	entries      int   // journal entries held
	journalBytes int64 // bytes of journal bodies held
	parked       int   // parked entries held
	parkedBytes  int64 // bytes of their bodies, on disk
}

func newState() *state {
	return &state{queues: make(map[string]*groups)}
}

// get returns the streamState of s, or nil if s has none: no state at all,
// or only a plain cursor.
func (st *state) get(s seqstore.Stream) *streamState {
	if g := st.queues[s.Queue]; g != nil {
		return g.full[s.Group]
	}
	return nil
}

// has reports whether s has any state.
func (st *state) has(s seqstore.Stream) bool {
	g := st.queues[s.Queue]
	if g == nil {
		return false
	}
	_, plain := g.plain[s.Group]
	return plain || g.full[s.Group] != nil
}

// group returns the groups of queue, created if needed.
func (st *state) group(queue string) *groups {
	g := st.queues[queue]
	if g == nil {
		g = &groups{}
		st.queues[strings.Clone(queue)] = g
	}
	return g
}

// getOrCreate returns the streamState of s, creating it if needed (with the
// plain cursor s had, if any).
func (st *state) getOrCreate(s seqstore.Stream) *streamState {
	g := st.group(s.Queue)
	if ss := g.full[s.Group]; ss != nil {
		return ss
	}
	ss := &streamState{}
	if c, ok := g.plain[s.Group]; ok {
		ss.cursor = seqstore.Cursor{Epoch: c.epoch, Next: c.next}
		delete(g.plain, s.Group)
	} else {
		st.streams++
	}
	if g.full == nil {
		g.full = make(map[string]*streamState)
	}
	// A copy, so that the map does not keep alive whatever larger string
	// the caller's name may be part of.
	g.full[strings.Clone(s.Group)] = ss
	return ss
}

// settle keeps s, whose streamState is ss, in its smallest form: a plain
// cursor if that is all it holds, nothing if it holds nothing.
func (st *state) settle(s seqstore.Stream, ss *streamState) {
	c, ok := plain(ss.cursor)
	if !ok || ss.next != 0 || ss.journal.Len() > 0 || len(ss.parks) > 0 {
		return
	}
	g := st.queues[s.Queue]
	delete(g.full, s.Group)
	st.setPlain(s, g, c)
}

// setPlain stores c as the whole state of s, which has no streamState;
// the zero cursor is no state at all.
func (st *state) setPlain(s seqstore.Stream, g *groups, c plainCursor) {
	if c == (plainCursor{}) {
		delete(g.plain, s.Group)
		st.streams--
		if len(g.full) == 0 && len(g.plain) == 0 {
			delete(st.queues, s.Queue)
		}
		return
	}
	if g.plain == nil {
		g.plain = make(map[string]plainCursor)
	}
	if _, ok := g.plain[s.Group]; ok {
		g.plain[s.Group] = c
		return
	}
	g.plain[strings.Clone(s.Group)] = c
}

// reserve allocates the seqs of one Reserve call, all or none, and writes
// the reservations to res. Requests of one stream get consecutive ranges in
// request order; newEpoch is called once per stream without sender state.
// If a request would pass MaxSeq, nothing is applied and the result is the
// call's *seqstore.BatchError.
func (st *state) reserve(reqs []seqstore.ReserveRequest, res []seqstore.Reservation, newEpoch func() uint64) error {
	var errs []error
	var after map[seqstore.Stream]seqstore.Reservation // epoch and next seq after the earlier requests of the call
	for i, r := range reqs {
		var epoch, first uint64
		if p, ok := after[r.Stream]; ok {
			epoch, first = p.Epoch, p.First
		} else if ss := st.get(r.Stream); ss != nil && ss.next != 0 {
			epoch, first = ss.epoch, ss.next
		} else {
			epoch, first = newEpoch(), 1
		}
		if first > seqstore.MaxSeq || uint64(r.N-1) > seqstore.MaxSeq-first {
			if errs == nil {
				errs = make([]error, len(reqs))
			}
			errs[i] = fmt.Errorf("%w: %d seqs from %d of %s pass MaxSeq", seqstore.ErrOverflow, r.N, first, r.Stream)
		}
		res[i] = seqstore.Reservation{Epoch: epoch, First: first}
		if len(reqs) > 1 {
			if after == nil {
				after = make(map[seqstore.Stream]seqstore.Reservation, len(reqs))
			}
			after[r.Stream] = seqstore.Reservation{Epoch: epoch, First: first + uint64(r.N)}
		}
	}
	if errs != nil {
		return seqstore.Abort(errs)
	}
	for i, r := range reqs {
		st.applyReserve(st.getOrCreate(r.Stream), res[i].Epoch, res[i].First, r.N, r.Journal)
	}
	return nil
}

func (st *state) applyReserve(ss *streamState, epoch, first uint64, n int, journal [][]byte) {
	ss.epoch = epoch
	ss.next = first + uint64(n)
	if journal == nil {
		return
	}
	total := 0
	for _, b := range journal {
		total += len(b)
	}
	// One allocation holds every body of the call.
	buf := make([]byte, 0, total)
	for i, b := range journal {
		start := len(buf)
		buf = append(buf, b...)
		ss.journal.Add(first+uint64(i), buf[start:len(buf):len(buf)])
	}
	st.entries += len(journal)
	st.journalBytes += int64(total)
}

// sent drops the journal entries of marks and appends to held, in marks
// of at most maxMarkSeqs seqs, those that were held.
func (st *state) sent(marks []seqstore.SentMark, held []seqstore.SentMark) []seqstore.SentMark {
	for _, m := range marks {
		dropped := st.sentOne(m.Stream, m.Seqs)
		for len(dropped) > 0 {
			n := min(len(dropped), maxMarkSeqs)
			held = append(held, seqstore.SentMark{Stream: m.Stream, Seqs: dropped[:n:n]})
			dropped = dropped[n:]
		}
	}
	return held
}

// sentOne drops the journal entries of seqs of s and returns those that
// were held.
func (st *state) sentOne(s seqstore.Stream, seqs []uint64) []uint64 {
	ss := st.get(s)
	if ss == nil || ss.journal.Len() == 0 {
		return nil
	}
	var dropped []uint64
	for _, q := range seqs {
		if body, ok := ss.journal.Remove(q); ok {
			st.entries--
			st.journalBytes -= int64(len(body))
			dropped = append(dropped, q)
		}
	}
	return dropped
}

// advance applies a batch of compare-and-set moves, all or none. If a
// stored cursor differs from its From, nothing is applied and the result is
// the call's *seqstore.BatchError: ErrConflict for the moves whose From
// differs, ErrAborted for the others.
func (st *state) advance(batch []seqstore.Advance) error {
	var errs []error
	for i, a := range batch {
		cur := st.cursor(a.Stream)
		if !cur.Same(a.From) {
			if errs == nil {
				errs = make([]error, len(batch))
			}
			errs[i] = fmt.Errorf("%w: cursor of %s is %d/%d (owner %d), not %d/%d (owner %d)",
				seqstore.ErrConflict, a.Stream, cur.Epoch, cur.Next, cur.Owner, a.From.Epoch, a.From.Next, a.From.Owner)
		}
	}
	if errs != nil {
		return seqstore.Abort(errs)
	}
	for _, a := range batch {
		st.setCursor(a.Stream, a.To)
	}
	return nil
}

// cursor returns the stored cursor of s, or the zero Cursor. Its Skipped
// slice is shared with the state.
func (st *state) cursor(s seqstore.Stream) seqstore.Cursor {
	g := st.queues[s.Queue]
	if g == nil {
		return seqstore.Cursor{}
	}
	if ss := g.full[s.Group]; ss != nil {
		return ss.cursor
	}
	c := g.plain[s.Group]
	return seqstore.Cursor{Epoch: c.epoch, Next: c.next}
}

// setCursor stores c as the cursor of s and drops the parked entries of s
// that c passed: setting the cursor, by Advance or by its replay, is the
// one step that hands parked entries out and removes them. A stream left
// with only a plain cursor is kept as one.
func (st *state) setCursor(s seqstore.Stream, c seqstore.Cursor) {
	if pc, ok := plain(c); ok && st.get(s) == nil {
		if !st.has(s) {
			if pc == (plainCursor{}) {
				return // the zero cursor of a stream without state: nothing to keep
			}
			st.streams++
		}
		st.setPlain(s, st.group(s.Queue), pc)
		return
	}
	c.Skipped = slices.Clone(c.Skipped)
	ss := st.getOrCreate(s)
	ss.cursor = c
	st.dropParks(ss)
	st.settle(s, ss)
}

// dropParks drops the parked entries of ss below its cursor: a prefix,
// since they are ordered by (epoch, seq).
func (st *state) dropParks(ss *streamState) {
	n := 0
	for n < len(ss.parks) && ss.cursor.Below(ss.parks[n].epoch, ss.parks[n].seq) {
		st.parkedBytes -= int64(ss.parks[n].size)
		n++
	}
	if n == 0 {
		return
	}
	st.parked -= n
	switch rest := ss.parks[n:]; {
	case len(rest) == 0:
		ss.parks = nil // let the array go
	case len(rest) < cap(ss.parks)/4:
		ss.parks = slices.Clone(rest)
	default:
		ss.parks = rest
	}
}

// checkPark refuses, for a Park call, the entries that the stored cursor
// of their stream already passed: the result is nil or the call's
// *seqstore.BatchError, ErrConflict for those, ErrAborted for the others.
func (st *state) checkPark(entries []seqstore.Parked) error {
	var errs []error
	for i, p := range entries {
		if c := st.cursor(p.Stream); c.Below(p.Epoch, p.Seq) {
			if errs == nil {
				errs = make([]error, len(entries))
			}
			errs[i] = fmt.Errorf("%w: park of %s %d/%d: the cursor is at %d/%d", seqstore.ErrConflict, p.Stream, p.Epoch, p.Seq, c.Epoch, c.Next)
		}
	}
	if errs != nil {
		return seqstore.Abort(errs)
	}
	return nil
}

// park adds or replaces the parked entry e of s.
func (st *state) park(s seqstore.Stream, e parkEntry) {
	ss := st.getOrCreate(s)
	i, found := slices.BinarySearchFunc(ss.parks, [2]uint64{e.epoch, e.seq}, comparePark)
	if found {
		st.parkedBytes += int64(e.size) - int64(ss.parks[i].size)
		ss.parks[i] = e
		return
	}
	ss.parks = slices.Insert(ss.parks, i, e)
	st.parked++
	st.parkedBytes += int64(e.size)
}

// unpark returns the locations of the entries q asks for.
func (st *state) unpark(q seqstore.ParkQuery) []parkEntry {
	ss := st.get(q.Stream)
	if ss == nil {
		return nil
	}
	i, _ := slices.BinarySearchFunc(ss.parks, [2]uint64{q.Epoch, q.From}, comparePark)
	var out []parkEntry
	for ; i < len(ss.parks) && ss.parks[i].epoch == q.Epoch && len(out) < q.Max; i++ {
		out = append(out, ss.parks[i])
	}
	return out
}

// parkedStreams returns the streams of queue with parked entries, ordered
// by key.
func (st *state) parkedStreams(queue string) []seqstore.Stream {
	var out []seqstore.Stream
	g := st.queues[queue]
	if g == nil {
		return nil
	}
	for group, ss := range g.full {
		if len(ss.parks) > 0 {
			out = append(out, seqstore.Stream{Queue: queue, Group: group})
		}
	}
	slices.SortFunc(out, func(a, b seqstore.Stream) int { return cmp.Compare(a.Key(), b.Key()) })
	return out
}

// pending returns copies of the journal entries of queue, ordered by stream
// key and then seq.
func (st *state) pending(queue string) []seqstore.Entry {
	var out []seqstore.Entry
	g := st.queues[queue]
	if g == nil {
		return nil
	}
	for group, ss := range g.full {
		s := seqstore.Stream{Queue: queue, Group: group}
		for q, body := range ss.journal.All() {
			out = append(out, seqstore.Entry{Stream: s, Epoch: ss.epoch, Seq: q, Body: slices.Clone(body)})
		}
	}
	keys := make(map[seqstore.Stream]string)
	for _, e := range out {
		if _, ok := keys[e.Stream]; !ok {
			keys[e.Stream] = e.Stream.Key()
		}
	}
	slices.SortFunc(out, func(a, b seqstore.Entry) int {
		if c := cmp.Compare(keys[a.Stream], keys[b.Stream]); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return out
}

// replay applies one frame payload read from a log. Every record must be
// well formed and consistent with the state so far; anything else is
// corruption (the frame's checksum matched, so the bytes are what was
// written). The payload starts at offset base of file, where parked
// entries are left to be read.
func (st *state) replay(payload []byte, file io.ReaderAt, base int64) error {
	d := decoder{b: payload}
	for !d.empty() && d.err == nil {
		var err error
		switch typ := d.byte(); typ {
		case recReserve:
			err = st.replayReservation(&d)
		case recReserves:
			for n := d.count(len(d.b)); n > 0 && err == nil && d.err == nil; n-- {
				err = st.replayReservation(&d)
			}
		case recSent:
			st.replayMark(&d)
		case recSents:
			for n := d.count(len(d.b)); n > 0 && d.err == nil; n-- {
				st.replayMark(&d)
			}
		case recAdvance:
			for n := d.count(len(d.b)); n > 0 && d.err == nil; n-- {
				s := d.stream()
				c := d.cursor()
				if d.err == nil {
					st.setCursor(s, c)
				}
			}
		case recParks:
			for n := d.count(len(d.b)); n > 0 && err == nil && d.err == nil; n-- {
				err = st.replayPark(&d, file, base+int64(len(payload)))
			}
		default:
			return fmt.Errorf("unknown record type %d: %w", typ, errDecode)
		}
		if err != nil {
			return err
		}
	}
	return d.err
}

// replayReservation decodes one reservation and applies it. It returns an
// error if the reservation does not continue the stream's counter.
func (st *state) replayReservation(d *decoder) error {
	s := d.stream()
	epoch, first, n := d.uvarint(), d.uvarint(), d.uvarint()
	hasJournal := d.byte()
	if d.err != nil {
		return nil
	}
	if epoch == 0 || epoch > seqstore.MaxSeq || n == 0 || first == 0 || first > seqstore.MaxSeq || n-1 > seqstore.MaxSeq-first || hasJournal > 1 {
		return fmt.Errorf("reserve of %s: bad fields epoch %d first %d n %d", s, epoch, first, n)
	}
	ss := st.get(s)
	if ss != nil && ss.next != 0 && (ss.epoch != epoch || ss.next != first) {
		return fmt.Errorf("reserve of %s: epoch %d first %d, but state has epoch %d next %d", s, epoch, first, ss.epoch, ss.next)
	}
	if (ss == nil || ss.next == 0) && first != 1 {
		return fmt.Errorf("reserve of %s: first %d for a new stream", s, first)
	}
	var journal [][]byte
	if hasJournal == 1 {
		if n > uint64(len(d.b)) { // every body takes at least one byte
			return fmt.Errorf("reserve of %s: %d bodies in %d bytes: %w", s, n, len(d.b), errDecode)
		}
		journal = make([][]byte, n)
		for i := range journal {
			journal[i] = d.bytes(d.count(maxFrameBytes))
		}
		if d.err != nil {
			return nil
		}
	}
	st.applyReserve(st.getOrCreate(s), epoch, first, int(n), journal)
	return nil
}

// replayPark decodes one parked entry and applies it. The payload being
// decoded ends at offset end of file. An entry its cursor already passed
// was never accepted: an error.
func (st *state) replayPark(d *decoder, file io.ReaderAt, end int64) error {
	s := d.stream()
	e := parkEntry{epoch: d.uvarint(), seq: d.uvarint(), crc: d.uint32()}
	e.size = uint32(d.count(seqstore.MaxParkBody))
	e.off = end - int64(len(d.b))
	e.file = file
	d.bytes(int(e.size))
	if d.err != nil {
		return nil
	}
	if e.seq == 0 || e.seq > seqstore.MaxSeq || e.epoch > seqstore.MaxSeq {
		return fmt.Errorf("park of %s: bad fields epoch %d seq %d", s, e.epoch, e.seq)
	}
	if c := st.cursor(s); c.Below(e.epoch, e.seq) {
		return fmt.Errorf("park of %s %d/%d below its cursor %d/%d", s, e.epoch, e.seq, c.Epoch, c.Next)
	}
	st.park(s, e)
	return nil
}

// replayMark decodes one mark and applies it.
func (st *state) replayMark(d *decoder) {
	s := d.stream()
	n := d.count(len(d.b))
	seqs := make([]uint64, 0, n)
	for range n {
		seqs = append(seqs, d.uvarint())
	}
	if d.err == nil {
		st.sentOne(s, seqs)
	}
}

// parkedStream is a stream with parked entries, as a snapshot writes it.
type parkedStream struct {
	s  seqstore.Stream
	ss *streamState
}

// snapshotHead returns the start of the snapshot file for st, whose log
// replay resumes at log nextGen: its header and the streams, without the
// parked entries; and the streams whose parked entries follow, in the
// order writeSnapshot writes them.
func (st *state) snapshotHead(nextGen uint64) ([]byte, []parkedStream) {
	b := make([]byte, 0, snapHeaderSize+64*st.streams+int(st.journalBytes)+8*st.entries)
	b = append(b, snapMagic...)
	b = binary.LittleEndian.AppendUint32(b, snapVersion)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, nextGen)
	b = binary.AppendUvarint(b, uint64(st.streams))
	var parked []parkedStream
	for queue, g := range st.queues {
		for group, ss := range g.full {
			s := seqstore.Stream{Queue: queue, Group: group}
			b = appendStream(b, s)
			b = binary.AppendUvarint(b, ss.epoch)
			b = binary.AppendUvarint(b, ss.next)
			b = appendCursor(b, ss.cursor)
			b = binary.AppendUvarint(b, uint64(ss.journal.Len()))
			for q, body := range ss.journal.All() {
				b = binary.AppendUvarint(b, q)
				b = binary.AppendUvarint(b, uint64(len(body)))
				b = append(b, body...)
			}
			if len(ss.parks) > 0 {
				parked = append(parked, parkedStream{s, ss})
			}
		}
		for group, c := range g.plain {
			b = appendStream(b, seqstore.Stream{Queue: queue, Group: group})
			b = binary.AppendUvarint(b, 0) // no sender state
			b = binary.AppendUvarint(b, 0)
			b = appendCursor(b, seqstore.Cursor{Epoch: c.epoch, Next: c.next})
			b = binary.AppendUvarint(b, 0) // no journal
		}
	}
	return b, parked
}

// snapWriter writes a snapshot file, counting its bytes and computing its
// checksum on the way. The first error sticks.
type snapWriter struct {
	w   io.Writer
	n   int64
	crc uint32
	err error
}

func (sw *snapWriter) write(p []byte) {
	if sw.err != nil {
		return
	}
	sw.crc = crc32.Update(sw.crc, castagnoli, p)
	_, sw.err = sw.w.Write(p)
	sw.n += int64(len(p))
}

// segRef is where a parked body is, as a snapshot records it: at off in
// park segment gen.
type segRef struct {
	gen uint64
	off int64
}

// placeParks decides where each parked entry of parked (in order) is after
// a snapshot: an entry whose body is in a park segment that stays (kept
// returns that segment's gen) stays there; every other body (in a log, an
// older snapshot, or a segment being dropped) is read, checked and copied
// to w, the new park segment gen, whose offset base is where w begins. It
// returns the entries' places, in order, the bytes copied, and the
// entries whose body failed its checksum (copied as they are, so that
// Unpark still reports them). The parked entries must not change meanwhile
// (only the writer goroutine changes them).
func placeParks(parked []parkedStream, kept func(io.ReaderAt) (uint64, bool), gen uint64, w io.Writer, base int64) (refs []segRef, copied int64, bad []string, err error) {
	var body []byte
	off := base
	for _, p := range parked {
		key := ""
		for _, e := range p.ss.parks {
			if g, ok := kept(e.file); ok {
				refs = append(refs, segRef{g, e.off})
				continue
			}
			if key == "" {
				key = p.s.Key()
			}
			body = slices.Grow(body[:0], int(e.size))[:e.size]
			if err := readBody(e, body); err != nil {
				return nil, 0, nil, err
			}
			if parkCRC(key, e.epoch, e.seq, body) != e.crc {
				bad = append(bad, fmt.Sprintf("%s %d/%d", p.s, e.epoch, e.seq))
			}
			if _, err := w.Write(body); err != nil {
				return nil, 0, nil, err
			}
			refs = append(refs, segRef{gen, off})
			off += int64(e.size)
		}
	}
	return refs, off - base, bad, nil
}

// writeSnapshot writes a snapshot file to w: head (from snapshotHead), the
// parked entries of parked with refs, the places of their bodies (from
// placeParks), and the trailer.
func writeSnapshot(w io.Writer, head []byte, parked []parkedStream, refs []segRef) error {
	sw := snapWriter{w: w}
	sw.write(head)
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(parked)))
	k := 0
	for _, p := range parked {
		b = appendStream(b, p.s)
		b = binary.AppendUvarint(b, uint64(len(p.ss.parks)))
		for _, e := range p.ss.parks {
			b = binary.AppendUvarint(b, e.epoch)
			b = binary.AppendUvarint(b, e.seq)
			b = binary.LittleEndian.AppendUint32(b, e.crc)
			b = binary.AppendUvarint(b, uint64(e.size))
			b = binary.AppendUvarint(b, refs[k].gen)
			b = binary.AppendUvarint(b, uint64(refs[k].off))
			k++
			if len(b) >= 4096 {
				sw.write(b)
				b = b[:0]
			}
		}
	}
	sw.write(binary.LittleEndian.AppendUint64(b, uint64(sw.n+int64(len(b))-snapHeaderSize)))
	if sw.err != nil {
		return sw.err
	}
	_, err := w.Write(binary.LittleEndian.AppendUint32(nil, sw.crc))
	return err
}

// readBody reads the body of e into body (of e.size bytes). A short file
// is corruption.
func readBody(e parkEntry, body []byte) error {
	n, err := e.file.ReadAt(body, e.off)
	if n == len(body) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("parked body of %d bytes at offset %d: file ends after %d: %w", len(body), e.off, n, seqstore.ErrCorrupt)
	}
	return err
}

// relocate points the parked entries of parked whose places refs (from
// placeParks) put in park segment gen at their bodies in file, that
// segment.
func relocate(parked []parkedStream, refs []segRef, gen uint64, file io.ReaderAt) {
	k := 0
	for _, p := range parked {
		for i := range p.ss.parks {
			if refs[k].gen == gen {
				p.ss.parks[i].file, p.ss.parks[i].off = file, refs[k].off
			}
			k++
		}
	}
}

// encodeSnapshot returns the snapshot file content for st, whose log replay
// resumes at log nextGen, and the park segment nextGen it refers to, with
// every parked body, read from where it is.
func (st *state) encodeSnapshot(nextGen uint64) (snap, seg []byte, err error) {
	head, parked := st.snapshotHead(nextGen)
	segBuf := bytes.NewBuffer(segHeader(nextGen))
	none := func(io.ReaderAt) (uint64, bool) { return 0, false }
	refs, _, _, err := placeParks(parked, none, nextGen, segBuf, segHeaderSize)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, head, parked, refs); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), segBuf.Bytes(), nil
}

// segmentFunc returns park segment gen, opened, and its size.
type segmentFunc func(gen uint64) (io.ReaderAt, int64, error)

// decodeSnapshot parses a snapshot file, data, read from file, where the
// parked bodies of a version 2 snapshot are left; those of version 3 are in
// the park segments seg opens. Any failure is reported as an error the
// caller wraps in seqstore.ErrCorrupt.
func decodeSnapshot(data []byte, file io.ReaderAt, seg segmentFunc) (st *state, nextGen uint64, err error) {
	if len(data) < snapHeaderSize+snapTrailerSize {
		return nil, 0, fmt.Errorf("snapshot of %d bytes is too short", len(data))
	}
	end := len(data) - 4
	if binary.LittleEndian.Uint32(data[end:]) != crc32.Checksum(data[:end], castagnoli) {
		return nil, 0, fmt.Errorf("snapshot checksum mismatch")
	}
	if string(data[:8]) != snapMagic {
		return nil, 0, fmt.Errorf("snapshot has bad magic %q", data[:8])
	}
	version := binary.LittleEndian.Uint32(data[8:])
	if version != snapVersion && version != snapVersion2 && version != snapVersion1 {
		return nil, 0, fmt.Errorf("snapshot format version %d, want %d to %d", version, snapVersion1, snapVersion)
	}
	nextGen = binary.LittleEndian.Uint64(data[16:])
	payload := data[snapHeaderSize : len(data)-snapTrailerSize]
	if binary.LittleEndian.Uint64(data[len(data)-snapTrailerSize:]) != uint64(len(payload)) || nextGen == 0 {
		return nil, 0, fmt.Errorf("snapshot trailer does not match its size")
	}
	st = newState()
	d := decoder{b: payload}
	n := d.count(len(payload))
	for range n {
		s := d.stream()
		epoch, next := d.uvarint(), d.uvarint()
		c := d.cursor()
		entries := d.count(len(d.b))
		if d.err != nil {
			break
		}
		if st.has(s) || epoch > seqstore.MaxSeq || next > seqstore.MaxSeq+1 || (epoch == 0) != (next == 0) || entries > 0 && next == 0 {
			return nil, 0, fmt.Errorf("snapshot entry of %s is inconsistent", s)
		}
		if pc, ok := plain(c); ok && pc != (plainCursor{}) && next == 0 && entries == 0 {
			st.streams++
			st.setPlain(s, st.group(s.Queue), pc)
			continue
		}
		ss := st.getOrCreate(s)
		ss.epoch, ss.next, ss.cursor = epoch, next, c
		// In seq order since snapshots hold the journal as a slice; in any
		// order before (a map's).
		held := make([]snapEntry, 0, entries)
		for range entries {
			q := d.uvarint()
			body := d.bytes(d.count(maxFrameBytes))
			if d.err != nil {
				break
			}
			if q == 0 || q >= next {
				return nil, 0, fmt.Errorf("snapshot journal of %s has bad seq %d", s, q)
			}
			held = append(held, snapEntry{q, slices.Clone(body)})
		}
		if err := st.loadJournal(ss, held); err != nil {
			return nil, 0, fmt.Errorf("snapshot journal of %s %w", s, err)
		}
	}
	if version >= snapVersion2 && d.err == nil {
		if err := st.decodeParks(&d, version, file, int64(snapHeaderSize+len(payload)), seg); err != nil {
			return nil, 0, err
		}
	}
	if d.err == nil && !d.empty() {
		d.fail()
	}
	if d.err != nil {
		return nil, 0, fmt.Errorf("snapshot payload: %w", d.err)
	}
	// A stream listed with no state but its parked entries is kept in
	// full; one with nothing at all (a release before plain cursors
	// wrote those) is dropped.
	for queue, g := range st.queues {
		for group, ss := range g.full {
			st.settle(seqstore.Stream{Queue: queue, Group: group}, ss)
		}
	}
	return st, nextGen, nil
}

// decodeParks decodes the parked entries of a snapshot of version: for
// version 2, with their bodies, in file, whose payload ends at offset end;
// for version 3, with the places of their bodies in the park segments seg
// opens. Each stream is listed once, after the streams, with its entries
// in (epoch, seq) order and none below its cursor.
func (st *state) decodeParks(d *decoder, version uint32, file io.ReaderAt, end int64, seg segmentFunc) error {
	n := d.count(st.streams)
	for range n {
		s := d.stream()
		k := d.count(len(d.b))
		if d.err != nil {
			return nil
		}
		if !st.has(s) {
			return fmt.Errorf("snapshot parks of %s: unknown stream", s)
		}
		ss := st.getOrCreate(s)
		if len(ss.parks) > 0 {
			return fmt.Errorf("snapshot parks of %s: listed twice", s)
		}
		ss.parks = make([]parkEntry, 0, min(k, len(d.b)/4))
		for range k {
			e := parkEntry{epoch: d.uvarint(), seq: d.uvarint(), crc: d.uint32(), file: file}
			e.size = uint32(d.count(seqstore.MaxParkBody))
			if version == snapVersion2 {
				e.off = end - int64(len(d.b))
				d.bytes(int(e.size))
			}
			gen, off := uint64(0), uint64(0)
			if version >= snapVersion {
				gen, off = d.uvarint(), d.uvarint()
			}
			if d.err != nil {
				return nil
			}
			if version >= snapVersion {
				f, size, err := seg(gen)
				if err != nil {
					return fmt.Errorf("snapshot parks of %s: entry %d/%d: %w", s, e.epoch, e.seq, err)
				}
				if off < segHeaderSize || off > uint64(size) || uint64(size)-off < uint64(e.size) {
					return fmt.Errorf("snapshot parks of %s: entry %d/%d at %d+%d past the end of %s (%d bytes)", s, e.epoch, e.seq, off, e.size, segName(gen), size)
				}
				e.file, e.off = f, int64(off)
			}
			if e.seq == 0 || e.seq > seqstore.MaxSeq || e.epoch > seqstore.MaxSeq || ss.cursor.Below(e.epoch, e.seq) ||
				len(ss.parks) > 0 && comparePark(ss.parks[len(ss.parks)-1], [2]uint64{e.epoch, e.seq}) >= 0 {
				return fmt.Errorf("snapshot parks of %s: bad entry %d/%d", s, e.epoch, e.seq)
			}
			ss.parks = append(ss.parks, e)
			st.parked++
			st.parkedBytes += int64(e.size)
		}
	}
	return nil
}

// snapEntry is a journal entry read from a snapshot.
type snapEntry struct {
	seq  uint64
	body []byte
}

func compareSnapEntry(a, b snapEntry) int { return cmp.Compare(a.seq, b.seq) }

// loadJournal puts the journal entries of ss read from a snapshot in its
// journal, in seq order: snapshots written while the journal was a map hold
// them in any order. A seq held twice is an error.
func (st *state) loadJournal(ss *streamState, held []snapEntry) error {
	if !slices.IsSortedFunc(held, compareSnapEntry) {
		slices.SortFunc(held, compareSnapEntry)
	}
	for i, e := range held {
		if i > 0 && held[i-1].seq == e.seq {
			return fmt.Errorf("has bad seq %d", e.seq)
		}
	}
	for _, e := range held {
		ss.journal.Add(e.seq, e.body)
		st.entries++
		st.journalBytes += int64(len(e.body))
	}
	return nil
}
