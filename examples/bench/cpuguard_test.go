package main

import (
	"context"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBinomTail(t *testing.T) {
	for _, tc := range []struct {
		k, x int
		want float64
	}{
		{5, 0, 1.0 / 32}, {5, -1, 0}, {5, 5, 1}, {5, 9, 1},
		{8, 1, 9.0 / 256}, {10, 1, 11.0 / 1024}, {10, 2, 56.0 / 1024}, {15, 3, 576.0 / 32768},
	} {
		assert.InDelta(t, tc.want, binomTail(tc.k, tc.x), 1e-12, "P(Binomial(%d, 1/2) <= %d)", tc.k, tc.x)
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{3, 1, 2}
	assert.Equal(t, 2.0, median(xs))
	assert.Equal(t, []float64{3, 1, 2}, xs, "the input keeps its order")
	assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}), "an even count: the mean of the middle two")
	assert.Equal(t, 0.0, median(nil))
}

// pairsAt returns one pair per added figure, raw at 1 µs per message.
func pairsAt(added ...float64) []cpuPair {
	ps := make([]cpuPair, len(added))
	for i, a := range added {
		ps[i] = cpuPair{Base: 1, Row: 1 + a}
	}
	return ps
}

func TestJudgeCPU(t *testing.T) {
	b := cpuBaseline{Raw: 1, Added: 3}

	j := judgeCPU(b, pairsAt(3, 3, 3, 3), false)
	assert.False(t, j.Decided, "4 pairs cannot decide at 5%% (1 in 16 by chance)")
	assert.InDelta(t, 3.5, j.Limit, 1e-9, "the limit is half a step over the baseline")

	j = judgeCPU(b, pairsAt(3.1, 2.9, 3.2, 3.0, 2.8), false)
	assert.True(t, j.Decided && j.Passed, "5 of 5 under the limit: %+v", j)
	assert.InDelta(t, 3.0, j.Added, 1e-9)
	assert.False(t, j.Stale)

	j = judgeCPU(b, pairsAt(4.1, 3.9, 4.2, 4.0, 3.8), false)
	assert.True(t, j.Decided && !j.Passed, "1 µs dearer, 5 of 5 over the limit: %+v", j)
	assert.Equal(t, 5, j.Above)

	j = judgeCPU(b, pairsAt(3.1, 2.9, 9, 3.0, 2.8, 3.1, 3.0, 2.9), false)
	assert.True(t, j.Decided && j.Passed, "one pair spoilt by a burst of load is one vote (1 of 8 over: 9 in 256)")
	assert.InDelta(t, 3.0, j.Added, 0.05, "the median ignores it")

	noisy := pairsAt(3.0, 3.7, 3.3, 3.8, 3.4, 3.6)
	j = judgeCPU(b, noisy, false)
	assert.False(t, j.Decided, "3 of 6 over: undecided, another pair")
	j = judgeCPU(b, noisy, true)
	assert.True(t, j.Decided && j.Passed, "the last look: the median, 3.45, is under 3.5")
	j = judgeCPU(b, append(noisy, pairsAt(3.9)...), true)
	assert.True(t, j.Decided && !j.Passed, "the last look: the median, 3.6, is over 3.5")

	j = judgeCPU(b, pairsAt(1.9, 2.0, 2.1, 2.0, 1.8), false)
	assert.True(t, j.Passed && j.Stale, "decidedly cheaper than the baseline: say so")

	j = judgeCPU(b, nil, true)
	assert.False(t, j.Decided, "no pairs, no verdict")

	b.Step = 2
	j = judgeCPU(b, pairsAt(3.9, 3.7, 3.8, 3.8, 3.6), false)
	assert.InDelta(t, 4.0, j.Limit, 1e-9, "a row with a step of 2 µs: the limit is 1 µs over")
	assert.True(t, j.Decided && j.Passed, "0.8 µs dearer is under half its step: passes, by design")
	j = judgeCPU(b, pairsAt(5.1, 4.9, 5.2, 5.0, 4.8), false)
	assert.True(t, j.Decided && !j.Passed, "2 µs dearer fails")
}

