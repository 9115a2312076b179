package main

import (
	"fmt"
	"math"
	"slices"
)

// The CPU guard: what ordering adds to a row's CPU time per message, held
// against a baseline in microseconds. It guards the in-process memqueue
// rows, where ordering is most of the work and a ratio of two short runs
// does not hold still (see guard.go). In the guard table a baseline that
// ends in "µs" makes a CPU row; the row of its raw base gives that base's
// CPU per message when the baselines were measured, the speed reference:
//
//	| raw/memqueue/g1 | 0.55 µs |
//	| ordered/memqueue/memstore/durable/g1 | 3.3 µs |
//
// The shell (cpuGuard) runs the row and its raw base in pairs, back to
// back, alternating which goes first, each run after a GC, on one P
// (GOMAXPROCS 1), the base over cpuGuardRawFactor times as many messages so
// that both last about as long. CPU time is the process's (getrusage), not
// wall time: time spent waiting for a CPU is not counted at all. What other
// work on the machine still changes is how much a CPU second does (a busy
// sibling hyperthread, caches, frequency): on this 2-CPU machine two
// spinning processes made both runs of a pair up to 40% dearer, and what
// ordering adds moved by 1.7 µs in one run of three. So each pair's
// difference is scaled by the speed of this run as its raw base measures
// it, the reference over the median of the pairs' raw figures (the median,
// not each pair's own: a short raw run is too noisy to scale one pair by):
//
//	added = (ordered - raw) × reference / median(raw)
//
// judgeCPU decides from the pairs so far. The limit is the baseline plus
// half the regression the guard must see (cpuGuardStep): a row that got
// cpuGuardStep dearer lands as far above the limit as an unchanged row
// lands below it. The noise model is a sign test on the median: if the
// row's true figure were exactly the limit, each pair would land above or
// below it with probability 1/2, so the count above is Binomial(k, 1/2).
// The guard passes once so few pairs are above the limit that this would
// happen with probability at most cpuGuardAlpha, fails once so few are
// below, and otherwise runs another pair, up to -guard-pairs; then the
// median decides. It assumes nothing about the shape of the noise: a pair
// spoilt by a burst of load is one vote, not an average dragged off, and
// a noisy machine costs pairs, not a wrong verdict. The spread (1.4826
// times the median absolute deviation, a robust standard deviation) is
// reported; a pair's noise well under cpuGuardStep/2 decides in
// cpuGuardMinPairs pairs. What pairing cannot remove is a shift of a whole
// try (a burst of load that outlasts it, or raw's runs dearer than the
// machine's speed, which scales the row down): a row that fails is judged
// again with fresh pairs added to its old ones (judgeRow, -guard-retries).
const (
	// cpuGuardStep is the regression, in CPU µs per message at the
	// reference's speed, that the CPU guard must see; the limit is half
	// of it above the baseline.
	cpuGuardStep = 1.0
	// cpuGuardAlpha is the sign test's level, one-sided, at each look.
	cpuGuardAlpha = 0.05
	// cpuGuardMinPairs is the fewest pairs that can decide at
	// cpuGuardAlpha: 5 pairs all on one side happen by chance 1 time in 32.
	cpuGuardMinPairs = 5
	// cpuGuardRawFactor: the raw base of a pair runs this many times the
	// ordered row's messages (raw costs a fifth to a tenth as much CPU).
	cpuGuardRawFactor = 4
)

// judgeRow is the CPU guard's policy over a row's pairs, which next runs
// one at a time: pairs until judgeCPU decides (at most maxPairs); if the row
// is over its limit, up to retries more tries, each adding at least
// cpuGuardMinPairs and at most maxPairs fresh pairs to the same list and
// judging them all, so that a burst of load that spoilt the first try is
// outvoted and the speed comes from more runs of raw. It returns each
// try's judgement (the last one is the verdict) and calls seen, if not nil,
// with the judgement after each pair.
func judgeRow(b cpuBaseline, maxPairs, retries int, next func() (cpuPair, error), seen func(cpuPair, cpuJudgement)) ([]cpuJudgement, error) {
	var pairs []cpuPair
	var tries []cpuJudgement
	for try := 0; try <= retries; try++ {
		start := len(pairs)
		for {
			p, err := next()
			if err != nil {
				return tries, err
			}
			pairs = append(pairs, p)
			fresh := len(pairs) - start
			j := judgeCPU(b, pairs, fresh >= maxPairs)
			if seen != nil {
				seen(p, j)
			}
			if j.Decided && fresh >= cpuGuardMinPairs {
				tries = append(tries, j)
				if j.Passed {
					return tries, nil
				}
				break
			}
		}
	}
	return tries, nil
}

