package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The test binary serves as the bench in TestRefGuardChildren's
	// children (-serve-cpu).
	if os.Getenv(envBenchChild) == "1" {
		os.Exit(command(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	// fasthttp (under the MNS SDK) keeps per-host connection cleaners that
	// sleep for the idle-connection period after the last connection closed.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	)
}

// deliver builds the body producer p sends as its count-th message to
// group g, with id id, and hands it to the checker as group name and seq.
func deliver(c *checker, id, g, p int, count, seq uint64, group string) {
	body := make([]byte, minPayload)
	stamp{admit: c.now(), id: uint64(id), group: uint32(g), producer: uint32(p), count: count}.put(body)
	c.ordered(group, seq, false, body)
}

func TestCheckerAcceptsOrder(t *testing.T) {
	c := newChecker(4, 2, 2)
	deliver(c, 0, 0, 0, 1, 1, "g0000")
	deliver(c, 1, 1, 0, 1, 1, "g0001")
	deliver(c, 2, 0, 1, 1, 2, "g0000")
	deliver(c, 2, 0, 1, 1, 2, "g0000") // a duplicate delivery
	deliver(c, 3, 0, 0, 2, 3, "g0000")
	require.NoError(t, c.err(), "in-order deliveries with one duplicate")
	assert.Equal(t, int64(4), c.delivered.Load(), "first deliveries")
	assert.Equal(t, int64(1), c.dups.Load(), "duplicates")
	select {
	case <-c.done:
	default:
		t.Fatal("done must be closed once every message was delivered")
	}
}

func TestCheckerReportsViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(c *checker)
		want string
	}{
		{"seq skipped", func(c *checker) {
			deliver(c, 0, 0, 0, 1, 1, "g0000")
			deliver(c, 1, 0, 0, 2, 3, "g0000")
		}, "seq 3 delivered after seq 1"},
		{"seq backwards", func(c *checker) {
			deliver(c, 1, 0, 0, 2, 2, "g0000")
			deliver(c, 0, 0, 0, 1, 1, "g0000")
		}, "seq 2 delivered after seq 0"},
		{"producer order", func(c *checker) {
			deliver(c, 1, 0, 0, 2, 1, "g0000")
			deliver(c, 0, 0, 0, 1, 2, "g0000")
		}, "producer 0's message #2 delivered after its #0"},
		{"wrong group", func(c *checker) {
			deliver(c, 0, 0, 0, 1, 1, "g0001")
		}, `sent to group "g0000" delivered as group "g0001"`},
		{"unknown id", func(c *checker) {
			deliver(c, 99, 0, 0, 1, 1, "g0000")
		}, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChecker(4, 2, 2)
			tc.run(c)
			err := c.err()
			require.Error(t, err, "the checker must report the violation")
			assert.Contains(t, err.Error(), "ORDER OR CONTENT VIOLATED")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCheckerUnordered(t *testing.T) {
	c := newChecker(1, 1, 1)
	body := make([]byte, minPayload)
	stamp{id: 0, count: 1}.put(body)
	c.ordered("g0000", 1, true, body)
	require.Error(t, c.err(), "a message flagged Unordered in a run without chaos is a violation")
}

func TestStampRoundTrip(t *testing.T) {
	want := stamp{admit: 123456789, id: 42, group: 7, producer: 3, count: 99}
	b := make([]byte, 40)
	want.put(b)
	got, ok := readStamp(b)
	require.True(t, ok)
	assert.Equal(t, want, got)
	_, ok = readStamp(b[:minPayload-1])
	assert.False(t, ok, "a short body carries no stamp")
}

func TestCheckerPauses(t *testing.T) {
	c := newChecker(3, 1, 1)
	ms := int64(time.Millisecond)
	c.at[0], c.at[1], c.at[2] = 50*ms, 20*ms, 90*ms // first deliveries of concurrent handlers land out of order
	c.latN.Store(3)
	first, longest := c.pauses(5 * ms)
	assert.Equal(t, 15*time.Millisecond, first, "from the start to the earliest delivery")
	assert.Equal(t, 40*time.Millisecond, longest, "the longest gap between two deliveries in time order (50 to 90 ms)")
}

func TestProducerRangeCoversAll(t *testing.T) {
	for _, tc := range []struct{ n, producers int }{{10, 3}, {16, 4}, {1, 4}, {0, 2}, {1000, 7}} {
		next := 0
		for p := range tc.producers {
			lo, hi := producerRange(tc.n, tc.producers, p)
			require.Equal(t, next, lo, "n=%d producers=%d: producer %d starts where the previous ended", tc.n, tc.producers, p)
			require.LessOrEqual(t, lo, hi)
			next = hi
		}
		assert.Equal(t, tc.n, next, "n=%d producers=%d: every id is sent", tc.n, tc.producers)
	}
}

func TestPercentile(t *testing.T) {
	ms := int64(time.Millisecond)
	sorted := []int64{1 * ms, 2 * ms, 3 * ms, 4 * ms, 100 * ms}
	assert.InDelta(t, 3.0, percentile(sorted, 0.5), 1e-9, "p50")
	assert.InDelta(t, 100.0, percentile(sorted, 0.99), 1e-9, "p99")
	assert.Zero(t, percentile(nil, 0.5))
}

func TestConfigValidate(t *testing.T) {
	ok := config{count: 1, messages: 1, producers: 1, consumers: 1, size: minPayload, timeout: time.Second}
	require.NoError(t, ok.validate())
	for name, mutate := range map[string]func(*config){
		"messages":        func(c *config) { c.messages = 0 },
		"producers":       func(c *config) { c.producers = 0 },
		"size":            func(c *config) { c.size = minPayload - 1 },
		"backlog":         func(c *config) { c.backlog = -1 },
		"timeout":         func(c *config) { c.timeout = 0 },
		"count":           func(c *config) { c.count = 0 },
		"commit-interval": func(c *config) { c.commitInterval = -2 },
		"scenario":        func(c *config) { c.scenario = "(" },
		"skip":            func(c *config) { c.skip = "(" },
		"guard-pairs":     func(c *config) { c.guard, c.guardPairs, c.guardMessages = "README.md", cpuGuardMinPairs-1, 1 },
		"guard-messages":  func(c *config) { c.guard, c.guardPairs, c.guardMessages = "README.md", cpuGuardMinPairs, 0 },
		"guard-ref":       func(c *config) { c.guardRef = "/tmp/bench-ref" },
		"serve-cpu":       func(c *config) { c.serveCPU, c.guardMessages = "ordered/memqueue/memstore/durable/g1", 0 },
	} {
		c := ok
		mutate(&c)
		assert.Error(t, c.validate(), "bad -%s must be refused", name)
	}
}

// TestRunSmall runs the in-process scenarios with a few messages and checks
// that every row was measured and the JSON carries the targets.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real scenarios")
	}
	c := &config{
		json: true, count: 1, messages: 2000, producers: 2, consumers: 2, size: 64, backlog: 1000,
		timeout: 30 * time.Second, quick: true,
		scenario: `^(ordered/memqueue/memstore/durable/g.*|ordered/emulator/filestore/fast/g1000|pipelined/memstore|engine/core/g1|backlog/memqueue/memstore/g1)$`,
	}
	var out, progress bytes.Buffer
	ok, err := run(context.Background(), c, &out, &progress)
	require.NoError(t, err, "progress:\n%s", progress.String())
	require.True(t, ok, "every scenario must pass; progress:\n%s", progress.String())
	var doc struct {
		Results []struct {
			Name         string  `json:"scenario"`
			Rate         float64 `json:"msgs_per_s"`
			Ratio        float64 `json:"ratio"`
			Messages     int     `json:"messages"`
			Failed       string  `json:"failed"`
			Reqs         float64 `json:"queue_requests_per_msg"`
			Drain        float64 `json:"drain_s"`
			Receives     float64 `json:"receives_per_msg"`
			MaxUndeleted int     `json:"max_undeleted"`
			Heap         float64 `json:"heap_inuse_mib"`
		} `json:"results"`
		Targets []struct {
			Scenario string `json:"scenario"`
			NotRun   bool   `json:"not_run"`
		} `json:"targets"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc), "JSON output:\n%s", out.String())
	var names []string
	for _, r := range doc.Results {
		names = append(names, r.Name)
		assert.Empty(t, r.Failed, "%s failed", r.Name)
		assert.Positive(t, r.Rate, "%s: msgs/s", r.Name)
		if strings.HasPrefix(r.Name, "ordered/") {
			assert.Positive(t, r.Ratio, "%s: ratio to its raw base", r.Name)
			assert.Positive(t, r.Reqs, "%s: requests per message", r.Name)
		}
		if strings.HasPrefix(r.Name, "backlog/") {
			assert.Positive(t, r.Drain, "%s: drain time", r.Name)
			assert.GreaterOrEqual(t, r.Receives, 1.0, "%s: every message received at least once", r.Name)
			assert.Positive(t, r.MaxUndeleted, "%s: peak undeleted", r.Name)
			assert.Positive(t, r.Heap, "%s: heap in use", r.Name)
		}
	}
	assert.Equal(t, []string{ // an ordered row brings its floor
		"raw/memqueue/g1", "raw/memqueue/g1000", "floor/memqueue/memstore/g1", "floor/memqueue/memstore/g1000",
		"ordered/memqueue/memstore/durable/g1", "ordered/memqueue/memstore/durable/g1000",
		"raw/emulator/g1000", "ordered/emulator/filestore/fast/g1000",
		"serial/memstore", "pipelined/memstore", "backlog/memqueue/memstore/g1", "engine/core/g1",
	}, names, "selected scenarios and their bases, in order")
	run := 0
	for _, tg := range doc.Targets {
		if !tg.NotRun {
			run++
		}
	}
	assert.Equal(t, 14, run, "targets with a measured scenario: ordered/raw (wall and CPU) and reqs/msg for two memqueue rows, pipelined, "+
		"the receive core's rate and allocations, the hot group's requests, receives, store writes, pause and cap")
}

func TestRunTable(t *testing.T) {
	c := &config{count: 1, messages: 1000, producers: 1, consumers: 1, size: minPayload, timeout: 30 * time.Second, scenario: `^engine/core/g1$`, quick: true}
	var out, progress bytes.Buffer
	ok, err := run(context.Background(), c, &out, &progress)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Contains(t, out.String(), "engine/core/g1")
	assert.Contains(t, out.String(), "Targets")
	assert.Contains(t, out.String(), "receive core msgs/s on one core")
	assert.Regexp(t, `(?m)^  engine/core/g1 +\d+ msgs/s`, progress.String(), "the row's line, its name first")
	assert.NotContains(t, progress.String()+out.String(), "\r", "no progress line off a terminal")
	checkOutput(t, "a run's table", out.String())
	checkOutput(t, "a run's progress", progress.String())
}

// TestCommandLine: -h prints the usage with the environment and exits 0;
// bad flags and values exit 2.
func TestCommandLine(t *testing.T) {
	var stdout, stderr strings.Builder
	require.Equal(t, 0, command(t.Context(), []string{"-h"}, &stdout, &stderr), "-h is a success")
	for _, want := range []string{"Usage of bench:", "-quick", "-guard", "Environment:", "INORDER_TEST_REDIS_ADDR", "INORDER_TEST_POSTGRES_DSN",
		"INORDER_TEST_MYSQL_DSN", "MNS_ENDPOINT", "MNS_ACCESS_KEY_ID", "MNS_ACCESS_KEY_SECRET"} {
		assert.Contains(t, stderr.String(), want, "usage")
	}
	assert.Empty(t, stdout.String())
	stderr.Reset()
	assert.Equal(t, 2, command(t.Context(), []string{"-nope"}, &stdout, &stderr), "a bad flag")
	stderr.Reset()
	assert.Equal(t, 2, command(t.Context(), []string{"-count", "0"}, &stdout, &stderr), "a bad value")
	assert.Equal(t, "bench: -count must be at least 1\n", stderr.String())
	stderr.Reset()
	assert.Equal(t, 0, command(t.Context(), []string{"-list", "-scenario", "^engine/core/g1$"}, &stdout, &stderr))
	assert.Equal(t, "engine/core/g1\n", stdout.String())
}

func TestRunUnknownScenario(t *testing.T) {
	c := &config{count: 1, messages: 1, producers: 1, consumers: 1, size: minPayload, timeout: time.Second, scenario: "^nothing$"}
	_, err := run(context.Background(), c, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "no scenario matches")
}

// TestRoundsRatioFromOneRound: with -count 3, each ratio divides figures of
// one round, and the row shows the round of the median ratio. Taking each
// row's best run instead would divide round 3's ordered rate by round 2's
// raw rate (120/200 = 0.60), a ratio no round measured.
func TestRoundsRatioFromOneRound(t *testing.T) {
	selected := []scenario{{name: "raw/q/g1"}, {name: "ordered/q/s/durable/g1", base: "raw/q/g1"}}
	rates := [][2]float64{{100, 90}, {200, 100}, {150, 120}} // raw, ordered per round: ratios 0.9, 0.5, 0.8
	var rounds [][]*result
	for _, rr := range rates {
		round := []*result{
			{Name: "raw/q/g1", Rate: rr[0], CPUPerMsg: 1},
			{Name: "ordered/q/s/durable/g1", Base: "raw/q/g1", Rate: rr[1], CPUPerMsg: 1000 / rr[1]},
		}
		withRatios(selected, round)
		rounds = append(rounds, round)
	}
	got := pickRounds(selected, rounds)
	require.Len(t, got, 2)
	raw, ord := got[0], got[1]
	assert.Equal(t, 150.0, raw.Rate, "the base row shows its median round by msgs/s")
	assert.Equal(t, 3, raw.Round, "the base row's round")
	assert.InDelta(t, 0.8, ord.Ratio, 1e-9, "the ordered row's ratio is the median of the rounds' own ratios (0.5, 0.8, 0.9)")
	assert.Equal(t, 3, ord.Round, "the round of the median ratio")
	assert.Equal(t, 120.0, ord.Rate, "the row's rate is that round's")
	assert.InDelta(t, 120.0/1000, ord.CPURatio, 1e-9, "the CPU ratio comes from the same round")
	assert.Contains(t, ord.Notes, "round 3 of 3, the median by ratio (rounds: 0.9, 0.5, 0.8)", "the notes say which round")

	// A failed run stands for its row whatever the other rounds did.
	rounds[1][1].Failed = "delivered 3 of 4"
	got = pickRounds(selected, rounds)
	assert.Equal(t, "delivered 3 of 4", got[1].Failed, "a failure is kept")

	// One round: the run as measured, no round noted.
	got = pickRounds(selected, rounds[:1])
	assert.Zero(t, got[1].Round, "no round with -count 1")
	assert.InDelta(t, 0.9, got[1].Ratio, 1e-9, "ratio of the one round")
}

// -skip leaves out what it matches, unless a selected row needs it as its
// base or floor.
func TestSelectSkip(t *testing.T) {
	all := []scenario{
		{name: "raw/q/g1"},
		{name: "floor/q/memstore/g1", base: "raw/q/g1"},
		{name: "ordered/q/memstore/durable/g1", base: "raw/q/g1", floor: "floor/q/memstore/g1"},
		{name: "ordered/q/redisstore/durable/g1", base: "raw/q/g1"},
		{name: "backlog/q/g1/lossy"},
	}
	var names []string
	for _, s := range selectScenarios(all, regexp.MustCompile(""), regexp.MustCompile(`^(raw|floor)/|redisstore|lossy`)) {
		names = append(names, s.name)
	}
	assert.Equal(t, []string{"raw/q/g1", "floor/q/memstore/g1", "ordered/q/memstore/durable/g1"}, names,
		"the bases and floor stay: the memstore row needs them")
}
