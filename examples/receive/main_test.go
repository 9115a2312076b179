package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
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
		for _, tb := range []string{"send", "journal", "cursor", "parked", "lease_ns", "lease", "member", "schema_version"} {
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

// emulatorEnv points the programs at srv, with no store or key from the
// environment.
func emulatorEnv(t *testing.T, srv *mnstest.Server) {
	t.Setenv("MNS_ENDPOINT", srv.Endpoint())
	t.Setenv("MNS_ACCESS_KEY_ID", srv.AccessKeyID())
	t.Setenv("MNS_ACCESS_KEY_SECRET", srv.AccessKeySecret())
	t.Setenv("MNS_QUEUE", "")
	t.Setenv("INORDER_STORE", "")
	t.Setenv("INORDER_KEY", "")
}

// sendNumbers sends 1..n to queue on srv through ordered.Queue, group "",
// as command send does.
func sendNumbers(t *testing.T, srv *mnstest.Server, queue string, n int) {
	t.Helper()
	require.NoError(t, srv.CreateQueue(queue, nil))
	drv, err := mnsqueue.New(t.Context(), srv.Endpoint(), queue,
		mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}, nil)
	require.NoError(t, err)
	defer drv.Close()
	q, err := ordered.New(t.Context(), drv, memstore.New(), nil)
	require.NoError(t, err)
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = []byte(strconv.Itoa(i + 1))
	}
	require.NoError(t, q.SendBatch(t.Context(), "", payloads))
	require.NoError(t, q.Close(t.Context()))
}

// stuckLine is the line receive prints for a group waiting on seq 1 that
// the store has no cursor for.
var stuckLine = regexp.MustCompile(`receive: group "" waits for seq 1 \(held 2[0-9 ,-]*\) since \d+s: the store has no cursor for it; ` +
	`if the store was lost, restart with -lowest to start at the lowest seq present\n`)

