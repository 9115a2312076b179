package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseGuard(t *testing.T) {
	doc := "# README\n| not | guarded |\n" + guardBegin + "\n| scenario | ratio |\n|---|---|\n| ordered/a/g1 | 0.5 |\n| pipelined/b | 120 |\n" + guardEnd + "\n| ordered/c | 9 |\n"
	rows, err := parseGuard(strings.NewReader(doc), "README.md")
	require.NoError(t, err)
	assert.Equal(t, []guardRow{{Scenario: "ordered/a/g1", Baseline: 0.5}, {Scenario: "pipelined/b", Baseline: 120}}, rows)

	for name, bad := range map[string]string{
		"no markers": "| scenario | ratio |\n| ordered/a | 0.5 |\n",
		"empty":      guardBegin + "\n| scenario | ratio |\n|---|---|\n" + guardEnd + "\n",
		"bad ratio":  guardBegin + "\n| ordered/a | fast |\n" + guardEnd + "\n",
		"zero":       guardBegin + "\n| ordered/a | 0 |\n" + guardEnd + "\n",
		"one cell":   guardBegin + "\n| ordered/a |\n" + guardEnd + "\n",
	} {
		_, err := parseGuard(strings.NewReader(bad), "README.md")
		assert.Error(t, err, name)
	}
}

// The README's own table must parse, and name scenarios that exist.
func TestReadmeGuardTable(t *testing.T) {
	rows, err := readGuard("../../README.md")
	require.NoError(t, err)
	c := &config{messages: 100, quick: true, count: 1, producers: 1, consumers: 1, size: minPayload, backlog: 1000}
	known := make(map[string]bool)
	for _, s := range scenarios(c, newEnvironment()) {
		known[s.name] = true
	}
	for _, r := range rows {
		if !strings.Contains(r.Scenario, "redis") && !strings.Contains(r.Scenario, "postgres") && !strings.Contains(r.Scenario, "mysql") {
			assert.True(t, known[r.Scenario], "README guard row %q names no scenario", r.Scenario)
		}
	}
}

// fakeScenarios returns a base at 100 msgs/s and a scenario whose rate is
// the next of rates at each run.
func fakeScenarios(rates ...float64) []scenario {
	i := 0
	return []scenario{
		{name: "raw/x", run: func(context.Context) (*result, error) { return &result{Rate: 100}, nil }},
		{name: "ordered/x", base: "raw/x", run: func(context.Context) (*result, error) {
			r := rates[min(i, len(rates)-1)]
			i++
			return &result{Rate: r}, nil
		}},
	}
}

func guardOnce(t *testing.T, retries int, baseline float64, rates ...float64) guardVerdict {
	t.Helper()
	ss := fakeScenarios(rates...)
	c := &config{timeout: time.Minute}
	round := []*result{runOne(context.Background(), c, ss[0]), runOne(context.Background(), c, ss[1])}
	withRatios(ss, round)
	byName := map[string]*result{"raw/x": round[0], "ordered/x": round[1]}
	vs := guard(context.Background(), c, ss, nil, byName, []guardRow{{Scenario: "ordered/x", Baseline: baseline}, {Scenario: "ordered/elsewhere", Baseline: 1}}, retries, io.Discard)
	require.Len(t, vs, 2)
	assert.True(t, vs[1].NotRun && vs[1].Passed, "a row that did not run passes")
	return vs[0]
}

func TestGuard(t *testing.T) {
	v := guardOnce(t, 2, 1.0, 80)
	assert.True(t, v.Passed, "0.8 against 1.0: within 30%")
	assert.Equal(t, []float64{0.8}, v.Tries, "no retry when above the floor")

	v = guardOnce(t, 2, 1.0, 30, 50, 90)
	assert.True(t, v.Passed, "a noisy first run: the best of three counts")
	assert.Equal(t, []float64{0.3, 0.5, 0.9}, v.Tries)

	v = guardOnce(t, 1, 1.0, 30, 50, 90)
	assert.False(t, v.Passed, "one retry is not enough here")
	assert.InDelta(t, 0.5, v.Ratio, 1e-9)

	v = guardOnce(t, 2, 1.0, 60)
	assert.False(t, v.Passed, "a regression fails every try")
	assert.Equal(t, []float64{0.6, 0.6, 0.6}, v.Tries)
	assert.InDelta(t, 0.7, v.Floor, 1e-9)
	assert.False(t, guardPassed([]guardVerdict{v}))
}

