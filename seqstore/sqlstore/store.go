package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/internal/batcher"
	"github.com/inorder/inorder/internal/retry"
	"github.com/inorder/inorder/seqstore"
)

// ErrSchemaTooNew is returned by Migrate when the database's schema version
// is newer than this package knows: a newer release migrated it.
var ErrSchemaTooNew = errors.New("sqlstore: schema is newer than this code")

// DefaultTablePrefix is the table prefix used when Options.TablePrefix is
// empty.
const DefaultTablePrefix = "inorder_"

const (
	maxTxCalls      = 128
	maxTxRows       = 512
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
	// TxTimeout bounds each group-commit transaction, its retries
	// included, so that Close cannot hang on a dead server. Default 30s.
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
	// Ops is the number of Reserve, Sent, Advance and Park calls served (each
	// call counts one, whatever its number of streams).
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
	log     *slog.Logger
	timeout time.Duration

	commits *batcher.Batcher[*op]
	sleep   func(ctx context.Context, d time.Duration) error // between retries

	mu     sync.RWMutex // guards closed
	closed bool
	// life ends at Close, and with it the watches of WatchLeases, whose
	// goroutines Close waits for.
	life    context.Context
	end     context.CancelFunc
	watches sync.WaitGroup

	ops, txs, stmts, retries atomic.Uint64

	// onDrop, when set (tests), is told the rows each parked-row DELETE
	// deleted.
	onDrop func(n int64)
	// beforeLeaseCommit, when set (tests), runs between a lease call's
	// statements and its COMMIT.
	beforeLeaseCommit func()
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
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		db:      db,
		dialect: dialect,
		prefix:  o.TablePrefix,
		log:     o.Logger,
		timeout: o.TxTimeout,
		sleep:   retry.Sleep,
	}
	s.life, s.end = context.WithCancel(context.Background())
	var err error
	s.commits, err = batcher.New(&batcher.Options{MaxHandlers: o.Writers, MaxItems: maxTxCalls, MaxSize: maxTxRows}, s.commit)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %w", err)
	}
	return s, nil
}

// Stats returns the counters since Open.
func (s *Store) Stats() Stats {
	return Stats{Ops: s.ops.Load(), Transactions: s.txs.Load(), Statements: s.stmts.Load(), Retries: s.retries.Load()}
}

// Close waits until every call already submitted has committed (or
// failed), and ends the watches of WatchLeases. It does not close the
// *sql.DB. Later calls return seqstore.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.end()
	s.watches.Wait()
	s.commits.Shutdown()
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// Migrate creates or upgrades the tables to the newest schema version this
// package knows, recorded in <prefix>schema_version. It is idempotent and
// safe to run from several processes at once: PostgreSQL and SQLite migrate
// in one transaction (PostgreSQL under an advisory lock), MySQL under a
// named lock (GET_LOCK; its DDL commits at once, so every statement is
// idempotent). It refuses a database whose schema is newer than this code.
func (s *Store) Migrate(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlstore: migrate: %w", err)
	}
	defer func() { _ = conn.Close() }()
	lockName := "inorder_migrate_" + s.prefix
	if s.dialect == MySQL {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", lockName).Scan(&got); err != nil {
			return fmt.Errorf("sqlstore: migrate: lock: %w", err)
		}
		if got.Int64 != 1 {
			return fmt.Errorf("sqlstore: migrate: another process held lock %q for 60s", lockName)
		}
		defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", lockName) }()
		return s.migrate(ctx, conn)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if s.dialect == Postgres {
		h := fnv.New64a()
		_, _ = h.Write([]byte(lockName))
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
			return fmt.Errorf("sqlstore: migrate: lock: %w", err)
		}
	}
	if err := s.migrate(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: migrate: commit: %w", err)
	}
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) migrate(ctx context.Context, db execer) error {
	vt := s.prefix + "schema_version"
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+vt+" (version INTEGER NOT NULL)"); err != nil {
		return fmt.Errorf("sqlstore: migrate: create %s: %w", vt, err)
	}
	var cur sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT MAX(version) FROM "+vt).Scan(&cur); err != nil {
		return fmt.Errorf("sqlstore: migrate: read %s: %w", vt, err)
	}
	latest := migrations[len(migrations)-1].version
	if cur.Int64 > int64(latest) {
		return fmt.Errorf("%w: schema version %d, this code knows up to %d", ErrSchemaTooNew, cur.Int64, latest)
	}
	for _, m := range migrations {
		if int64(m.version) <= cur.Int64 {
			continue
		}
		for _, stmt := range m.stmts(s.dialect, s.prefix) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("sqlstore: migrate to version %d: %w", m.version, err)
			}
		}
		upd := "INSERT INTO " + vt + " (version) VALUES (" + strconv.Itoa(m.version) + ")"
		if cur.Valid {
			upd = "UPDATE " + vt + " SET version = " + strconv.Itoa(m.version)
		}
		if _, err := db.ExecContext(ctx, upd); err != nil {
			return fmt.Errorf("sqlstore: migrate: record version %d: %w", m.version, err)
		}
		cur = sql.NullInt64{Int64: int64(m.version), Valid: true}
		s.log.InfoContext(ctx, "sqlstore: schema migrated", "prefix", s.prefix, "version", m.version)
	}
	return nil
}

// Reserve implements seqstore.Store: the requests are one call of the
// group commit, all or nothing.
func (s *Store) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if err := seqstore.CheckReserve(reqs); err != nil {
		return nil, fmt.Errorf("sqlstore: reserve: %w", err)
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	o := &op{kind: opReserve, reqs: reqs}
	if err := s.do(ctx, o); err != nil {
		return nil, fmt.Errorf("sqlstore: reserve %s: %w", callName(len(reqs), reqs[0].Stream), err)
	}
	return o.res, nil
}

