package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/inorder/inorder/seqstore"
)

type opKind int

const (
	opReserve opKind = iota + 1
	opSent
	opAdvance
)

// op is one caller's Reserve, Sent or Advance, queued for the group commit.
type op struct {
	kind    opKind
	stream  seqstore.Stream // reserve, sent
	n       int             // reserve
	journal [][]byte        // reserve
	seqs    []uint64        // sent
	batch   []seqstore.Advance

	res    seqstore.Reservation
	err    error
	cancel <-chan struct{}
	done   chan struct{}
	// skipped is set (before done is closed) when the writer found the
	// caller's context ended and did not run the op.
	skipped bool
}

// outcome is an op's own result inside a transaction: a reservation, or a
// conflict or corrupt row that failed only that op (nothing of it written).
type outcome struct {
	res seqstore.Reservation
	err error
}

// rowChunk bounds the streams or rows per statement, well under every
// dialect's limit on bound parameters.
const rowChunk = 400

// maxStatementBytes bounds the body bytes of one multi-row INSERT.
const maxStatementBytes = 4 << 20

// applyBatch runs ops in tx with a fixed number of statements whatever their
// count: one locking SELECT per table, the compare-and-set and counter
// arithmetic in Go, then one multi-row INSERT / upsert / DELETE per kind of
// write. The returned error means tx is unusable and must be rolled back.
func (s *Store) applyBatch(ctx context.Context, tx *sql.Tx, ops []*op) ([]outcome, error) {
	out := make([]outcome, len(ops))
	if err := s.applyReserves(ctx, tx, ops, out); err != nil {
		return nil, err
	}
	if err := s.applySent(ctx, tx, ops); err != nil {
		return nil, err
	}
	if err := s.applyAdvances(ctx, tx, ops, out); err != nil {
		return nil, err
	}
	return out, nil
}

type sendState struct {
	epoch, last     int64
	exists, created bool
	dirty           bool
	corrupt         error
}