// A machine that does half as much per CPU second doubles both runs of a
// pair: the raw figures measure that, and what ordering added is scaled
// back to the reference's speed.
func TestJudgeCPUScalesToTheReference(t *testing.T) {
	b := cpuBaseline{Raw: 0.5, Added: 3}
	slow := []cpuPair{{1.0, 7.0}, {1.1, 7.1}, {0.9, 6.9}, {1.0, 7.0}, {1.0, 6.9}}
	j := judgeCPU(b, slow, false)
	assert.InDelta(t, 0.5, j.Speed, 1e-9)
	assert.InDelta(t, 3.0, j.Added, 1e-9, "6 µs at half the speed is 3 at the reference's")
	assert.True(t, j.Decided && j.Passed, "%+v", j)

	j = judgeCPU(b, []cpuPair{{0.5, 4.5}, {0.5, 4.4}, {0.5, 4.6}, {0.5, 4.5}, {0.5, 4.5}}, false)
	assert.InDelta(t, 4.0, j.Added, 1e-9)
	assert.True(t, j.Decided && !j.Passed, "1 µs dearer at the reference's speed")
}

// The noise model's error rates, simulated: pairs whose noise is Gaussian
// with a standard deviation of 0.3 and 0.5 µs (the spread of a try on this
// machine at load 3-11 was 0.1-0.9 µs, mostly under 0.5), judged by the
// shell's policy (judgeRow: 15 pairs a try, two more tries for a row over
// its limit). An unchanged row must pass and a row cpuGuardStep dearer must
// fail, each in at least 99% of runs, also when one pair in ten is spoilt
// (10 µs over), and when the first five pairs are (a burst of load through
// the first try).
func TestJudgeCPUErrorRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 24))
	b := cpuBaseline{Raw: 1, Added: 3}
	// row judges one row whose pairs add b.Added+shift with noise sd; it
	// returns the verdict and the pairs it took.
	row := func(shift, sd float64, spoilt string) (bool, int) {
		n := 0
		next := func() (cpuPair, error) {
			n++
			a := b.Added + shift + sd*rng.NormFloat64()
			if spoilt == "one in ten" && rng.IntN(10) == 0 || spoilt == "first five" && n <= 5 {
				a += 10
			}
			return cpuPair{Base: 1, Row: 1 + a}, nil
		}
		tries, err := judgeRow(b, 15, 2, next, nil)
		require.NoError(t, err)
		return tries[len(tries)-1].Passed, n
	}
	const runs = 1000
	for _, sd := range []float64{0.3, 0.5} {
		for _, spoilt := range []string{"none", "one in ten", "first five"} {
			passed, caught, okPairs, badPairs := 0, 0, 0, 0
			for range runs {
				ok, n := row(0, sd, spoilt)
				if ok {
					passed++
				}
				okPairs += n
				ok, n = row(cpuGuardStep, sd, spoilt)
				if !ok {
					caught++
				}
				badPairs += n
			}
			t.Logf("noise %.1f µs, spoilt pairs %s: unchanged rows passed %d of %d (%.1f pairs each), rows %.0f µs dearer failed %d of %d (%.1f pairs each)",
				sd, spoilt, passed, runs, float64(okPairs)/runs, cpuGuardStep, caught, runs, float64(badPairs)/runs)
			assert.GreaterOrEqual(t, passed, runs*99/100, "an unchanged row passes (noise %.1f, spoilt %s)", sd, spoilt)
			assert.GreaterOrEqual(t, caught, runs*99/100, "a row one step dearer fails (noise %.1f, spoilt %s)", sd, spoilt)
		}
	}
}

// judgeRow's tries: a row over its limit gets fresh pairs added to its old
// ones, at least cpuGuardMinPairs a try, and the last try is the verdict.
func TestJudgeRow(t *testing.T) {
	b := cpuBaseline{Raw: 1, Added: 3}
	feed := func(added ...float64) func() (cpuPair, error) {
		i := 0
		return func() (cpuPair, error) {
			a := added[min(i, len(added)-1)]
			i++
			return cpuPair{Base: 1, Row: 1 + a}, nil
		}
	}
	tries, err := judgeRow(b, 15, 2, feed(3), nil)
	require.NoError(t, err)
	require.Len(t, tries, 1)
	assert.True(t, tries[0].Passed)
	assert.Len(t, tries[0].Pairs, 5)

	tries, err = judgeRow(b, 15, 2, feed(4), nil)
	require.NoError(t, err)
	require.Len(t, tries, 3, "over the limit: two more tries")
	assert.False(t, tries[2].Passed)
	assert.Len(t, tries[2].Pairs, 15, "5 pairs a try, each try judging them all")

	tries, err = judgeRow(b, 15, 2, feed(4, 4, 4, 4, 4, 3), nil)
	require.NoError(t, err)
	require.Len(t, tries, 2, "a burst through the first try, outvoted in the second")
	assert.True(t, tries[1].Passed)
	assert.Len(t, tries[1].Pairs, 18, "5 of 18 over the limit: 4.8% by chance")

	var seen int
	_, err = judgeRow(b, 15, 2, feed(3), func(cpuPair, cpuJudgement) { seen++ })
	require.NoError(t, err)
	assert.Equal(t, 5, seen, "seen after every pair")
}

