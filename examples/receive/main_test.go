package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

func TestMain(m *testing.M) {
	// The MNS driver TestSendReceiveProcesses plants a body with: fasthttp's
	// per-host connection cleaners sleep for the idle-connection period
	// after the last connection closed before they exit.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	)
}

// TestSendReceiveProcesses builds commands send and receive and runs them as
// separate processes against an emulator, three times: each run of receive
// prints the 20 messages of the run of send before it, in order, and the queue
// is empty after each round without faults. The second round runs with redeliveries and 5xx answers,
// whose stray copies the third round, without faults, must drop. Then the
// legacy header, and then -store with SQLite and Redis.
func TestSendReceiveProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	bin := t.TempDir()
	// One go build links both programs in parallel.
	build, err := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "../send", "../receive").CombinedOutput()
	require.NoError(t, err, "go build: %s", build)
	srv, err := mnstest.NewServer(nil)
	require.NoError(t, err)
	defer srv.Close()
	state := t.TempDir()
	env := append(os.Environ(), "INORDER_STORE=", "MNS_ENDPOINT="+srv.Endpoint(), "MNS_ACCESS_KEY_ID="+srv.AccessKeyID(),
		"MNS_ACCESS_KEY_SECRET="+srv.AccessKeySecret(), "MNS_QUEUE=sample")
	runCmdEnv := func(extraEnv []string, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Env = append(env[:len(env):len(env)], extraEnv...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s: stderr: %s", name, stderr.String())
		return string(out)
	}
	runCmd := func(name string, args ...string) string {
		t.Helper()
		return runCmdEnv(nil, name, args...)
	}
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&want, "receive message body is %d\n", i)
	}
	want.WriteString("Finish receive 20 messages\n")

	faults := mnstest.Faults{Redeliver: 0.2, Error5xx: 0.05}
	for round := 1; round <= 3; round++ {
		if round == 2 {
			require.NoError(t, srv.SetFaults(faults))
		}
		out := runCmd("send", "-store", filepath.Join(state, "send"))
		assert.Contains(t, out, fmt.Sprintf("send message body is 20 (seq %d)", 20*round), "round %d: send output", round)
		out = runCmd("receive", "-store", filepath.Join(state, "receive"))
		assert.Equal(t, want.String(), out, "round %d: receive output", round)
		if round == 2 {
			// A receive whose answer a fault lost (or a send stored
			// twice) leaves copies hidden for the visibility timeout that
			// this receiver never saw. Bring them back; the next round,
			// without faults, must drop them as duplicates.
			require.NoError(t, srv.SetFaults(mnstest.Faults{}))
			srv.Advance(time.Minute)
			continue
		}
		info, err := srv.Queue("sample")
		require.NoError(t, err)
		assert.Zero(t, info.Active+info.Inactive+info.Delayed, "round %d: messages left in the queue: %+v", round, info)
	}

	// The sample's own header, on a fresh queue and stores, with faults.
	require.NoError(t, srv.SetFaults(faults))
	out := runCmd("send", "-legacy", "-queue", "legacy", "-store", filepath.Join(state, "legacy-send"))
	assert.Contains(t, out, "send message body is 20 (seq 20)", "legacy send output")
	out = runCmd("receive", "-queue", "legacy", "-store", filepath.Join(state, "legacy-receive"))
	assert.Equal(t, want.String(), out, "legacy receive output")

	// Signed headers (INORDER_KEY on both), with an unsigned body planted in
	// the queue: receive prints the 20 signed messages only, and leaves the
	// planted one in the queue.
	key := []string{"INORDER_KEY=" + rand.Text()}
	out = runCmdEnv(key, "send", "-queue", "signed", "-store", filepath.Join(state, "signed-send"))
	assert.Contains(t, out, "send message body is 20 (seq 20)", "signed send output")
	plant, err := mnsqueue.New(t.Context(), srv.Endpoint(), "signed",
		mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}, nil)
	require.NoError(t, err)
	require.NoError(t, plant.SendBatch(t.Context(), [][]byte{[]byte("planted")}))
	require.NoError(t, plant.Close())
	out = runCmdEnv(key, "receive", "-queue", "signed", "-store", filepath.Join(state, "signed-receive"))
	assert.Equal(t, want.String(), out, "signed receive output: the unsigned body is not handed out")
	info, err := srv.Queue("signed")
	require.NoError(t, err)
	assert.Equal(t, 1, info.Active+info.Inactive, "the unsigned body stays in the queue: %+v", info)

	// Server and SQL stores, each shared by send and receive and used twice,
	// so the second send continues the first's counter: one SQLite file
	// named by -store, one Redis (miniredis) named by INORDER_STORE. No
	// faults: these rounds are about the stores, and a receive whose answer
	// a fault lost hides its messages for the visibility timeout.
	// PostgreSQL and MariaDB too when their test servers are configured
	// (optional here, required with CI=true).
	require.NoError(t, srv.SetFaults(mnstest.Faults{}))
	mr := miniredis.RunT(t)
	type storeRound struct {
		queue string
		env   []string
		args  []string
	}
	rounds := []storeRound{
		{"sqlite", nil, []string{"-store", "sqlite:" + filepath.Join(state, "sqlite", "both.db") + "?prefix=ex_"}},
		{"redis", []string{"INORDER_STORE=redis://" + mr.Addr() + "/0?prefix=ex:"}, nil},
	}
	if spec := sqlServerSpec(t, "pgx", "INORDER_TEST_POSTGRES_DSN"); spec != "" {
		rounds = append(rounds, storeRound{"postgres", nil, []string{"-store", spec}})
	}
	if spec := sqlServerSpec(t, "mysql", "INORDER_TEST_MYSQL_DSN"); spec != "" {
		rounds = append(rounds, storeRound{"mysql", nil, []string{"-store", spec}})
	}
	for _, st := range rounds {
		t.Logf("store round %s", st.queue)
		for round := 1; round <= 2; round++ {
			out := runCmdEnv(st.env, "send", append([]string{"-queue", st.queue}, st.args...)...)
			assert.Contains(t, out, fmt.Sprintf("send message body is 20 (seq %d)", 20*round), "%s round %d: send output", st.queue, round)
			out = runCmdEnv(st.env, "receive", append([]string{"-queue", st.queue}, st.args...)...)
			assert.Equal(t, want.String(), out, "%s round %d: receive output", st.queue, round)
			info, err := srv.Queue(st.queue)
			require.NoError(t, err)
			assert.Zero(t, info.Active+info.Inactive+info.Delayed, "%s round %d: messages left in the queue: %+v", st.queue, round, info)
		}
	}
	keys := mr.Keys()
	require.NotEmpty(t, keys, "the Redis store should hold the state")
	for _, k := range keys {
		assert.True(t, strings.HasPrefix(k, "ex:"), "Redis key %q should start with the prefix ex:", k)
	}
	_, err = os.Stat(filepath.Join(state, "sqlite", "both.db"))
	assert.NoError(t, err, "the SQLite store should be in its file")
}

