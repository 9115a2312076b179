package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inorder/inorder/seqstore"
)

type opKind int

const (
	opReserve opKind = iota + 1
	opSent
	opAdvance
	opPark
	opDrop
)

// op is one Reserve, Sent, Advance or Park call, or one chunk of the drops
// an Advance left (see dropPassed), submitted to the group commit.
type op struct {
	kind  opKind
	reqs  []seqstore.ReserveRequest // reserve
	marks []seqstore.SentMark       // sent
	batch []seqstore.Advance        // advance
	parks []seqstore.Parked         // park
	drops []seqstore.Stream         // drop

	// The outcome, set by the group commit: the reservations, and the
	// call's own error (a *seqstore.BatchError naming its requests at
	// fault, or the transaction's error).
	res []seqstore.Reservation
	err error
	// more lists the streams of an Advance or drop whose passed parks the
	// transaction did not all drop (see dropPassed).
	more []seqstore.Stream
}

// Size implements batcher.Sizer: the rows the call reads or writes, which
// bound one transaction (maxTxRows); a parked body also counts one per
// parkBytesPerRow bytes, so that a transaction of large parks stays a few
// MiB.
func (o *op) Size() int {
	n := len(o.reqs) + len(o.batch) + len(o.parks) + len(o.drops)
	for _, r := range o.reqs {
		n += len(r.Journal)
	}
	for _, m := range o.marks {
		n += len(m.Seqs)
	}
	for _, p := range o.parks {
		n += len(p.Body) / parkBytesPerRow
	}
	return n
}

// parkBytesPerRow is the body size that counts as one row in op.Size.
const parkBytesPerRow = 8 << 10

// outcome is an op's own result inside a transaction: its reservations, or
// the *seqstore.BatchError of the requests that failed it (nothing of it
// written).
type outcome struct {
	res  []seqstore.Reservation
	err  error
	more []seqstore.Stream
}

// rowChunk bounds the streams or rows per statement, well under every
// dialect's limit on bound parameters. The cost of a statement grows
// faster than its rows beyond a few hundred (PostgreSQL plans and filters
// a long IN or OR list row by row on a small table).
const rowChunk = 256

// maxStatementBytes bounds the body bytes of one multi-row INSERT.
const maxStatementBytes = 4 << 20

// applyBatch runs ops in tx with a fixed number of statements whatever their
// count: one locking SELECT per table, the compare-and-set and counter
// arithmetic in Go, then one multi-row INSERT / upsert / DELETE per kind of
// write. Each op is atomic: a request at fault fails its op (the others
// ErrAborted) and nothing of that op is written; the other ops go on. The
// returned error means tx is unusable and must be rolled back.
func (s *Store) applyBatch(ctx context.Context, tx *sql.Tx, ops []*op) ([]outcome, error) {
	out := make([]outcome, len(ops))
	if err := s.applyReserves(ctx, tx, ops, out); err != nil {
		return nil, err
	}
	if err := s.applySent(ctx, tx, ops); err != nil {
		return nil, err
	}
	if err := s.applyCursors(ctx, tx, ops, out); err != nil {
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
		for _, r := range o.reqs {
			if _, ok := states[r.Stream]; !ok {
				states[r.Stream] = &sendState{}
				streams = append(streams, r.Stream)
			}
		}
	}
	if len(streams) == 0 {
		return nil
	}
	err := s.selectRows(ctx, tx, "send", "epoch, last_seq", streams, true, func(st seqstore.Stream, vals []any) {
		ss := states[st]
		if ss == nil {
			return
		}
		ss.exists = true
		var err error
		ss.epoch, ss.last, err = sendFromRow(vals)
		if err != nil {
			ss.corrupt = fmt.Errorf("send state of %s: %w", st, err)
		}
	})
	if err != nil {
		return err
	}
	var journal [][]any
	last := map[seqstore.Stream]int64{} // one op's plan, before it applies
	for i, o := range ops {
		if o.kind != opReserve {
			continue
		}
		clear(last)
		var errs []error
		fail := func(k int, err error) {
			if errs == nil {
				errs = make([]error, len(o.reqs))
			}
			errs[k] = err
		}
		res := make([]seqstore.Reservation, len(o.reqs))
		for k, r := range o.reqs {
			ss := states[r.Stream]
			if ss.corrupt != nil {
				fail(k, ss.corrupt)
				continue
			}
			l, ok := last[r.Stream]
			if !ok {
				l = ss.last // 0 for a stream without state
			}
			if uint64(r.N) > seqstore.MaxSeq-uint64(l) {
				fail(k, fmt.Errorf("%w: %d seqs of %s after %d", seqstore.ErrOverflow, r.N, r.Stream, l))
				continue
			}
			res[k].First = uint64(l + 1)
			last[r.Stream] = l + int64(r.N)
		}
		if err := seqstore.Abort(errs); err != nil {
			out[i].err = err
			continue
		}
		for k, r := range o.reqs {
			ss := states[r.Stream]
			if !ss.exists && !ss.created {
				ss.created, ss.epoch = true, int64(seqstore.NewEpoch(time.Now()))
			}
			ss.last, ss.dirty = last[r.Stream], true
			res[k].Epoch = uint64(ss.epoch)
			for j, b := range r.Journal {
				if b == nil {
					b = []byte{} // NULL would break NOT NULL; an empty body is a body
				}
				journal = append(journal, []any{r.Stream.Queue, r.Stream.Group, int64(res[k].First) + int64(j), b})
			}
		}
		out[i].res = res
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
		for _, m := range o.marks {
			seqs := make([]any, 0, len(m.Seqs))
			for _, q := range m.Seqs {
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
				args = append(args, m.Stream.Queue, m.Stream.Group)
				args = append(args, part...)
			}
		}
	}
	return flush()
}