// Sent implements seqstore.Store.
func (s *Store) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	if err := seqstore.CheckSent(marks); err != nil {
		return fmt.Errorf("sqlstore: sent: %w", err)
	}
	if !slices.ContainsFunc(marks, func(m seqstore.SentMark) bool { return len(m.Seqs) > 0 }) {
		return nil
	}
	if err := s.do(ctx, &op{kind: opSent, marks: marks}); err != nil {
		return fmt.Errorf("sqlstore: sent %s: %w", callName(len(marks), marks[0].Stream), err)
	}
	return nil
}

// callName names a call's streams in errors: the stream, or how many and
// the first.
func callName(n int, first seqstore.Stream) string {
	if n == 1 {
		return first.String()
	}
	return fmt.Sprintf("%d streams from %s", n, first)
}

// Cursors implements seqstore.Store. It reads outside the group commit, in
// one statement per few hundred streams; a corrupt row fails only its
// stream.
func (s *Store) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("sqlstore: cursors: %w", seqstore.ErrClosed)
	}
	out := make([]seqstore.Cursor, len(streams))
	errs := make([]error, len(streams))
	failed := false
	valid := make([]seqstore.Stream, 0, len(streams))
	for i, st := range streams {
		if err := st.Validate(); err != nil {
			errs[i], failed = err, true
			continue
		}
		valid = append(valid, st)
	}
	found := make(map[seqstore.Stream]outcomeCursor, len(valid))
	err := s.selectRows(ctx, s.db, "cursor", cursorCols, valid, false, func(st seqstore.Stream, vals []any) {
		c, err := cursorFromRow(vals)
		found[st] = outcomeCursor{c, err}
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: cursors: %w", err)
	}
	for i, st := range streams {
		if errs[i] != nil {
			continue
		}
		f := found[st]
		if f.err != nil {
			errs[i], failed = fmt.Errorf("cursor of %s: %w", st, f.err), true
			continue
		}
		out[i] = cloneCursor(f.c)
	}
	if failed {
		return out, fmt.Errorf("sqlstore: cursors: %w", &seqstore.BatchError{Errs: errs})
	}
	return out, nil
}

type outcomeCursor struct {
	c   seqstore.Cursor
	err error
}

func cloneCursor(c seqstore.Cursor) seqstore.Cursor {
	c.Skipped = slices.Clone(c.Skipped)
	return c
}

// Advance implements seqstore.Store: the batch is one compare-and-set
// inside a group-commit transaction, all or nothing, with the drop of up to
// dropChunk of the parked entries it passed; it drops the rest after the
// commit, dropChunk per statement (see the package documentation).
func (s *Store) Advance(ctx context.Context, batch []seqstore.Advance) error {
	if err := seqstore.CheckAdvance(batch); err != nil {
		return fmt.Errorf("sqlstore: advance: %w", err)
	}
	if len(batch) == 0 {
		return nil
	}
	o := &op{kind: opAdvance, batch: batch}
	if err := s.do(ctx, o); err != nil {
		return fmt.Errorf("sqlstore: advance: %w", err)
	}
	if err := s.dropPassed(ctx, o.more); err != nil {
		// The cursors moved: report that. What is left is below them.
		s.log.WarnContext(ctx, "sqlstore: dropping passed parks failed; the next advance or parked-streams scan retries", "err", err.Error())
	}
	return nil
}

// AdvanceTx applies batch like Advance, but inside the caller's transaction,
// so that the application's own writes and the cursors commit or roll back
// together: the basis of exactly-once processing. It returns once the
// statements ran; nothing is durable until the caller commits tx. On a
// *seqstore.BatchError (a conflict, say) nothing was written and the caller
// should roll back. tx must come from the *sql.DB the Store was opened with
// (or one on the same database and table prefix).
//
// AdvanceTx drops up to dropChunk of the parked entries its cursors pass
// in tx. It cannot drop more before tx commits, so it leaves the rest to
// later writes (the stream's next Advance or AdvanceTx, and
// ParkedStreams); Unpark never returns them meanwhile.
func (s *Store) AdvanceTx(ctx context.Context, tx *sql.Tx, batch []seqstore.Advance) error {
	if tx == nil {
		return fmt.Errorf("sqlstore: advance in transaction: %w: nil *sql.Tx", seqstore.ErrInvalidArgument)
	}
	if err := seqstore.CheckAdvance(batch); err != nil {
		return fmt.Errorf("sqlstore: advance in transaction: %w", err)
	}
	if s.isClosed() {
		return fmt.Errorf("sqlstore: advance in transaction: %w", seqstore.ErrClosed)
	}
	out, err := s.applyBatch(ctx, tx, []*op{{kind: opAdvance, batch: batch}})
	if err == nil {
		err = out[0].err
	}
	if err != nil {
		return fmt.Errorf("sqlstore: advance in transaction: %w", err)
	}
	return nil
}

// Pending implements seqstore.Store. It reads outside the group commit.
func (s *Store) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("sqlstore: pending: %w", err)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("sqlstore: pending: %w", seqstore.ErrClosed)
	}
	q := s.ph("SELECT j.grp, j.seq, j.body, s.epoch, s.last_seq FROM " + s.prefix + "journal j LEFT JOIN " +
		s.prefix + "send s ON s.queue = j.queue AND s.grp = j.grp WHERE j.queue = ?")
	rows, err := s.db.QueryContext(ctx, q, queue)
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
