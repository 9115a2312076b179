package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestSendReceiveProcesses builds commands send and receive and runs them as
// separate processes against an emulator, twice: each run of receive prints
// the 20 messages of the run of send before it, in order, and the queue is
// empty afterwards. The second round runs with redeliveries and 5xx answers.
func TestSendReceiveProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	bin := t.TempDir()
	for _, name := range []string{"send", "receive"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), "../"+name).CombinedOutput()
		require.NoError(t, err, "go build %s: %s", name, out)
	}
	srv, err := mnstest.NewServer(nil)
	require.NoError(t, err)
	defer srv.Close()
	state := t.TempDir()
	env := append(os.Environ(), "MNS_ENDPOINT="+srv.Endpoint(), "MNS_ACCESS_KEY_ID="+srv.AccessKeyID(),
		"MNS_ACCESS_KEY_SECRET="+srv.AccessKeySecret(), "MNS_QUEUE=sample")
	runCmd := func(name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s: stderr: %s", name, stderr.String())
		return string(out)
	}
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&want, "receive message body is %d\n", i)
	}
	want.WriteString("Finish receive 20 messages\n")

	for round := 1; round <= 2; round++ {
		if round == 2 {
			require.NoError(t, srv.SetFaults(mnstest.Faults{Redeliver: 0.2, Error5xx: 0.05}))
		}
		out := runCmd("send", "-store", filepath.Join(state, "send"))
		assert.Contains(t, out, fmt.Sprintf("send message body is 20 (seq %d)", 20*round), "round %d: send output", round)
		out = runCmd("receive", "-store", filepath.Join(state, "receive"))
		assert.Equal(t, want.String(), out, "round %d: receive output", round)
		info, err := srv.Queue("sample")
		require.NoError(t, err)
		assert.Zero(t, info.Active+info.Inactive+info.Delayed, "round %d: messages left in the queue: %+v", round, info)
	}

	// The sample's own header, on a fresh queue and stores.
	out := runCmd("send", "-legacy", "-queue", "legacy", "-store", filepath.Join(state, "legacy-send"))
	assert.Contains(t, out, "send message body is 20 (seq 20)", "legacy send output")
	out = runCmd("receive", "-queue", "legacy", "-store", filepath.Join(state, "legacy-receive"))
	assert.Equal(t, want.String(), out, "legacy receive output")
}