// TestLostStore is a new user's first trouble: the receive store is lost
// after seq 1 was handled and deleted, so the group has no cursor and
// waits for seq 1, which never comes. receive says so within seconds, on
// stderr, naming -lowest; the summary repeats it; and -lowest gets the
// rest, 2..20.
func TestLostStore(t *testing.T) {
	srv, err := mnstest.NewServer(nil)
	require.NoError(t, err)
	defer srv.Close()
	emulatorEnv(t, srv)
	sendNumbers(t, srv, "lost", 20)
	dir := t.TempDir()

	var stdout, stderr strings.Builder
	require.Equal(t, 0, command(t.Context(), []string{"-queue", "lost", "-store", filepath.Join(dir, "first"), "-n", "1"}, &stdout, &stderr),
		"stderr: %s", stderr.String())
	require.Equal(t, "receive message body is 1\nFinish receive 1 messages\n", stdout.String())
	assert.Contains(t, stderr.String(), "receive: 1 of 1 messages from queue lost in ", "the summary line")

	// The store is lost: a new, empty one.
	stdout.Reset()
	stderr.Reset()
	start := time.Now()
	seen := &timedWriter{w: &stderr, want: "restart with -lowest", start: start}
	code := command(t.Context(), []string{"-queue", "lost", "-store", filepath.Join(dir, "lost"), "-gap-timeout", "1s", "-timeout", "4s"},
		&stdout, seen)
	assert.Equal(t, 1, code, "receive gives up after -timeout")
	assert.Less(t, time.Since(start), 9*time.Second)
	text := stderr.String()
	require.NotZero(t, seen.at, "the stuck line; stderr:\n%s", text)
	assert.Less(t, seen.at, 3500*time.Millisecond, "the stuck line comes within seconds (-gap-timeout 1s), while receive waits")
	assert.Empty(t, stdout.String(), "nothing is handed out: seq 1 is missing")
	lines := stuckLine.FindAllStringIndex(text, -1)
	require.GreaterOrEqual(t, len(lines), 2, "the stuck line, while waiting and in the summary; stderr:\n%s", text)
	summary := strings.Index(text, "receive: 0 of 20 messages from queue lost in ")
	require.Positive(t, summary, "the summary line; stderr:\n%s", text)
	assert.Less(t, lines[0][1], summary, "the stuck line is printed while waiting, before the summary; stderr:\n%s", text)
	assert.Contains(t, text[summary:], "gaps 1", "the summary counts the hole")
	assert.Contains(t, text, "receive: after 0 of 20 messages: context deadline exceeded\n")
	assert.NotContains(t, text, "\r", "no progress line off a terminal")

	// The way out it named. (The same store: the run above, shorter than
	// the queue's visibility timeout, parked nothing, so the store has no
	// cursor yet; see TestDescribe for a group that has one.)
	stdout.Reset()
	stderr.Reset()
	code = command(t.Context(), []string{"-queue", "lost", "-store", filepath.Join(dir, "lost"), "-lowest", "-n", "19", "-timeout", "20s"},
		&stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	var want strings.Builder
	for i := 2; i <= 20; i++ {
		fmt.Fprintf(&want, "receive message body is %d\n", i)
	}
	want.WriteString("Finish receive 19 messages\n")
	assert.Equal(t, want.String(), stdout.String())
	assert.Contains(t, stderr.String(), `receive: group "": passed over seqs 1, started at seq 2, the lowest present (-lowest)`)
}

// TestDescribe: each cause of a stuck group gets its line, with what
// fixes it.
func TestDescribe(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	// Group "started" has a cursor at seq 1 (a receiver that ran without
	// -lowest after the store was lost, and parked); "" has none.
	require.NoError(t, store.Advance(t.Context(), []seqstore.Advance{{
		Stream: seqstore.Stream{Queue: "default", Group: "started"},
		To:     seqstore.Cursor{Epoch: 7, Next: 1},
	}}))
	c := config{queue: "orders", gapTimeout: 5 * time.Second}
	w := newWatcher(c, store, 30*time.Second, io.Discard)
	lowest := newWatcher(config{queue: "orders", gapTimeout: 5 * time.Second, lowest: true}, store, 30*time.Second, io.Discard)
	for _, tt := range []struct {
		name string
		w    *watcher
		g    groupStatus
		want string
	}{
		{"lost store", w, groupStatus{Group: "", Cause: "gap", StuckSeconds: 12.3, Next: 1, HeldRanges: "2-20"},
			`group "" waits for seq 1 (held 2-20) since 12s: the store has no cursor for it; ` +
				`if the store was lost, restart with -lowest to start at the lowest seq present`},
		{"lost store, cursor written since", w, groupStatus{Group: "started", Cause: "gap", StuckSeconds: 40, Next: 1, DurableNext: 1, HeldRanges: "2-20"},
			`group "started" waits for seq 1 (held 2-20) since 40s: the store's cursor for it is at seq 1 and nothing was handled; ` +
				`if the store was lost, restart with -gap-skip to skip to the lowest seq present after -gap-timeout (5s) ` +
				`(-lowest applies only to a group with no cursor)`},
		{"hole", w, groupStatus{Group: "g1", Cause: "gap", StuckSeconds: 6, Next: 5, Delivered: 4, DurableNext: 5, HeldRanges: "6-9, 12"},
			`group "g1" waits for seq 5 (held 6-9, 12) since 6s: seq 5 has not arrived: taken by another receiver and invisible ` +
				`until the queue's visibility timeout (30s) ends, or lost; if it is lost for good, restart with -gap-skip to skip ` +
				`holes older than -gap-timeout (5s)`},
		{"hole at seq 1 under -lowest", lowest, groupStatus{Group: "", Cause: "gap", StuckSeconds: 6, Next: 1, HeldRanges: "2"},
			`group "" waits for seq 1 (held 2) since 6s: seq 1 has not arrived`},
		{"poison", w, groupStatus{Group: "g2", Cause: "poison", StuckSeconds: 3, Next: 8, Out: true, Attempt: 5},
			`group "g2" waits for seq 8 since 3s: handed out 5 times without an ack (ReceiveOptions.MaxAttempts); it is retried ` +
				`and nothing else of the group is delivered: fix what fails, or set ReceiveOptions.Poison to PoisonDeadLetter with a DeadLetter queue`},
		{"conflict", w, groupStatus{Group: "g3", Cause: "conflict", StuckSeconds: 1, Next: 4},
			`group "g3" waits for seq 4 since 1s: another receiver moved its cursor: is a second receive running on queue orders ` +
				`with the same store? Stop it; this one reads the cursor again and goes on from it`},
		{"store", w, groupStatus{Group: "g4", Cause: "store", StuckSeconds: 2, Next: 9, Error: "filestore: corrupt cursor"},
			`group "g4" waits for seq 9 since 2s: the store refused its cursor: filestore: corrupt cursor; repair or replace the store (-store)`},
	} {
		got := tt.w.describe(t.Context(), tt.g)
		assert.True(t, strings.HasPrefix(got, tt.want), "%s:\n got %s\nwant %s...", tt.name, got, tt.want)
	}
}

// TestInvisibleMessages: the messages are taken by an earlier receiver that
// did not delete them (killed), so nothing arrives; receive reads the
// queue's counts and says they are invisible and within how long they come
// back.
func TestInvisibleMessages(t *testing.T) {
	srv, err := mnstest.NewServer(nil)
	require.NoError(t, err)
	defer srv.Close()
	emulatorEnv(t, srv)
	sendNumbers(t, srv, "held", 5)
	drv, err := mnsqueue.New(t.Context(), srv.Endpoint(), "held",
		mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}, nil)
	require.NoError(t, err)
	defer drv.Close()
	taken := 0
	for taken < 5 {
		msgs, err := drv.ReceiveBatch(t.Context(), 16, time.Second)
		require.NoError(t, err)
		taken += len(msgs)
	}

	var stdout, stderr strings.Builder
	code := command(t.Context(), []string{"-queue", "held", "-store", t.TempDir(), "-timeout", "4s"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "receive: nothing has arrived in 3s: queue held holds 5 messages invisible (0 visible, 0 delayed): "+
		"taken by an earlier receiver that did not delete them (killed, or still running). They come back at most 30s after it took them "+
		"(the queue's visibility timeout)\n",
		"stderr:\n%s", stderr.String())
	assert.Contains(t, stderr.String(), "receive: 0 of 20 messages from queue held in ")
}

// TestExplainQuiet: the other answers of the queue's counts.
func TestExplainQuiet(t *testing.T) {
	for _, tt := range []struct {
		name   string
		counts queueCounts
		err    error
		want   string
	}{
		{"empty", queueCounts{}, nil, "receive: nothing has arrived in 3s: queue q1 is empty; run command send (with the same -queue), or check -queue and -endpoint\n"},
		{"delayed", queueCounts{delayed: 4}, nil, "receive: nothing has arrived in 3s: queue q1 holds 4 delayed messages (sent with a delay), 0 visible\n"},
		{"unknown", queueCounts{}, errors.New("AccessDenied"), "receive: nothing has arrived in 3s from queue q1 (its counts are unknown: AccessDenied); " +
			"messages an earlier receiver took and did not delete stay invisible until the queue's visibility timeout, 30s, ends\n"},
		{"visible", queueCounts{active: 3}, nil, ""},
	} {
		var out strings.Builder
		w := newWatcher(config{queue: "q1"}, nil, 30*time.Second, &out)
		w.counts = func(context.Context) (queueCounts, error) { return tt.counts, tt.err }
		w.explainQuiet(t.Context())
		assert.Equal(t, tt.want, out.String(), tt.name)
	}
}

// TestCommandLine: -h prints the usage with the environment and exits 0,
// a bad flag exits 2, and a refused connection says how to start the
// emulator there.
func TestCommandLine(t *testing.T) {
	t.Setenv("MNS_ENDPOINT", "")
	t.Setenv("MNS_ACCESS_KEY_ID", "")
	t.Setenv("INORDER_STORE", "")
	var stdout, stderr strings.Builder
	require.Equal(t, 0, command(t.Context(), []string{"-h"}, &stdout, &stderr), "-h is a success")
	for _, want := range []string{"Usage of receive:", "-lowest", "-gap-skip", "-gap-timeout", "-shards", "-member", "-ttl", "Environment:",
		"MNS_ENDPOINT", "MNS_QUEUE", "MNS_ACCESS_KEY_ID", "MNS_ACCESS_KEY_SECRET", "INORDER_STORE", "INORDER_KEY"} {
		assert.Contains(t, stderr.String(), want, "usage")
	}
	assert.Empty(t, stdout.String())

	stderr.Reset()
	assert.Equal(t, 2, command(t.Context(), []string{"-nope"}, &stdout, &stderr), "a bad flag")
	assert.Contains(t, stderr.String(), "flag provided but not defined: -nope")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	stderr.Reset()
	code := command(t.Context(), []string{"-endpoint", "http://" + addr + "/.", "-store", t.TempDir()}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "connection refused")
	assert.Contains(t, stderr.String(), "receive: nothing listens at "+addr+": start the MNS emulator there with `go run ./examples/mns-emulator -addr "+addr+"`",
		"the hint, with the emulator's key taken for a loopback endpoint; stderr:\n%s", stderr.String())
}

// timedWriter writes to w and notes when want was first written, after
// start.
type timedWriter struct {
	w     io.Writer
	want  string
	start time.Time
	at    time.Duration
}

func (t *timedWriter) Write(p []byte) (int, error) {
	if t.at == 0 && strings.Contains(string(p), t.want) {
		t.at = time.Since(t.start)
	}
	return t.w.Write(p)
}
