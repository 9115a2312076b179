package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// withRatios fills in the ratios of one round's results (round[i] is the
// run of selected[i]; bases and floors come first) from the bases' and
// floors' runs of the same round: a ratio never divides figures of two
// rounds.
func withRatios(selected []scenario, round []*result) {
	byName := make(map[string]*result, len(round))
	for i, s := range selected {
		r := round[i]
		b := byName[s.base]
		if b != nil && b.Failed == "" && b.Rate > 0 && r.baseRate == 0 {
			r.baseRate = b.Rate
		}
		if r.baseRate > 0 {
			r.Ratio = r.Rate / r.baseRate
		}
		if b != nil && strings.HasPrefix(b.Name, "raw/") && b.CPUPerMsg > 0 && r.CPUPerMsg > 0 {
			r.CPURatio = b.CPUPerMsg / r.CPUPerMsg
		}
		if f := byName[s.floor]; f != nil && f.Failed == "" && f.Rate > 0 && r.Failed == "" {
			r.FloorRatio = r.Rate / f.Rate
			r.floorRaw, r.floorRawCPU = f.Ratio, f.CPURatio
			if f.CPUPerMsg > 0 && r.CPUPerMsg > 0 {
				r.FloorCPURatio = f.CPUPerMsg / r.CPUPerMsg
			}
		}
		byName[s.name] = r
	}
}

// pickRounds returns, for each scenario, the run that stands for it in the
// table: with one round, that run; with more, the run of the median round,
// ranked by ratio when the row has one and by msgs/s otherwise (the lower
// median for an even count, so that it is a real run). Its ratio and CPU
// ratio come from that round alone (see withRatios); its Round and Notes
// say which round it was and list the other rounds' figures. A failed run
// stands for its scenario whatever the other rounds did.
func pickRounds(selected []scenario, rounds [][]*result) []*result {
	out := make([]*result, len(selected))
	for i := range selected {
		runs := make([]*result, len(rounds))
		for k, round := range rounds {
			runs[k] = round[i]
		}
		if j := slices.IndexFunc(runs, func(r *result) bool { return r.Failed != "" }); j >= 0 {
			out[i] = runs[j]
			continue
		}
		if len(runs) == 1 {
			out[i] = runs[0]
			continue
		}
		key, by := func(r *result) float64 { return r.Rate }, "msgs/s"
		if runs[0].Ratio > 0 {
			key, by = func(r *result) float64 { return r.Ratio }, "ratio"
		}
		order := make([]int, len(runs))
		for k := range order {
			order[k] = k
		}
		slices.SortStableFunc(order, func(a, b int) int {
			return cmp.Compare(key(runs[a]), key(runs[b]))
		})
		k := order[(len(order)-1)/2]
		r := runs[k]
		r.Round = k + 1
		figures := make([]string, len(runs))
		for j, run := range runs {
			figures[j] = fmt.Sprintf("%.3g", key(run))
		}
		if r.Notes != "" {
			r.Notes += "; "
		}
		r.Notes += fmt.Sprintf("round %d of %d, the median by %s (rounds: %s)", k+1, len(runs), by, strings.Join(figures, ", "))
		out[i] = r
	}
	return out
}