type cursorState struct {
	cur    seqstore.Cursor
	exists bool
	dirty  bool // an Advance moved it
	// zero: a Park needs a row to lock and there is none; a zero cursor
	// row is created (Cursors reads it as the zero Cursor).
	zero    bool
	corrupt error
}

// parkKey names one parked entry.
type parkKey struct {
	stream     seqstore.Stream
	epoch, seq uint64
}

// applyCursors runs the Advance and Park calls of ops in queue order
// against the locked cursor rows of their streams, so that a Park sees
// every Advance before it in the transaction and the reverse. A Park holds
// its stream's cursor row locked until the transaction ends, so no
// concurrent Advance can pass an entry between the check and the insert; a
// stream without a cursor row gets a zero row, inserted plainly like any
// new row (a concurrent creation fails this transaction on the duplicate
// key, and the retry locks the winner's row). An Advance, and a drop,
// deletes the parked entries its streams' cursors passed, at most
// dropChunk per statement (see deletePassed), and notes in out the streams
// that may have more.
func (s *Store) applyCursors(ctx context.Context, tx *sql.Tx, ops []*op, out []outcome) error {
	states := map[seqstore.Stream]*cursorState{}
	var streams []seqstore.Stream
	add := func(st seqstore.Stream) {
		if _, ok := states[st]; !ok {
			states[st] = &cursorState{}
			streams = append(streams, st)
		}
	}
	for _, o := range ops {
		for _, a := range o.batch {
			add(a.Stream)
		}
		for _, p := range o.parks {
			add(p.Stream)
		}
		for _, st := range o.drops {
			add(st)
		}
	}
	if len(streams) == 0 {
		return nil
	}
	err := s.selectRows(ctx, tx, "cursor", cursorCols, streams, true, func(st seqstore.Stream, vals []any) {
		cs := states[st]
		if cs == nil {
			return
		}
		cs.exists = true
		var err error
		if cs.cur, err = cursorFromRow(vals); err != nil {
			cs.corrupt = fmt.Errorf("cursor of %s: %w", st, err)
		}
	})
	if err != nil {
		return err
	}
	parks := map[parkKey]seqstore.Parked{} // the last body parked wins
	var parkOrder []parkKey
	for i, o := range ops {
		switch o.kind {
		case opAdvance:
			out[i].err = s.planAdvance(o, states)
		case opPark:
			if out[i].err = planPark(o, states); out[i].err != nil {
				continue
			}
			for _, p := range o.parks {
				k := parkKey{p.Stream, p.Epoch, p.Seq}
				if _, ok := parks[k]; !ok {
					parkOrder = append(parkOrder, k)
				}
				parks[k] = p
			}
		}
	}
	dropping := map[seqstore.Stream]bool{}
	for _, o := range ops {
		for _, st := range o.drops {
			dropping[st] = true
		}
	}
	var created, updated, passed [][]any
	var passedStreams []seqstore.Stream
	for _, st := range streams {
		cs := states[st]
		if dropping[st] && !cs.dirty && cs.exists && cs.corrupt == nil {
			passed = append(passed, []any{st.Queue, st.Group, int64(cs.cur.Epoch), int64(cs.cur.Epoch), int64(cs.cur.Next)})
			passedStreams = append(passedStreams, st)
		}
		if !cs.dirty && !cs.zero {
			continue
		}
		row := []any{st.Queue, st.Group, int64(cs.cur.Epoch), int64(cs.cur.Next), int64(cs.cur.Owner), seqstore.FormatSkipped(cs.cur.Skipped)}
		switch {
		case !cs.exists:
			created = append(created, row)
		case cs.dirty:
			updated = append(updated, row)
		}
		if cs.dirty {
			passed = append(passed, []any{st.Queue, st.Group, int64(cs.cur.Epoch), int64(cs.cur.Epoch), int64(cs.cur.Next)})
			passedStreams = append(passedStreams, st)
		}
	}
	cols := []string{"queue", "grp", "epoch", "next_seq", "owner", "skipped"}
	if err := s.insertRows(ctx, tx, "cursor", cols, created, nil); err != nil {
		return err
	}
	if err := s.insertRows(ctx, tx, "cursor", cols, updated, cols[2:]); err != nil {
		return err
	}
	more, err := s.deletePassed(ctx, tx, passedStreams, passed)
	if err != nil {
		return err
	}
	if len(more) > 0 {
		for i, o := range ops {
			if out[i].err != nil {
				continue
			}
			for _, a := range o.batch {
				if slices.Contains(more, a.Stream) {
					out[i].more = append(out[i].more, a.Stream)
				}
			}
			for _, st := range o.drops {
				if slices.Contains(more, st) {
					out[i].more = append(out[i].more, st)
				}
			}
		}
	}
	var parked [][]any
	for _, k := range parkOrder {
		if states[k.stream].cur.Below(k.epoch, k.seq) {
			continue // a later Advance of this transaction passed it
		}
		p := parks[k]
		body := p.Body
		if body == nil {
			body = []byte{} // NULL would break NOT NULL; an empty body is a body
		}
		parked = append(parked, []any{p.Stream.Queue, p.Stream.Group, int64(p.Epoch), int64(p.Seq), int64(parkCRC(p.Stream, p.Epoch, p.Seq, body)), body})
	}
	return s.insertRows(ctx, tx, "parked", []string{"queue", "grp", "epoch", "seq", "crc", "body"}, parked, []string{"crc", "body"})
}

