package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	)
}

// TestRun starts the program on a free port, reads the endpoint and
// credentials it prints, uses them with the real SDK, and stops it.
func TestRun(t *testing.T) {
	t.Setenv(secretEnv, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-queue", "jobs", "-stats", "0", "-shards", "1"}, pw, io.Discard)
		_ = pw.Close()
		done <- err
	}()
	env := map[string]string{}
	lines := bufio.NewScanner(pr)
	for lines.Scan() && len(env) < 3 {
		if kv, ok := strings.CutPrefix(lines.Text(), "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	require.Len(t, env, 3, "three export lines printed: %v", env)
	require.True(t, strings.HasSuffix(env["MNS_ENDPOINT"], "/."), "endpoint %q ends in /.", env["MNS_ENDPOINT"])
	client := ali_mns.NewAliMNSClientWithConfig(ali_mns.AliMNSClientConfig{
		EndPoint:        env["MNS_ENDPOINT"],
		AccessKeyId:     env["MNS_ACCESS_KEY_ID"],
		AccessKeySecret: env["MNS_ACCESS_KEY_SECRET"],
		TimeoutSecond:   10,
	})
	q := ali_mns.NewMNSQueue("jobs", client)
	_, err := q.SendMessage(ali_mns.MessageSendRequest{MessageBody: "hello", Priority: 8})
	require.NoError(t, err, "send to the queue created by -queue")
	rc := make(chan ali_mns.MessageReceiveResponse, 1)
	ec := make(chan error, 1)
	q.ReceiveMessage(rc, ec, 1)
	select {
	case m := <-rc:
		assert.Equal(t, "hello", m.MessageBody)
	case err := <-ec:
		t.Fatalf("receive: %v", err)
	}
	cancel()
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	select {
	case err := <-done:
		require.NoError(t, err, "run after cancel")
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop within 10 s of cancel")
	}
	assert.Contains(t, rest.String(), "stopped;", "final counts printed")
	assert.Contains(t, rest.String(), "SendMessage=1")
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-addr", "localhost:0"},
		{"-addr", "0.0.0.0:0"},
		{"-addr", "0.0.0.0:0", "-access-key-secret", "inorder-secret"},
		{"-shards", "65"},
		{"-shards", "-1"},
		{"-drop", "1.5"},
		{"-queue", "bad_name", "-addr", "127.0.0.1:0"},
		{"extra"},
	} {
		// A valid configuration would serve until the deadline and return nil.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := run(ctx, args, io.Discard, io.Discard)
		cancel()
		assert.Error(t, err, "args %q", args)
	}
}

// startRun starts the program with args and returns the lines it printed up
// to "Ctrl-C to stop." and a stop function that cancels it and returns its
// result.
func startRun(t *testing.T, args ...string) (banner []string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw, io.Discard)
		_ = pw.Close()
		done <- err
	}()
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		banner = append(banner, lines.Text())
		if strings.HasPrefix(lines.Text(), "Ctrl-C") {
			break
		}
	}
	go func() {
		for lines.Scan() { // keep the pipe drained until run returns
		}
	}()
	return banner, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("run did not stop within 10 s of cancel")
		}
	}
}

// TestBannerShowsEffectiveOptions: "-shards 0" means the default, 4 shards,
// and the banner says 4, not 0.
func TestBannerShowsEffectiveOptions(t *testing.T) {
	banner, stop := startRun(t, "-addr", "127.0.0.1:0", "-stats", "0", "-shards", "0")
	require.NotEmpty(t, banner, "a banner is printed")
	assert.Contains(t, banner[0], "(shards 4,", "the banner gives the shards in use: %q", banner[0])
	require.NoError(t, stop())
}

// TestLoseAckedSendsWarns: the fault that does what the service never does
// is off by default, named for what it does, and announced when on.
func TestLoseAckedSendsWarns(t *testing.T) {
	banner, stop := startRun(t, "-addr", "127.0.0.1:0", "-stats", "0")
	assert.NotContains(t, strings.Join(banner, "\n"), "lose-acked-sends", "off by default")
	require.NoError(t, stop())
	banner, stop = startRun(t, "-addr", "127.0.0.1:0", "-stats", "0", "-lose-acked-sends", "0.1")
	assert.Contains(t, strings.Join(banner, "\n"), "WARNING: -lose-acked-sends 0.1", "announced when on")
	require.NoError(t, stop())
	err := run(context.Background(), []string{"-loss", "0.1"}, io.Discard, io.Discard)
	assert.Error(t, err, "the old name -loss is gone")
}

// TestChaosFlag: -chaos turns on the preset's faults and the consumption
// throttle; an explicit flag still wins.
func TestChaosFlag(t *testing.T) {
	banner, stop := startRun(t, "-addr", "127.0.0.1:0", "-stats", "0", "-chaos", "-redeliver", "0.5", "-topic", "orders")
	text := strings.Join(banner, "\n")
	assert.Contains(t, text, "faults: redeliver 0.5, error5xx 0.02", "the preset, with -redeliver overriding it:\n%s", text)
	assert.Contains(t, text, "pushes delayed up to 200ms, duplicated 0.02, dropped 0", text)
	assert.Contains(t, text, "consumption throttle true", text)
	assert.Contains(t, text, "topics: orders", text)
	assert.NotContains(t, text, "WARNING", "the preset loses nothing")
	require.NoError(t, stop())
}

