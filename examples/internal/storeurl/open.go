package storeurl

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // registers driver "sqlite"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/redisstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

// Options configures Open. A nil *Options means the defaults.
type Options struct {
	// ConnectTimeout bounds the ping of a server or database, and then
	// Migrate, each. Default 10s.
	ConnectTimeout time.Duration
	// MaxOpenConns caps the connections of a SQL store's *sql.DB.
	// Default 8.
	MaxOpenConns int
	// Logger is passed to the store. Default: discard.
	Logger *slog.Logger
	// ReadOnly opens the store to read it, for tools that inspect one
	// (examples/inorderctl): a file store must exist and is opened with
	// filestore.Options.ReadOnly (nothing in its directory is created or
	// changed, and its writing methods fail); a SQLite file must exist
	// and is not created; no SQL store is migrated, so a missing table
	// fails the first read. Redis and SQL stores are not made read-only
	// themselves: their writing methods still write.
	ReadOnly bool
}

func (o *Options) validate() error {
	if o.ConnectTimeout < 0 || o.MaxOpenConns < 0 {
		return fmt.Errorf("storeurl: negative option: ConnectTimeout %v, MaxOpenConns %d", o.ConnectTimeout, o.MaxOpenConns)
	}
	return nil
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		if err := o.validate(); err != nil {
			return c, err
		}
		c = *o
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = 8
	}
	return c, nil
}

// Backend is a store opened from a spec together with what was opened for
// it. Close closes all of it.
type Backend struct {
	// Store is the store: a *filestore.Store, *redisstore.Store or
	// *sqlstore.Store.
	Store seqstore.Store
	// DB is the database of a SQL store (for sqlstore.Store.AdvanceTx),
	// nil otherwise. Close closes it.
	DB *sql.DB
	// Redis is the client of a Redis store, nil otherwise. Close closes it.
	Redis *redis.Client

	spec      *Spec
	closeOnce sync.Once
	closeErr  error
}

// Kind returns the kind of store.
func (b *Backend) Kind() Kind { return b.spec.Kind }

// String returns the spec with passwords redacted.
func (b *Backend) String() string { return b.spec.String() }

// Close closes the store, then the *sql.DB or Redis client. It is
// idempotent; calls after the first return nil.
func (b *Backend) Close() error {
	first := false
	b.closeOnce.Do(func() {
		first = true
		err := b.Store.Close()
		if b.DB != nil {
			err = errors.Join(err, b.DB.Close())
		}
		if b.Redis != nil {
			err = errors.Join(err, b.Redis.Close())
		}
		if err != nil {
			b.closeErr = b.spec.scrub(fmt.Errorf("storeurl: close %s: %w", b.spec, err))
		}
	})
	if !first {
		return nil
	}
	return b.closeErr
}

// Open parses spec and opens its store: see Parse and Spec.Open.
func Open(ctx context.Context, spec string, opts *Options) (*Backend, error) {
	s, err := Parse(spec)
	if err != nil {
		return nil, err
	}
	return s.Open(ctx, opts)
}

// Open opens the store s names. For a server it pings it first (an error
// wrapping ErrUnreachable if that fails); for a SQL store it runs Migrate.
// The store is then ready for use. Errors contain no password.
func (s *Spec) Open(ctx context.Context, opts *Options) (*Backend, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var b *Backend
	switch s.Kind {
	case File:
		b, err = s.openFile(o)
	case SQLite:
		b, err = s.openSQLite(ctx, o)
	case Redis:
		b, err = s.openRedis(ctx, o)
	case Postgres:
		b, err = s.openSQL(ctx, o, stdlib.OpenDB(*s.pg), sqlstore.Postgres)
	case MySQL:
		var conn driver.Connector
		if conn, err = mysql.NewConnector(s.mysql); err == nil {
			b, err = s.openSQL(ctx, o, sql.OpenDB(conn), sqlstore.MySQL)
		} else {
			err = fmt.Errorf("storeurl: %s: %w", s, err)
		}
	default:
		err = fmt.Errorf("%w: %s: no kind (create a Spec with Parse)", ErrInvalidSpec, s)
	}
	if err != nil {
		return nil, s.scrub(err)
	}
	return b, nil
}

