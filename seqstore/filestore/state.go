package filestore

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/inorder/inorder/seqstore"
)

// streamState is what the store keeps per stream: the sender counter and its
// unsent journal, and the receiver cursor.
type streamState struct {
	epoch   uint64            // sender epoch; 0 before the first Reserve
	next    uint64            // next seq Reserve hands out; 0 before the first Reserve
	journal map[uint64][]byte // unsent journal bodies by seq
	cursor  seqstore.Cursor
}

// state is the store's whole content in memory. It is not safe for
// concurrent use; Store guards it with its mutex.
type state struct {
	queues map[string]map[string]*streamState // queue -> group -> state

	streams      int   // number of streamStates
	entries      int   // journal entries held
	journalBytes int64 // bytes of journal bodies held
}

func newState() *state {
	return &state{queues: make(map[string]map[string]*streamState)}
}

func (st *state) get(s seqstore.Stream) *streamState {
	return st.queues[s.Queue][s.Group]
}

func (st *state) getOrCreate(s seqstore.Stream) *streamState {
	groups := st.queues[s.Queue]
	if groups == nil {
		groups = make(map[string]*streamState)
		st.queues[s.Queue] = groups
	}
	ss := groups[s.Group]
	if ss == nil {
		ss = &streamState{}
		groups[s.Group] = ss
		st.streams++
	}
	return ss
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
	if ss.journal == nil {
		ss.journal = make(map[uint64][]byte, len(journal))
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
		ss.journal[first+uint64(i)] = buf[start:len(buf):len(buf)]
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
	if ss == nil || len(ss.journal) == 0 {
		return nil
	}
	var dropped []uint64
	for _, q := range seqs {
		if body, ok := ss.journal[q]; ok {
			delete(ss.journal, q)
			st.entries--
			st.journalBytes -= int64(len(body))
			dropped = append(dropped, q)
		}
	}
	if len(ss.journal) == 0 {
		ss.journal = nil // let the map's memory go
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
	if ss := st.get(s); ss != nil {
		return ss.cursor
	}
	return seqstore.Cursor{}
}

func (st *state) setCursor(s seqstore.Stream, c seqstore.Cursor) {
	c.Skipped = slices.Clone(c.Skipped)
	st.getOrCreate(s).cursor = c
}

// pending returns copies of the journal entries of queue, ordered by stream
// key and then seq.
func (st *state) pending(queue string) []seqstore.Entry {
	var out []seqstore.Entry
	for group, ss := range st.queues[queue] {
		s := seqstore.Stream{Queue: queue, Group: group}
		for q, body := range ss.journal {
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
// written).
func (st *state) replay(payload []byte) error {
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

// encodeSnapshot returns the snapshot file content for st, whose log replay
// resumes at log nextGen.
func (st *state) encodeSnapshot(nextGen uint64) []byte {
	b := make([]byte, 0, snapHeaderSize+snapTrailerSize+64*st.streams+int(st.journalBytes)+8*st.entries)
	b = append(b, snapMagic...)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, nextGen)
	b = binary.AppendUvarint(b, uint64(st.streams))
	for queue, groups := range st.queues {
		for group, ss := range groups {
			b = appendStream(b, seqstore.Stream{Queue: queue, Group: group})
			b = binary.AppendUvarint(b, ss.epoch)
			b = binary.AppendUvarint(b, ss.next)
			b = appendCursor(b, ss.cursor)
			b = binary.AppendUvarint(b, uint64(len(ss.journal)))
			for q, body := range ss.journal {
				b = binary.AppendUvarint(b, q)
				b = binary.AppendUvarint(b, uint64(len(body)))
				b = append(b, body...)
			}
		}
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(b)-snapHeaderSize))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSnapshot parses a snapshot file. Any failure is reported as an error
// the caller wraps in seqstore.ErrCorrupt.
func decodeSnapshot(data []byte) (st *state, nextGen uint64, err error) {
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
	if v := binary.LittleEndian.Uint32(data[8:]); v != formatVersion {
		return nil, 0, fmt.Errorf("snapshot format version %d, want %d", v, formatVersion)
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
		if st.get(s) != nil || epoch > seqstore.MaxSeq || next > seqstore.MaxSeq+1 || (epoch == 0) != (next == 0) || entries > 0 && next == 0 {
			return nil, 0, fmt.Errorf("snapshot entry of %s is inconsistent", s)
		}
		ss := st.getOrCreate(s)
		ss.epoch, ss.next, ss.cursor = epoch, next, c
		if entries > 0 {
			ss.journal = make(map[uint64][]byte, entries)
		}
		for range entries {
			q := d.uvarint()
			body := d.bytes(d.count(maxFrameBytes))
			if d.err != nil {
				break
			}
			if _, dup := ss.journal[q]; dup || q == 0 || q >= next {
				return nil, 0, fmt.Errorf("snapshot journal of %s has bad seq %d", s, q)
			}
			ss.journal[q] = slices.Clone(body)
			st.entries++
			st.journalBytes += int64(len(body))
		}
	}
	if d.err == nil && !d.empty() {
		d.fail()
	}
	if d.err != nil {
		return nil, 0, fmt.Errorf("snapshot payload: %w", d.err)
	}
	return st, nextGen, nil
}
