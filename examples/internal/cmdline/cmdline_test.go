package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUsageAndStatus(t *testing.T) {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	fs.Int("n", 20, "messages")
	SetUsage(fs, "prog [flags]: does things", EnvEndpoint, EnvSecret)
	err := Parse(fs, []string{"-h"})
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Equal(t, 0, Status("prog", err, &out), "-h is a success")
	assert.Equal(t, "Usage of prog:\nprog [flags]: does things\n\nFlags:\n  -n int\n    \tmessages (default 20)\n\n"+
		"Environment:\n  MNS_ENDPOINT           MNS endpoint, e.g. http://ACCOUNT.mns.REGION.aliyuncs.com\n"+
		"  MNS_ACCESS_KEY_SECRET  its secret (environment only: a flag would show in ps)\n", out.String())

	out.Reset()
	err = Parse(fs, []string{"-x"})
	assert.Equal(t, 2, Status("prog", err, &out), "a bad flag")
	assert.Equal(t, 1, strings.Count(out.String(), "flag provided but not defined: -x"), "printed once, by the flag package:\n%s", out.String())

	out.Reset()
	assert.Equal(t, 1, Status("prog", Parse(fs, []string{"extra"}), &out))
	assert.Equal(t, "prog: unexpected arguments [\"extra\"] (see -h)\n", out.String())
	assert.Equal(t, 0, Status("prog", nil, &out))
}

func TestUnreachable(t *testing.T) {
	refused := fmt.Errorf("open queue q: mnsqueue: GetQueueAttributes: send request failed, dial tcp 127.0.0.1:8931: connect: connection refused")
	var out strings.Builder
	assert.Equal(t, 1, Status("send", Unreachable(refused, DefaultEndpoint), &out))
	assert.Equal(t, "send: "+refused.Error()+"\n"+
		"send: nothing listens at 127.0.0.1:8931: start the MNS emulator in another terminal with `go run ./examples/mns-emulator`, "+
		"or set MNS_ENDPOINT, MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET for real MNS\n", out.String())

	h := new(Hinted)
	require.ErrorAs(t, Unreachable(fmt.Errorf("x: %w", syscall.ECONNREFUSED), "http://localhost:9000/."), &h)
	assert.Equal(t, "nothing listens at localhost:9000: start the MNS emulator there with `go run ./examples/mns-emulator -addr 127.0.0.1:9000`, "+
		"or check -endpoint (MNS_ENDPOINT)", h.Hint)
	require.ErrorAs(t, Unreachable(refused, "http://123.mns.cn-hangzhou.aliyuncs.com"), &h)
	assert.Equal(t, "nothing accepts connections at 123.mns.cn-hangzhou.aliyuncs.com: check -endpoint (MNS_ENDPOINT)", h.Hint)
	other := errors.New("403 SignatureDoesNotMatch")
	assert.Same(t, other, Unreachable(other, DefaultEndpoint), "other errors pass as they are")

	assert.True(t, IsLoopback(DefaultEndpoint))
	assert.True(t, IsLoopback("http://[::1]:8931"))
	assert.False(t, IsLoopback("http://123.mns.cn-hangzhou.aliyuncs.com"))
}

// TestLoggers: ordered's lines name the MNS queue, and its Options.Name
// under its own key.
func TestLoggers(t *testing.T) {
	var out strings.Builder
	q, other := Loggers(true, &out, slog.LevelDebug, "orders")
	q.Info("ordered: receiver starting", "queue", "default", "mode", "AtLeastOnce")
	other.With("queue", "orders").Info("mnsqueue: released")
	assert.Contains(t, out.String(), `msg="ordered: receiver starting" mns_queue=orders streams=default mode=AtLeastOnce`)
	assert.Contains(t, out.String(), `msg="mnsqueue: released" queue=orders`)
	q, other = Loggers(false, &out, slog.LevelDebug, "orders")
	assert.Nil(t, q)
	assert.Nil(t, other)
}
