package storeurl

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/redisstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

func uniqueName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// serverEnv returns the value of env, skipping the test when it is unset,
// or failing it with CI=true.
func serverEnv(t *testing.T, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not set: the real-server tests are required in CI", env)
		}
		t.Skipf("%s not set", env)
	}
	return v
}

// redisSpec returns a redis:// spec for the Redis at INORDER_TEST_REDIS_ADDR
// with a unique prefix whose keys are deleted when the test ends.
func redisSpec(t *testing.T) string {
	addr := serverEnv(t, "INORDER_TEST_REDIS_ADDR")
	prefix := "inordertest:" + uniqueName() + ":"
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		keys, err := c.Keys(ctx, prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = c.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("cleanup of %s*: %v", prefix, err)
		}
	})
	return "redis://" + addr + "/0?prefix=" + url.QueryEscape(prefix)
}

// dropTables drops the store's tables under prefix when the test ends.
func dropTables(t testing.TB, driverName, dsn, prefix string) {
	t.Cleanup(func() {
		db, err := sql.Open(driverName, dsn)
		require.NoError(t, err)
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, tb := range []string{"send", "journal", "cursor", "parked", "lease_ns", "lease", "member", "schema_version"} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+prefix+tb); err != nil {
				t.Errorf("cleanup: drop %s%s: %v", prefix, tb, err)
			}
		}
	})
}

// postgresSpec returns the URL of INORDER_TEST_POSTGRES_DSN with a unique
// table prefix.
func postgresSpec(t *testing.T) string {
	dsn := serverEnv(t, "INORDER_TEST_POSTGRES_DSN")
	u, err := url.Parse(dsn)
	require.NoError(t, err, "INORDER_TEST_POSTGRES_DSN must be a postgres:// URL")
	require.Contains(t, []string{"postgres", "postgresql"}, u.Scheme, "INORDER_TEST_POSTGRES_DSN must be a postgres:// URL")
	prefix := uniqueName() + "_"
	dropTables(t, "pgx", dsn, prefix)
	q := u.Query()
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	return u.String()
}

// mysqlURL converts a go-sql-driver DSN such as root@tcp(127.0.0.1:3306)/test
// to a mysql:// URL; it keeps the user, password, address, database and
// system variables.
func mysqlURL(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err, "INORDER_TEST_MYSQL_DSN")
	require.Equal(t, "tcp", cfg.Net, "INORDER_TEST_MYSQL_DSN must use tcp(host:port)")
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	switch {
	case cfg.Passwd != "":
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	case cfg.User != "":
		u.User = url.User(cfg.User)
	}
	q := url.Values{}
	for k, v := range cfg.Params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func TestMySQLURL(t *testing.T) {
	assert.Equal(t, "mysql://root@127.0.0.1:3306/test", mysqlURL(t, "root@tcp(127.0.0.1:3306)/test"))
	assert.Equal(t, "mysql://u:p%40w@h:1/db?sql_mode=ANSI", mysqlURL(t, "u:p@w@tcp(h:1)/db?sql_mode=ANSI"))
}

// mysqlSpec returns INORDER_TEST_MYSQL_DSN as a mysql:// URL with a unique
// table prefix.
func mysqlSpec(t *testing.T) string {
	dsn := serverEnv(t, "INORDER_TEST_MYSQL_DSN")
	prefix := uniqueName() + "_"
	dropTables(t, "mysql", dsn, prefix)
	u := mysqlURL(t, dsn)
	if strings.Contains(u, "?") {
		return u + "&prefix=" + prefix
	}
	return u + "?prefix=" + prefix
}

func miniredisSpec(t *testing.T) string {
	mr := miniredis.RunT(t)
	return "redis://" + mr.Addr() + "/0?prefix=app:"
}

