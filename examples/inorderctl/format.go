package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/inorder/inorder/seqstore"
)

// span is a run of consecutive seqs of one epoch that a store holds
// (journal entries or parked messages), with their bytes.
type span struct {
	Epoch, First, Last uint64
	Bytes              int64
}

func (s span) Count() uint64 { return s.Last - s.First + 1 }

// spansOf folds entries, ordered by epoch and seq, into spans.
func spansOf(entries []seqstore.EntryInfo) []span {
	var out []span
	for _, e := range entries {
		if n := len(out); n > 0 && out[n-1].Epoch == e.Epoch && out[n-1].Last+1 == e.Seq {
			out[n-1].Last = e.Seq
			out[n-1].Bytes += int64(e.Size)
			continue
		}
		out = append(out, span{Epoch: e.Epoch, First: e.Seq, Last: e.Seq, Bytes: int64(e.Size)})
	}
	return out
}

func totalBytes(entries []seqstore.EntryInfo) int64 {
	var n int64
	for _, e := range entries {
		n += int64(e.Size)
	}
	return n
}

// formatRange writes r as FIRST-LAST (FIRST alone for one seq, FIRST-max
// to the end of the epoch), prefixed with EPOCH: unless it is epoch.
func formatRange(b *strings.Builder, epoch, r0, first, last uint64) {
	if r0 != epoch {
		b.WriteString(strconv.FormatUint(r0, 10))
		b.WriteByte(':')
	}
	b.WriteString(strconv.FormatUint(first, 10))
	switch {
	case last == seqstore.MaxSeq:
		b.WriteString("-max")
	case last != first:
		b.WriteByte('-')
		b.WriteString(strconv.FormatUint(last, 10))
	}
}

