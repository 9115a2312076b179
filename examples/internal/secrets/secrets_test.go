package secrets

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// secret is a password the programs are given and must never print.
type secret struct {
	raw  string
	core string // its random part: found in any encoding that keeps letters and digits
}

func newSecret(t *testing.T, before, after string) secret {
	core := randomHex(t, 8)
	return secret{raw: before + core + after, core: core}
}

// forms returns the ways s could show up in text: as given, escaped for a
// URL, in base64, and each half of its random part.
func (s secret) forms() []string {
	return []string{s.raw, url.QueryEscape(s.raw), url.PathEscape(s.raw),
		base64.StdEncoding.EncodeToString([]byte(s.raw)), s.core[:len(s.core)/2], s.core[len(s.core)/2:]}
}

// serverEnv returns env's value; without it the test is skipped, or fails
// with CI=true.
func serverEnv(t *testing.T, env string) string {
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required with CI=true", env)
		}
		t.Skipf("%s not set", env)
	}
	return v
}

// closedAddr returns a loopback address that refuses connections.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// A run is one run of an example program.
type run struct {
	name string   // the subtest
	prog string   // demo, send or receive
	args []string // its arguments
	env  []string // added to the common environment
	ok   bool     // it must exit 0; else it must fail
	want string   // a piece of its output that shows it got where the run is meant to go
	logs bool     // it must print at least one log line (level=...)
}

// TestNoSecretInOutput runs the example programs with known secrets and
// greps all they print for them.
func TestNoSecretInOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three programs")
	}
	bin := t.TempDir()
	build, err := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"../../demo", "../../send", "../../receive").CombinedOutput()
	require.NoError(t, err, "go build: %s", build)

	mnsSecret := newSecret(t, "mns", "")
	// Escaped differently in a URL's userinfo, path and query; written raw in
	// a URL, its '/' ends the authority, and url.Parse quotes what is before.
	dbSecret := newSecret(t, "db", "/x@y")
	// The header key of send and receive (INORDER_KEY), in every run.
	keySecret := newSecret(t, "inorder-key-", "")
	secrets := []secret{mnsSecret, dbSecret, keySecret}
	// Faults make the programs retry and log; the stores log their setup.
	srv, err := mnstest.NewServer(&mnstest.Options{
		AccessKeyID:     "inorder-leak-test",
		AccessKeySecret: mnsSecret.raw,
		// 3%: at 10% a receive answered 500 after taking messages, twice in a
		// row, kept seq 1 invisible past the program's 60 s (two visibility
		// timeouts): the test is about secrets in the output, not chaos.
		Faults: mnstest.Faults{Error5xx: 0.03, Redeliver: 0.1},
	})
	require.NoError(t, err)
	defer srv.Close()
	mr := miniredis.RunT(t)
	mr.RequireAuth(dbSecret.raw)

	env := append(os.Environ(), "INORDER_STORE=", "XDG_CACHE_HOME="+t.TempDir(),
		"MNS_ENDPOINT="+srv.Endpoint(), "MNS_ACCESS_KEY_ID=inorder-leak-test", "MNS_ACCESS_KEY_SECRET="+mnsSecret.raw,
		"INORDER_KEY="+keySecret.raw)
	wrongMNS := "MNS_ACCESS_KEY_SECRET=" + mnsSecret.raw + "-wrong"
	redisURL := (&url.URL{Scheme: "redis", User: url.UserPassword("", dbSecret.raw), Host: mr.Addr(), Path: "/0", RawQuery: "prefix=leak:"}).String()
	wrongRedis := (&url.URL{Scheme: "redis", User: url.UserPassword("", "wrong-"+dbSecret.raw), Host: mr.Addr(), Path: "/0"}).String()
	closed := closedAddr(t)

	runs := []run{
		{name: "send redis", prog: "send", args: []string{"-v", "-queue", "leak-redis", "-store", redisURL}, ok: true,
			want: "Finish send 20 messages", logs: true},
		{name: "receive redis", prog: "receive", args: []string{"-v", "-queue", "leak-redis", "-timeout", "1m"},
			env: []string{"INORDER_STORE=" + redisURL}, ok: true, want: "Finish receive 20 messages", logs: true},
		{name: "demo", prog: "demo", args: []string{"-v", "-queue", "leak-demo", "-messages", "300", "-groups", "5"}, ok: true,
			want: "in order: true"},

		{name: "send wrong MNS secret", prog: "send", args: []string{"-v", "-queue", "leak-wrong", "-store", redisURL},
			env: []string{wrongMNS}, want: "SignatureDoesNotMatch"},
		{name: "demo wrong MNS secret", prog: "demo", args: []string{"-v", "-queue", "leak-wrong"},
			env: []string{wrongMNS}, want: "SignatureDoesNotMatch"},
		{name: "libpq DSN", prog: "send", args: []string{"-store", "host=127.0.0.1 user=postgres password=" + dbSecret.raw + " dbname=test"},
			want: "key=value"},
		{name: "go-sql-driver DSN", prog: "receive", args: []string{"-store", "root:" + dbSecret.raw + "@tcp(127.0.0.1:3306)/test"},
			want: "unknown scheme"},
		{name: "malformed URL", prog: "send", args: []string{"-store", "postgres://u:" + dbSecret.raw + "@h/db"},
			want: "invalid port"},
		{name: "unreachable", prog: "send", args: []string{"-v", "-queue", "leak-unreachable",
			"-store", "postgres://u:" + url.QueryEscape(dbSecret.raw) + "@" + closed + "/db?sslmode=disable"},
			want: "unreachable"},
		{name: "wrong Redis password", prog: "receive", args: []string{"-v", "-queue", "leak-redis", "-store", wrongRedis},
			want: "WRONGPASS"},
		{name: "usage with INORDER_STORE", prog: "send", args: []string{"-h"}, env: []string{"INORDER_STORE=" + redisURL},
			ok: true, want: "-store"},
	}
	runs = append(runs, postgresRuns(t, dbSecret)...)
	runs = append(runs, mysqlRun(t, dbSecret))

	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, r.prog), r.args...)
			cmd.Env = append(env[:len(env):len(env)], r.env...)
			cmd.Dir = t.TempDir() // where a spec mistaken for a path would land
			out, err := cmd.CombinedOutput()
			text := string(out)
			var exit *exec.ExitError
			if r.ok {
				require.NoError(t, err, "%s should succeed; output:\n%s", r.prog, text)
			} else {
				require.True(t, errors.As(err, &exit), "%s should fail with an exit status, got %v; output:\n%s", r.prog, err, text)
			}
			assert.Contains(t, text, r.want, "the run should get where it is meant to; output:\n%s", text)
			if r.logs {
				assert.Contains(t, text, "level=", "-v should print log lines; output:\n%s", text)
			}
			for _, s := range secrets {
				for _, f := range s.forms() {
					assert.NotContains(t, text, f, "a secret leaked (as %q) in:\n%s", f, text)
				}
			}
		})
	}
}

