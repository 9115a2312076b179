package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
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

var bodyLine = regexp.MustCompile(`^receive message body is (\d+)$`)

// runDemo runs the demo with small numbers and checks its output: the
// plain queue delivers all 20 (out of order for the seeded memqueue), the
// ordered queue 1..20 in order, the large run reports order kept and its
// metrics, and the stuck group delivers 1, 3, 4, then 2 late.
func runDemo(t *testing.T, driver string) string {
	var out strings.Builder
	c := config{out: &out, driver: driver, queue: "demo-test", messages: 2000, groups: 20, producers: 3, seed: 1,
		metrics: true, gapTimeout: 500 * time.Millisecond}
	start := time.Now()
	require.NoError(t, run(c), "demo output:\n%s", out.String())
	t.Logf("the demo took %v", time.Since(start))
	text := out.String()

	step1, rest, ok := strings.Cut(text, "== 2.")
	require.True(t, ok, "step 2 missing:\n%s", text)
	step2, rest, ok := strings.Cut(rest, "== 3.")
	require.True(t, ok, "step 3 missing:\n%s", text)
	step3, step4, ok := strings.Cut(rest, "== 4.")
	require.True(t, ok, "step 4 missing:\n%s", text)

	bodies := func(s string) []int {
		var out []int
		for _, line := range strings.Split(s, "\n") {
			if m := bodyLine.FindStringSubmatch(line); m != nil {
				v, _ := strconv.Atoi(m[1])
				out = append(out, v)
			}
		}
		return out
	}
	plain := bodies(step1)
	seen := make(map[int]bool)
	for _, v := range plain {
		seen[v] = true
	}
	assert.Len(t, seen, 20, "the plain queue delivers all 20: %v", plain)
	want := make([]int, 20)
	for i := range want {
		want[i] = i + 1
	}
	assert.Equal(t, want, bodies(step2), "ordered.Queue delivers 1..20 in order")
	assert.Contains(t, step3, "2000 messages, 20 groups, in order: true (violations 0, repeats 0)")
	checkMetricsTable(t, step3, 2000)
	checkStuckStep(t, step4)
	return step1
}

var metricRow = regexp.MustCompile(`^  ([a-z][a-z._]+) +(\d+)  `)

// checkMetricsTable checks step 3's table of OTel metrics: every row, each
// at most 100 columns, and every message sent and consumed once.
func checkMetricsTable(t *testing.T, step3 string, messages int64) {
	_, table, ok := strings.Cut(step3, "metrics (OpenTelemetry")
	require.True(t, ok, "no metrics table in step 3:\n%s", step3)
	rows := make(map[string]int64)
	for _, line := range strings.Split(table, "\n") {
		assert.LessOrEqual(t, len(line), 100, "a line of the table is longer than 100 columns: %q", line)
		if m := metricRow.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseInt(m[2], 10, 64)
			rows[m[1]] = v
		}
	}
	for _, name := range []string{
		"messaging.client.sent.messages", "messaging.client.consumed.messages", "inorder.duplicates",
		"inorder.redelivered", "inorder.gaps", "inorder.skipped", "inorder.late", "inorder.buffered.count",
		"inorder.receive.undeleted", "inorder.groups.stuck", "inorder.queue.requests", "inorder.store.requests",
		"messaging.process.duration", "inorder.commit.duration",
	} {
		assert.Contains(t, rows, name, "the metrics table has a row for %s:\n%s", name, table)
	}
	assert.Equal(t, messages, rows["messaging.client.sent.messages"], "messages sent, by the metrics")
	assert.Equal(t, messages, rows["messaging.client.consumed.messages"], "consumed == sent")
	assert.Equal(t, messages, rows["messaging.process.duration"], "one process duration per message")
	assert.Zero(t, rows["inorder.groups.stuck"], "no group stuck after the run")
	assert.Positive(t, rows["inorder.queue.requests"], "queue requests counted")
}

var stuckBody = regexp.MustCompile(`^receive message body is debit (\d+)0 \(seq (\d+)(, Unordered: a late arrival)?\)$`)

// stuckDeliveries returns the seqs step 4 prints as delivered, a late one
// as its negative.
func stuckDeliveries(t *testing.T, step4 string) []int {
	var seqs []int
	for _, line := range strings.Split(step4, "\n") {
		if m := stuckBody.FindStringSubmatch(line); m != nil {
			assert.Equal(t, m[1], m[2], "the body of seq %s: %q", m[2], line)
			v, _ := strconv.Atoi(m[2])
			if m[3] != "" {
				v = -v
			}
			seqs = append(seqs, v)
		}
	}
	return seqs
}

