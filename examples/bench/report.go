package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// result is one row of the table. Zero (or NaN) fields are printed as "-".
type result struct {
	Name     string  `json:"scenario"`
	Messages int     `json:"messages"`
	Rate     float64 `json:"msgs_per_s"`
	Ratio    float64 `json:"ratio,omitempty"`
	Base     string  `json:"base,omitempty"`
	// ReqsPerMsg is queue requests per message; StoreOpsPerMsg store calls
	// per message.
	ReqsPerMsg     float64 `json:"queue_requests_per_msg,omitempty"`
	StoreOpsPerMsg float64 `json:"store_ops_per_msg,omitempty"`
	// ReqsByKind splits ReqsPerMsg by kind, for drivers that count them
	// (the emulator); the notes print it.
	ReqsByKind   *reqKinds `json:"queue_requests_per_msg_by_kind,omitempty"`
	P50          float64   `json:"p50_ms,omitempty"`
	P99          float64   `json:"p99_ms,omitempty"`
	PeakBuffered int       `json:"peak_buffered,omitempty"`
	AllocsPerMsg float64   `json:"allocs_per_msg,omitempty"`
	// CPUPerMsg is the process's CPU time per message, in microseconds;
	// CPURatio is the base row's CPUPerMsg divided by this row's: the
	// throughput ratio if both were CPU-bound, and much less sensitive to
	// other work on the machine than the wall-clock ratio.
	CPUPerMsg float64 `json:"cpu_us_per_msg,omitempty"`
	CPURatio  float64 `json:"cpu_ratio,omitempty"`
	// Floor names the floor row of an ordered row (see floorWork);
	// FloorRatio is this row's msgs/s over the floor's, FloorCPURatio the
	// floor's CPU per message over this row's: how far ordering is from
	// its unavoidable work.
	Floor         string  `json:"floor_scenario,omitempty"`
	FloorRatio    float64 `json:"floor_ratio,omitempty"`
	FloorCPURatio float64 `json:"floor_cpu_ratio,omitempty"`
	Notes         string  `json:"notes,omitempty"`
	// Hot-group figures (backlog rows, see hot): drain time, messages the
	// queue handed out per message, store writes (Advance and Park calls)
	// per message, the longest time between two deliveries, the peak of
	// messages received and not deleted, arrivals parked and not kept, and
	// the heap in use at the end (after a GC).
	DrainSeconds      float64 `json:"drain_s,omitempty"`
	ReceivesPerMsg    float64 `json:"receives_per_msg,omitempty"`
	StoreWritesPerMsg float64 `json:"store_writes_per_msg,omitempty"`
	LongestPause      float64 `json:"longest_pause_s,omitempty"`
	MaxUndeleted      int     `json:"max_undeleted,omitempty"`
	Parked            int64   `json:"parked,omitempty"`
	NotKept           int64   `json:"not_kept,omitempty"`
	HeapInuseMiB      float64 `json:"heap_inuse_mib,omitempty"`
	// Round is the round (from 1) whose run the row shows, with -count
	// above 1: the median round (see pickRounds); 0 with one round.
	Round   int     `json:"round,omitempty"`
	Seconds float64 `json:"seconds"`
	Failed  string  `json:"failed,omitempty"`

	// floorRaw and floorRawCPU are the floor row's ratios to raw in the
	// round FloorRatio comes from (the floor row's own line may show
	// another round).
	floorRaw, floorRawCPU float64

	// baseRate overrides the base row's rate (engine rows compare with a
	// limit measured in the same scenario).
	baseRate float64
}

// lineWidth is the widest line the bench prints to a terminal, in runes.
const lineWidth = 120

// column is one figure of the table: its heading on two lines (a unit under
// its name, so that no heading is wider than its figures) and its cell.
type column struct {
	head [2]string
	cell func(r *result) string
}

var columns = []column{
	{[2]string{"", "msgs/s"}, func(r *result) string { return num(r.Rate, 0) }},
	{[2]string{"", "ratio"}, func(r *result) string { return ratio(r.Ratio) }},
	{[2]string{"cpu", "µs/msg"}, func(r *result) string { return short(r.CPUPerMsg) }},
	{[2]string{"cpu", "ratio"}, func(r *result) string { return ratio(r.CPURatio) }},
	{[2]string{"reqs", "/msg"}, func(r *result) string { return num(r.ReqsPerMsg, 3) }},
	{[2]string{"store", "/msg"}, func(r *result) string { return num(r.StoreOpsPerMsg, 3) }},
	{[2]string{"p50", "ms"}, func(r *result) string { return short(r.P50) }},
	{[2]string{"p99", "ms"}, func(r *result) string { return short(r.P99) }},
	{[2]string{"", "peak"}, func(r *result) string { return count(r.PeakBuffered) }},
	{[2]string{"allocs", "/msg"}, func(r *result) string { return num(r.AllocsPerMsg, 1) }},
}