// sqlServerSpec returns a -store spec for the SQL server in env (a postgres://
// URL, or a go-sql-driver DSN for MySQL) with a unique table prefix whose
// tables are dropped when the test ends, or "" when env is not set. With
// CI=true, where every server is configured, an unset env fails the test.
func sqlServerSpec(t *testing.T, driverName, env string) string {
	dsn := os.Getenv(env)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required with CI=true: the %s round would not run", env, driverName)
		}
		t.Logf("%s not set: no %s round", env, driverName)
		return ""
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "ex" + hex.EncodeToString(b[:]) + "_"
	t.Cleanup(func() {
		db, err := sql.Open(driverName, dsn)
		require.NoError(t, err)
		defer db.Close()
		for _, tb := range []string{"send", "journal", "cursor", "parked", "schema_version"} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + prefix + tb); err != nil {
				t.Errorf("cleanup: drop %s%s: %v", prefix, tb, err)
			}
		}
	})
	u, err := url.Parse(dsn)
	if driverName == "mysql" {
		cfg, perr := mysql.ParseDSN(dsn)
		require.NoError(t, perr, env)
		u, err = &url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}, nil
		if cfg.Passwd == "" {
			u.User = url.User(cfg.User)
		}
	}
	require.NoError(t, err, env)
	q := u.Query()
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestStoreFlagErrors checks that a bad -store fails before any network
// call, with a message that names the problem and never the password.
func TestStoreFlagErrors(t *testing.T) {
	for _, tt := range []struct{ spec, msg string }{
		{"mongodb://u:hunter2@h/db", "unknown scheme"},
		{"mysql://u:hunter2@h", "one database name"},
		{"redis://u:hunter2@h:1/0?bogus=1", "unexpected option"},
		{"host=h user=u password=hunter2 dbname=d", "key=value"},
		{"root:hunter2@tcp(h:3306)/db", "unknown scheme"},
	} {
		var stderr strings.Builder
		_, err := parse([]string{"-store", tt.spec}, &stderr)
		require.Error(t, err, "-store %s should be refused", tt.spec)
		assert.ErrorContains(t, err, tt.msg)
		assert.NotContains(t, err.Error(), "hunter2", "the password leaked")
	}
	t.Setenv("INORDER_STORE", "sqlite::memory:")
	_, err := parse(nil, io.Discard)
	assert.ErrorContains(t, err, "in-memory", "INORDER_STORE is read when -store is not given")
	c, err := parse([]string{"-store", "sqlite:x.db"}, io.Discard)
	require.NoError(t, err, "-store wins over INORDER_STORE")
	assert.Equal(t, "sqlite:x.db", c.storeSpec.String())
	t.Setenv("INORDER_STORE", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // Linux; elsewhere os.UserCacheDir ignores it
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	c, err = parse([]string{"-queue", "q1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "file:"+filepath.Join(cache, "inorder-examples", "q1", "receive"), c.storeSpec.String(),
		"the default store: a per-user directory, not the shared temporary directory")
	var help strings.Builder
	_, err = parse([]string{"-h"}, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, help.String(), "default file:"+filepath.Join(cache, "inorder-examples", "<queue>", "receive"),
		"-h should say where the default store is")
}
