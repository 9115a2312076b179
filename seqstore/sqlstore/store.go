package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// DefaultTablePrefix is the table prefix used when Options.TablePrefix is
// empty.
const DefaultTablePrefix = "inorder_"

const (
	maxBatchOps     = 128
	journalChunk    = 500 // rows per INSERT, 4 parameters each
	defaultTxTimout = 30 * time.Second
)

var prefixRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,30}$`)

// Options configures a Store. A nil *Options means the defaults.
type Options struct {
	// TablePrefix starts every table name. Default DefaultTablePrefix. It
	// must match ^[A-Za-z_][A-Za-z0-9_]{0,30}$; it is the only name ever
	// written into SQL text. PostgreSQL folds it to lower case.
	TablePrefix string
	// Writers is how many group-commit transactions may run at once.
	// Default 1, which suits every dialect; SQLite allows one writer anyway.
	Writers int
	// TxTimeout bounds each group-commit transaction, so that Close cannot
	// hang on a dead server. Default 30s.
	TxTimeout time.Duration
	// Logger receives debug and warning messages; nil discards them. Bodies
	// and DSNs are never logged.
	Logger *slog.Logger
}

func (o *Options) validate() error {
	if o.TablePrefix != "" && !prefixRE.MatchString(o.TablePrefix) {
		return fmt.Errorf("sqlstore: table prefix %q must match %s", o.TablePrefix, prefixRE)
	}
	if o.Writers < 0 {
		return fmt.Errorf("sqlstore: Writers must not be negative, got %d", o.Writers)
	}
	if o.TxTimeout < 0 {
		return fmt.Errorf("sqlstore: TxTimeout must not be negative, got %v", o.TxTimeout)
	}
	return nil
}

// Stats counts the work a Store's group commit did since Open.
type Stats struct {
	// Ops is the number of Reserve, Sent and Advance calls served.
	Ops uint64
	// Transactions is the number of transactions begun for them, retries
	// included.
	Transactions uint64
	// Statements is the number of statements run in those transactions.
	Statements uint64
	// Retries is the number of transactions run again after a transient
	// failure (busy database, deadlock, a connection lost before COMMIT).
	Retries uint64
}

// Store is a seqstore.Store in a SQL database. Create it with Open and
// create its tables with Migrate.
type Store struct {
	db      *sql.DB
	dialect Dialect
	prefix  string
	q       *queries
	log     *slog.Logger
	timeout time.Duration

	mu     sync.RWMutex // guards closed and sending on queue
	closed bool
	queue  chan *op
	wg     sync.WaitGroup

	ops, txs, stmts, retries atomic.Uint64
}

var _ seqstore.Store = (*Store)(nil)

// Open returns a Store over db, which stays owned by the caller: Close does
// not close it. Open does not touch the database; call Migrate once to create
// or upgrade the tables.
func Open(db *sql.DB, dialect Dialect, opts *Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlstore: nil *sql.DB")
	}
	if !dialect.valid() {
		return nil, fmt.Errorf("sqlstore: unknown dialect %v", dialect)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.TablePrefix == "" {
		o.TablePrefix = DefaultTablePrefix
	}
	if o.Writers == 0 {
		o.Writers = 1
	}
	if o.TxTimeout == 0 {
		o.TxTimeout = defaultTxTimout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Store{
		db:      db,
		dialect: dialect,
		prefix:  o.TablePrefix,
		q:       buildQueries(dialect, o.TablePrefix),
		log:     o.Logger,
		timeout: o.TxTimeout,
		queue:   make(chan *op, maxBatchOps*o.Writers),
	}
	s.wg.Add(o.Writers)
	for range o.Writers {
		go s.writer()
	}
	return s, nil
}

// Stats returns the counters since Open.
func (s *Store) Stats() Stats {
	return Stats{Ops: s.ops.Load(), Transactions: s.txs.Load(), Statements: s.stmts.Load(), Retries: s.retries.Load()}
}

// Close stops the writers after they have committed every queued call. It
// does not close the *sql.DB. Later calls return seqstore.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// Migrate creates or upgrades the tables to the newest schema version this
// package knows, recorded in <prefix>schema_version. It is idempotent. It
// refuses a database whose schema is newer than this code. Run it from one
// process at a time (a deploy step, or at start-up of a single instance).
func (s *Store) Migrate(ctx context.Context) error {
	vt := s.prefix + "schema_version"
	if _, err := s.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+vt+" (version INTEGER NOT NULL)"); err != nil {
		return fmt.Errorf("sqlstore: migrate: create %s: %w", vt, err)
	}
	var cur sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MAX(version) FROM "+vt).Scan(&cur); err != nil {
		return fmt.Errorf("sqlstore: migrate: read %s: %w", vt, err)
	}
	latest := migrations[len(migrations)-1].version
	if cur.Int64 > int64(latest) {
		return fmt.Errorf("sqlstore: migrate: %w: schema version %d is newer than this code's %d", seqstore.ErrCorrupt, cur.Int64, latest)
	}
	for _, m := range migrations {
		if int64(m.version) <= cur.Int64 {
			continue
		}
		for _, stmt := range m.stmts(s.dialect, s.prefix) {
			if _, err := s.db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("sqlstore: migrate to version %d: %w", m.version, err)
			}
		}
		upd := "INSERT INTO " + vt + " (version) VALUES (" + strconv.Itoa(m.version) + ")"
		if cur.Valid {
			upd = "UPDATE " + vt + " SET version = " + strconv.Itoa(m.version)
		}
		if _, err := s.db.ExecContext(ctx, upd); err != nil {
			return fmt.Errorf("sqlstore: migrate: record version %d: %w", m.version, err)
		}
		cur = sql.NullInt64{Int64: int64(m.version), Valid: true}
		s.log.InfoContext(ctx, "sqlstore: schema migrated", "prefix", s.prefix, "version", m.version)
	}
	return nil
}

// Reserve implements seqstore.Store.
func (s *Store) Reserve(ctx context.Context, st seqstore.Stream, n int, journal [][]byte) (seqstore.Reservation, error) {
	if err := st.Validate(); err != nil {
		return seqstore.Reservation{}, fmt.Errorf("sqlstore: reserve: %w", err)
	}
	if n < 1 {
		return seqstore.Reservation{}, fmt.Errorf("sqlstore: reserve %s: %w: n must be at least 1, got %d", st, seqstore.ErrInvalidArgument, n)
	}
	if journal != nil && len(journal) != n {
		return seqstore.Reservation{}, fmt.Errorf("sqlstore: reserve %s: %w: journal holds %d bodies for n=%d", st, seqstore.ErrInvalidArgument, len(journal), n)
	}
	var res seqstore.Reservation
	o := &op{apply: func(ctx context.Context, tx *sql.Tx) (error, error) {
		r, opErr, dbErr := s.reserveIn(ctx, tx, st, n, journal)
		res = r
		return opErr, dbErr
	}}
	if err := s.do(ctx, o); err != nil {
		return seqstore.Reservation{}, fmt.Errorf("sqlstore: reserve %s: %w", st, err)
	}
	return res, nil
}

// reserveIn allocates n seqs of st inside tx. opErr is the caller's own
// failure (overflow, corrupt row) with nothing written; dbErr means the
// transaction is unusable.
func (s *Store) reserveIn(ctx context.Context, tx *sql.Tx, st seqstore.Stream, n int, journal [][]byte) (res seqstore.Reservation, opErr, dbErr error) {
	var epoch, last int64
	s.stmts.Add(1)
	err := tx.QueryRowContext(ctx, s.q.selectSendLocked, st.Queue, st.Group).Scan(&epoch, &last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		epoch = int64(seqstore.NewEpoch(time.Now()))
		s.stmts.Add(1)
		if _, err := tx.ExecContext(ctx, s.q.insertSend, st.Queue, st.Group, epoch, int64(n)); err != nil {
			return res, nil, err
		}
	case err != nil:
		return res, nil, err
	default:
		if epoch < 1 || last < 0 {
			return res, fmt.Errorf("%w: send row has epoch %d last_seq %d", seqstore.ErrCorrupt, epoch, last), nil
		}
		if uint64(n) > seqstore.MaxSeq-uint64(last) {
			return res, fmt.Errorf("%w: %d seqs after %d", seqstore.ErrOverflow, n, last), nil
		}
		s.stmts.Add(1)
		r, err := tx.ExecContext(ctx, s.q.updateSend, last+int64(n), st.Queue, st.Group, last)
		if err != nil {
			return res, nil, err
		}
		if k, err := r.RowsAffected(); err != nil || k != 1 {
			return res, nil, fmt.Errorf("send row of %s changed under its lock (%d rows, %v)", st, k, err)
		}
	}
	first := last + 1
	for lo := 0; lo < len(journal); lo += journalChunk {
		part := journal[lo:min(lo+journalChunk, len(journal))]
		args := make([]any, 0, 4*len(part))
		for i, b := range part {
			if b == nil {
				b = []byte{} // NULL would break NOT NULL; an empty body is a body
			}
			args = append(args, st.Queue, st.Group, first+int64(lo+i), b)
		}
		s.stmts.Add(1)
		if _, err := tx.ExecContext(ctx, s.q.insertJournal(len(part)), args...); err != nil {
			return res, nil, err
		}
	}
	return seqstore.Reservation{Epoch: uint64(epoch), First: uint64(first)}, nil, nil
}

// Sent implements seqstore.Store.
func (s *Store) Sent(ctx context.Context, st seqstore.Stream, seqs []uint64) error {
	if err := st.Validate(); err != nil {
		return fmt.Errorf("sqlstore: sent: %w", err)
	}
	if len(seqs) == 0 {
		return nil
	}
	o := &op{apply: func(ctx context.Context, tx *sql.Tx) (error, error) {
		for lo := 0; lo < len(seqs); lo += journalChunk {
			part := seqs[lo:min(lo+journalChunk, len(seqs))]
			args := make([]any, 0, 2+len(part))
			args = append(args, st.Queue, st.Group)
			for _, q := range part {
				if q > seqstore.MaxSeq {
					continue // no such entry can exist
				}
				args = append(args, int64(q))
			}
			if len(args) == 2 {
				continue
			}
			s.stmts.Add(1)
			if _, err := tx.ExecContext(ctx, s.q.deleteJournal(len(args)-2), args...); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}}
	if err := s.do(ctx, o); err != nil {
		return fmt.Errorf("sqlstore: sent %s: %w", st, err)
	}
	return nil
}

// Cursor implements seqstore.Store. It reads outside the group commit.
func (s *Store) Cursor(ctx context.Context, st seqstore.Stream) (seqstore.Cursor, error) {
	if err := st.Validate(); err != nil {
		return seqstore.Cursor{}, fmt.Errorf("sqlstore: cursor: %w", err)
	}
	if s.isClosed() {
		return seqstore.Cursor{}, fmt.Errorf("sqlstore: cursor %s: %w", st, seqstore.ErrClosed)
	}
	c, _, err := readCursor(ctx, s.db, s.q.selectCursor, st)
	if err != nil {
		return seqstore.Cursor{}, fmt.Errorf("sqlstore: cursor %s: %w", st, err)
	}
	return c, nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readCursor returns st's cursor and whether a row exists.
func readCursor(ctx context.Context, db queryer, query string, st seqstore.Stream) (seqstore.Cursor, bool, error) {
	var e, n, o int64
	var sk string
	err := db.QueryRowContext(ctx, query, st.Queue, st.Group).Scan(&e, &n, &o, &sk)
	if errors.Is(err, sql.ErrNoRows) {
		return seqstore.Cursor{}, false, nil
	}
	if err != nil {
		return seqstore.Cursor{}, false, err
	}
	if e < 0 || n < 0 || o < 0 {
		return seqstore.Cursor{}, true, fmt.Errorf("%w: cursor row has epoch %d next_seq %d owner %d", seqstore.ErrCorrupt, e, n, o)
	}
	skipped, err := parseSkipped(sk)
	if err != nil {
		return seqstore.Cursor{}, true, err
	}
	return seqstore.Cursor{Epoch: uint64(e), Next: uint64(n), Owner: uint64(o), Skipped: skipped}, true, nil
}

// Advance implements seqstore.Store: the batch is one compare-and-set inside
// a group-commit transaction, all or nothing.
func (s *Store) Advance(ctx context.Context, batch []seqstore.Advance) error {
	if err := checkBatch(batch); err != nil {
		return fmt.Errorf("sqlstore: advance: %w", err)
	}
	if len(batch) == 0 {
		return nil
	}
	o := &op{apply: func(ctx context.Context, tx *sql.Tx) (error, error) {
		return s.advanceIn(ctx, tx, batch)
	}}
	if err := s.do(ctx, o); err != nil {
		var ce *seqstore.ConflictError
		if errors.As(err, &ce) {
			return err
		}
		return fmt.Errorf("sqlstore: advance: %w", err)
	}
	return nil
}

// AdvanceTx applies batch like Advance, but inside the caller's transaction,
// so that the application's own writes and the cursors commit or roll back
// together: the basis of exactly-once processing. It returns once the
// statements ran; nothing is durable until the caller commits tx. On a
// *seqstore.ConflictError nothing was written and the caller should roll
// back. tx must come from the *sql.DB the Store was opened with (or one on
// the same database and table prefix).
func (s *Store) AdvanceTx(ctx context.Context, tx *sql.Tx, batch []seqstore.Advance) error {
	if tx == nil {
		return fmt.Errorf("sqlstore: advance in transaction: %w: nil *sql.Tx", seqstore.ErrInvalidArgument)
	}
	if err := checkBatch(batch); err != nil {
		return fmt.Errorf("sqlstore: advance in transaction: %w", err)
	}
	if s.isClosed() {
		return fmt.Errorf("sqlstore: advance in transaction: %w", seqstore.ErrClosed)
	}
	opErr, dbErr := s.advanceIn(ctx, tx, batch)
	if dbErr != nil {
		return fmt.Errorf("sqlstore: advance in transaction: %w", dbErr)
	}
	return opErr
}

func checkBatch(batch []seqstore.Advance) error {
	seen := make(map[seqstore.Stream]struct{}, len(batch))
	for _, a := range batch {
		if err := a.Check(); err != nil {
			return err
		}
		if _, dup := seen[a.Stream]; dup {
			return fmt.Errorf("%w: stream %s appears twice in one batch", seqstore.ErrInvalidArgument, a.Stream)
		}
		seen[a.Stream] = struct{}{}
	}
	return nil
}

// advanceIn locks and compares every cursor of batch, then writes them all,
// or none if any differs from its From.
func (s *Store) advanceIn(ctx context.Context, tx *sql.Tx, batch []seqstore.Advance) (opErr, dbErr error) {
	exists := make([]bool, len(batch))
	var conflicts []seqstore.Stream
	for i, a := range batch {
		s.stmts.Add(1)
		cur, ok, err := readCursor(ctx, tx, s.q.selectCursorLocked, a.Stream)
		if err != nil {
			if errors.Is(err, seqstore.ErrCorrupt) {
				return fmt.Errorf("sqlstore: advance %s: %w", a.Stream, err), nil
			}
			return nil, err
		}
		exists[i] = ok
		if !cur.Same(a.From) {
			conflicts = append(conflicts, a.Stream)
		}
	}
	if len(conflicts) > 0 {
		return &seqstore.ConflictError{Streams: conflicts}, nil
	}
	for i, a := range batch {
		to, from := a.To, a.From
		sk := formatSkipped(to.Skipped)
		s.stmts.Add(1)
		if !exists[i] {
			if _, err := tx.ExecContext(ctx, s.q.insertCursor, a.Stream.Queue, a.Stream.Group,
				int64(to.Epoch), int64(to.Next), int64(to.Owner), sk); err != nil {
				return nil, err
			}
			continue
		}
		r, err := tx.ExecContext(ctx, s.q.updateCursor, int64(to.Epoch), int64(to.Next), int64(to.Owner), sk,
			a.Stream.Queue, a.Stream.Group, int64(from.Epoch), int64(from.Next), int64(from.Owner))
		if err != nil {
			return nil, err
		}
		if s.q.checkUpdate {
			if k, err := r.RowsAffected(); err != nil || k != 1 {
				return nil, fmt.Errorf("cursor row of %s changed under its lock (%d rows, %v)", a.Stream, k, err)
			}
		}
	}
	return nil, nil
}

// Pending implements seqstore.Store. It reads outside the group commit.
func (s *Store) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("sqlstore: pending: %w", err)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("sqlstore: pending: %w", seqstore.ErrClosed)
	}
	rows, err := s.db.QueryContext(ctx, s.q.pending, queue)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: pending %q: %w", queue, err)
	}
	defer func() { _ = rows.Close() }()
	var out []seqstore.Entry
	for rows.Next() {
		var grp string
		var seq int64
		var body []byte
		var epoch, last sql.NullInt64
		if err := rows.Scan(&grp, &seq, &body, &epoch, &last); err != nil {
			return nil, fmt.Errorf("sqlstore: pending %q: %w", queue, err)
		}
		st := seqstore.Stream{Queue: queue, Group: grp}
		if err := st.Validate(); err != nil {
			return nil, fmt.Errorf("sqlstore: pending %q: %w: journal row of group %q: %v", queue, seqstore.ErrCorrupt, grp, err)
		}
		if !epoch.Valid || epoch.Int64 < 1 || last.Int64 < 0 || seq < 1 || seq > last.Int64 {
			return nil, fmt.Errorf("sqlstore: pending %q: %w: journal entry %s seq %d with send state epoch %v last %v",
				queue, seqstore.ErrCorrupt, st, seq, epoch.Int64, last.Int64)
		}
		if body == nil {
			body = []byte{}
		}
		out = append(out, seqstore.Entry{Stream: st, Epoch: uint64(epoch.Int64), Seq: uint64(seq), Body: body})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: pending %q: %w", queue, err)
	}
	sort.Slice(out, func(i, j int) bool {
		ki, kj := out[i].Stream.Key(), out[j].Stream.Key()
		if ki != kj {
			return ki < kj
		}
		return out[i].Seq < out[j].Seq
	})
	return out, nil
}

func formatSkipped(rs []seqstore.Range) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d-%d", r.Epoch, r.First, r.Last)
	}
	return b.String()
}

func parseNum(v string) (uint64, error) {
	if v == "" || len(v) > 1 && v[0] == '0' {
		return 0, fmt.Errorf("%w: %q is not a canonical number", seqstore.ErrCorrupt, v)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > seqstore.MaxSeq {
		return 0, fmt.Errorf("%w: %q is not a number in 0..MaxSeq", seqstore.ErrCorrupt, v)
	}
	return n, nil
}

func parseSkipped(v string) ([]seqstore.Range, error) {
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > seqstore.MaxSkipped {
		return nil, fmt.Errorf("%w: %d skipped ranges, at most %d", seqstore.ErrCorrupt, len(parts), seqstore.MaxSkipped)
	}
	out := make([]seqstore.Range, len(parts))
	for i, p := range parts {
		e, rest, ok1 := strings.Cut(p, ":")
		a, b, ok2 := strings.Cut(rest, "-")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: skipped range %q", seqstore.ErrCorrupt, p)
		}
		var errs [3]error
		out[i].Epoch, errs[0] = parseNum(e)
		out[i].First, errs[1] = parseNum(a)
		out[i].Last, errs[2] = parseNum(b)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("skipped range %q: %w", p, err)
		}
	}
	return out, nil
}
