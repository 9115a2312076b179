package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/ordered/scaleout"
)

func TestMain(m *testing.M) {
	// fasthttp's connection cleaners (under the MNS SDK) exit a while after
	// the last connection closed.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	)
}

// TestStoreFlag checks -store, INORDER_STORE and the default store; the
// programs themselves run in examples/receive's process test.
func TestStoreFlag(t *testing.T) {
	t.Setenv("INORDER_STORE", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // Linux; elsewhere os.UserCacheDir ignores it
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	c, err := parse([]string{"-queue", "q1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "file:"+filepath.Join(cache, "inorder-examples", "q1", "send"), c.storeSpec.String(),
		"default store: a per-user directory, not the shared temporary directory")

	t.Setenv("INORDER_STORE", "redis://u:hunter2@127.0.0.1:6379/0?prefix=app:")
	c, err = parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "redis://u:xxxxx@127.0.0.1:6379/0?prefix=app:", c.storeSpec.String(), "store from INORDER_STORE")

	var help strings.Builder
	_, err = parse([]string{"-h"}, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, help.String(), "-store", "usage")
	assert.Contains(t, help.String(), "default file:"+filepath.Join(cache, "inorder-examples", "<queue>", "send"),
		"-h should say where the default store is")
	assert.NotContains(t, help.String(), "hunter2", "-h must not print INORDER_STORE's password")

	c, err = parse([]string{"-store", "/var/lib/state"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "/var/lib/state", c.storeSpec.Path, "a bare path is a directory, and -store wins over INORDER_STORE")

	var stderr strings.Builder
	_, err = parse([]string{"-store", "postgres://u:hunter2@h:x/db"}, &stderr)
	require.Error(t, err, "a malformed URL should be refused")
	assert.ErrorContains(t, err, "-store: storeurl: invalid spec")
	assert.NotContains(t, err.Error(), "hunter2", "the password leaked")
}

// TestKeyFromEnv: INORDER_KEY is read from the environment only, and a key
// under 16 bytes stops the program with an error that does not print it.
func TestKeyFromEnv(t *testing.T) {
	t.Setenv("INORDER_STORE", "file:"+t.TempDir())
	t.Setenv("INORDER_KEY", "")
	c, err := parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Nil(t, c.key, "no key when INORDER_KEY is unset")

	t.Setenv("INORDER_KEY", "a key of 32 bytes, from a secret")
	c, err = parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "a key of 32 bytes, from a secret", string(c.key))

	t.Setenv("INORDER_KEY", "shortsecret")
	_, err = parse(nil, io.Discard)
	require.Error(t, err, "a short key must stop the program")
	assert.ErrorContains(t, err, "INORDER_KEY")
	assert.ErrorContains(t, err, "at least 16")
	assert.NotContains(t, err.Error(), "shortsecret", "the key leaked")
}

// TestStorePasswordOnCommandLine: a -store URL with a password draws a
// warning that the command line is public; the same in INORDER_STORE does
// not. Neither prints the password.
func TestStorePasswordOnCommandLine(t *testing.T) {
	t.Setenv("INORDER_STORE", "")
	var stderr strings.Builder
	_, err := parse([]string{"-store", "redis://u:hunter2@127.0.0.1:6379/0"}, &stderr)
	require.NoError(t, err)
	assert.Contains(t, stderr.String(), "WARNING: other users of this machine can read the password in -store")
	assert.NotContains(t, stderr.String(), "hunter2")

	stderr.Reset()
	t.Setenv("INORDER_STORE", "redis://u:hunter2@127.0.0.1:6379/0")
	_, err = parse(nil, &stderr)
	require.NoError(t, err)
	assert.Empty(t, stderr.String(), "INORDER_STORE is the recommended place")

	stderr.Reset()
	_, err = parse([]string{"-store", "redis://127.0.0.1:6379/0"}, &stderr)
	require.NoError(t, err)
	assert.Empty(t, stderr.String(), "no password, no warning")
}

// TestCommandLine: -h prints the usage with the environment and exits 0,
// and a refused connection says how to start the emulator there.
func TestCommandLine(t *testing.T) {
	t.Setenv("MNS_ENDPOINT", "")
	t.Setenv("MNS_ACCESS_KEY_ID", "")
	t.Setenv("INORDER_STORE", "")
	var stdout, stderr strings.Builder
	require.Equal(t, 0, command(t.Context(), []string{"-h"}, &stdout, &stderr), "-h is a success")
	for _, want := range []string{"Usage of send:", "-legacy", "Environment:",
		"MNS_ENDPOINT", "MNS_QUEUE", "MNS_ACCESS_KEY_ID", "MNS_ACCESS_KEY_SECRET", "INORDER_STORE", "INORDER_KEY"} {
		assert.Contains(t, stderr.String(), want, "usage")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	stderr.Reset()
	code := command(t.Context(), []string{"-endpoint", "http://" + addr + "/.", "-store", t.TempDir()}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "send: nothing listens at "+addr+": start the MNS emulator there with `go run ./examples/mns-emulator -addr "+addr+"`",
		"stderr:\n%s", stderr.String())
}

// TestRun sends to the emulator in process: the sample's lines, and no
// progress line off a terminal.
func TestRun(t *testing.T) {
	srv, err := mnstest.NewServer(nil)
	require.NoError(t, err)
	defer srv.Close()
	t.Setenv("MNS_ENDPOINT", srv.Endpoint())
	t.Setenv("MNS_ACCESS_KEY_ID", srv.AccessKeyID())
	t.Setenv("MNS_ACCESS_KEY_SECRET", srv.AccessKeySecret())
	t.Setenv("INORDER_STORE", "")
	t.Setenv("INORDER_KEY", "")
	var stdout, stderr strings.Builder
	require.Equal(t, 0, command(t.Context(), []string{"-queue", "orders", "-n", "300", "-store", t.TempDir()}, &stdout, &stderr),
		"stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "send message body is 300 (seq 300)\nFinish send 300 messages to queue orders\n")
	assert.NotContains(t, stdout.String()+stderr.String(), "\r", "no progress line off a terminal")
	info, err := srv.Queue("orders")
	require.NoError(t, err)
	assert.Equal(t, 300, info.Active+info.Inactive+info.Delayed)
}

// TestShards: -shards 4 -groups 6 sends each group to its shard queue,
// <queue>-0..<queue>-3, and says where each message went; bad values are
// refused.
func TestShards(t *testing.T) {
	srv, err := mnstest.NewServer(nil)
	require.NoError(t, err)
	defer srv.Close()
	t.Setenv("INORDER_STORE", "")
	t.Setenv("MNS_ENDPOINT", srv.Endpoint())
	t.Setenv("MNS_ACCESS_KEY_ID", srv.AccessKeyID())
	t.Setenv("MNS_ACCESS_KEY_SECRET", srv.AccessKeySecret())
	var stdout, stderr strings.Builder
	code := command(t.Context(), []string{"-queue", "orders", "-shards", "4", "-groups", "6", "-n", "24", "-store", "file:" + t.TempDir()}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	want := map[string]int{}
	for g := 1; g <= 6; g++ {
		s := scaleout.ShardOf(fmt.Sprintf("g%d", g), 4)
		want[fmt.Sprintf("orders-%d", s)] += 4
		assert.Contains(t, stdout.String(), fmt.Sprintf("send message body is %d (group g%d, shard %d, seq 1)\n", g, g, s))
	}
	assert.Contains(t, stdout.String(), "Finish send 24 messages to queue orders (4 shards)")
	for i := range 4 {
		name := fmt.Sprintf("orders-%d", i)
		info, err := srv.Queue(name)
		require.NoError(t, err, "shard queue %s created", name)
		assert.Equal(t, want[name], info.Active, "messages in %s", name)
	}

	for _, args := range [][]string{{"-shards", "-1"}, {"-shards", "1025"}, {"-groups", "0"}, {"-legacy", "-groups", "2"}} {
		stderr.Reset()
		assert.Equal(t, 1, command(t.Context(), append(args, "-store", "file:"+t.TempDir()), &stdout, &stderr), "%v", args)
		assert.NotEmpty(t, stderr.String(), "%v says why", args)
	}
}
