package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/examples/internal/progress"
)

// allScenarios returns every scenario the bench has with every optional
// service configured (only their names are used).
func allScenarios() []scenario {
	e := &environment{redisAddr: "redis:6379", postgresDSN: "postgres://x", mysqlDSN: "x", mnsEndpoint: "http://mns"}
	c := &config{messages: 100, quick: true, count: 1, producers: 1, consumers: 1, size: minPayload, backlog: 1000}
	return scenarios(c, e)
}

// fixedResults returns a row for every scenario of allScenarios with the
// widest figures and the longest notes the bench writes, and a failed row.
func fixedResults(t *testing.T) []*result {
	t.Helper()
	var rs []*result
	for i, s := range allScenarios() {
		r := &result{
			Name: s.name, Base: s.base, Floor: s.floor, Messages: 200_000, Rate: 12_345_678, Ratio: 124.94, CPUPerMsg: 1783.28, CPURatio: 0.39,
			ReqsPerMsg: 2.080, StoreOpsPerMsg: 0.915, P50: 1201, P99: 4881.5, PeakBuffered: 16515, AllocsPerMsg: 505.5,
			Notes: "drain 5.31s, 1.010 receives/msg, store writes 0.0149/msg (advance 0.0008, park 0.0141), longest pause " +
				"4.881s (first delivery after 0.003s), peak undeleted 3856, parked 19746, not kept 0, heap in use 6.1 MiB at the end " +
				"(7.0 MiB before the drain), visibility timeout 5s, 13 receive responses lost (LoseReceive 0.01), queue requests " +
				"of the drain; 80 unparks, send/receive/delete/visibility per msg 0.080/1.000/1.000/0.000, " +
				"round 3 of 3, the median by ratio (rounds: 0.9, 0.5, 0.8)",
		}
		if s.floor != "" {
			r.FloorRatio, r.FloorCPURatio, r.floorRaw, r.floorRawCPU = 124.94, 0.39, 124.94, 0.39
		}
		if i == 3 {
			r.Failed = "delivered 1999 of 2000 messages: context deadline exceeded (sent 2000, failed 0; received 2010, " +
				"delivered 1999, buffered 0, undeleted 11, parked 0, unparked 0, not kept 0, shortened 0, groups 1000, stuck 1); " +
				`group "g0042" stuck since 29.5s: waiting for seq 17 of epoch 1 (gap timeout 30s)`
		}
		rs = append(rs, r)
	}
	require.Greater(t, len(rs), 40, "every scenario, the optional ones too")
	return rs
}

// displayWidth is the width of line on a terminal: tabs to the next
// multiple of eight, other runes one column each.
func displayWidth(line string) int {
	n := 0
	for _, r := range line {
		if r == '\t' {
			n += 8 - n%8
			continue
		}
		n++
	}
	return n
}

// filePath matches what reads as a file name in the bench's output.
var filePath = regexp.MustCompile(`/?[\w-][\w.-]*(?:/[\w.-]+)*\.(?:md|go|json|svg|out|prof|pprof|txt|sh|yaml|yml|mod)\b`)