// TestChosenSecretNotPrinted: the export lines give the published default
// secret, which anyone may know, but not one chosen with -access-key-secret,
// which the user has and a log of the banner must not.
func TestChosenSecretNotPrinted(t *testing.T) {
	t.Setenv(secretEnv, "")
	banner, stop := startRun(t, "-addr", "127.0.0.1:0", "-stats", "0", "-access-key-secret", "chosen-S3cr3t")
	text := strings.Join(banner, "\n")
	assert.NotContains(t, text, "S3cr3t", "a chosen secret must not be printed:\n%s", text)
	assert.Contains(t, text, "export MNS_ACCESS_KEY_ID=inorder\n", "the id is printed:\n%s", text)
	assert.Contains(t, text, "MNS_ACCESS_KEY_SECRET: the secret you gave the emulator", "the banner says which secret:\n%s", text)
	require.NoError(t, stop())

	banner, stop = startRun(t, "-addr", "127.0.0.1:0", "-stats", "0")
	assert.Contains(t, banner, "export MNS_ACCESS_KEY_SECRET=inorder-secret", "the published default is printed")
	require.NoError(t, stop())
}

// TestSecretSources: the secret comes from -access-key-secret-file or
// MNS_EMULATOR_ACCESS_KEY_SECRET, stays out of the banner, and signs the
// SDK's requests; -access-key-secret still works, with a warning that the
// command line is public. Off loopback, a short one is refused.
func TestSecretSources(t *testing.T) {
	const secret = "a-secret-Of-24-bytes-xyz"
	file := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(file, []byte(secret+"\n"), 0o600))
	for _, tc := range []struct {
		name string
		env  string
		args []string
	}{
		{"file", "", []string{"-access-key-secret-file", file}},
		{"environment", secret, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(secretEnv, tc.env)
			banner, stop := startRun(t, append([]string{"-addr", "127.0.0.1:0", "-stats", "0", "-queue", "jobs"}, tc.args...)...)
			text := strings.Join(banner, "\n")
			assert.NotContains(t, text, "Of-24", "the secret must not be printed:\n%s", text)
			var endpoint string
			for _, l := range banner {
				if v, ok := strings.CutPrefix(l, "export MNS_ENDPOINT="); ok {
					endpoint = v
				}
			}
			for key, ok := range map[string]bool{secret: true, mnstest.DefaultAccessKeySecret: false} {
				client := ali_mns.NewAliMNSClientWithConfig(ali_mns.AliMNSClientConfig{
					EndPoint: endpoint, AccessKeyId: mnstest.DefaultAccessKeyID, AccessKeySecret: key, TimeoutSecond: 10})
				_, err := ali_mns.NewMNSQueue("jobs", client).SendMessage(ali_mns.MessageSendRequest{MessageBody: "hello", Priority: 8})
				if ok {
					assert.NoError(t, err, "the chosen secret signs")
				} else {
					assert.Error(t, err, "the published default no longer signs")
				}
			}
			require.NoError(t, stop())
		})
	}

	t.Setenv(secretEnv, "")
	var stderr strings.Builder
	o := mnstest.Options{AccessKeySecret: secret}
	require.NoError(t, chooseSecret(&o, "", &stderr))
	assert.Contains(t, stderr.String(), "WARNING: other users of this machine can read -access-key-secret")
	assert.NotContains(t, stderr.String(), "Of-24")
	o = mnstest.Options{AccessKeySecret: secret}
	assert.Error(t, chooseSecret(&o, file, io.Discard), "both flags")
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	o = mnstest.Options{}
	assert.ErrorContains(t, chooseSecret(&o, empty, io.Discard), "first line is empty")
	o = mnstest.Options{}
	require.NoError(t, chooseSecret(&o, "", io.Discard))
	assert.Equal(t, mnstest.DefaultAccessKeySecret, o.AccessKeySecret, "no secret given: the published default")

	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte("tooshort\n"), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := run(ctx, []string{"-addr", "0.0.0.0:0", "-access-key-id", "me", "-access-key-secret-file", short}, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "at least 16 bytes", "a short secret off loopback")
}

// TestCommandLine: -h prints the usage with the environment and exits 0; a
// taken address says an emulator may be running there.
func TestCommandLine(t *testing.T) {
	var stdout, stderr strings.Builder
	require.Equal(t, 0, command(t.Context(), []string{"-h"}, &stdout, &stderr), "-h is a success")
	assert.Contains(t, stderr.String(), "Usage of mns-emulator:")
	assert.Contains(t, stderr.String(), "-addr")
	assert.Contains(t, stderr.String(), "Environment:\n  "+secretEnv)
	assert.Empty(t, stdout.String())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	stderr.Reset()
	assert.Equal(t, 1, command(t.Context(), []string{"-addr", ln.Addr().String()}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "mns-emulator: "+ln.Addr().String()+" is taken: is an emulator running there already?",
		"stderr:\n%s", stderr.String())
}