// planAdvance checks an Advance call against states and, when every move
// matches, applies it there. It returns the call's *seqstore.BatchError.
func (s *Store) planAdvance(o *op, states map[seqstore.Stream]*cursorState) error {
	var errs []error
	for k, a := range o.batch {
		cs := states[a.Stream]
		var err error
		switch {
		case cs.corrupt != nil:
			err = cs.corrupt
		case !cs.cur.Same(a.From):
			err = fmt.Errorf("%w: %s is at %d/%d owner %d", seqstore.ErrConflict, a.Stream, cs.cur.Epoch, cs.cur.Next, cs.cur.Owner)
		default:
			continue
		}
		if errs == nil {
			errs = make([]error, len(o.batch))
		}
		errs[k] = err
	}
	if err := seqstore.Abort(errs); err != nil {
		return err
	}
	for _, a := range o.batch {
		cs := states[a.Stream]
		cs.cur, cs.dirty = a.To, true
	}
	return nil
}

// planPark checks a Park call against states: no entry may be below its
// stream's cursor. It marks the streams without a cursor row for a zero
// row and returns the call's *seqstore.BatchError.
func planPark(o *op, states map[seqstore.Stream]*cursorState) error {
	var errs []error
	for k, p := range o.parks {
		cs := states[p.Stream]
		var err error
		switch {
		case cs.corrupt != nil:
			err = cs.corrupt
		case cs.cur.Below(p.Epoch, p.Seq):
			err = fmt.Errorf("%w: park of %s %d/%d: the cursor is at %d/%d", seqstore.ErrConflict, p.Stream, p.Epoch, p.Seq, cs.cur.Epoch, cs.cur.Next)
		default:
			continue
		}
		if errs == nil {
			errs = make([]error, len(o.parks))
		}
		errs[k] = err
	}
	if err := seqstore.Abort(errs); err != nil {
		return err
	}
	for _, p := range o.parks {
		if cs := states[p.Stream]; !cs.exists {
			cs.zero = true
		}
	}
	return nil
}