func (s *Store) applyReserves(ctx context.Context, tx *sql.Tx, ops []*op, out []outcome) error {
	states := map[seqstore.Stream]*sendState{}
	var streams []seqstore.Stream
	for _, o := range ops {
		if o.kind == opReserve {
			if _, ok := states[o.stream]; !ok {
				states[o.stream] = &sendState{}
				streams = append(streams, o.stream)
			}
		}
	}
	if len(streams) == 0 {
		return nil
	}
	err := s.selectLocked(ctx, tx, "send", "epoch, last_seq", streams, func(rows *sql.Rows) error {
		var st seqstore.Stream
		var epoch, last int64
		if err := rows.Scan(&st.Queue, &st.Group, &epoch, &last); err != nil {
			return err
		}
		ss := states[st]
		if ss == nil {
			return nil
		}
		ss.exists, ss.epoch, ss.last = true, epoch, last
		if epoch < 1 || last < 0 {
			ss.corrupt = fmt.Errorf("%w: send row has epoch %d last_seq %d", seqstore.ErrCorrupt, epoch, last)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var journal [][]any
	for i, o := range ops {
		if o.kind != opReserve {
			continue
		}
		ss := states[o.stream]
		if ss.corrupt != nil {
			out[i].err = ss.corrupt
			continue
		}
		if !ss.exists && !ss.created {
			ss.created, ss.epoch, ss.last = true, int64(seqstore.NewEpoch(time.Now())), 0
		}
		if uint64(o.n) > seqstore.MaxSeq-uint64(ss.last) {
			out[i].err = fmt.Errorf("%w: %d seqs after %d", seqstore.ErrOverflow, o.n, ss.last)
			continue
		}
		first := ss.last + 1
		ss.last += int64(o.n)
		ss.dirty = true
		out[i].res = seqstore.Reservation{Epoch: uint64(ss.epoch), First: uint64(first)}
		for k, b := range o.journal {
			if b == nil {
				b = []byte{} // NULL would break NOT NULL; an empty body is a body
			}
			journal = append(journal, []any{o.stream.Queue, o.stream.Group, first + int64(k), b})
		}
	}
	var created, updated [][]any
	for _, st := range streams {
		ss := states[st]
		row := []any{st.Queue, st.Group, ss.epoch, ss.last}
		switch {
		case ss.created:
			created = append(created, row)
		case ss.dirty:
			updated = append(updated, row)
		}
	}
	cols := []string{"queue", "grp", "epoch", "last_seq"}
	// New rows are plain INSERTs: if another process created the stream
	// meanwhile, the duplicate key fails this transaction (and the retry
	// sees its row) instead of overwriting its counter.
	if err := s.insertRows(ctx, tx, "send", cols, created, nil); err != nil {
		return err
	}
	if err := s.insertRows(ctx, tx, "send", cols, updated, []string{"last_seq"}); err != nil {
		return err
	}
	return s.insertRows(ctx, tx, "journal", []string{"queue", "grp", "seq", "body"}, journal, nil)
}

func (s *Store) applySent(ctx context.Context, tx *sql.Tx, ops []*op) error {
	var b strings.Builder
	var args []any
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		s.stmts.Add(1)
		_, err := tx.ExecContext(ctx, s.ph("DELETE FROM "+s.prefix+"journal WHERE "+b.String()), args...)
		b.Reset()
		args = args[:0]
		return err
	}
	for _, o := range ops {
		if o.kind != opSent {
			continue
		}
		seqs := make([]any, 0, len(o.seqs))
		for _, q := range o.seqs {
			if q <= seqstore.MaxSeq { // larger ones cannot exist
				seqs = append(seqs, int64(q))
			}
		}
		for len(seqs) > 0 {
			part := seqs[:min(len(seqs), 4*rowChunk)]
			seqs = seqs[len(part):]
			if len(args)+len(part) > 4*rowChunk {
				if err := flush(); err != nil {
					return err
				}
			}
			if len(args) > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString("(queue = ? AND grp = ? AND seq IN (?")
			b.WriteString(strings.Repeat(", ?", len(part)-1))
			b.WriteString("))")
			args = append(args, o.stream.Queue, o.stream.Group)
			args = append(args, part...)
		}
	}
	return flush()
}

type cursorState struct {
	cur     seqstore.Cursor
	exists  bool
	dirty   bool
	corrupt error
}

func (s *Store) applyAdvances(ctx context.Context, tx *sql.Tx, ops []*op, out []outcome) error {
	states := map[seqstore.Stream]*cursorState{}
	var streams []seqstore.Stream
	for _, o := range ops {
		if o.kind != opAdvance {
			continue
		}
		for _, a := range o.batch {
			if _, ok := states[a.Stream]; !ok {
				states[a.Stream] = &cursorState{}
				streams = append(streams, a.Stream)
			}
		}
	}
	if len(streams) == 0 {
		return nil
	}
	err := s.selectLocked(ctx, tx, "cursor", "epoch, next_seq, owner, skipped", streams, func(rows *sql.Rows) error {
		var st seqstore.Stream
		var e, n, o int64
		var sk string
		if err := rows.Scan(&st.Queue, &st.Group, &e, &n, &o, &sk); err != nil {
			return err
		}
		cs := states[st]
		if cs == nil {
			return nil
		}
		cs.exists = true
		cs.cur, cs.corrupt = cursorFromRow(e, n, o, sk)
		return nil
	})
	if err != nil {
		return err
	}
	for i, o := range ops {
		if o.kind != opAdvance {
			continue
		}
		var conflicts []seqstore.Stream
		for _, a := range o.batch {
			cs := states[a.Stream]
			if cs.corrupt != nil {
				out[i].err = fmt.Errorf("cursor of %s: %w", a.Stream, cs.corrupt)
				break
			}
			if !cs.cur.Same(a.From) {
				conflicts = append(conflicts, a.Stream)
			}
		}
		if out[i].err != nil {
			continue
		}
		if len(conflicts) > 0 {
			out[i].err = &seqstore.ConflictError{Streams: conflicts}
			continue
		}
		for _, a := range o.batch {
			cs := states[a.Stream]
			cs.cur, cs.dirty = a.To, true
		}
	}
	var created, updated [][]any
	for _, st := range streams {
		cs := states[st]
		if !cs.dirty {
			continue
		}
		row := []any{st.Queue, st.Group, int64(cs.cur.Epoch), int64(cs.cur.Next), int64(cs.cur.Owner), seqstore.FormatSkipped(cs.cur.Skipped)}
		if cs.exists {
			updated = append(updated, row)
		} else {
			created = append(created, row)
		}
	}
	cols := []string{"queue", "grp", "epoch", "next_seq", "owner", "skipped"}
	if err := s.insertRows(ctx, tx, "cursor", cols, created, nil); err != nil {
		return err
	}
	return s.insertRows(ctx, tx, "cursor", cols, updated, cols[2:])
}

// selectLocked reads the rows of streams from table, locking them for the
// rest of the transaction, and calls scan for each row. The selected
// columns start with queue and grp.
func (s *Store) selectLocked(ctx context.Context, tx *sql.Tx, table, cols string, streams []seqstore.Stream,
	scan func(rows *sql.Rows) error) error {
	// A stable order keeps concurrent writers from locking in opposite
	// orders.
	slices.SortFunc(streams, func(a, b seqstore.Stream) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Group, b.Group))
	})
	for lo := 0; lo < len(streams); lo += rowChunk {
		part := streams[lo:min(lo+rowChunk, len(streams))]
		var b strings.Builder
		b.WriteString("SELECT queue, grp, " + cols + " FROM " + s.prefix + table + " WHERE (queue = ? AND grp = ?)")
		b.WriteString(strings.Repeat(" OR (queue = ? AND grp = ?)", len(part)-1))
		b.WriteString(s.lockSuffix())
		args := make([]any, 0, 2*len(part))
		for _, st := range part {
			args = append(args, st.Queue, st.Group)
		}
		s.stmts.Add(1)
		rows, err := tx.QueryContext(ctx, s.ph(b.String()), args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := scan(rows); err != nil {
				_ = rows.Close()
				return err
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

// insertRows inserts rows into table, several per statement. With update
// set, a row whose key exists is updated in those columns instead (an
// upsert; used only for rows this transaction has locked).
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, table string, cols []string, rows [][]any, update []string) error {
	if len(rows) == 0 {
		return nil
	}
	one := "(?" + strings.Repeat(", ?", len(cols)-1) + ")"
	var tail string
	if update != nil {
		sets := make([]string, len(update))
		for i, c := range update {
			if s.dialect == MySQL {
				sets[i] = c + " = VALUES(" + c + ")"
			} else {
				sets[i] = c + " = excluded." + c
			}
		}
		if s.dialect == MySQL {
			tail = " ON DUPLICATE KEY UPDATE " + strings.Join(sets, ", ")
		} else {
			tail = " ON CONFLICT (queue, grp) DO UPDATE SET " + strings.Join(sets, ", ")
		}
	}
	for lo := 0; lo < len(rows); {
		// Up to rowChunk rows and about maxStatementBytes of bodies per
		// statement (MySQL's max_allowed_packet defaults to 16 MiB).
		hi, size := lo, 0
		for hi < len(rows) && hi-lo < rowChunk && (hi == lo || size < maxStatementBytes) {
			for _, v := range rows[hi] {
				if b, ok := v.([]byte); ok {
					size += len(b)
				}
			}
			hi++
		}
		part := rows[lo:hi]
		lo = hi
		q := "INSERT INTO " + s.prefix + table + " (" + strings.Join(cols, ", ") + ") VALUES " +
			one + strings.Repeat(", "+one, len(part)-1) + tail
		args := make([]any, 0, len(cols)*len(part))
		for _, r := range part {
			args = append(args, r...)
		}
		s.stmts.Add(1)
		if _, err := tx.ExecContext(ctx, s.ph(q), args...); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) lockSuffix() string {
	if s.dialect == SQLite {
		return "" // the transaction holds the database's write lock
	}
	return " FOR UPDATE"
}

// ph adapts ? placeholders to the dialect.
func (s *Store) ph(q string) string {
	if s.dialect == Postgres {
		return dollarParams(q)
	}
	return q
}

// cursorFromRow validates a cursor row.
func cursorFromRow(e, n, o int64, sk string) (seqstore.Cursor, error) {
	if e < 0 || n < 0 || o < 0 {
		return seqstore.Cursor{}, fmt.Errorf("%w: cursor row has epoch %d next_seq %d owner %d", seqstore.ErrCorrupt, e, n, o)
	}
	skipped, err := seqstore.ParseSkipped(sk)
	if err != nil {
		return seqstore.Cursor{}, err
	}
	return seqstore.Cursor{Epoch: uint64(e), Next: uint64(n), Owner: uint64(o), Skipped: skipped}, nil
}