// checkStuckStep checks step 4's output: seq 1, the hole reported by the
// hook, Stats and the gauge, the repair, 3 and 4, then seq 2 late.
func checkStuckStep(t *testing.T, step4 string) {
	assert.Equal(t, []int{1, 3, 4, -2}, stuckDeliveries(t, step4),
		"seq 1, then (after the repair) 3 and 4 in order, then 2 flagged Unordered:\n%s", step4)
	for _, want := range []string{
		"sender: seq 2 failed: ordered: send: after 1 attempt(s): lost on the way (the demo's lossy driver)\n",
		"Hooks.OnGap after ",
		": group acct-7 misses seq 2 (hole ",
		"Stats().Receive.Stuck: group acct-7, cause gap, since ",
		"inorder.groups.stuck{inorder.stuck.cause=gap} = 1, inorder.groups.stuck.age{...} = ",
		"repair: q.SkipHole(ctx, \"acct-7\"): seq 2 recorded as skipped",
		"inorder.groups.stuck{inorder.stuck.cause=gap} = 0, inorder.groups.stuck.age{...} = 0.0 s\n",
	} {
		assert.Contains(t, step4, want, "step 4")
	}
	before, after, _ := strings.Cut(step4, "repair: ")
	assert.Contains(t, before, "cause=gap} = 1", "the gauge says 1 before the repair")
	assert.Contains(t, after, "cause=gap} = 0", "and 0 after")
}

func TestDemoMemqueue(t *testing.T) {
	step1 := runDemo(t, "memqueue")
	assert.NotContains(t, step1, " 0 out of order", "the seeded plain queue shows disorder:\n%s", step1)
}

func TestDemoMNSEmulator(t *testing.T) {
	t.Setenv("MNS_ENDPOINT", "") // always the embedded emulator
	runDemo(t, "mns")
}

func TestDemoFlags(t *testing.T) {
	assert.Error(t, run(config{out: &strings.Builder{}, driver: "nope", groups: 1, producers: 1}))
	assert.Error(t, run(config{out: &strings.Builder{}, driver: "memqueue", groups: 0, producers: 1}))
}

// TestDemoStatusPage: with -status, the demo serves the status page of its
// current ordered.Queue, and with -hold keeps serving the last one (closed,
// every message acknowledged) after it finishes.
func TestDemoStatusPage(t *testing.T) {
	var out strings.Builder
	urls := make(chan string, 1)
	c := config{out: &out, driver: "memqueue", messages: 500, groups: 10, producers: 2, seed: 1,
		status: "127.0.0.1:0", hold: 3 * time.Second, served: func(u string) { urls <- u }}
	errc := make(chan error, 1)
	go func() { errc <- run(c) }()
	url := <-urls

	type status struct {
		Queue   string `json:"queue"`
		Closed  bool   `json:"closed"`
		Receive *struct {
			Acked int64 `json:"acked"`
		} `json:"receive"`
	}
	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var s status
	require.Eventually(t, func() bool {
		code, body := get(url + "?format=json")
		s = status{}
		return code == http.StatusOK && json.Unmarshal([]byte(body), &s) == nil && s.Queue == "demo-large" && s.Closed
	}, time.Minute, 20*time.Millisecond, "the page of the large run's Queue, closed, during the hold")
	require.NotNil(t, s.Receive)
	assert.GreaterOrEqual(t, s.Receive.Acked, int64(500))
	code, page := get(url)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, page, "demo-large")

	require.NoError(t, <-errc, "demo output:\n%s", out.String())
	assert.Contains(t, out.String(), "status page: "+url+" (up 3s after the demo)")
	assert.Contains(t, out.String(), "holding for 3s")
	_, err := http.Get(url)
	assert.Error(t, err, "the page stops with the demo")
}