// closedAddr returns a loopback address on which nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestRoundTrip opens each kind of store from a spec, reserves with a
// journal, marks sent, advances a cursor, closes, reopens (migrating again)
// and finds the state kept.
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		spec func(t *testing.T) string
		kind Kind
		want any // the concrete store type
	}{
		{"file", func(t *testing.T) string { return "file:" + filepath.Join(t.TempDir(), "state") }, File, &filestore.Store{}},
		{"bare path", func(t *testing.T) string { return filepath.Join(t.TempDir(), "state") }, File, &filestore.Store{}},
		{"sqlite", func(t *testing.T) string {
			return "sqlite:" + filepath.Join(t.TempDir(), "new-dir", "store.db") + "?prefix=app_"
		}, SQLite, &sqlstore.Store{}},
		{"miniredis", miniredisSpec, Redis, &redisstore.Store{}},
		{"redis", redisSpec, Redis, &redisstore.Store{}},
		{"postgres", postgresSpec, Postgres, &sqlstore.Store{}},
		{"mysql", mysqlSpec, MySQL, &sqlstore.Store{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := tt.spec(t)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			st := seqstore.Stream{Queue: "q-" + uniqueName(), Group: "g"}

			b, err := Open(ctx, spec, nil)
			require.NoError(t, err, "Open(%s)", spec)
			assert.Equal(t, tt.kind, b.Kind())
			assert.IsType(t, tt.want, b.Store)
			assert.Equal(t, tt.kind == SQLite || tt.kind == Postgres || tt.kind == MySQL, b.DB != nil, "DB set for SQL stores only")
			assert.Equal(t, tt.kind == Redis, b.Redis != nil, "Redis set for Redis stores only")

			rs, err := b.Store.Reserve(ctx, []seqstore.ReserveRequest{{Stream: st, N: 2, Journal: [][]byte{[]byte("a"), []byte("b")}}})
			require.NoError(t, err, "Reserve")
			r := rs[0]
			assert.Equal(t, uint64(1), r.First, "first seq of a new stream")
			pending, err := b.Store.Pending(ctx, st.Queue)
			require.NoError(t, err, "Pending")
			require.Len(t, pending, 2, "journal entries pending")
			assert.Equal(t, []byte("b"), pending[1].Body)
			require.NoError(t, b.Store.Sent(ctx, []seqstore.SentMark{{Stream: st, Seqs: []uint64{1, 2}}}), "Sent")
			to := seqstore.Cursor{Epoch: r.Epoch, Next: 3}
			require.NoError(t, b.Store.Advance(ctx, []seqstore.Advance{{Stream: st, To: to}}), "Advance")

			require.NoError(t, b.Close(), "Close")
			assert.NoError(t, b.Close(), "a second Close")
			if b.DB != nil {
				assert.ErrorContains(t, b.DB.PingContext(ctx), "database is closed", "Close must close the *sql.DB")
			}
			if b.Redis != nil {
				assert.ErrorIs(t, b.Redis.Ping(ctx).Err(), redis.ErrClosed, "Close must close the Redis client")
			}

			b, err = Open(ctx, spec, nil)
			require.NoError(t, err, "reopen (migrates again)")
			defer func() { assert.NoError(t, b.Close(), "Close after reopen") }()
			cs, err := b.Store.Cursors(ctx, []seqstore.Stream{st})
			require.NoError(t, err, "Cursors")
			c := cs[0]
			assert.True(t, c.Same(to), "cursor after reopen: want %+v, got %+v", to, c)
			pending, err = b.Store.Pending(ctx, st.Queue)
			require.NoError(t, err, "Pending")
			assert.Empty(t, pending, "entries marked sent must stay sent")
			r2, err := b.Store.Reserve(ctx, []seqstore.ReserveRequest{{Stream: st, N: 1}})
			require.NoError(t, err, "Reserve after reopen")
			assert.Equal(t, []seqstore.Reservation{{Epoch: r.Epoch, First: 3}}, r2, "the counter continues")
		})
	}
}

// TestSQLiteFilesPrivate checks that a SQLite database created through Open
// is mode 0600, and so are its -wal and -shm files (they hold message bodies),
// in a directory created 0700.
func TestSQLiteFilesPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix file modes")
	}
	dir := filepath.Join(t.TempDir(), "new-dir")
	path := filepath.Join(dir, "store.db")
	b, err := Open(t.Context(), "sqlite:"+path, nil)
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Store.Reserve(t.Context(), []seqstore.ReserveRequest{{Stream: seqstore.Stream{Queue: "q"}, N: 1, Journal: [][]byte{[]byte("body")}}})
	require.NoError(t, err, "Reserve, so that the -wal and -shm files exist")
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "%s should be 0600, got %v", p, info.Mode().Perm())
	}
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "the directory should be created 0700, got %v", info.Mode().Perm())
}