func (s *Spec) openFile(o Options) (*Backend, error) {
	st, err := filestore.Open(s.Path, &filestore.Options{Logger: o.Logger, ReadOnly: o.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("storeurl: %s: %w", s, err)
	}
	return &Backend{Store: st, spec: s}, nil
}

func (s *Spec) openSQLite(ctx context.Context, o Options) (*Backend, error) {
	if o.ReadOnly {
		if _, err := os.Stat(s.Path); err != nil {
			return nil, fmt.Errorf("storeurl: %s: no database to read: %w", s, err)
		}
	} else if dir := filepath.Dir(s.Path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("storeurl: %s: %w", s, err)
		}
	}
	if !o.ReadOnly {
		if err := createPrivate(s.Path); err != nil {
			return nil, fmt.Errorf("storeurl: %s: %w", s, err)
		}
	}
	db, err := sql.Open("sqlite", s.sqliteDSN)
	if err != nil {
		return nil, fmt.Errorf("storeurl: %s: %w", s, err)
	}
	return s.openSQL(ctx, o, db, sqlstore.SQLite)
}

// createPrivate creates the empty file path, mode 0600, unless something is
// there already (O_EXCL: an existing file or link is left as it is). SQLite
// takes an empty file for a new database and gives its -wal and -shm files
// the database file's mode; left to itself it would create all three 0644.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// openSQL opens a sqlstore over db, pings and migrates; on failure it closes
// db.
func (s *Spec) openSQL(ctx context.Context, o Options, db *sql.DB, dialect sqlstore.Dialect) (*Backend, error) {
	db.SetMaxOpenConns(o.MaxOpenConns)
	st, err := sqlstore.Open(db, dialect, &sqlstore.Options{TablePrefix: s.Prefix, Logger: o.Logger})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("storeurl: %s: %w", s, err)
	}
	fail := func(err error) (*Backend, error) {
		st.Close()
		db.Close()
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	err = db.PingContext(pctx)
	cancel()
	if err != nil {
		if dialect == sqlstore.SQLite {
			return fail(fmt.Errorf("storeurl: %s: open database: %w", s, err))
		}
		return fail(fmt.Errorf("%w: %s: %w", ErrUnreachable, s, err))
	}
	if !o.ReadOnly {
		mctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
		err = st.Migrate(mctx)
		cancel()
		if err != nil {
			return fail(fmt.Errorf("storeurl: %s: %w", s, err))
		}
	}
	return &Backend{Store: st, DB: db, spec: s}, nil
}

func (s *Spec) openRedis(ctx context.Context, o Options) (*Backend, error) {
	// Each client gets its own copy: NewClient fills in defaults in place.
	opts := *s.redis
	client := redis.NewClient(&opts)
	st, err := redisstore.New(client, &redisstore.Options{Prefix: s.Prefix, Logger: o.Logger})
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("storeurl: %s: %w", s, err)
	}
	if err := s.pingRedis(ctx, o.ConnectTimeout); err != nil {
		st.Close()
		client.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, s, err)
	}
	return &Backend{Store: st, Redis: client, spec: s}, nil
}

// pingRedis pings through a client of its own whose timeouts are capped at
// timeout: go-redis bounds a new connection's handshake by its dial and read
// timeouts, not by the ctx of the command, and those timeouts must not change
// for the store's client.
func (s *Spec) pingRedis(ctx context.Context, timeout time.Duration) error {
	opts := *s.redis
	for _, d := range []*time.Duration{&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout} {
		if *d <= 0 || *d > timeout {
			*d = timeout
		}
	}
	opts.MaxRetries = -1
	opts.PoolSize = 1
	c := redis.NewClient(&opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.Ping(ctx).Err()
}