// cursorCols are the value columns of a cursor row, in the order
// cursorFromRow reads them.
const cursorCols = "epoch, next_seq, owner, skipped"

// selectRows reads the rows of streams from table and calls row for each,
// with the values of cols (scanned as they come, so that a value of the
// wrong type is the caller's to judge, not a failed query). With lock, the
// rows stay locked for the rest of tx (SELECT ... FOR UPDATE; SQLite: the
// transaction holds the database's write lock). db is a *sql.Tx or *sql.DB.
func (s *Store) selectRows(ctx context.Context, db querier, table, cols string, streams []seqstore.Stream, lock bool,
	row func(st seqstore.Stream, vals []any)) error {
	// A stable order keeps concurrent writers from locking in opposite
	// orders.
	streams = slices.Clone(streams)
	slices.SortFunc(streams, func(a, b seqstore.Stream) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Group, b.Group))
	})
	streams = slices.Compact(streams)
	n := strings.Count(cols, ",") + 1
	for lo := 0; lo < len(streams); lo += rowChunk {
		part := streams[lo:min(lo+rowChunk, len(streams))]
		// One "queue = ? AND grp IN (...)" per queue (usually one): an
		// IN list is an index lookup per name (hashed by PostgreSQL), where
		// an OR of pairs costs every row a test per pair.
		var b strings.Builder
		b.WriteString("SELECT queue, grp, " + cols + " FROM " + s.prefix + table + " WHERE ")
		args := make([]any, 0, len(part)+1)
		for i := 0; i < len(part); {
			k := i + 1
			for k < len(part) && part[k].Queue == part[i].Queue {
				k++
			}
			if i > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString("(queue = ? AND grp IN (?" + strings.Repeat(", ?", k-i-1) + "))")
			args = append(args, part[i].Queue)
			for _, st := range part[i:k] {
				args = append(args, st.Group)
			}
			i = k
		}
		if lock {
			b.WriteString(s.lockSuffix())
		}
		s.stmts.Add(1)
		rows, err := db.QueryContext(ctx, s.ph(b.String()), args...)
		if err != nil {
			return err
		}
		vals := make([]any, n)
		dest := make([]any, 2+n)
		var st seqstore.Stream
		dest[0], dest[1] = &st.Queue, &st.Group
		for i := range vals {
			dest[2+i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				_ = rows.Close()
				return err
			}
			row(st, vals)
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

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
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
			tail = " ON CONFLICT (" + primaryKey(table) + ") DO UPDATE SET " + strings.Join(sets, ", ")
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

// primaryKey returns the key columns of table, as Migrate creates them.
func primaryKey(table string) string {
	if table == "parked" {
		return "queue, grp, epoch, seq"
	}
	return "queue, grp"
}

// dropChunk bounds the parked rows one statement deletes: a transaction
// with an Advance deletes up to dropChunk rows its cursors passed (per
// rowChunk streams), and dropPassed the rest, dropChunk per statement, in
// statements of their own, so that no transaction holds its locks (SQLite:
// the database's write lock) for the time of deleting a large park.
const dropChunk = 1000

// passedCond matches a stream's parked rows that its cursor passed, given
// queue, group, cursor epoch twice and cursor next.
const passedCond = "queue = ? AND grp = ? AND (epoch < ? OR epoch = ? AND seq < ?)"

// deletePassed deletes the parked rows that the cursors args (one
// passedCond's values per stream of streams) passed, at most dropChunk per
// statement of up to rowChunk streams, and returns the streams of the
// statements that deleted dropChunk rows: those may have passed rows left.
// db is a *sql.Tx or the *sql.DB.
func (s *Store) deletePassed(ctx context.Context, db execer, streams []seqstore.Stream, args [][]any) ([]seqstore.Stream, error) {
	var more []seqstore.Stream
	for lo := 0; lo < len(args); lo += rowChunk {
		part := args[lo:min(lo+rowChunk, len(args))]
		where := "(" + passedCond + ")" + strings.Repeat(" OR ("+passedCond+")", len(part)-1)
		t := s.prefix + "parked"
		var q string
		switch s.dialect {
		case Postgres:
			q = "DELETE FROM " + t + " WHERE ctid = ANY(ARRAY(SELECT ctid FROM " + t + " WHERE " + where + " LIMIT ?))"
		case MySQL:
			q = "DELETE FROM " + t + " WHERE " + where + " ORDER BY queue, grp, epoch, seq LIMIT ?"
		default: // SQLite has DELETE ... LIMIT only when compiled with it
			q = "DELETE FROM " + t + " WHERE rowid IN (SELECT rowid FROM " + t + " WHERE " + where + " LIMIT ?)"
		}
		flat := make([]any, 0, len(part)*len(part[0])+1)
		for _, a := range part {
			flat = append(flat, a...)
		}
		flat = append(flat, dropChunk)
		s.stmts.Add(1)
		res, err := db.ExecContext(ctx, s.ph(q), flat...)
		if err != nil {
			return nil, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		if s.onDrop != nil {
			s.onDrop(n)
		}
		if n >= dropChunk {
			more = append(more, streams[lo:lo+len(part)]...)
		}
	}
	return more, nil
}

// dropPassed deletes the parked rows of streams that their cursors passed,
// in drop calls of the group commit, each a transaction that locks the
// streams' cursor rows and deletes at most dropChunk rows per rowChunk
// streams: other calls of the store queue between them, as they do
// between any two transactions (on SQLite a loop of its own would retake
// the write lock before a waiter's busy handler woke). A cursor never moves
// back, so what one passed stays passed. dropPassed stops early when ctx
// ends or the store closes; what is left is below the cursor, which
// Unpark never returns, and the stream's next Advance or ParkedStreams
// drops it.
func (s *Store) dropPassed(ctx context.Context, streams []seqstore.Stream) error {
	for len(streams) > 0 {
		o := &op{kind: opDrop, drops: streams}
		if err := s.do(ctx, o); err != nil {
			return err
		}
		if o.err != nil {
			return o.err
		}
		streams = o.more
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

// sendFromRow validates the values of a send row (epoch, last_seq).
func sendFromRow(vals []any) (epoch, last int64, err error) {
	e, ok1 := toInt64(vals[0])
	l, ok2 := toInt64(vals[1])
	if !ok1 || !ok2 || e < 1 || l < 0 {
		return 0, 0, fmt.Errorf("%w: send row has epoch %v last_seq %v", seqstore.ErrCorrupt, vals[0], vals[1])
	}
	return e, l, nil
}

// cursorFromRow validates the values of a cursor row (cursorCols).
func cursorFromRow(vals []any) (seqstore.Cursor, error) {
	e, ok1 := toInt64(vals[0])
	n, ok2 := toInt64(vals[1])
	o, ok3 := toInt64(vals[2])
	sk, ok4 := toString(vals[3])
	if !ok1 || !ok2 || !ok3 || !ok4 || e < 0 || n < 0 || o < 0 {
		return seqstore.Cursor{}, fmt.Errorf("%w: cursor row has epoch %v next_seq %v owner %v skipped %T",
			seqstore.ErrCorrupt, vals[0], vals[1], vals[2], vals[3])
	}
	skipped, err := seqstore.ParseSkipped(sk)
	if err != nil {
		return seqstore.Cursor{}, err
	}
	return seqstore.Cursor{Epoch: uint64(e), Next: uint64(n), Owner: uint64(o), Skipped: skipped}, nil
}

// toInt64 accepts what drivers return for a BIGINT column: an int64, or its
// decimal text (MySQL's text protocol; a value SQLite stored as text).
func toInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case []byte:
		n, err := strconv.ParseInt(string(v), 10, 64)
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func toString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	}
	return "", false
}