// printTable prints the results as a table of figures, the scenario names
// on the left, then each row's base and notes as wrapped paragraphs: the
// notes are too long for a column of a table that fits lineWidth.
func printTable(w io.Writer, results []*result) {
	cells := make([][]string, 0, len(results)+2)
	cells = append(cells, []string{""}, []string{"scenario"})
	for _, c := range columns {
		cells[0] = append(cells[0], c.head[0])
		cells[1] = append(cells[1], c.head[1])
	}
	for _, r := range results {
		row := []string{r.Name}
		for _, c := range columns {
			if r.Failed != "" {
				row = append(row, "FAILED")
				break
			}
			row = append(row, c.cell(r))
		}
		cells = append(cells, row)
	}
	widths := make([]int, len(columns)+1)
	for _, row := range cells {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	gap, total := 2, 0
	for _, wd := range widths {
		total += wd + gap
	}
	if total-gap > lineWidth {
		gap = 1
	}
	for _, row := range cells {
		var b strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			switch {
			case i == 0:
				b.WriteString(cell + pad) // names on the left
			default:
				b.WriteString(strings.Repeat(" ", gap) + pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	var notes []string
	for _, r := range results {
		var parts []string
		if r.Failed != "" {
			parts = append(parts, "FAILED: "+r.Failed)
		}
		if r.Base != "" {
			parts = append(parts, "base "+r.Base)
		}
		if r.Notes != "" {
			parts = append(parts, r.Notes)
		}
		if len(parts) > 0 {
			notes = append(notes, r.Name+": "+strings.Join(parts, "; "))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Notes (base: the row a ratio divides by):")
		for _, n := range notes {
			fmt.Fprint(w, wrap(n, "  ", "      "))
		}
	}
}

// printFloors compares each ordered row with its floor row, if both ran.
// The floor's own ratios are those of the same round.
func printFloors(w io.Writer, results []*result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := false
	for _, r := range results {
		if r.FloorRatio == 0 {
			continue
		}
		if !head {
			fmt.Fprintln(w)
			fmt.Fprint(w, wrap("Ordered against its floor (floor/<driver>/<store>/g<groups>: the raw row plus a header "+
				"encoded and decoded per message and one cursor write per received batch):", "", "  "))
			head = true
		}
		fmt.Fprintf(tw, "  %s\t%s of the floor's msgs/s, cpu %s\t(floor/raw %s, cpu %s)\n", r.Name,
			ratio(r.FloorRatio), ratio(r.FloorCPURatio), ratio(r.floorRaw), ratio(r.floorRawCPU))
	}
	tw.Flush()
}

// wrapAfter is wrap for text that continues a line already begun with
// printed: it returns the rest of that line and the lines after it.
func wrapAfter(printed, text, rest string) string {
	n := utf8.RuneCountInString(printed)
	return wrap(text, strings.Repeat(" ", n), rest)[n:]
}

// wrap breaks text into lines of at most lineWidth runes at spaces, the
// first line starting with first, the others with rest, each ending with a
// newline. A word too long for a line is cut.
func wrap(text, first, rest string) string {
	var b strings.Builder
	line, n := first, utf8.RuneCountInString(first)
	empty := true // line holds no word yet
	flush := func() {
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		line, n, empty = rest, utf8.RuneCountInString(rest), true
	}
	for _, word := range strings.Fields(text) {
		for {
			wn := utf8.RuneCountInString(word)
			sep := 1
			if empty {
				sep = 0
			}
			if n+sep+wn <= lineWidth {
				if !empty {
					line += " "
				}
				line, n, empty = line+word, n+sep+wn, false
				break
			}
			if !empty {
				flush()
				continue
			}
			// Alone on its line and still too long: cut it.
			cut := []rune(word)[:max(lineWidth-n, 1)]
			line += string(cut)
			word = string([]rune(word)[len(cut):])
			flush()
		}
	}
	if !empty || b.Len() == 0 {
		flush()
	}
	return b.String()
}

func num(v float64, prec int) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

// ratio formats a ratio with three significant figures or so: 0.39, 1.16,
// 125.
func ratio(v float64) string {
	if v >= 10 {
		return num(v, 0)
	}
	return num(v, 2)
}

// short formats a figure in at most four or five characters: 9.71, 99.2,
// 783.
func short(v float64) string {
	switch {
	case v >= 100:
		return num(v, 0)
	case v >= 10:
		return num(v, 1)
	}
	return num(v, 2)
}

func count(v int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

// target is one performance target of docs/PERFORMANCE.md, with what was measured.
type target struct {
	Name     string  `json:"target"`
	Scenario string  `json:"scenario"`
	Measured float64 `json:"measured"`
	Want     string  `json:"want"`
	Met      bool    `json:"met"`
	Missing  bool    `json:"not_run,omitempty"`
}

// checkTargets evaluates the targets of docs/PERFORMANCE.md on the results.
func checkTargets(byName map[string]*result) []target {
	var ts []target
	atLeast := func(name, scen string, want float64, measured func(*result) float64) {
		t := target{Name: name, Scenario: scen, Want: fmt.Sprintf(">= %g", want)}
		if r := byName[scen]; r != nil && r.Failed == "" {
			t.Measured = measured(r)
			t.Met = t.Measured >= want
		} else {
			t.Missing = true
		}
		ts = append(ts, t)
	}
	atMost := func(name, scen string, want float64, measured func(*result) float64) {
		t := target{Name: name, Scenario: scen, Want: fmt.Sprintf("<= %g", want)}
		if r := byName[scen]; r != nil && r.Failed == "" {
			t.Measured = measured(r)
			t.Met = t.Measured <= want
		} else {
			t.Missing = true
		}
		ts = append(ts, t)
	}
	ratio := func(r *result) float64 { return r.Ratio }
	for _, s := range []string{
		"ordered/emulator/filestore/durable/g1", "ordered/emulator/filestore/durable/g1000",
		"ordered/memqueue/memstore/durable/g1", "ordered/memqueue/memstore/durable/g1000",
	} {
		atLeast("ordered/raw", s, orderedTarget, ratio)
		atLeast("ordered/raw, CPU per message", s, orderedTarget, func(r *result) float64 { return r.CPURatio })
	}
	atLeast("pipelined/serial at 1ms", "pipelined/memstore", 10, ratio)
	for _, s := range []string{"ordered/memqueue/memstore/durable/g1", "ordered/memqueue/memstore/durable/g1000"} {
		atMost("queue requests per delivered message", s, 0.25, func(r *result) float64 { return r.ReqsPerMsg })
	}
	for _, s := range []string{"engine/core/g1", "engine/core/g1000"} {
		atLeast("receive core msgs/s on one core", s, 2e6, func(r *result) float64 { return r.Rate })
		atMost("receive core allocs per message", s, 1, func(r *result) float64 { return r.AllocsPerMsg })
	}
	const calm = "backlog/memqueue/memstore/g1"
	atMost("hot group: queue requests per message", calm, 1.3, func(r *result) float64 { return r.ReqsPerMsg })
	atMost("hot group: receives per message", calm, 1.3, func(r *result) float64 { return r.ReceivesPerMsg })
	atMost("hot group: store writes per message", calm, 0.2, func(r *result) float64 { return r.StoreWritesPerMsg })
	atMost("hot group: longest pause, s", calm, 1, func(r *result) float64 { return r.LongestPause })
	atMost("hot group: peak received and not deleted", calm, 4000, func(r *result) float64 { return float64(r.MaxUndeleted) })
	atLeast("hot group: calm/lossy drain time (1% lost)", calm+"/lossy", 0.5, ratio)
	atLeast("hot group over emulator: ordered/raw", "backlog/emulator/memstore/g1", 0.8, ratio)
	atMost("hot group over emulator: longest pause, s", "backlog/emulator/memstore/g1", 30, func(r *result) float64 { return r.LongestPause })
	atLeast("filestore reservations / (N x fsyncs/s)", "engine/filestore-16", 0.7, ratio)
	return ts
}

func printTargets(w io.Writer, ts []target) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Targets (docs/PERFORMANCE.md):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range ts {
		verdict := "MISSED"
		switch {
		case t.Missing:
			verdict = "not run"
		case t.Met:
			verdict = "met"
		}
		measured := "-"
		if !t.Missing {
			measured = strings.TrimSuffix(fmt.Sprintf("%.3g", t.Measured), ".0")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", t.Name, t.Scenario, measured, t.Want, verdict)
	}
	tw.Flush()
}

// percentile returns the p-th percentile (0..1) of sorted, in milliseconds.
func percentile(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(math.Ceil(p*float64(len(sorted))))-1, len(sorted)-1)
	return float64(time.Duration(sorted[max(i, 0)])) / float64(time.Millisecond)
}
