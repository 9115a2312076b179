package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
)

// The regression guard (-guard FILE) compares each ratio of this run with
// a baseline written in FILE (the README), between these two markers, as a
// Markdown table whose first column is a scenario and whose second is its
// baseline, measured with the same flags (further columns are notes):
//
//	<!-- bench-guard:begin -->
//	| scenario | ratio |
//	|---|---|
//	| ordered/memqueue/memstore/durable/g1 | 0.34 |
//	<!-- bench-guard:end -->
//
// The ratio guarded is the CPU ratio (raw CPU per message over this row's)
// where the row has one, else the throughput ratio (pipelined against
// serial, filestore reservations against the disk's fsyncs). CPU time is
// the process's own, so other work on the machine moves it far less than
// it moves wall-clock throughput: at -quick size an in-process row lasts
// 10-50 ms, and its throughput ratio varied 0.09-0.85 between rounds of
// one run. A ratio more than guardSlack below its baseline fails the run;
// a row below the line runs again with its base, up to -guard-retries
// more times, and its best ratio counts. A regression fails every try; a
// noisy moment seldom does. A row whose baseline is in µs is a CPU row,
// judged apart (cpuguard.go).
const (
	guardBegin = "<!-- bench-guard:begin -->"
	guardEnd   = "<!-- bench-guard:end -->"
	guardSlack = 0.30
)

// guardRow is one baseline of the guard table.
type guardRow struct {
	Scenario string  `json:"scenario"`
	Baseline float64 `json:"baseline"`
	// CPU: Baseline is the CPU µs per message that ordering adds to the
	// row's raw base (a cell "3.45 µs"), judged by judgeCPU over pairs of
	// runs (see cpuguard.go); else Baseline is a ratio. Step is the
	// regression a CPU row must see, if not cpuGuardStep ("5.45 µs, step 2").
	CPU  bool    `json:"cpu,omitempty"`
	Step float64 `json:"step_us,omitempty"`
}

// guardVerdict is the guard's finding for one row.
type guardVerdict struct {
	guardRow
	Floor   float64   `json:"floor"`
	Ratio   float64   `json:"ratio"`           // the best of Tries
	Tries   []float64 `json:"tries,omitempty"` // every ratio measured, the first from the main run
	Passed  bool      `json:"passed"`
	NotRun  bool      `json:"not_run,omitempty"`
	Problem string    `json:"problem,omitempty"`
	// CPUTries are a CPU row's tries, each the judgement of every pair run
	// so far when the try ended; the last is the verdict (Floor, Ratio and
	// Tries are a ratio row's).
	CPUTries []cpuJudgement `json:"cpu_tries,omitempty"`
	// Against is the reference binary a CPU row was judged against
	// (-guard-ref; cpuref.go), if not against its baseline.
	Against string `json:"against,omitempty"`
}

// readGuard reads the guard table from file.
func readGuard(file string) ([]guardRow, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("bench: -guard: %w", err)
	}
	defer f.Close()
	return parseGuard(f, file)
}

func parseGuard(r io.Reader, name string) ([]guardRow, error) {
	var rows []guardRow
	in, seen := false, false
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == guardBegin:
			in, seen = true, true
			continue
		case text == guardEnd:
			in = false
			continue
		case !in || !strings.HasPrefix(text, "|"):
			continue
		}
		cells := strings.Split(strings.Trim(text, "|"), "|")
		if len(cells) < 2 {
			return nil, fmt.Errorf("bench: -guard: %s:%d: want | scenario | ratio |", name, line)
		}
		scenario, ratio := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		if scenario == "scenario" || strings.Trim(scenario, "-: ") == "" {
			continue // the header and its separator
		}
		baseline, stepText, stepped := strings.Cut(ratio, ", step ")
		number, cpu := strings.CutSuffix(strings.TrimSpace(baseline), "µs")
		number = strings.TrimPrefix(strings.TrimSpace(number), "+")
		v, err := strconv.ParseFloat(number, 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("bench: -guard: %s:%d: baseline %q of %s is not a positive number (a ratio, or CPU µs per message)", name, line, ratio, scenario)
		}
		row := guardRow{Scenario: scenario, Baseline: v, CPU: cpu}
		if stepped {
			step, err := strconv.ParseFloat(strings.TrimSpace(stepText), 64)
			if err != nil || !(step > 0) || !cpu {
				return nil, fmt.Errorf("bench: -guard: %s:%d: %q of %s: want \"N µs, step S\" with S positive", name, line, ratio, scenario)
			}
			row.Step = step
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: -guard: %s: %w", name, err)
	}
	if !seen || len(rows) == 0 {
		return nil, fmt.Errorf("bench: -guard: %s has no table between %s and %s", name, guardBegin, guardEnd)
	}
	return rows, nil
}

