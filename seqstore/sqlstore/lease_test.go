package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// TestLeaser runs the lease section on SQLite and, when configured, on
// PostgreSQL and MariaDB/MySQL, on the databases' clocks (the suite
// sleeps); each subtest gets its own table prefix, and several Stores over
// one *sql.DB race as several processes would.
func TestLeaser(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.RunLeaser(t, storetest.LeaseHarness{Persistent: true, Shared: true, Watches: b.dialect == Postgres,
				Open: func(t *testing.T) (func(t *testing.T) seqstore.Store, storetest.Clock) {
					db, prefix := b.open(t)
					newStore(t, db, b.dialect, prefix).Close() // migrate once
					return func(t *testing.T) seqstore.Store {
						s, err := Open(db, b.dialect, &Options{TablePrefix: prefix})
						if err != nil {
							t.Fatalf("Open: %v", err)
						}
						return s
					}, nil
				}})
		})
	}
}

// TestLeaserSQLiteClock runs the lease section on SQLite databases whose
// clock the test drives: each database's driver replaces julianday with a
// fake clock, so that leases expire without sleeping, and so that a lease
// whose expiry came from the Go clock instead of the database's would not
// expire when the suite says.
func TestLeaserSQLiteClock(t *testing.T) {
	storetest.RunLeaser(t, storetest.LeaseHarness{Persistent: true, Shared: true,
		Open: func(t *testing.T) (func(t *testing.T) seqstore.Store, storetest.Clock) {
			db, clock := openSQLiteClock(t)
			prefix := uniquePrefix()
			newStore(t, db, SQLite, prefix).Close() // migrate once
			return func(t *testing.T) seqstore.Store {
				s, err := Open(db, SQLite, &Options{TablePrefix: prefix})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s
			}, clock
		}})
}

var clockDrivers atomic.Int64

// openSQLiteClock opens a fresh SQLite database whose julianday('now') is
// a fake clock, an hour ahead of the real one, that only the returned
// Clock moves.
func openSQLiteClock(t *testing.T) (*sql.DB, storetest.Clock) {
	t.Helper()
	var mu sync.Mutex
	now := time.Now().Add(time.Hour)
	drv := &sqlite.Driver{}
	drv.MustRegisterScalarFunction("julianday", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if s, ok := args[0].(string); !ok || s != "now" {
			return nil, fmt.Errorf("fake julianday: only 'now', got %v", args[0])
		}
		mu.Lock()
		defer mu.Unlock()
		return float64(now.UnixMicro())/86400e6 + 2440587.5, nil
	})
	name := fmt.Sprintf("sqlite-clock-%d", clockDrivers.Add(1))
	sql.Register(name, drv)
	db, err := sql.Open(name, sqliteDSN(filepath.Join(t.TempDir(), "store.db")))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { _ = db.Close() })
	return db, func(_ *testing.T, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
}

// TestAcquireMySQLClientFoundRows: with clientFoundRows=true in the DSN,
// MySQL counts a row an upsert found (not changed) as affected: Acquire must
// not take a shard whose live lease its INSERT ... ON DUPLICATE KEY UPDATE
// found (a review's finding; it granted the live lease a second time).
func TestAcquireMySQLClientFoundRows(t *testing.T) {
	dsn := os.Getenv("INORDER_TEST_MYSQL_DSN")
	if dsn == "" {
		t.Skip("INORDER_TEST_MYSQL_DSN not set")
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db, prefix := openServer(t, "mysql", "INORDER_TEST_MYSQL_DSN", dsn+sep+"clientFoundRows=true")
	st := newStore(t, db, MySQL, prefix)
	ctx := context.Background()
	got, err := st.Acquire(ctx, "orders", []int{0}, "a#1", time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("first acquire: %v %v", got, err)
	}
	got, err = st.Acquire(ctx, "orders", []int{0}, "b#1", time.Minute)
	if err != nil {
		t.Fatalf("second acquire: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("shard 0's live lease of a#1 was granted to b#1 too: %v", got)
	}
}