// formatRanges formats rs relative to epoch (see formatRange), at most
// limit of them (0: all) and then how many more.
func formatRanges(rs []seqstore.Range, epoch uint64, limit int) string {
	if len(rs) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, r := range rs {
		if limit > 0 && i == limit {
			fmt.Fprintf(&b, " +%d more", len(rs)-limit)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		formatRange(&b, epoch, r.Epoch, r.First, r.Last)
	}
	return b.String()
}

func spanRanges(spans []span) []seqstore.Range {
	rs := make([]seqstore.Range, len(spans))
	for i, s := range spans {
		rs[i] = seqstore.Range{Epoch: s.Epoch, First: s.First, Last: s.Last}
	}
	return rs
}

// tableRanges is how many ranges a cell of the streams table shows.
const tableRanges = 4

// printTable prints the streams of queue as a table.
func printTable(w io.Writer, queue string, states []seqstore.StreamState) {
	fmt.Fprintf(w, "queue %q: %d streams with state\n", queue, len(states))
	if len(states) == 0 {
		return
	}
	fmt.Fprintln(w, "ranges are FIRST-LAST, EPOCH:FIRST-LAST in another epoch than the cursor's")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSENDER EPOCH/LAST\tCURSOR EPOCH/NEXT\tOWNER\tSKIPPED\tPARKED\tJOURNAL")
	for _, s := range states {
		sender := "-"
		if s.SendEpoch != 0 {
			sender = fmt.Sprintf("%d/%d", s.SendEpoch, s.LastSeq)
		}
		cursor, owner := "-", "-"
		if s.Cursor.Epoch != 0 || s.Cursor.Next != 0 {
			cursor = fmt.Sprintf("%d/%d", s.Cursor.Epoch, s.Cursor.Next)
		}
		if s.Cursor.Owner != 0 {
			owner = strconv.FormatUint(s.Cursor.Owner, 10)
		}
		parked := "-"
		if len(s.Parked) > 0 {
			parked = fmt.Sprintf("%d: %s", len(s.Parked), formatRanges(spanRanges(spansOf(s.Parked)), s.Cursor.Epoch, tableRanges))
		}
		// Names are quoted: a group may hold any byte, escape sequences
		// and line breaks included.
		fmt.Fprintf(tw, "%q\t%s\t%s\t%s\t%s\t%s\t%d\n", s.Stream.Group, sender, cursor, owner,
			formatRanges(s.Cursor.Skipped, s.Cursor.Epoch, tableRanges), parked, len(s.Journal))
	}
	tw.Flush()
}

// detail is one stream's state, with the bodies show -bodies read.
type detail struct {
	seqstore.StreamState
	journal map[uint64][]byte
	parked  map[[2]uint64][]byte
}

// printDetail prints one stream as show does.
func printDetail(w io.Writer, d detail, bodies bool) {
	s := d.StreamState
	fmt.Fprintf(w, "stream %q group %q (key %s)\n", s.Stream.Queue, s.Stream.Group, s.Stream.Key())
	if s.Empty() {
		fmt.Fprintln(w, "no state: no sender counter, cursor, parks or journal")
		return
	}
	if s.SendEpoch != 0 {
		fmt.Fprintf(w, "sender:   epoch %d, last seq %d\n", s.SendEpoch, s.LastSeq)
	} else {
		fmt.Fprintln(w, "sender:   none")
	}
	c := s.Cursor
	switch {
	case c.Epoch == 0 && c.Next == 0:
		fmt.Fprintln(w, "cursor:   none")
	default:
		fmt.Fprintf(w, "cursor:   epoch %d, next %d", c.Epoch, c.Next)
		if c.Owner != 0 {
			fmt.Fprintf(w, ", fencing owner %d (a receiver holds the stream)", c.Owner)
		} else {
			fmt.Fprint(w, ", no owner")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "skipped:  %s", plural(len(c.Skipped), "range"))
	for _, r := range c.Skipped {
		fmt.Fprintf(w, "\n  epoch %d seqs %s", r.Epoch, formatRanges([]seqstore.Range{r}, r.Epoch, 0))
	}
	fmt.Fprintln(w)
	spans := spansOf(s.Parked)
	fmt.Fprintf(w, "parked:   %s, %s", plural(len(s.Parked), "message"), plural(int(totalBytes(s.Parked)), "byte"))
	if len(spans) > 0 {
		fmt.Fprintf(w, ", in %s", plural(len(spans), "range"))
	}
	fmt.Fprintln(w)
	for _, sp := range spans {
		fmt.Fprintf(w, "  epoch %d seqs %s: %s, %s\n", sp.Epoch,
			formatRanges([]seqstore.Range{{Epoch: sp.Epoch, First: sp.First, Last: sp.Last}}, sp.Epoch, 0),
			plural(int(sp.Count()), "message"), plural(int(sp.Bytes), "byte"))
	}
	if bodies {
		for _, e := range s.Parked {
			fmt.Fprintf(w, "  epoch %d seq %d: %s\n", e.Epoch, e.Seq, quoteBody(d.parked[[2]uint64{e.Epoch, e.Seq}]))
		}
	}
	fmt.Fprintf(w, "journal:  %s not marked sent, %s\n", plural(len(s.Journal), "entry"), plural(int(totalBytes(s.Journal)), "byte"))
	for _, e := range s.Journal {
		fmt.Fprintf(w, "  seq %d: %s", e.Seq, plural(e.Size, "byte"))
		if bodies {
			fmt.Fprintf(w, ": %s", quoteBody(d.journal[e.Seq]))
		}
		fmt.Fprintln(w)
	}
}

// plural returns n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "y"):
		return strconv.Itoa(n) + " " + strings.TrimSuffix(noun, "y") + "ies"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// quoteBody shows a body as a Go string literal: bodies are bytes, and a
// terminal must not interpret them.
func quoteBody(b []byte) string {
	if b == nil {
		return "(gone: read after the listing)"
	}
	return strconv.Quote(string(b))
}

// JSON forms.

type listJSON struct {
	Queue   string       `json:"queue"`
	Streams []streamJSON `json:"streams"`
}

type streamJSON struct {
	Queue   string      `json:"queue"`
	Group   string      `json:"group"`
	Key     string      `json:"key"`
	Sender  *senderJSON `json:"sender"`
	Cursor  *cursorJSON `json:"cursor"`
	Parked  heldJSON    `json:"parked"`
	Journal heldJSON    `json:"journal"`
}

type senderJSON struct {
	Epoch uint64 `json:"epoch"`
	Last  uint64 `json:"last"`
}

type cursorJSON struct {
	Epoch   uint64      `json:"epoch"`
	Next    uint64      `json:"next"`
	Owner   uint64      `json:"owner"`
	Skipped []rangeJSON `json:"skipped"`
}

type rangeJSON struct {
	Epoch uint64 `json:"epoch"`
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
}

// heldJSON is what a store holds of a stream: parked messages or journal
// entries.
type heldJSON struct {
	Count   int         `json:"count"`
	Bytes   int64       `json:"bytes"`
	Ranges  []spanJSON  `json:"ranges"`
	Entries []entryJSON `json:"entries,omitempty"`
}

type spanJSON struct {
	Epoch uint64 `json:"epoch"`
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	Count uint64 `json:"count"`
	Bytes int64  `json:"bytes"`
}

type entryJSON struct {
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
	Size  int    `json:"size"`
	Body  []byte `json:"body,omitempty"`
}

func streamToJSON(s seqstore.StreamState) streamJSON {
	out := streamJSON{Queue: s.Stream.Queue, Group: s.Stream.Group, Key: s.Stream.Key(),
		Parked: held(s.Parked), Journal: held(s.Journal)}
	if s.SendEpoch != 0 {
		out.Sender = &senderJSON{Epoch: s.SendEpoch, Last: s.LastSeq}
	}
	c := s.Cursor
	if c.Epoch != 0 || c.Next != 0 || c.Owner != 0 || len(c.Skipped) > 0 {
		out.Cursor = &cursorJSON{Epoch: c.Epoch, Next: c.Next, Owner: c.Owner, Skipped: []rangeJSON{}}
		for _, r := range c.Skipped {
			out.Cursor.Skipped = append(out.Cursor.Skipped, rangeJSON{Epoch: r.Epoch, First: r.First, Last: r.Last})
		}
	}
	return out
}

func held(entries []seqstore.EntryInfo) heldJSON {
	h := heldJSON{Count: len(entries), Bytes: totalBytes(entries), Ranges: []spanJSON{}}
	for _, s := range spansOf(entries) {
		h.Ranges = append(h.Ranges, spanJSON{Epoch: s.Epoch, First: s.First, Last: s.Last, Count: s.Count(), Bytes: s.Bytes})
	}
	return h
}

func streamsJSON(states []seqstore.StreamState) []streamJSON {
	out := make([]streamJSON, len(states))
	for i, s := range states {
		out[i] = streamToJSON(s)
	}
	return out
}

// detailJSON is show's JSON: the stream with every journal and parked
// entry, bodies included when read.
func detailJSON(d detail) streamJSON {
	out := streamToJSON(d.StreamState)
	for _, e := range d.Journal {
		out.Journal.Entries = append(out.Journal.Entries, entryJSON{Epoch: e.Epoch, Seq: e.Seq, Size: e.Size, Body: d.journal[e.Seq]})
	}
	for _, e := range d.Parked {
		out.Parked.Entries = append(out.Parked.Entries, entryJSON{Epoch: e.Epoch, Seq: e.Seq, Size: e.Size, Body: d.parked[[2]uint64{e.Epoch, e.Seq}]})
	}
	return out
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
