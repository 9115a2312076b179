package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
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
	Notes     string  `json:"notes,omitempty"`
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

	// baseRate overrides the base row's rate (engine rows compare with a
	// limit measured in the same scenario).
	baseRate float64
}

func printTable(w io.Writer, results []*result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmsgs/s\tratio\tcpu µs/msg\tcpu ratio\treqs/msg\tstore/msg\tp50\tp99\tpeak\tallocs/msg\t\tbase; notes")
	for _, r := range results {
		if r.Failed != "" {
			fmt.Fprintf(tw, "%s\tFAILED\t\t\t\t\t\t\t\t\t\t\t%s\n", r.Name, r.Failed)
			continue
		}
		notes := r.Base
		if r.Notes != "" {
			if notes != "" {
				notes += "; "
			}
			notes += r.Notes
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\t%s\n", r.Name,
			num(r.Rate, 0), num(r.Ratio, 2), num(r.CPUPerMsg, 2), num(r.CPURatio, 2), num(r.ReqsPerMsg, 3), num(r.StoreOpsPerMsg, 3),
			ms(r.P50), ms(r.P99), count(r.PeakBuffered), num(r.AllocsPerMsg, 1), notes)
	}
	tw.Flush()
	// tabwriter right-aligns every cell; the first column reads better on
	// the left, so the header and rows keep their names padded as printed.
}

func num(v float64, prec int) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func ms(v float64) string {
	if v == 0 {
		return "-"
	}
	if v < 10 {
		return fmt.Sprintf("%.2fms", v)
	}
	return fmt.Sprintf("%.0fms", v)
}

func count(v int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

// target is one performance target of DESIGN.md, with what was measured.
type target struct {
	Name     string  `json:"target"`
	Scenario string  `json:"scenario"`
	Measured float64 `json:"measured"`
	Want     string  `json:"want"`
	Met      bool    `json:"met"`
	Missing  bool    `json:"not_run,omitempty"`
}

// checkTargets evaluates DESIGN.md's "Performance" targets on the results.
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
		atLeast("ordered/raw", s, 0.90, ratio)
		atLeast("ordered/raw, CPU per message", s, 0.90, func(r *result) float64 { return r.CPURatio })
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
	fmt.Fprintln(w, "Targets (DESIGN.md, Performance):")
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
