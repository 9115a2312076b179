package crashtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/redisstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

// serverVar returns the environment variable that points the tests at a
// server. Unset, it fails the test with CI=true (CI has every server) and
// skips it otherwise.
func serverVar(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required with CI=true", name)
		}
		t.Skipf("%s not set", name)
	}
	return v
}

// redisAddr returns the Redis the tests use: the real one at
// INORDER_TEST_REDIS_ADDR, or outside CI a miniredis started for the test.
func redisAddr(t *testing.T) string {
	t.Helper()
	if os.Getenv("INORDER_TEST_REDIS_ADDR") == "" && os.Getenv("CI") != "true" {
		return miniredis.RunT(t).Addr()
	}
	return serverVar(t, "INORDER_TEST_REDIS_ADDR")
}

// uniqueName returns a name no other test run uses: servers are shared.
func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// redisStores returns a function that opens a redisstore on the Redis at
// addr, a new client each call, all under one key prefix unique to the
// test. direct is the server's own address (addr may be a proxy in front of
// it): the keys under the prefix are deleted through it when the test ends.
// The clients fail fast, so that an outage shows as errors, not hangs.
func redisStores(t *testing.T, addr, direct string) func() seqstore.Store {
	prefix := redisPrefix(t, direct)
	return func() seqstore.Store {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
			ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
		require.NoError(t, err, "redisstore.New")
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// redisPrefix returns a key prefix unique to the test; the keys under it
// are deleted through direct when the test ends.
func redisPrefix(t *testing.T, direct string) string {
	prefix := uniqueName("crashtest:") + ":"
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: direct})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				t.Errorf("cleanup: delete %s: %v", iter.Val(), err)
			}
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleanup: scan %s*: %v", prefix, err)
		}
	})
	return prefix
}

// postgresStores returns a function that opens a sqlstore on the PostgreSQL
// database of dsn, a new *sql.DB each call (as separate processes would),
// all on tables under one prefix unique to the test, dropped when the test
// ends through directDSN (dsn may go through a proxy).
func postgresStores(t *testing.T, dsn, directDSN string) func() seqstore.Store {
	prefix := postgresPrefix(t, directDSN)
	return func() seqstore.Store {
		db, err := sql.Open("pgx", dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		db.SetConnMaxLifetime(time.Second)
		s, err := sqlstore.Open(db, sqlstore.Postgres, &sqlstore.Options{TablePrefix: prefix, TxTimeout: 2 * time.Second})
		require.NoError(t, err, "sqlstore.Open")
		require.NoError(t, s.Migrate(t.Context()), "Migrate")
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// postgresPrefix returns a table prefix unique to the test; its tables
// are dropped through directDSN when the test ends.
func postgresPrefix(t *testing.T, directDSN string) string {
	prefix := uniqueName("ct") + "_"
	t.Cleanup(func() {
		db, err := sql.Open("pgx", directDSN)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, tbl := range []string{"send", "journal", "cursor", "parked", "lease_ns", "lease", "member", "schema_version"} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+prefix+tbl); err != nil {
				t.Errorf("cleanup: drop %s%s: %v", prefix, tbl, err)
			}
		}
	})
	return prefix
}