func TestOpenPrefix(t *testing.T) {
	ctx := t.Context()
	mr := miniredis.RunT(t)
	b, err := Open(ctx, "redis://"+mr.Addr()+"/0?prefix=myapp:", nil)
	require.NoError(t, err)
	st := seqstore.Stream{Queue: "q"}
	_, err = b.Store.Reserve(ctx, []seqstore.ReserveRequest{{Stream: st, N: 1}})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	keys := mr.Keys()
	require.NotEmpty(t, keys, "Reserve should have written keys")
	for _, k := range keys {
		assert.True(t, strings.HasPrefix(k, "myapp:"), "key %q should start with the prefix", k)
	}

	path := filepath.Join(t.TempDir(), "s.db")
	b, err = Open(ctx, "sqlite:"+path+"?prefix=myapp_", nil)
	require.NoError(t, err)
	var n int
	require.NoError(t, b.DB.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'myapp!_%' ESCAPE '!'").Scan(&n))
	assert.Equal(t, 8, n, "tables under the prefix: send, journal, cursor, parked, lease_ns, lease, member, schema_version")
	var mode string
	require.NoError(t, b.DB.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	assert.Equal(t, "wal", mode, "sqlite opened in WAL mode")
	var busy int
	require.NoError(t, b.DB.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy))
	assert.Equal(t, 10000, busy, "sqlite busy_timeout")
	require.NoError(t, b.Close())
}

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	addr := closedAddr(t)
	short := &Options{ConnectTimeout: 3 * time.Second}

	t.Run("unreachable", func(t *testing.T) {
		for _, spec := range []string{
			"redis://u:" + secret + "@" + addr + "/0",
			"postgres://u:" + secret + "@" + addr + "/db?sslmode=disable",
			"mysql://u:" + secret + "@" + addr + "/db",
		} {
			start := time.Now()
			b, err := Open(ctx, spec, short)
			require.Error(t, err, "Open(%s) should fail, got %v", spec, b)
			assert.ErrorIs(t, err, ErrUnreachable, "Open(%s)", spec)
			assert.Less(t, time.Since(start), 10*time.Second, "a refused connection should fail fast")
			assertRedacted(t, err.Error())
			assert.Contains(t, err.Error(), addr, "the message should say where")
		}
	})
	t.Run("ctx deadline", func(t *testing.T) {
		// A listener that accepts and never answers: the ping must give up
		// at ConnectTimeout.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				conns = append(conns, c)
			}
		}()
		for _, spec := range []string{
			"redis://" + l.Addr().String() + "/0",
			"postgres://u@" + l.Addr().String() + "/db?sslmode=disable",
			"mysql://u@" + l.Addr().String() + "/db",
		} {
			start := time.Now()
			_, err = Open(ctx, spec, &Options{ConnectTimeout: 300 * time.Millisecond})
			assert.ErrorIs(t, err, ErrUnreachable, "Open(%s)", spec)
			assert.Less(t, time.Since(start), 2*time.Second, "ConnectTimeout should bound the ping of %s", spec)
		}
		l.Close()
		<-done
	})
	t.Run("wrong password", func(t *testing.T) {
		mr := miniredis.RunT(t)
		mr.RequireAuth("right-password")
		_, err := Open(ctx, "redis://:"+secret+"@"+mr.Addr()+"/0", short)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrUnreachable)
		assertRedacted(t, err.Error())
		assert.Contains(t, err.Error(), "WRONGPASS", "the server's answer should come through: %v", err)
	})
	t.Run("right password", func(t *testing.T) {
		mr := miniredis.RunT(t)
		mr.RequireAuth(secret)
		b, err := Open(ctx, "redis://:"+secret+"@"+mr.Addr()+"/0", short)
		require.NoError(t, err, "the right password should be accepted")
		defer b.Close()
		for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
			assertRedacted(t, fmt.Sprintf(f, b))
		}
		assert.Equal(t, "redis://:xxxxx@"+mr.Addr()+"/0", b.String())
	})
	t.Run("sqlite cannot create", func(t *testing.T) {
		_, err := Open(ctx, "sqlite:"+filepath.Join(notDir, "x.db"), short)
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrUnreachable, "a local file is not a server")
		assert.Contains(t, err.Error(), notDir)
	})
	t.Run("file locked", func(t *testing.T) {
		spec := "file:" + filepath.Join(dir, "locked")
		b, err := Open(ctx, spec, nil)
		require.NoError(t, err)
		defer b.Close()
		_, err = Open(ctx, spec, nil)
		assert.ErrorIs(t, err, seqstore.ErrLocked)
	})
	t.Run("bad prefix", func(t *testing.T) {
		_, err := Open(ctx, "sqlite:"+filepath.Join(dir, "p.db")+"?prefix=bad-prefix", nil)
		assert.ErrorContains(t, err, "prefix", "sqlstore rejects the prefix")
		_, err = Open(ctx, "redis://"+addr+"/0?prefix=a{b}", nil)
		assert.ErrorContains(t, err, "prefix", "redisstore rejects the prefix before connecting")
		assert.NotErrorIs(t, err, ErrUnreachable, "the prefix is checked before the ping")
	})
	t.Run("options", func(t *testing.T) {
		_, err := Open(ctx, "file:"+filepath.Join(dir, "o"), &Options{MaxOpenConns: -1})
		assert.ErrorContains(t, err, "negative option")
		_, err = (&Spec{}).Open(ctx, nil)
		assert.ErrorIs(t, err, ErrInvalidSpec, "a Spec not made by Parse")
	})
}

