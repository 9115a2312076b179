package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// orderedTarget is the ordered/raw ratio the targets of docs/PERFORMANCE.md
// ask of the emulator and memqueue rows, wall and CPU (checkTargets).
const orderedTarget = 0.90

// The chart's geometry, in pixels.
const (
	svgCharW   = 7.3 // a monospace character at svgFont
	svgFont    = 12
	svgPlotW   = 480.0 // the bars' area: svgMaxRatio wide at most
	svgBarH    = 8
	svgRowH    = 24 // one scenario: its two bars
	svgGroupH  = 22 // a group's heading
	svgMargin  = 12
	svgHeadH   = 64 // title, legend and axis labels above the rows
	svgValueW  = 48 // room for a bar's value after its end
	svgMaxAxis = 2.0
)

// chartRow is one scenario of the chart: its ratios against raw.
type chartRow struct {
	name      string
	wall, cpu float64
}

// chartRows picks the rows whose base is a raw row, grouped by transport
// and store (the second and third parts of the name: memqueue/memstore),
// the groups in the order they first appear.
func chartRows(results []*result) (groups []string, rows map[string][]chartRow) {
	rows = make(map[string][]chartRow)
	for _, r := range results {
		if r.Failed != "" || !strings.HasPrefix(r.Base, "raw/") || r.Ratio <= 0 && r.CPURatio <= 0 {
			continue
		}
		parts := strings.Split(r.Name, "/")
		g := parts[min(1, len(parts)-1)]
		if len(parts) >= 4 {
			g += "/" + parts[2]
		}
		if _, ok := rows[g]; !ok {
			groups = append(groups, g)
		}
		rows[g] = append(rows[g], chartRow{name: r.Name, wall: r.Ratio, cpu: r.CPURatio})
	}
	return groups, rows
}

// writeSVG draws the ordered/raw ratios of results (wall and CPU, one
// horizontal bar each) as a self-contained SVG chart, grouped by transport
// and store, with the 1.0 line and the target line. title heads it (the
// environment of the run).
func writeSVG(w io.Writer, title string, results []*result) error {
	groups, rows := chartRows(results)
	longest, n := len("scenario"), 0
	top := 1.0
	for _, g := range groups {
		for _, r := range rows[g] {
			longest = max(longest, len(r.name))
			top = max(top, r.wall, r.cpu)
			n++
		}
	}
	// The axis runs to the next quarter above the largest ratio, at most
	// svgMaxAxis: a longer bar is cut at the edge and says its value.
	axis := math.Min(math.Ceil(top*4)/4, svgMaxAxis)
	scale := svgPlotW / axis // pixels per 1.0 of ratio
	labelW := float64(longest)*svgCharW + svgMargin
	x0 := svgMargin + labelW
	width := x0 + svgPlotW + svgValueW + svgMargin
	height := float64(svgHeadH + len(groups)*svgGroupH + n*svgRowH + svgMargin)
	if n == 0 {
		height += svgRowH
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" `+
		`font-family="monospace" font-size="%d">`+"\n", width, height, width, height, svgFont)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc("inorder bench: ordered/raw ratios; "+title))
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-weight="bold">%s</text>`+"\n", svgMargin, esc("ordered/raw: throughput (wall) and CPU per message (cpu), higher is better"))
	// The run's environment, cut to the chart's width (whole in the title).
	sub := []rune(title)
	if fit := int((width - 2*svgMargin) / svgCharW); len(sub) > fit {
		sub = append(sub[:fit-1], '…')
	}
	fmt.Fprintf(&b, `<text x="%d" y="34" fill="#555">%s</text>`+"\n", svgMargin, esc(string(sub)))
	legend := x0 + svgPlotW - 100
	fmt.Fprintf(&b, `<rect x="%.1f" y="42" width="10" height="%d" fill="#4e79a7"/><text x="%.1f" y="50">wall</text>`+"\n", legend, svgBarH, legend+14)
	fmt.Fprintf(&b, `<rect x="%.1f" y="42" width="10" height="%d" fill="#f28e2b"/><text x="%.1f" y="50">cpu</text>`+"\n", legend+60, svgBarH, legend+74)
	plotTop, plotBottom := float64(svgHeadH), height-svgMargin
	// The axis: a tick every quarter, labelled every half.
	for v := 0.0; v <= axis+1e-9; v += 0.25 {
		x := x0 + v*scale
		fmt.Fprintf(&b, `<line x1="%.2f" y1="%.0f" x2="%.2f" y2="%.0f" stroke="#eee"/>`+"\n", x, plotTop, x, plotBottom)
		if math.Mod(v+1e-9, 0.5) < 1e-6 {
			fmt.Fprintf(&b, `<text x="%.2f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x, plotTop-4, esc(fmt.Sprintf("%g", v)))
		}
	}
	for _, ref := range []struct {
		v     float64
		label string
		dash  string
	}{{1, "1.0 (raw)", ""}, {orderedTarget, fmt.Sprintf("target %g", orderedTarget), ` stroke-dasharray="4 3"`}} {
		if ref.v > axis {
			continue
		}
		x := x0 + ref.v*scale
		fmt.Fprintf(&b, `<line class="ref" x1="%.2f" y1="%.0f" x2="%.2f" y2="%.0f" stroke="#c00"%s/>`+"\n", x, plotTop, x, plotBottom, ref.dash)
		anchor := "start"
		if ref.v < 1 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text x="%.2f" y="%.0f" text-anchor="%s" fill="#c00">%s</text>`+"\n", x, plotBottom+10, anchor, esc(ref.label))
	}
	y := plotTop
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%.0f">%s</text>`+"\n", svgMargin, y+16, esc("no row of this run has a ratio against a raw row"))
	}
	bar := func(class, color string, v, y float64) {
		if v <= 0 {
			return
		}
		wd := math.Min(v, axis) * scale
		fmt.Fprintf(&b, `<rect class="bar %s" x="%.2f" y="%.1f" width="%.2f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
			class, x0, y, wd, svgBarH, color, esc(fmt.Sprintf("%s %.3g", class, v)))
		fmt.Fprintf(&b, `<text x="%.2f" y="%.1f" font-size="10">%s</text>`+"\n", x0+wd+3, y+svgBarH-1, esc(fmt.Sprintf("%.2f", v)))
	}
	for _, g := range groups {
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", svgMargin, y+16, esc(g))
		y += svgGroupH
		for _, r := range rows[g] {
			fmt.Fprintf(&b, `<text x="%d" y="%.0f">%s</text>`+"\n", svgMargin, y+14, esc(r.name))
			bar("wall", "#4e79a7", r.wall, y+2)
			bar("cpu", "#f28e2b", r.cpu, y+2+svgBarH+2)
			y += svgRowH
		}
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// esc escapes s for the text of an XML element or a quoted attribute.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