// checkOutput asserts that every line of out fits lineWidth and that every
// file it names exists in the repository (relative to its root, two
// directories up) or is one of passed, the paths given by flag.
func checkOutput(t *testing.T, what, out string, passed ...string) {
	t.Helper()
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		assert.LessOrEqual(t, displayWidth(line), lineWidth, "%s, line %d is %d columns wide:\n%s", what, i+1, displayWidth(line), line)
	}
	for _, p := range filePath.FindAllString(out, -1) {
		if contains(passed, p) {
			continue
		}
		_, err := os.Stat(filepath.Join("..", "..", p))
		assert.NoError(t, err, "%s names %q, which is not in the repository nor passed by flag", what, p)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestTableFits: the table, its notes, the targets and the guard's
// verdicts, from fixed results with every scenario, the widest figures and
// the longest notes, fit 120 columns and name only files that exist.
func TestTableFits(t *testing.T) {
	rs := fixedResults(t)
	byName := make(map[string]*result)
	for _, r := range rs {
		byName[r.Name] = r
	}
	var out strings.Builder
	printTable(&out, rs)
	printFloors(&out, rs)
	printTargets(&out, checkTargets(byName))
	guardFile := filepath.Join(t.TempDir(), "baselines.md")
	printGuard(&out, guardFile, []guardVerdict{
		{guardRow: guardRow{Scenario: "ordered/emulator-fifo/memstore/durable/g1000", Baseline: 0.903}, Floor: 0.632,
			Tries: []float64{0.3, 0.25, 0.31}, Ratio: 0.31},
		{guardRow: guardRow{Scenario: "ordered/emulator/postgres/durable/g1000", Baseline: 0.8}, Floor: 0.56,
			Problem: "the scenario failed: " + rs[3].Failed},
		{guardRow: guardRow{Scenario: "ordered/mns/filestore/durable/g1000", Baseline: 0.8}, NotRun: true, Passed: true},
	})
	text := out.String()
	checkOutput(t, "the table", text, guardFile)
	for _, r := range rs {
		assert.Contains(t, text, r.Name+" ", "every row is named")
	}
	assert.True(t, strings.Contains(text, "FAILED: delivered 1999 of 2000"), "a failure's message is printed")
	unwrapped := regexp.MustCompile(`\n +`).ReplaceAllString(text, " ")
	assert.True(t, strings.Contains(unwrapped, rs[3].Failed), "a failure's message is printed in full, wrapped")
	assert.False(t, strings.Contains(text, "DESIGN.md"), "not in the repository")
	assert.True(t, strings.Contains(text, "Targets (docs/PERFORMANCE.md)"), "the targets' source")
	assert.True(t, strings.Contains(text, "ordered/emulator/memstore/durable/g1000  125 of the floor's msgs/s, cpu 0.39"),
		"the rows against their floor")

	// The one line before the run and the progress lines.
	env := &environment{}
	out.Reset()
	fmt.Fprint(&out, wrap(fmt.Sprintf("bench: %d scenarios; %s; %s", len(rs), env.describe(), loadAverage()), "", "  "))
	name := fmt.Sprintf("  %-44s ", rs[3].Name)
	fmt.Fprint(&out, name+wrapAfter(name, "FAILED: "+rs[3].Failed, "    "))
	for _, r := range rs { // the line a terminal shows while a row runs
		out.WriteString(progress.Format(progress.Options{Label: "  " + r.Name, Unit: "msgs"}, 1_999_999, 2_000_000,
			1234*time.Second, 1_234_567, "") + "\n")
	}
	checkOutput(t, "the progress", out.String())
}

// TestUsageFits: -h fits 120 columns too (the flag package indents help with
// a tab).
func TestUsageFits(t *testing.T) {
	var stdout, stderr strings.Builder
	require.Equal(t, 0, command(t.Context(), []string{"-h"}, &stdout, &stderr))
	checkOutput(t, "-h", stderr.String())
}

func TestWrap(t *testing.T) {
	assert.Equal(t, "  a b\n", wrap("a  b", "  ", "    "))
	assert.Equal(t, "\n", wrap("", "", "  "), "an empty text is an empty line")
	long := strings.Repeat("word ", 60)
	got := wrap(long, "  ", "    ")
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Greater(t, len(lines), 2)
	for _, l := range lines {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), lineWidth)
		assert.True(t, strings.HasPrefix(l, "  "), "indented: %q", l)
	}
	assert.Equal(t, 60, strings.Count(got, "word"), "no word lost")
	cut := wrap(strings.Repeat("x", 300), "", "")
	assert.Equal(t, strings.Repeat("x", 300), strings.ReplaceAll(cut, "\n", ""), "a word longer than a line is cut, not lost")
	for _, l := range strings.Split(strings.TrimSuffix(cut, "\n"), "\n") {
		assert.LessOrEqual(t, len(l), lineWidth)
	}
}
