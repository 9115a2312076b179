package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("INORDER_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but INORDER_TEST_POSTGRES_DSN is not set")
		}
		t.Skip("INORDER_TEST_POSTGRES_DSN not set")
	}
	return dsn
}

func awaitWake(t *testing.T, ch <-chan struct{}, within time.Duration, after string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		require.True(t, ok, "the watch channel closed instead of waking after %s", after)
	case <-time.After(within):
		require.Fail(t, "no wake-up", "no wake-up within %v after %s", within, after)
	}
}

// TestWatchReconnect: when the server ends the listening connection
// (pg_terminate_backend), the watch listens again on a new one and wakes
// (what was sent meanwhile is lost), and the next Release wakes it again.
func TestWatchReconnect(t *testing.T) {
	db, prefix := openServer(t, "pgx", "INORDER_TEST_POSTGRES_DSN", postgresDSN(t))
	w, x := newStore(t, db, Postgres, prefix), newStore(t, db, Postgres, prefix)
	ch, err := w.WatchLeases(t.Context(), "ns")
	require.NoError(t, err)
	var killed int
	err = db.QueryRowContext(t.Context(), "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1",
		`LISTEN "`+w.wakeChannel()+`"`).Scan(&killed)
	require.NoError(t, err)
	require.Equal(t, 1, killed, "the listening backend")
	awaitWake(t, ch, 10*time.Second, "the listening connection was terminated")
	for len(ch) > 0 {
		<-ch
	}
	require.Eventually(t, func() bool {
		held, err := x.Acquire(t.Context(), "ns", []int{0}, "x-1", time.Minute)
		if err != nil || len(held) != 1 || x.Release(t.Context(), "ns", held) != nil {
			return false
		}
		select {
		case _, ok := <-ch:
			return ok
		case <-time.After(time.Second):
			return false
		}
	}, 10*time.Second, 10*time.Millisecond, "no wake-up after a Release once listening again")
}

// TestWatchAfterCommit: the wake-up of a Release goes out at its COMMIT,
// not before: with 300 ms between the Release's statements and its COMMIT,
// the watcher wakes only once the released shard reads free. A NOTIFY sent
// before the COMMIT (outside the transaction) would wake it while the
// lease still reads held, and the woken member would find nothing to
// acquire until its next heartbeat.
func TestWatchAfterCommit(t *testing.T) {
	db, prefix := openServer(t, "pgx", "INORDER_TEST_POSTGRES_DSN", postgresDSN(t))
	w, x := newStore(t, db, Postgres, prefix), newStore(t, db, Postgres, prefix)
	ch, err := w.WatchLeases(t.Context(), "ns")
	require.NoError(t, err)
	held, err := x.Acquire(t.Context(), "ns", []int{0}, "x-1", time.Minute)
	require.NoError(t, err)
	x.beforeLeaseCommit = func() { time.Sleep(300 * time.Millisecond) }
	done := make(chan error, 1)
	go func() { done <- x.Release(context.WithoutCancel(t.Context()), "ns", held) }()
	awaitWake(t, ch, 5*time.Second, "a Release")
	live, err := w.Leases(t.Context(), "ns")
	require.NoError(t, err)
	assert.Empty(t, live, "woken before the Release committed")
	require.NoError(t, <-done)
}

// TestWatchNotPgx: PostgreSQL through a driver other than pgx cannot
// watch: ErrNotSupported, and the connection is left usable.
func TestWatchNotPgx(t *testing.T) {
	dsn := postgresDSN(t)
	sql.Register("pgx-wrapped-"+t.Name(), wrappedDriver{stdlib.GetDefaultDriver()})
	db, err := sql.Open("pgx-wrapped-"+t.Name(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s, err := Open(db, Postgres, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.WatchLeases(t.Context(), "ns")
	assert.ErrorIs(t, err, seqstore.ErrNotSupported)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	assert.NoError(t, db.PingContext(ctx))
}

// wrappedDriver hides pgx's connection type behind database/sql's plain
// interfaces, as another PostgreSQL driver would.
type wrappedDriver struct{ d driver.Driver }

func (w wrappedDriver) Open(name string) (driver.Conn, error) {
	c, err := w.d.Open(name)
	if err != nil {
		return nil, err
	}
	return wrappedConn{c}, nil
}

type wrappedConn struct{ driver.Conn }