// TestCommandLine: -h prints the usage with the environment and exits 0;
// real MNS that refuses the connection gets a hint.
func TestCommandLine(t *testing.T) {
	var stdout, stderr strings.Builder
	require.Equal(t, 0, command([]string{"-h"}, &stdout, &stderr), "-h is a success")
	for _, want := range []string{"Usage of demo:", "-driver", "-hold", "-metrics", "-gap-timeout", "loopback", "Environment:", "MNS_ENDPOINT", "MNS_ACCESS_KEY_ID", "MNS_ACCESS_KEY_SECRET"} {
		assert.Contains(t, stderr.String(), want, "usage")
	}
	assert.Empty(t, stdout.String())
	stderr.Reset()
	assert.Equal(t, 2, command([]string{"-bogus"}, &stdout, &stderr), "a bad flag")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	t.Setenv("MNS_ENDPOINT", "http://"+addr+"/.")
	t.Setenv("MNS_ACCESS_KEY_ID", "inorder")
	t.Setenv("MNS_ACCESS_KEY_SECRET", "inorder-secret")
	stderr.Reset()
	assert.Equal(t, 1, command([]string{"-status", "off", "-messages", "0"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "demo: nothing listens at "+addr+": start the MNS emulator there with", "stderr:\n%s", stderr.String())
}

// syncBuffer is the demo's output, written by the demo's goroutines and
// read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var (
	curlGet  = regexp.MustCompile(`(?m)^   curl -s '([^']+)'$`)
	curlPost = regexp.MustCompile(`(?m)^   curl -s -H 'Origin: ([^']+)' -d repair=([a-z-]+) -d group=(\S+) '([^']+)'$`)
)

// TestDemoHoldRepair: with -hold, step 4 leaves acct-7 stuck; the curl
// lines the demo prints work: the GET shows the group stuck on a gap with
// the skip-hole action, the POST repairs it (done: true), and the demo
// prints what follows until the hold ends.
func TestDemoHoldRepair(t *testing.T) {
	var out syncBuffer
	urls := make(chan string, 1)
	done := make(chan struct{})
	c := config{out: &out, driver: "memqueue", messages: 0, groups: 1, producers: 1, seed: 1, metrics: true,
		gapTimeout: 300 * time.Millisecond, status: "127.0.0.1:0", hold: time.Minute,
		served: func(u string) { urls <- u }, done: done}
	errc := make(chan error, 1)
	go func() { errc <- run(c) }()
	page := <-urls
	ended := false
	defer func() {
		if !ended { // a failed check: end the hold and wait for the demo
			close(done)
			<-errc
		}
	}()

	var get, post []string
	require.Eventually(t, func() bool {
		text := out.String()
		get, post = curlGet.FindStringSubmatch(text), curlPost.FindStringSubmatch(text)
		return get != nil && post != nil
	}, 30*time.Second, 10*time.Millisecond, "the curl lines of -hold")
	assert.Equal(t, page+"?group=acct-7&format=json", get[1])

	resp, err := http.Get(get[1])
	require.NoError(t, err)
	var status struct {
		Queue string `json:"queue"`
		Group *struct {
			Group string `json:"group"`
			Cause string `json:"cause"`
			Next  uint64 `json:"next"`
		} `json:"group"`
		Stuck []struct {
			Group   string   `json:"group"`
			Cause   string   `json:"cause"`
			Actions []string `json:"actions"`
		} `json:"stuck"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&status))
	resp.Body.Close()
	assert.Equal(t, "demo-stuck", status.Queue)
	require.NotNil(t, status.Group, "the GET shows acct-7")
	assert.Equal(t, "acct-7", status.Group.Group)
	assert.Equal(t, "gap", status.Group.Cause)
	assert.Equal(t, uint64(2), status.Group.Next, "waiting for seq 2")
	require.Len(t, status.Stuck, 1)
	assert.Equal(t, []string{"skip-hole"}, status.Stuck[0].Actions, "the page offers the repair")

	form := url.Values{"repair": {post[2]}, "group": {post[3]}}
	req, err := http.NewRequest(http.MethodPost, post[4], strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl -d sends it
	req.Header.Set("Origin", post[1])
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	var repaired struct {
		Action string `json:"action"`
		Group  string `json:"group"`
		Done   bool   `json:"done"`
		Error  string `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&repaired))
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, repaired.Done, "the POST repaired acct-7: %+v", repaired)
	assert.Equal(t, "skip-hole", repaired.Action)

	require.Eventually(t, func() bool { return strings.Contains(out.String(), "Unordered: a late arrival") },
		30*time.Second, 10*time.Millisecond, "what follows the repair:\n%s", out.String())
	close(done)
	ended = true
	require.NoError(t, <-errc, "demo output:\n%s", out.String())
	text := out.String()
	_, step4, ok := strings.Cut(text, "== 4.")
	require.True(t, ok, "step 4:\n%s", text)
	assert.Equal(t, []int{1, 3, 4, -2}, stuckDeliveries(t, step4), "after the repair on the page:\n%s", step4)
	assert.Contains(t, step4, "acct-7 repaired on the status page; what follows:")
	assert.Contains(t, step4, "cause=gap} = 0", "the gauge after the repair")
	_, err = http.Get(page)
	assert.Error(t, err, "the page stops with the demo")
}