// TestWrongPasswordRealServers checks that the real servers' answers to a
// wrong password pass through without the password.
func TestWrongPasswordRealServers(t *testing.T) {
	short := &Options{ConnectTimeout: 5 * time.Second}
	t.Run("redis", func(t *testing.T) {
		addr := serverEnv(t, "INORDER_TEST_REDIS_ADDR")
		_, err := Open(t.Context(), "redis://someone:"+secret+"@"+addr+"/0", short)
		require.Error(t, err, "AUTH with an unknown user should fail")
		assertRedacted(t, err.Error())
	})
	t.Run("mysql", func(t *testing.T) {
		cfg, err := mysql.ParseDSN(serverEnv(t, "INORDER_TEST_MYSQL_DSN"))
		require.NoError(t, err)
		cfg.Passwd = secret + "-wrong"
		u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}
		_, err = Open(t.Context(), u.String(), short)
		require.Error(t, err, "a wrong password should be refused")
		assertRedacted(t, err.Error())
		assert.Contains(t, err.Error(), "Access denied", "the server's answer should come through")
	})
}

// TestOpenReadOnly: with ReadOnly, Open creates nothing (no directory, no
// database file, no table) and a file store refuses writes.
func TestOpenReadOnly(t *testing.T) {
	ctx := t.Context()
	ro := &Options{ReadOnly: true}
	dir := filepath.Join(t.TempDir(), "state")
	_, err := Open(ctx, "file:"+dir, ro)
	require.Error(t, err, "a missing file store")
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "the directory was created")

	b, err := Open(ctx, "file:"+dir, nil)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	b, err = Open(ctx, "file:"+dir, ro)
	require.NoError(t, err)
	_, err = b.Store.Reserve(ctx, []seqstore.ReserveRequest{{Stream: seqstore.Stream{Queue: "q"}, N: 1}})
	assert.ErrorIs(t, err, filestore.ErrReadOnly)
	require.NoError(t, b.Close())

	db := filepath.Join(t.TempDir(), "s.db")
	_, err = Open(ctx, "sqlite:"+db, ro)
	require.Error(t, err, "a missing SQLite file")
	assert.Contains(t, err.Error(), "no database to read")
	_, err = os.Stat(db)
	assert.ErrorIs(t, err, os.ErrNotExist, "the database file was created")

	require.NoError(t, os.WriteFile(db, nil, 0o600))
	b, err = Open(ctx, "sqlite:"+db, ro)
	require.NoError(t, err, "an empty SQLite file opens read-only")
	var tables int
	require.NoError(t, b.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").Scan(&tables))
	assert.Zero(t, tables, "no table created: read-only does not migrate")
	_, err = b.Store.Pending(ctx, "q")
	assert.Error(t, err, "a read without tables fails")
	require.NoError(t, b.Close())
}