func TestParseGuardCPURows(t *testing.T) {
	doc := guardBegin + "\n| scenario | baseline |\n|---|---|\n| raw/memqueue/g1 | 0.5 µs |\n| ordered/memqueue/memstore/durable/g1 | +3.3 µs | a note |\n" +
		"| ordered/memqueue/memstore/durable/g1000 | 5.5 µs, step 2 |\n| pipelined/memstore | 141 |\n" + guardEnd + "\n"
	rows, err := parseGuard(strings.NewReader(doc), "README.md")
	require.NoError(t, err)
	assert.Equal(t, []guardRow{
		{Scenario: "raw/memqueue/g1", Baseline: 0.5, CPU: true},
		{Scenario: "ordered/memqueue/memstore/durable/g1", Baseline: 3.3, CPU: true},
		{Scenario: "ordered/memqueue/memstore/durable/g1000", Baseline: 5.5, CPU: true, Step: 2},
		{Scenario: "pipelined/memstore", Baseline: 141},
	}, rows)
	for _, bad := range []string{"µs", "3 µs, step 0", "3 µs, step x", "0.5, step 2"} {
		_, err = parseGuard(strings.NewReader(guardBegin+"\n| ordered/a | "+bad+" |\n"+guardEnd+"\n"), "README.md")
		assert.Error(t, err, "%q", bad)
	}
}

// cpuScenarios returns a raw base at 1 µs per message and an ordered row
// at the next of cpus at each run.
func cpuScenarios(cpus ...float64) []scenario {
	i := 0
	return []scenario{
		{name: "raw/q/g1", run: func(context.Context) (*result, error) { return &result{Rate: 100, CPUPerMsg: 1}, nil }},
		{name: "ordered/q/s/durable/g1", base: "raw/q/g1", run: func(context.Context) (*result, error) {
			cpu := cpus[min(i, len(cpus)-1)]
			i++
			return &result{Rate: 100, CPUPerMsg: cpu}, nil
		}},
	}
}

func TestGuardCPURow(t *testing.T) {
	rows := []guardRow{{Scenario: "raw/q/g1", Baseline: 1, CPU: true}, {Scenario: "ordered/q/s/durable/g1", Baseline: 3, CPU: true}}
	check := func(retries int, cpus ...float64) guardVerdict {
		ss := cpuScenarios(cpus...)
		c := &config{timeout: time.Minute, guardPairs: 15}
		vs := guard(context.Background(), c, ss, ss, nil, rows, retries, io.Discard)
		require.Len(t, vs, 1, "the raw row is the reference, not a guard")
		return vs[0]
	}
	v := check(2, 4)
	assert.True(t, v.Passed, "3 µs added, as the baseline")
	require.Len(t, v.CPUTries, 1)
	assert.Len(t, v.CPUTries[0].Pairs, cpuGuardMinPairs, "decided in the fewest pairs")

	v = check(2, 5)
	assert.False(t, v.Passed, "1 µs dearer")
	assert.Len(t, v.CPUTries, 3, "judged again on fresh pairs, twice")

	v = check(2, 5, 5, 5, 5, 5, 4)
	assert.True(t, v.Passed, "a first try spoilt throughout by load: outvoted in the second")
	assert.Len(t, v.CPUTries, 2)

	ss := cpuScenarios(4)
	c := &config{timeout: time.Minute, guardPairs: 15}
	vs := guard(context.Background(), c, ss, ss, nil, rows[1:], 2, io.Discard)
	assert.False(t, vs[0].Passed)
	assert.Contains(t, vs[0].Problem, "speed reference", "no raw row in the table")

	vs = guard(context.Background(), c, ss[:1], ss, nil, rows, 2, io.Discard)
	assert.True(t, vs[0].NotRun && vs[0].Passed, "not selected: not run")
}
