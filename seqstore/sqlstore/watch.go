package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inorder/inorder/internal/retry"
	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.LeaseWatcher = (*Store)(nil)

// Backoff of a watch whose connection was lost.
var listenBackoff = retry.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}

// errNotPgx is why a PostgreSQL store cannot watch: its *sql.DB's driver
// is not pgx, whose notification API WatchLeases uses.
var errNotPgx = fmt.Errorf("%w: WatchLeases on PostgreSQL needs the pgx driver (github.com/jackc/pgx/v5/stdlib)", seqstore.ErrNotSupported)

// wakeChannel is the NOTIFY channel of the store's namespaces (the payload
// names the namespace): the table prefix, an identifier of at most 31
// bytes, and a suffix, within PostgreSQL's 63.
func (s *Store) wakeChannel() string { return s.prefix + "lease_wake" }

// notify queues a wake-up of ns in tx. PostgreSQL delivers it when tx
// commits, so a listener never wakes before the change is visible, and
// drops it when tx rolls back. Other dialects cannot watch: nothing.
func (s *Store) notify(ctx context.Context, tx *sql.Tx, ns string) error {
	if s.dialect != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, "SELECT pg_notify($1, $2)", s.wakeChannel(), ns)
	return err
}

// minWatchPool is the smallest connection pool (sql.DB.SetMaxOpenConns)
// in which WatchLeases takes a connection.
const minWatchPool = 4

// WatchLeases implements seqstore.LeaseWatcher on PostgreSQL with
// LISTEN/NOTIFY: Release, Leave and a Heartbeat that changed the view run
// pg_notify in their transaction. A watch holds one connection of the
// *sql.DB for itself (count it in SetMaxOpenConns), taken with DB.Conn and
// used through Conn.Raw with pgx's native WaitForNotification; it returns
// once LISTEN ran. A lost connection is replaced (backoff up to 5 s) and
// the new LISTEN wakes, since notifications sent meanwhile are lost; the
// channel closes only when ctx ends or the store is closed, and Close waits
// for the watch's goroutine. On MySQL and SQLite, or on PostgreSQL through
// another driver than pgx, it returns an error wrapping
// seqstore.ErrNotSupported; on a pool capped below minWatchPool
// connections too, so that the watch never starves the store's calls.
func (s *Store) WatchLeases(ctx context.Context, ns string) (<-chan struct{}, error) {
	if err := seqstore.CheckLease(ns); err != nil {
		return nil, fmt.Errorf("sqlstore: watch leases: %w", err)
	}
	if err := s.leaseReady(ctx, "watch leases"); err != nil {
		return nil, err
	}
	if s.dialect != Postgres {
		return nil, fmt.Errorf("sqlstore: watch leases: %w: %v has no notifications; poll", seqstore.ErrNotSupported, s.dialect)
	}
	// A watch holds a connection for its life: a small pool is left to the
	// store's calls, and the caller polls.
	if max := s.db.Stats().MaxOpenConnections; max > 0 && max < minWatchPool {
		return nil, fmt.Errorf("sqlstore: watch leases: %w: the pool allows %d connections (SetMaxOpenConns), and a watch would hold one for good; poll", seqstore.ErrNotSupported, max)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("sqlstore: watch leases: %w", seqstore.ErrClosed)
	}
	s.watches.Add(1)
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel) // Close ends the watch
	out := make(chan struct{}, 1)
	ready := make(chan error, 1)
	go func() {
		defer s.watches.Done()
		defer stop()
		defer cancel()
		s.listen(ctx, ns, out, ready)
	}()
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("sqlstore: watch leases of %q: %w", ns, err)
	}
	return out, nil
}

// listen runs a watch: it reports the first LISTEN's outcome to ready, and
// then listens until ctx ends, again on a new connection after one is
// lost. It closes out when it returns (not after a failed first LISTEN,
// whose out nobody got).
func (s *Store) listen(ctx context.Context, ns string, out chan<- struct{}, ready chan<- error) {
	first := true
	failures := 0 // since the last LISTEN
	for {
		err := s.listenOnce(ctx, ns, out, func() {
			if first {
				first = false
				ready <- nil
			} else {
				seqstore.Wake(out) // what was sent while away is lost
			}
			failures = 0
		})
		if first {
			ready <- err
			return
		}
		if ctx.Err() != nil || errors.Is(err, errNotPgx) {
			close(out)
			return
		}
		failures++
		s.log.Warn("sqlstore: lease watch lost its connection; listening again", "ns", ns, "err", err)
		if retry.Sleep(ctx, listenBackoff.Delay(failures)) != nil {
			close(out)
			return
		}
	}
}

// listenOnce takes a connection, LISTENs on it, calls subscribed, and
// wakes out for each notification of ns until the connection fails or ctx
// ends. The connection is then discarded, never put back in the pool with
// its LISTEN.
func (s *Store) listenOnce(ctx context.Context, ns string, out chan<- struct{}, subscribed func()) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	return conn.Raw(func(dc any) error {
		raw, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return errNotPgx
		}
		pc := raw.Conn()
		if _, err := pc.Exec(ctx, `LISTEN "`+s.wakeChannel()+`"`); err != nil {
			return fmt.Errorf("%w: listen: %w", driver.ErrBadConn, err)
		}
		subscribed()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
			}
			if n.Channel == s.wakeChannel() && n.Payload == ns {
				seqstore.Wake(out)
			}
		}
	})
}
