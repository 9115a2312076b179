package sqlstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.Parker = (*Store)(nil)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// parkCRC is the CRC-32C stored with a parked body: over the stream key's
// length and bytes, the epoch, the seq and the body, so that a body moved
// to another row fails the check as surely as a changed one.
func parkCRC(st seqstore.Stream, epoch, seq uint64, body []byte) uint32 {
	key := st.Key()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(len(key)))
	c := crc32.Update(0, castagnoli, b[:])
	c = crc32.Update(c, castagnoli, []byte(key))
	binary.BigEndian.PutUint64(b[:], epoch)
	c = crc32.Update(c, castagnoli, b[:])
	binary.BigEndian.PutUint64(b[:], seq)
	c = crc32.Update(c, castagnoli, b[:])
	return crc32.Update(c, castagnoli, body)
}

// Park implements seqstore.Parker: the entries are one call of the group
// commit, checked against their streams' locked cursor rows and upserted
// in the same transaction, all or nothing.
func (s *Store) Park(ctx context.Context, entries []seqstore.Parked) error {
	if err := seqstore.CheckPark(entries); err != nil {
		return fmt.Errorf("sqlstore: park: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	if err := s.do(ctx, &op{kind: opPark, parks: entries}); err != nil {
		return fmt.Errorf("sqlstore: park %s: %w", callName(len(entries), entries[0].Stream), err)
	}
	return nil
}

// unparkChunk bounds the queries per Unpark statement (a UNION ALL of one
// indexed range read each).
const unparkChunk = 64

// Unpark implements seqstore.Parker. It reads outside the group commit, one
// statement per unparkChunk queries, and checks every body's CRC.
func (s *Store) Unpark(ctx context.Context, queries []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	errs := make([]error, len(queries))
	for i, q := range queries {
		errs[i] = q.Check()
	}
	if err := seqstore.Abort(errs); err != nil {
		return nil, fmt.Errorf("sqlstore: unpark: %w", err)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("sqlstore: unpark: %w", seqstore.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: unpark: %w", err)
	}
	out := make([][]seqstore.Parked, len(queries))
	var idx []int // the queries that can match a row
	for i, q := range queries {
		if q.Epoch <= seqstore.MaxSeq && q.From <= seqstore.MaxSeq {
			idx = append(idx, i)
		}
	}
	for lo := 0; lo < len(idx); lo += unparkChunk {
		part := idx[lo:min(lo+unparkChunk, len(idx))]
		var b strings.Builder
		args := make([]any, 0, 9*len(part))
		for n, i := range part {
			q := queries[i]
			if n > 0 {
				b.WriteString(" UNION ALL ")
			}
			// The query's index is a literal: the one number written into
			// SQL text besides the prefix.
			k := strconv.Itoa(i)
			// Never a row the stream's cursor passed (an Advance may
			// leave some for dropPassed).
			b.WriteString("SELECT k, seq, crc, body FROM (SELECT " + k + " AS k, p.seq, p.crc, p.body FROM " + s.prefix +
				"parked p WHERE p.queue = ? AND p.grp = ? AND p.epoch = ? AND p.seq >= ? AND NOT EXISTS (SELECT 1 FROM " + s.prefix +
				"cursor c WHERE c.queue = ? AND c.grp = ? AND (c.epoch > ? OR c.epoch = ? AND c.next_seq > p.seq)) ORDER BY p.seq LIMIT ?) AS t" + k)
			args = append(args, q.Stream.Queue, q.Stream.Group, int64(q.Epoch), int64(q.From),
				q.Stream.Queue, q.Stream.Group, int64(q.Epoch), int64(q.Epoch), int64(q.Max))
		}
		if err := s.readParks(ctx, b.String(), args, queries, out); err != nil {
			return nil, fmt.Errorf("sqlstore: unpark %s: %w", callName(len(queries), queries[0].Stream), err)
		}
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b seqstore.Parked) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	return out, nil
}

// readParks runs one Unpark statement and appends its rows to out by query
// index, checking each row.
func (s *Store) readParks(ctx context.Context, q string, args []any, queries []seqstore.ParkQuery, out [][]seqstore.Parked) error {
	rows, err := s.db.QueryContext(ctx, s.ph(q), args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var k int
		var seq, crc any
		var body []byte
		if err := rows.Scan(&k, &seq, &crc, &body); err != nil {
			return err
		}
		if k < 0 || k >= len(queries) {
			return fmt.Errorf("unpark statement returned query index %d of %d", k, len(queries))
		}
		q := queries[k]
		p, err := parkedFromRow(q.Stream, q.Epoch, seq, crc, body)
		if err != nil {
			return err
		}
		if len(out[k]) >= q.Max || p.Seq < q.From {
			return fmt.Errorf("unpark statement returned %s seq %d beyond the query", q.Stream, p.Seq)
		}
		out[k] = append(out[k], p)
	}
	return rows.Err()
}

// parkedFromRow validates a parked row's values and its CRC.
func parkedFromRow(st seqstore.Stream, epoch uint64, seqV, crcV any, body []byte) (seqstore.Parked, error) {
	seq, ok1 := toInt64(seqV)
	crc, ok2 := toInt64(crcV)
	if !ok1 || !ok2 || seq < 1 || crc < 0 || crc > 1<<32-1 || len(body) > seqstore.MaxParkBody {
		return seqstore.Parked{}, fmt.Errorf("%w: parked row of %s epoch %d has seq %v crc %v and a body of %d bytes",
			seqstore.ErrCorrupt, st, epoch, seqV, crcV, len(body))
	}
	if got := parkCRC(st, epoch, uint64(seq), body); got != uint32(crc) {
		return seqstore.Parked{}, fmt.Errorf("%w: parked body of %s %d/%d: crc %08x, stored %08x",
			seqstore.ErrCorrupt, st, epoch, seq, got, crc)
	}
	if body == nil {
		body = []byte{} // SQLite returns an empty BLOB as nil
	}
	return seqstore.Parked{Stream: st, Epoch: epoch, Seq: uint64(seq), Body: body}, nil
}

// ParkedStreams implements seqstore.Parker. It reads outside the group
// commit, in one statement that counts each stream's parked rows and those
// its cursor has not passed; it lists the streams that have some of the
// latter, and drops the passed rows it finds (see dropPassed).
func (s *Store) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("sqlstore: parked streams: %w", err)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("sqlstore: parked streams: %w", seqstore.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: parked streams: %w", err)
	}
	streams, passed, err := s.parkedStreams(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: parked streams %q: %w", queue, err)
	}
	if err := s.dropPassed(ctx, passed); err != nil {
		s.log.WarnContext(ctx, "sqlstore: dropping passed parks failed", "queue", queue, "err", err.Error())
	}
	return streams, nil
}

// parkedStreams returns the streams of queue with parked rows their cursor
// has not passed, sorted by key, and those with rows it passed.
func (s *Store) parkedStreams(ctx context.Context, queue string) (live, passed []seqstore.Stream, err error) {
	p := s.prefix
	rows, err := s.db.QueryContext(ctx, s.ph("SELECT p.grp, COUNT(*), SUM(CASE WHEN c.epoch IS NULL OR p.epoch > c.epoch OR p.epoch = c.epoch AND p.seq >= c.next_seq THEN 1 ELSE 0 END) FROM "+
		p+"parked p LEFT JOIN "+p+"cursor c ON c.queue = p.queue AND c.grp = p.grp WHERE p.queue = ? GROUP BY p.grp"), queue)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var grp string
		var totalV, liveV any
		if err := rows.Scan(&grp, &totalV, &liveV); err != nil {
			return nil, nil, err
		}
		st := seqstore.Stream{Queue: queue, Group: grp}
		if err := st.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%w: parked row of group %q: %v", seqstore.ErrCorrupt, grp, err)
		}
		total, ok1 := toInt64(totalV)
		n, ok2 := toInt64(liveV)
		if !ok1 || !ok2 || n < 0 || n > total {
			return nil, nil, fmt.Errorf("%w: parked rows of %s counted %v, %v not passed", seqstore.ErrCorrupt, st, totalV, liveV)
		}
		if n > 0 {
			live = append(live, st)
		}
		if n < total {
			passed = append(passed, st)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(live, func(a, b seqstore.Stream) int { return strings.Compare(a.Key(), b.Key()) })
	return live, passed, nil
}