// guard checks the results against rows, running a ratio row that falls
// below its floor again (with its base) up to retries times. A CPU row runs
// in pairs with its base, from pairScen (the scenarios at -guard-messages),
// if it was selected.
func guard(ctx context.Context, c *config, selected, pairScen []scenario, byName map[string]*result, rows []guardRow, retries int, progress io.Writer) []guardVerdict {
	scen := make(map[string]scenario, len(selected))
	for _, s := range selected {
		scen[s.name] = s
	}
	refs := make(map[string]float64) // the CPU rows' speed references, by raw scenario
	for _, row := range rows {
		if row.CPU && isRaw(row.Scenario) {
			refs[row.Scenario] = row.Baseline
		}
	}
	out := make([]guardVerdict, 0, len(rows))
	for _, row := range rows {
		switch {
		case row.CPU && isRaw(row.Scenario):
			continue // a reference, not a guard
		case row.CPU:
			_, selected := scen[row.Scenario]
			out = append(out, cpuGuard(ctx, c, pairScen, refs, row, selected, retries, progress))
			if selected && c.guardRef != "" {
				out = append(out, refGuard(ctx, c, row, retries, progress))
			}
			continue
		}
		v := guardVerdict{guardRow: row, Floor: row.Baseline * (1 - guardSlack)}
		r, ok := byName[row.Scenario]
		s, known := scen[row.Scenario]
		switch {
		case !ok || !known:
			// Not selected (-scenario) or not on this machine (a
			// store without its env var): nothing to compare.
			v.NotRun, v.Passed = true, true
			out = append(out, v)
			continue
		case r.Failed != "":
			v.Problem = "the scenario failed: " + r.Failed
			out = append(out, v)
			continue
		case guarded(r) == 0:
			v.Problem = "the scenario has no ratio (its base failed?)"
			out = append(out, v)
			continue
		}
		v.Ratio = guarded(r)
		v.Tries = append(v.Tries, v.Ratio)
		for try := 0; v.Ratio < v.Floor && try < retries && ctx.Err() == nil; try++ {
			fmt.Fprintf(progress, "  guard: %s at %.3g, under %.3g: again (%d of %d)\n", row.Scenario, v.Ratio, v.Floor, try+1, retries)
			ratio, err := rerun(ctx, c, scen, s)
			if err != nil {
				v.Problem = err.Error()
				break
			}
			v.Tries = append(v.Tries, ratio)
			v.Ratio = max(v.Ratio, ratio)
		}
		v.Passed = v.Ratio >= v.Floor
		out = append(out, v)
	}
	return out
}

// rerun runs s and its base once more and returns the ratio of the two.
// A row whose base is no scenario (engine/filestore-16: the disk's own
// fsyncs, measured within the row) runs alone.
func rerun(ctx context.Context, c *config, scen map[string]scenario, s scenario) (float64, error) {
	ss := []scenario{s}
	if b, ok := scen[s.base]; ok {
		ss = []scenario{b, s}
	}
	runs := make([]*result, len(ss))
	for i, sc := range ss {
		runs[i] = runOne(ctx, c, sc)
		if runs[i].Failed != "" {
			return 0, fmt.Errorf("%s failed: %s", runs[i].Name, runs[i].Failed)
		}
	}
	withRatios(ss, runs)
	ratio := guarded(runs[len(runs)-1])
	if ratio == 0 {
		return 0, errors.New("no ratio")
	}
	return ratio, nil
}

// cpuGuard judges a CPU row: it runs the row's scenario and its raw base
// from pairScen in pairs as judgeRow asks (-guard-pairs a try, retries more
// tries while the row is over its limit). refs holds the raw bases' CPU
// per message when the baselines were measured.
func cpuGuard(ctx context.Context, c *config, pairScen []scenario, refs map[string]float64, row guardRow, selected bool, retries int, progress io.Writer) guardVerdict {
	v := guardVerdict{guardRow: row}
	if !selected {
		v.NotRun, v.Passed = true, true
		return v
	}
	byName := make(map[string]scenario, len(pairScen))
	for _, ps := range pairScen {
		byName[ps.name] = ps
	}
	s, ok := byName[row.Scenario]
	base, baseOK := byName[s.base]
	switch {
	case !ok || !baseOK || !isRaw(base.name):
		v.Problem = "a CPU row needs a scenario with a raw base"
		return v
	case refs[base.name] == 0:
		v.Problem = fmt.Sprintf("the guard table has no CPU baseline (in µs) for %s, the speed reference", base.name)
		return v
	}
	b := cpuBaseline{Raw: refs[base.name], Added: row.Baseline, Step: row.Step}
	// One P: no idle P's thread spins looking for work, a cost that comes
	// and goes with the timing of the hand-offs and with the machine's
	// load, not with ordering's work (and the guard takes one CPU of a
	// shared machine, not all).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// The first run of the base at its size grows the heap and pays its
	// page faults: its CPU per message came out 10-35% over the runs after
	// it, and the first pair under the limit by that much. It runs once
	// first, not counted.
	runtime.GC()
	if r := runOne(ctx, c, base); r.Failed != "" {
		v.Problem = fmt.Sprintf("%s failed: %s", r.Name, r.Failed)
		return v
	}
	k := 0
	next := func() (cpuPair, error) {
		if err := ctx.Err(); err != nil {
			return cpuPair{}, err
		}
		k++
		return runPair(ctx, c, base, s, k%2 == 0)
	}
	seen := func(p cpuPair, j cpuJudgement) {
		// The speed, and so every pair's scaled figure, moves as pairs
		// come: the line shows this pair's own figures and the judgement
		// so far.
		fmt.Fprintf(progress, "  guard: %s pair %d: raw %.2f, ordered %.2f µs/msg (+%.2f); so far %s, limit +%.2f\n",
			s.name, k, p.Base, p.Row, p.Row-p.Base, j, j.Limit)
	}
	return v.judged(judgeRow(b, c.guardPairs, retries, next, seen))
}

