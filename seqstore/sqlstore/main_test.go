package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backend is one database a test can run against.
type backend struct {
	name    string
	dialect Dialect
	// open returns a database and a fresh unique table prefix; the tables
	// under the prefix are dropped when the test ends.
	open func(t testing.TB) (*sql.DB, string)
}

func uniquePrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:]) + "_"
}

func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

func openSQLite(t testing.TB) (*sql.DB, string) {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(t.TempDir(), "store.db")))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { _ = db.Close() })
	return db, uniquePrefix()
}

// backends returns SQLite always, and PostgreSQL and MariaDB/MySQL when
// INORDER_TEST_POSTGRES_DSN / INORDER_TEST_MYSQL_DSN are set. With CI=true a
// missing variable or an unreachable server fails the test.
func backends(t testing.TB) []backend {
	t.Helper()
	bs := []backend{{name: "sqlite", dialect: SQLite, open: openSQLite}}
	for _, srv := range []struct {
		name, env, driver string
		dialect           Dialect
	}{
		{"postgres", "INORDER_TEST_POSTGRES_DSN", "pgx", Postgres},
		{"mysql", "INORDER_TEST_MYSQL_DSN", "mysql", MySQL},
	} {
		dsn := os.Getenv(srv.env)
		if dsn == "" {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but %s is not set: the %s tests are required in CI", srv.env, srv.name)
			}
			t.Logf("%s not set: %s tests skipped", srv.env, srv.name)
			continue
		}
		bs = append(bs, backend{name: srv.name, dialect: srv.dialect, open: func(t testing.TB) (*sql.DB, string) {
			return openServer(t, srv.driver, srv.env, dsn)
		}})
	}
	return bs
}

func openServer(t testing.TB, driver, env, dsn string) (*sql.DB, string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("%s: open: %v", env, err)
	}
	db.SetMaxOpenConns(8)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		t.Fatalf("%s is set but the server is unreachable: %v", env, err)
	}
	prefix := uniquePrefix()
	t.Cleanup(func() {
		defer func() { _ = db.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, tb := range append(tableNames, "app") {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+prefix+tb); err != nil {
				t.Errorf("cleanup: drop %s%s: %v", prefix, tb, err)
			}
		}
	})
	return db, prefix
}

// forEach runs f as a parallel subtest on every backend.
func forEach(t *testing.T, f func(t *testing.T, b backend, db *sql.DB, prefix string)) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db, p := b.open(t)
			f(t, b, db, p)
		})
	}
}

// newStore opens and migrates a store, closed when the test ends.
func newStore(t testing.TB, db *sql.DB, d Dialect, prefix string) *Store {
	t.Helper()
	s, err := Open(db, d, &Options{TablePrefix: prefix, Writers: benchWriters()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func envDSN(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	require.NotEmpty(t, v, env)
	return v
}

// benchWriters lets a benchmark run compare Options.Writers
// (BENCH_WRITERS=n); 0 means the default.
func benchWriters() int {
	n, _ := strconv.Atoi(os.Getenv("BENCH_WRITERS"))
	return n
}

// tableNames are the tables a prefix names, without it.
var tableNames = []string{"send", "journal", "cursor", "parked", "lease_ns", "lease", "member", "schema_version"}