// The whole path: -guard with a baseline far above what a run gives
// fails the run; with one below, it passes.
func TestRunGuard(t *testing.T) {
	dir := t.TempDir()
	write := func(ratio string) string {
		f := dir + "/guard-" + ratio + ".md"
		require.NoError(t, os.WriteFile(f, []byte(guardBegin+"\n| scenario | ratio |\n|---|---|\n| pipelined/memstore | "+ratio+" |\n"+guardEnd+"\n"), 0o644))
		return f
	}
	c := &config{quick: true, count: 1, messages: 400, producers: 1, consumers: 1, size: minPayload, backlog: 1000,
		timeout: 30 * time.Second, scenario: "^pipelined/memstore$", retries: 0}
	c.guard = write("1000000")
	var out strings.Builder
	ok, err := run(context.Background(), c, &out, io.Discard)
	require.NoError(t, err)
	assert.False(t, ok, "a ratio far under its baseline fails the run")
	assert.Contains(t, out.String(), "REGRESSED")

	c.guard = write("0.001")
	out.Reset()
	ok, err = run(context.Background(), c, &out, io.Discard)
	require.NoError(t, err)
	assert.True(t, ok, out.String())
	assert.Contains(t, out.String(), "Regression guard")
}

// Where a row has a CPU ratio, that is what the guard checks: a row whose
// throughput fell with the machine's load but whose CPU per message held
// passes, and one whose CPU per message grew fails.
func TestGuardPrefersCPURatio(t *testing.T) {
	check := func(rate, cpu float64) guardVerdict {
		ss := []scenario{
			{name: "raw/y", run: func(context.Context) (*result, error) { return &result{Rate: 100, CPUPerMsg: 1}, nil }},
			{name: "ordered/y", base: "raw/y", run: func(context.Context) (*result, error) { return &result{Rate: rate, CPUPerMsg: cpu}, nil }},
		}
		c := &config{timeout: time.Minute}
		round := []*result{runOne(context.Background(), c, ss[0]), runOne(context.Background(), c, ss[1])}
		withRatios(ss, round)
		byName := map[string]*result{"raw/y": round[0], "ordered/y": round[1]}
		return guard(context.Background(), c, ss, nil, byName, []guardRow{{Scenario: "ordered/y", Baseline: 0.8}}, 2, io.Discard)[0]
	}
	v := check(30, 1.25)
	assert.True(t, v.Passed, "throughput 0.3, CPU ratio 0.8: passes on the CPU ratio")
	assert.InDelta(t, 0.8, v.Ratio, 1e-9)
	v = check(90, 2.5)
	assert.False(t, v.Passed, "throughput 0.9, CPU ratio 0.4: fails on the CPU ratio")
	assert.Len(t, v.Tries, 3)
}

// A row whose base is no scenario but a rate it measures itself (the
// engine/filestore rows' fsyncs) runs again alone: the retry used to fail
// the row for a base "not in this run".
func TestGuardRetriesARowWithItsOwnBase(t *testing.T) {
	i := 0
	ss := []scenario{{name: "engine/x", base: "16x fdatasync/s", run: func(context.Context) (*result, error) {
		i++
		return &result{Rate: float64(50 * i), baseRate: 100}, nil
	}}}
	c := &config{timeout: time.Minute}
	round := []*result{runOne(context.Background(), c, ss[0])}
	withRatios(ss, round)
	vs := guard(context.Background(), c, ss, nil, map[string]*result{"engine/x": round[0]}, []guardRow{{Scenario: "engine/x", Baseline: 1}}, 2, io.Discard)
	assert.True(t, vs[0].Passed, "0.5, then 1.0 on the retry: %+v", vs[0])
	assert.Empty(t, vs[0].Problem)
	assert.Equal(t, []float64{0.5, 1}, vs[0].Tries)
}