// postgresRuns are send and receive sharing a PostgreSQL store given by a URL
// with a password: INORDER_TEST_POSTGRES_DSN's own, or dbSecret (CI's server
// trusts local connections and never asks for it).
func postgresRuns(t *testing.T, dbSecret secret) []run {
	dsn := serverEnv(t, "INORDER_TEST_POSTGRES_DSN")
	u, err := url.Parse(dsn)
	require.NoError(t, err, "INORDER_TEST_POSTGRES_DSN must be a postgres:// URL")
	if _, ok := u.User.Password(); !ok {
		u.User = url.UserPassword(u.User.Username(), dbSecret.raw)
	}
	prefix := "leak" + randomHex(t, 4) + "_"
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		require.NoError(t, err)
		defer db.Close()
		for _, tb := range []string{"send", "journal", "cursor", "parked", "lease_ns", "lease", "member", "schema_version"} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + prefix + tb); err != nil {
				t.Errorf("cleanup: drop %s%s: %v", prefix, tb, err)
			}
		}
	})
	q := u.Query()
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	spec := u.String()
	return []run{
		{name: "send postgres", prog: "send", args: []string{"-v", "-queue", "leak-pg", "-store", spec}, ok: true,
			want: "Finish send 20 messages", logs: true},
		{name: "receive postgres", prog: "receive", args: []string{"-v", "-queue", "leak-pg", "-timeout", "1m", "-store", spec}, ok: true,
			want: "Finish receive 20 messages", logs: true},
	}
}

// mysqlRun is a send to the MariaDB of INORDER_TEST_MYSQL_DSN with dbSecret
// as a wrong password.
func mysqlRun(t *testing.T, dbSecret secret) run {
	cfg, err := mysql.ParseDSN(serverEnv(t, "INORDER_TEST_MYSQL_DSN"))
	require.NoError(t, err, "INORDER_TEST_MYSQL_DSN")
	u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, dbSecret.raw), Host: cfg.Addr, Path: "/" + cfg.DBName}
	return run{name: "wrong MariaDB password", prog: "send", args: []string{"-v", "-queue", "leak-mysql", "-store", u.String()},
		want: "Access denied"}
}