// pairScenarios returns the scenarios of the CPU rows' pairs: the ordered
// rows at -guard-messages, their raw bases at cpuGuardRawFactor times as
// many.
func pairScenarios(c *config, e *environment) []scenario {
	oc, rc := *c, *c
	oc.messages, rc.messages = c.guardMessages, c.guardMessages*cpuGuardRawFactor
	var out []scenario
	for _, s := range scenarios(&oc, e) {
		if !isRaw(s.name) {
			out = append(out, s)
		}
	}
	for _, s := range scenarios(&rc, e) {
		if isRaw(s.name) {
			out = append(out, s)
		}
	}
	return out
}

func isRaw(name string) bool { return strings.HasPrefix(name, "raw/") }

// runPair runs base and s back to back (s first if sFirst), each after a
// GC, so that neither pays for the other's garbage, and returns their CPU
// per message.
func runPair(ctx context.Context, c *config, base, s scenario, sFirst bool) (cpuPair, error) {
	order := []scenario{base, s}
	if sFirst {
		order = []scenario{s, base}
	}
	cpu := make(map[string]float64, 2)
	for _, sc := range order {
		runtime.GC()
		r := runOne(ctx, c, sc)
		if r.Failed != "" {
			return cpuPair{}, fmt.Errorf("%s failed: %s", r.Name, r.Failed)
		}
		if !(r.CPUPerMsg > 0) {
			return cpuPair{}, fmt.Errorf("%s measured no CPU time", r.Name)
		}
		cpu[sc.name] = r.CPUPerMsg
	}
	return cpuPair{Base: cpu[base.name], Row: cpu[s.name]}, nil
}

// judged returns v with a CPU row's tries (judgeRow's) and their verdict.
func (v guardVerdict) judged(tries []cpuJudgement, err error) guardVerdict {
	v.CPUTries = tries
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	v.Passed = len(tries) > 0 && tries[len(tries)-1].Passed
	return v
}

// guarded returns the ratio the guard checks: the CPU ratio if r has one,
// else the throughput ratio.
func guarded(r *result) float64 {
	if r.CPURatio > 0 {
		return r.CPURatio
	}
	return r.Ratio
}

// guardPassed reports whether every verdict passed.
func guardPassed(vs []guardVerdict) bool {
	for _, v := range vs {
		if !v.Passed {
			return false
		}
	}
	return true
}

func printGuard(w io.Writer, file string, vs []guardVerdict) {
	fmt.Fprintln(w)
	fmt.Fprint(w, wrap(fmt.Sprintf("Regression guard (baselines in %s; fails below %.0f%% of a baseline, best of the tries):", file, 100*(1-guardSlack)), "", "  "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var problems []string // printed after the table: they are long
	for _, v := range vs {
		verdict := "ok"
		switch {
		case v.NotRun:
			verdict = "not run"
		case !v.Passed && v.Problem != "":
			verdict = "FAILED"
			problems = append(problems, v.Scenario+": "+v.Problem)
		case !v.Passed:
			verdict = "REGRESSED"
		}
		if v.CPU {
			against, stale := fmt.Sprintf("baseline +%.2f µs", v.Baseline), " (decidedly cheaper than its baseline: lower it)"
			if v.Against != "" {
				against, stale = "against the reference", " (decidedly cheaper than the reference: move it forward)"
			}
			tries := make([]string, len(v.CPUTries))
			for i, j := range v.CPUTries {
				tries[i] = j.String()
				if j.Stale {
					verdict += stale
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\tlimit +%.2f µs\tmeasured %s\t%s\n", v.Scenario, against, v.Baseline+cpuBaseline{Step: v.Step}.step()/2, strings.Join(tries, "; "), verdict)
			continue
		}
		tries := make([]string, len(v.Tries))
		for i, t := range v.Tries {
			tries[i] = strconv.FormatFloat(t, 'g', 3, 64)
		}
		fmt.Fprintf(tw, "  %s\tbaseline %.3g\tfloor %.3g\tmeasured %s\t%s\n", v.Scenario, v.Baseline, v.Floor, strings.Join(tries, ", "), verdict)
	}
	tw.Flush()
	for _, p := range problems {
		fmt.Fprint(w, wrap("FAILED "+p, "  ", "    "))
	}
}
