package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
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
// ordered queue 1..20 in order, and the large run reports order kept.
func runDemo(t *testing.T, driver string) string {
	var out strings.Builder
	c := config{out: &out, driver: driver, queue: "demo-test", messages: 2000, groups: 20, producers: 3, seed: 1}
	require.NoError(t, run(c), "demo output:\n%s", out.String())
	text := out.String()

	step1, rest, ok := strings.Cut(text, "== 2.")
	require.True(t, ok, "step 2 missing:\n%s", text)
	step2, step3, ok := strings.Cut(rest, "== 3.")
	require.True(t, ok, "step 3 missing:\n%s", text)

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
	return step1
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
	for _, want := range []string{"Usage of demo:", "-driver", "-hold", "Environment:", "MNS_ENDPOINT", "MNS_ACCESS_KEY_ID", "MNS_ACCESS_KEY_SECRET"} {
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