// cpuPair is one pair of runs, back to back: the CPU µs per message of the
// base (the raw row, or the reference binary's run of the row: cpuref.go)
// and of the row.
type cpuPair struct {
	Base float64 `json:"base_cpu_us_per_msg"`
	Row  float64 `json:"cpu_us_per_msg"`
}

// cpuBaseline is a CPU row's baseline: the CPU µs per message that
// ordering adds (Added), measured when its raw base used Raw, and the
// regression the row must see (Step; 0: cpuGuardStep). Raw 0: no speed
// reference, the pairs' differences count as measured (the reference
// binary's pairs, against Added 0).
type cpuBaseline struct {
	Raw   float64 `json:"raw_us"`
	Added float64 `json:"added_us"`
	Step  float64 `json:"step_us,omitempty"`
}

func (b cpuBaseline) step() float64 {
	if b.Step > 0 {
		return b.Step
	}
	return cpuGuardStep
}

// cpuJudgement is judgeCPU's finding on one try's pairs.
type cpuJudgement struct {
	Pairs []cpuPair `json:"pairs"`
	// Speed is the reference over the median of the pairs' raw figures:
	// what each pair's difference is scaled by (1: no speed reference).
	Speed  float64 `json:"speed"`
	Limit  float64 `json:"limit_us"`  // the baseline + half the step
	Added  float64 `json:"added_us"`  // the median of the pairs' scaled differences
	Spread float64 `json:"spread_us"` // 1.4826 × their median absolute deviation
	Above  int     `json:"above"`     // pairs above the limit
	// Decided: the sign test (or, on the last look, the median) decided;
	// Passed is its verdict.
	Decided bool `json:"decided"`
	Passed  bool `json:"passed"`
	// Stale: the row is decidedly cheaper than its baseline by more than
	// cpuGuardStep/2 (the same test, mirrored): its baseline should come
	// down, or a regression back up to it would pass.
	Stale bool `json:"stale,omitempty"`
}

// judgeCPU judges pairs against b. last says that no more pairs will
// come: the median decides what the sign test has not.
func judgeCPU(b cpuBaseline, pairs []cpuPair, last bool) cpuJudgement {
	j := cpuJudgement{Pairs: pairs, Limit: b.Added + b.step()/2}
	k := len(pairs)
	if k == 0 {
		return j
	}
	j.Speed = 1
	if b.Raw > 0 {
		base := make([]float64, k)
		for i, p := range pairs {
			base[i] = p.Base
		}
		if m := median(base); m > 0 {
			j.Speed = b.Raw / m
		}
	}
	added := make([]float64, k)
	for i, p := range pairs {
		added[i] = (p.Row - p.Base) * j.Speed
	}
	j.Added = median(added)
	dev := make([]float64, k)
	below, cheaper := 0, 0
	for i, a := range added {
		dev[i] = math.Abs(a - j.Added)
		switch {
		case a > j.Limit:
			j.Above++
		case a < j.Limit:
			below++ // a pair exactly at the limit votes neither way
		}
		if a < b.Added-b.step()/2 {
			cheaper++
		}
	}
	j.Spread = 1.4826 * median(dev)
	switch {
	case k >= cpuGuardMinPairs && binomTail(k, j.Above) <= cpuGuardAlpha:
		j.Decided, j.Passed = true, true
	case k >= cpuGuardMinPairs && binomTail(k, below) <= cpuGuardAlpha:
		j.Decided = true
	case last:
		j.Decided, j.Passed = true, j.Added <= j.Limit
	}
	j.Stale = j.Decided && j.Passed && binomTail(k, k-cheaper) <= cpuGuardAlpha
	return j
}

// String says what the judgement found, for the guard's table.
func (j cpuJudgement) String() string {
	return fmt.Sprintf("%+.2f µs (spread %.2f, speed %.2f; %d of %d pairs over the limit)", j.Added, j.Spread, j.Speed, j.Above, len(j.Pairs))
}

// binomTail returns P(X <= x) for X ~ Binomial(k, 1/2).
func binomTail(k, x int) float64 {
	if x < 0 {
		return 0
	}
	p, c := 0.0, 1.0 // c: k choose i
	for i := 0; i <= min(x, k); i++ {
		p += c
		c = c * float64(k-i) / float64(i+1)
	}
	return p / math.Pow(2, float64(k))
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is not changed.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
