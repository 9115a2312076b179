package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// svgBar is a bar of the chart as parsed back.
type svgBar struct {
	class string
	width float64
}

// parseSVG parses a chart with encoding/xml (it must be well-formed) and
// returns its bars and the text of its elements.
func parseSVG(t *testing.T, doc []byte) (bars []svgBar, text string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var texts strings.Builder
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the chart must be well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := make(map[string]string)
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			if tok.Name.Local == "rect" && strings.HasPrefix(attr["class"], "bar ") {
				w, err := strconv.ParseFloat(attr["width"], 64)
				require.NoError(t, err, "a bar's width")
				bars = append(bars, svgBar{class: strings.TrimPrefix(attr["class"], "bar "), width: w})
			}
		case xml.CharData:
			texts.Write(tok)
			texts.WriteByte('\n')
		}
	}
	return bars, texts.String()
}

func TestSVG(t *testing.T) {
	rs := []*result{
		{Name: "raw/memqueue/g1", Rate: 100, CPUPerMsg: 2},
		{Name: "floor/memqueue/memstore/g1", Base: "raw/memqueue/g1", Ratio: 1.0, CPURatio: 0.5},
		{Name: "ordered/memqueue/memstore/durable/g1", Base: "raw/memqueue/g1", Ratio: 0.5, CPURatio: 0.25},
		{Name: "ordered/memqueue/filestore/fast/g1000", Base: "raw/memqueue/g1000", Ratio: 0.75},
		{Name: "ordered/emulator/memstore/durable/g1", Base: "raw/emulator/g1", Ratio: 3.5, CPURatio: 0.9},
		{Name: "ordered/emulator/filestore/durable/g1", Base: "raw/emulator/g1", Failed: "delivered 1 of 2"},
		{Name: "backlog/emulator/memstore/g1", Base: "raw/emulator/g1/unbounded", Ratio: 1.14, CPURatio: 0.79},
		{Name: "pipelined/memstore", Base: "serial/memstore", Ratio: 125},
		{Name: "engine/filestore-16", Base: "16x fdatasync/s", Ratio: 0.9},
	}
	var b bytes.Buffer
	require.NoError(t, writeSVG(&b, `load <2> & "quotes"`, rs))
	bars, text := parseSVG(t, b.Bytes())
	assert.Less(t, b.Len(), 30<<10, "small")

	// One bar per ratio of a row against raw: 2+2+1+2+2 (the failed row,
	// pipelined and the engine rows have no raw base).
	assert.Len(t, bars, 9, "one bar per ratio value")
	for _, name := range []string{"floor/memqueue/memstore/g1", "ordered/memqueue/memstore/durable/g1", "ordered/memqueue/filestore/fast/g1000",
		"ordered/emulator/memstore/durable/g1", "backlog/emulator/memstore/g1"} {
		assert.Contains(t, text, name+"\n", "every scenario is labelled")
	}
	assert.NotContains(t, text, "pipelined/memstore", "a ratio against serial is not ordered/raw")
	for _, g := range []string{"memqueue/memstore", "memqueue/filestore", "emulator/memstore"} {
		assert.Contains(t, text, g+"\n", "grouped by transport and store")
	}
	assert.Contains(t, text, `load <2> & "quotes"`, "the title, escaped and parsed back")
	assert.Contains(t, b.String(), "load &lt;2&gt; &amp; &#34;quotes&#34;", "escaped by xml.EscapeText")
	assert.Contains(t, text, "target 0.9", "the target line")
	assert.Contains(t, text, "1.0 (raw)", "the reference line")

	// Lengths are proportional: the floor's wall bar (1.0) is twice the
	// ordered row's (0.5) and four times its CPU bar (0.25).
	one, half, quarter := bars[0], bars[2], bars[3]
	require.Equal(t, "wall", one.class)
	require.Equal(t, "wall", half.class)
	require.Equal(t, "cpu", quarter.class)
	assert.InDelta(t, one.width/2, half.width, 0.01, "a ratio of 0.5 is half as long as 1.0")
	assert.InDelta(t, one.width/4, quarter.width, 0.01, "0.25 is a quarter")
	assert.InDelta(t, one.width*0.5, bars[1].width, 0.01, "the floor's CPU ratio 0.5")
	assert.InDelta(t, one.width*svgMaxAxis, bars[5].width, 0.01, "3.5 is cut at the axis' end, 2.0")
}

func TestSVGEmpty(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeSVG(&b, "", []*result{{Name: "engine/core/g1", Rate: 1}}))
	bars, text := parseSVG(t, b.Bytes())
	assert.Empty(t, bars)
	assert.Contains(t, text, "no row of this run has a ratio against a raw row")
}

// With -jsonfile and no -svg the chart goes next to the JSON; -svg names
// its own file.
func TestChartFile(t *testing.T) {
	assert.Equal(t, "", (&config{}).chartFile())
	assert.Equal(t, "/tmp/run.svg", (&config{jsonFile: "/tmp/run.json"}).chartFile())
	assert.Equal(t, "out.svg", (&config{jsonFile: "out"}).chartFile())
	assert.Equal(t, "c.svg", (&config{jsonFile: "/tmp/run.json", svg: "c.svg"}).chartFile())

	dir := t.TempDir()
	c := &config{quick: true, count: 1, messages: 200, producers: 1, consumers: 1, size: minPayload, backlog: 1000,
		timeout: 30 * time.Second, scenario: "^ordered/memqueue/memstore/fast/g1$", jsonFile: filepath.Join(dir, "run.json")}
	ok, err := run(t.Context(), c, io.Discard, io.Discard)
	require.NoError(t, err)
	require.True(t, ok)
	doc, err := os.ReadFile(filepath.Join(dir, "run.svg"))
	require.NoError(t, err, "the chart next to the JSON")
	bars, text := parseSVG(t, doc)
	assert.Len(t, bars, 4, "wall and CPU of the one ordered row and of its floor")
	assert.Contains(t, text, "ordered/memqueue/memstore/fast/g1\n")
	assert.Contains(t, text, "floor/memqueue/memstore/g1\n")
}

// The example chart in testdata (the README shows it) stays well-formed:
// go run ./examples/bench -messages 40000 -count 5 -svg FILE
// -scenario '^(raw|floor|ordered)/(memqueue|emulator)/(memstore/(durable|fast)/)?g1(000)?$'
func TestSVGExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("testdata", "chart-example.svg"))
	require.NoError(t, err)
	assert.Less(t, len(doc), 30<<10, "small")
	bars, text := parseSVG(t, doc)
	assert.Len(t, bars, 24, "12 rows against raw, wall and CPU")
	assert.Contains(t, text, "floor/memqueue/memstore/g1000\n")
}
