package mnstest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// EnvNodeInterop enables TestNodeSDKInterop; .ci/run sets it.
const envNodeInterop = "INORDER_TEST_NODE"

// TestNodeSDKInterop runs the official MNS Node.js SDK (@alicloud/mns
// 1.2.0, pinned by testdata/node/package-lock.json) against the emulator: a
// Go sender's 200 messages are received by Node, which deletes half with
// DeleteMessage and half after ChangeMessageVisibility with
// BatchDeleteMessage (the Node SDK puts receipt handles in query strings
// unescaped: with the emulator's old handles, 1 in 10 had a '+', read as a
// space, and failed), then sends back to a queue and publishes to a topic
// whose subscribers the Go side reads. (The Node SDK writes bodies into its
// XML unescaped, so they must not hold '<' or '&': the service, like the
// emulator, answers MalformedXML.) It needs node and npm and the npm
// registry (npm ci into a temporary directory); it runs when
// INORDER_TEST_NODE=1, and then a missing tool or an install that fails
// fails the test.
func TestNodeSDKInterop(t *testing.T) {
	if os.Getenv(envNodeInterop) == "" {
		t.Skipf("set %s=1 to run the official Node.js SDK (@alicloud/mns 1.2.0, installed by npm ci from testdata/node) against the emulator; .ci/run does", envNodeInterop)
	}
	for _, tool := range []string{"node", "npm"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s=1 needs %s on PATH", envNodeInterop, tool)
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "interop.js"} {
		b, err := os.ReadFile(filepath.Join("testdata", "node", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
	var install []byte
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		install, err = cmd.CombinedOutput()
		cancel()
		if err == nil {
			break
		}
		time.Sleep(time.Duration(attempt) * 2 * time.Second)
	}
	require.NoError(t, err, "npm ci (3 attempts): %s", install)

	srv := newServer(t, nil)
	client := newClient(srv)
	for _, q := range []string{"from-go", "back", "fan", "fanxml"} {
		require.NoError(t, srv.CreateQueue(q, nil))
	}
	require.NoError(t, srv.CreateTopic("t", nil))
	require.NoError(t, srv.Subscribe("t", "fan", mnstest.Subscription{Endpoint: srv.QueueEndpoint("fan"), NotifyContentFormat: mnstest.FormatSimplified}))
	require.NoError(t, srv.Subscribe("t", "fanxml", mnstest.Subscription{Endpoint: srv.QueueEndpoint("fanxml")}))
	const n = 200
	sender := ali_mns.NewMNSQueue("from-go", client)
	var sent []string
	for i := 0; i < n; i += 16 {
		batch := msgs(fmt.Sprintf("go-%03d-", i), min(16, n-i))
		_, err := sender.BatchSendMessage(batch...)
		require.NoError(t, err)
		for _, m := range batch {
			sent = append(sent, m.MessageBody)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "interop.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"MNS_ENDPOINT=http://"+srv.Addr(), // the Node SDK takes any endpoint URL
		"MNS_ACCOUNT_ID="+srv.Options().AccountID,
		"MNS_ACCESS_KEY_ID="+srv.AccessKeyID(),
		"MNS_ACCESS_KEY_SECRET="+srv.AccessKeySecret(),
		"MNS_QUEUE=from-go", "MNS_QUEUE_BACK=back", "MNS_TOPIC=t", fmt.Sprint("MNS_COUNT=", n))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "node interop.js: %s", stderr.String())
	var out struct {
		Received, Deleted, Changed, BatchDeleted, Sent, Published int
		Handles, Bodies                                           []string
		TopicName                                                 string
		EmptyError                                                string
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), "node's summary: %s", stdout.String())
	assert.Equal(t, n, out.Received, "Node received every message")
	assert.Equal(t, n/2, out.Deleted, "DeleteMessage with the handle unescaped in the query")
	assert.Equal(t, n/2, out.Changed, "ChangeMessageVisibility with the handle unescaped")
	assert.Equal(t, n/2, out.BatchDeleted)
	slices.Sort(sent)
	slices.Sort(out.Bodies)
	assert.Equal(t, sent, out.Bodies, "the Go sender's bodies")
	info, err := srv.Queue("from-go")
	require.NoError(t, err)
	assert.Zero(t, info.Active+info.Inactive, "Node deleted everything")
	st := srv.Stats()
	assert.Zero(t, st.Errors[mnstest.CodeReceiptHandleError], "no handle was mangled")
	assert.Equal(t, "t", out.TopicName, "GetTopicAttributes from Node")
	assert.Equal(t, "MNSMessageNotExistError", out.EmptyError, "Node reads the <Error> of an empty receive")

	back, err := batchReceive(ali_mns.NewMNSQueue("back", client), 16, 1)
	require.NoError(t, err)
	var bodies []string
	for _, m := range back {
		bodies = append(bodies, m.MessageBody)
	}
	slices.Sort(bodies)
	assert.Len(t, bodies, 16, "Node's batch sends")
	assert.Equal(t, "node-0", bodies[0])
	fan, err := batchReceive(ali_mns.NewMNSQueue("fan", client), 16, 1)
	require.NoError(t, err)
	require.Len(t, fan, 3, "Node's publishes, pushed to the SIMPLIFIED subscriber")
	assert.True(t, slices.ContainsFunc(fan, func(m ali_mns.MessageReceiveResponse) bool { return m.MessageBody == "#1#from node" }))
	fx, err := batchReceive(ali_mns.NewMNSQueue("fanxml", client), 16, 1)
	require.NoError(t, err)
	require.Len(t, fx, 3, "and to the XML subscriber")
	assert.True(t, strings.Contains(fx[0].MessageBody, "<MessageTag>node</MessageTag>"), fx[0].MessageBody)
}
