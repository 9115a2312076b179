package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
// noisy moment seldom does.
const (
	guardBegin = "<!-- bench-guard:begin -->"
	guardEnd   = "<!-- bench-guard:end -->"
	guardSlack = 0.30
)

// guardRow is one baseline of the guard table.
type guardRow struct {
	Scenario string  `json:"scenario"`
	Baseline float64 `json:"baseline"`
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
		v, err := strconv.ParseFloat(ratio, 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("bench: -guard: %s:%d: ratio %q of %s is not a positive number", name, line, ratio, scenario)
		}
		rows = append(rows, guardRow{Scenario: scenario, Baseline: v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: -guard: %s: %w", name, err)
	}
	if !seen || len(rows) == 0 {
		return nil, fmt.Errorf("bench: -guard: %s has no table between %s and %s", name, guardBegin, guardEnd)
	}
	return rows, nil
}

// guard checks the results against rows, running a row that falls below
// its floor again (with its base) up to retries times.
func guard(ctx context.Context, c *config, selected []scenario, byName map[string]*result, rows []guardRow, retries int, progress io.Writer) []guardVerdict {
	scen := make(map[string]scenario, len(selected))
	for _, s := range selected {
		scen[s.name] = s
	}
	out := make([]guardVerdict, 0, len(rows))
	for _, row := range rows {
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
func rerun(ctx context.Context, c *config, scen map[string]scenario, s scenario) (float64, error) {
	b, ok := scen[s.base]
	if !ok {
		return 0, fmt.Errorf("its base %q is not in this run", s.base)
	}
	runs := []*result{runOne(ctx, c, b), runOne(ctx, c, s)}
	for _, r := range runs {
		if r.Failed != "" {
			return 0, fmt.Errorf("%s failed: %s", r.Name, r.Failed)
		}
	}
	withRatios([]scenario{b, s}, runs)
	ratio := guarded(runs[1])
	if ratio == 0 {
		return 0, errors.New("no ratio")
	}
	return ratio, nil
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
