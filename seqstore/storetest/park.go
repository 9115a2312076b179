package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// The parking side of the contract (seqstore.Parker): every Park/* test
// skips for a store that does not implement it.

var parkTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"Park/Unpark", testParkUnpark},
	{"Park/Copies", testParkCopies},
	{"Park/Replace", testParkReplace},
	{"Park/Empty", testParkEmpty},
	{"Park/Invalid", testParkInvalid},
	{"Park/Bounds", testParkBounds},
	{"Park/BelowCursor", testParkBelowCursor},
	{"Park/AdvanceDrops", testParkAdvanceDrops},
	{"Park/AdvanceDropsMany", testParkAdvanceDropsMany},
	{"Park/PassedLeftovers", testParkPassedLeftovers},
	{"Park/ParkedStreams", testParkedStreams},
	{"Park/ManyStreams", testParkMany},
	{"Park/Reopen", testParkReopen},
	{"Park/Concurrent", testParkConcurrent},
	{"Park/Cancelled", testParkCancelled},
	{"Park/Closed", testParkClosed},
	{"Park/HostileNames", testParkHostile},
}

// openParker is open for the Park tests (every store parks).
func openParker(t *testing.T, h Harness) (seqstore.Store, seqstore.Parker, func(t *testing.T) seqstore.Store) {
	t.Helper()
	st, reopen := open(t, h)
	return st, st, reopen
}

func park(t *testing.T, p seqstore.Parker, entries ...seqstore.Parked) {
	t.Helper()
	require.NoError(t, p.Park(t.Context(), entries), "Park of %d entries", len(entries))
}

func unpark(t *testing.T, p seqstore.Parker, queries ...seqstore.ParkQuery) [][]seqstore.Parked {
	t.Helper()
	got, err := p.Unpark(t.Context(), queries)
	require.NoError(t, err, "Unpark of %d queries", len(queries))
	require.Len(t, got, len(queries), "Unpark must return one result per query")
	return got
}

// unparkAll returns every parked entry of s in epoch (up to 10,000).
func unparkAll(t *testing.T, p seqstore.Parker, s seqstore.Stream, epoch uint64) []seqstore.Parked {
	t.Helper()
	return unpark(t, p, seqstore.ParkQuery{Stream: s, Epoch: epoch, Max: 10_000})[0]
}

func parkedStreams(t *testing.T, p seqstore.Parker, queue string) []seqstore.Stream {
	t.Helper()
	ss, err := p.ParkedStreams(t.Context(), queue)
	require.NoError(t, err, "ParkedStreams(%q)", queue)
	return ss
}

// pk builds a Parked with a string body.
func pk(s seqstore.Stream, epoch, seq uint64, body string) seqstore.Parked {
	return seqstore.Parked{Stream: s, Epoch: epoch, Seq: seq, Body: []byte(body)}
}

// assertParked compares parked entries field by field, in order, treating
// nil and empty bodies alike.
func assertParked(t *testing.T, want, got []seqstore.Parked, msgAndArgs ...any) bool {
	t.Helper()
	format := func(ps []seqstore.Parked) string {
		var b strings.Builder
		for _, p := range ps {
			body := fmt.Sprintf("%q", p.Body)
			if len(body) > 40 {
				body = fmt.Sprintf("%d bytes %q...", len(p.Body), p.Body[:min(16, len(p.Body))])
			}
			fmt.Fprintf(&b, "\n  %s epoch=%d seq=%d body=%s", p.Stream, p.Epoch, p.Seq, body)
		}
		if len(ps) == 0 {
			b.WriteString(" none")
		}
		return b.String()
	}
	ok := len(want) == len(got)
	for i := 0; ok && i < len(want); i++ {
		w, g := want[i], got[i]
		ok = w.Stream == g.Stream && w.Epoch == g.Epoch && w.Seq == g.Seq && bytes.Equal(w.Body, g.Body)
	}
	if ok {
		return true
	}
	what := "parked entries"
	if len(msgAndArgs) > 0 {
		if f, isString := msgAndArgs[0].(string); isString {
			what = fmt.Sprintf(f, msgAndArgs[1:]...)
		}
	}
	return assert.Fail(t, fmt.Sprintf("%s: want (in seq order):%s\ngot:%s", what, format(want), format(got)))
}

// assertStreams compares lists of streams, treating nil and empty alike.
func assertStreams(t *testing.T, want, got []seqstore.Stream, msgAndArgs ...any) {
	t.Helper()
	if len(want) == 0 && len(got) == 0 {
		return
	}
	assert.Equal(t, want, got, msgAndArgs...)
}

func testParkUnpark(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	const e1, e2 = 100, 200
	bin := []byte{0, 0xff, '#', '\n', 0x80, 0}
	// Out of order, over two calls, two streams and two epochs; seq 1 in
	// both epochs of a and in b.
	park(t, p,
		pk(a, e1, 7, "a7"), pk(a, e1, 3, "a3"), pk(b, e1, 5, "b5"), pk(a, e2, 1, "a2-1"),
		seqstore.Parked{Stream: a, Epoch: e1, Seq: 5, Body: bin}, pk(a, e1, 1, "a1"), pk(b, e1, 1, "b1"))
	park(t, p, seqstore.Parked{Stream: a, Epoch: e1, Seq: 4, Body: []byte{}},
		seqstore.Parked{Stream: a, Epoch: e1, Seq: 10}, pk(a, e2, 2, "a2-2"))

	a1 := []seqstore.Parked{pk(a, e1, 1, "a1"), pk(a, e1, 3, "a3"), pk(a, e1, 4, ""),
		{Stream: a, Epoch: e1, Seq: 5, Body: bin}, pk(a, e1, 7, "a7"), pk(a, e1, 10, "")}
	for _, tc := range []struct {
		q    seqstore.ParkQuery
		want []seqstore.Parked
	}{
		{seqstore.ParkQuery{Stream: a, Epoch: e1, Max: 100}, a1},
		{seqstore.ParkQuery{Stream: a, Epoch: e1, From: 1, Max: 6}, a1},
		{seqstore.ParkQuery{Stream: a, Epoch: e1, Max: 1}, a1[:1]},
		{seqstore.ParkQuery{Stream: a, Epoch: e1, From: 5, Max: 2}, a1[3:5]},
		{seqstore.ParkQuery{Stream: a, Epoch: e1, From: 6, Max: 1}, a1[4:5]},
		{seqstore.ParkQuery{Stream: a, Epoch: e1, From: 2, Max: 3}, a1[1:4]},
		{seqstore.ParkQuery{Stream: a, Epoch: e1, From: 10, Max: 100}, a1[5:]},
		{seqstore.ParkQuery{Stream: a, Epoch: e1, From: 11, Max: 100}, nil},
		{seqstore.ParkQuery{Stream: a, Epoch: e1, From: seqstore.MaxSeq, Max: 100}, nil},
		// Valid queries beyond the range of a signed 64-bit column.
		{seqstore.ParkQuery{Stream: a, Epoch: e1, From: seqstore.MaxSeq + 1, Max: 100}, nil},
		{seqstore.ParkQuery{Stream: a, Epoch: e1, From: 1<<64 - 1, Max: 100}, nil},
		{seqstore.ParkQuery{Stream: a, Epoch: seqstore.MaxSeq + 1, Max: 100}, nil},
		{seqstore.ParkQuery{Stream: a, Epoch: 1<<64 - 1, Max: 100}, nil},
		{seqstore.ParkQuery{Stream: a, Epoch: e2, Max: 100}, []seqstore.Parked{pk(a, e2, 1, "a2-1"), pk(a, e2, 2, "a2-2")}},
		{seqstore.ParkQuery{Stream: a, Epoch: e2, From: 2, Max: 100}, []seqstore.Parked{pk(a, e2, 2, "a2-2")}},
		{seqstore.ParkQuery{Stream: a, Epoch: e1 + 1, Max: 100}, nil},
		{seqstore.ParkQuery{Stream: a, Epoch: 0, Max: 100}, nil},
		{seqstore.ParkQuery{Stream: b, Epoch: e1, Max: 100}, []seqstore.Parked{pk(b, e1, 1, "b1"), pk(b, e1, 5, "b5")}},
		{seqstore.ParkQuery{Stream: b, Epoch: e2, Max: 100}, nil},
		{seqstore.ParkQuery{Stream: seqstore.Stream{Queue: "q", Group: "never parked"}, Epoch: e1, Max: 100}, nil},
		{seqstore.ParkQuery{Stream: seqstore.Stream{Queue: "q"}, Epoch: e1, Max: 100}, nil},
	} {
		got := unpark(t, p, tc.q)[0]
		assertParked(t, tc.want, got, "Unpark(%s epoch=%d from=%d max=%d)", tc.q.Stream, tc.q.Epoch, tc.q.From, tc.q.Max)
	}

	// The same queries in one call, one stream twice: one result each, in
	// query order.
	qs := []seqstore.ParkQuery{
		{Stream: b, Epoch: e1, Max: 100},
		{Stream: a, Epoch: e2, Max: 1},
		{Stream: a, Epoch: e1, From: 4, Max: 2},
		{Stream: seqstore.Stream{Queue: "other"}, Epoch: e1, Max: 5},
		{Stream: b, Epoch: e1, From: 2, Max: 100},
	}
	got := unpark(t, p, qs...)
	assertParked(t, []seqstore.Parked{pk(b, e1, 1, "b1"), pk(b, e1, 5, "b5")}, got[0], "query 0 of one Unpark call")
	assertParked(t, []seqstore.Parked{pk(a, e2, 1, "a2-1")}, got[1], "query 1 of one Unpark call")
	assertParked(t, a1[2:4], got[2], "query 2 of one Unpark call")
	assertParked(t, nil, got[3], "query 3 of one Unpark call (a stream without parks)")
	assertParked(t, []seqstore.Parked{pk(b, e1, 5, "b5")}, got[4], "query 4 of one Unpark call")

	// Unpark removes nothing; parking touches neither journal nor cursors.
	assertParked(t, a1, unparkAll(t, p, a, e1), "Unpark must not remove what it returns")
	assertStreams(t, []seqstore.Stream{a, b}, parkedStreams(t, p, "q"), "ParkedStreams(q)")
	assert.Empty(t, pending(t, st, "q"), "parks are not journal entries")
	assertCursor(t, seqstore.Cursor{}, cursor(t, st, a), "Park must not create a cursor")
	assert.Equal(t, uint64(1), reserve(t, st, a, 1, nil).First, "Park must not consume sender seqs")
}

func testParkCopies(t *testing.T, h Harness) {
	_, p, _ := openParker(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	body := []byte("original")
	park(t, p, seqstore.Parked{Stream: s, Epoch: 1, Seq: 2, Body: body})
	copy(body, "mutated!")
	got := unparkAll(t, p, s, 1)
	assertParked(t, []seqstore.Parked{pk(s, 1, 2, "original")}, got, "the store must keep its own copy of a parked body")
	require.Len(t, got, 1)
	copy(got[0].Body, "mutated!")
	assertParked(t, []seqstore.Parked{pk(s, 1, 2, "original")}, unparkAll(t, p, s, 1), "Unpark must return copies, not the store's bytes")
}

func testParkReplace(t *testing.T, h Harness) {
	_, p, _ := openParker(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	o := seqstore.Stream{Queue: "q", Group: "o"}
	park(t, p, pk(s, 9, 5, "old five"), pk(s, 9, 6, "six"), pk(o, 9, 5, "other five"), pk(s, 8, 5, "epoch 8"))
	park(t, p, pk(s, 9, 5, "new five"))
	assertParked(t, []seqstore.Parked{pk(s, 9, 5, "new five"), pk(s, 9, 6, "six")}, unparkAll(t, p, s, 9),
		"parking an entry again replaces its body (and keeps one entry)")
	assertParked(t, []seqstore.Parked{pk(o, 9, 5, "other five")}, unparkAll(t, p, o, 9), "another stream's entry with the same seq stays")
	assertParked(t, []seqstore.Parked{pk(s, 8, 5, "epoch 8")}, unparkAll(t, p, s, 8), "another epoch's entry with the same seq stays")

	// Replaced by an empty body, then by a longer one, inside calls that
	// also park new entries.
	park(t, p, pk(s, 9, 7, "seven"), pk(s, 9, 5, ""))
	assertParked(t, []seqstore.Parked{pk(s, 9, 5, ""), pk(s, 9, 6, "six"), pk(s, 9, 7, "seven")}, unparkAll(t, p, s, 9),
		"replaced by an empty body")
	long := strings.Repeat("long body ", 1000)
	park(t, p, pk(s, 9, 4, "four"), pk(s, 9, 5, long), pk(s, 9, 6, "6"))
	assertParked(t, []seqstore.Parked{pk(s, 9, 4, "four"), pk(s, 9, 5, long), pk(s, 9, 6, "6"), pk(s, 9, 7, "seven")}, unparkAll(t, p, s, 9),
		"replaced by longer and shorter bodies")
	assertStreams(t, sortStreams(o, s), parkedStreams(t, p, "q"), "replacing does not add streams")
}

func testParkEmpty(t *testing.T, h Harness) {
	_, p, _ := openParker(t, h)
	ctx := t.Context()
	assert.NoError(t, p.Park(ctx, nil), "Park of no entries is a no-op")
	assert.NoError(t, p.Park(ctx, []seqstore.Parked{}), "Park of no entries is a no-op")
	got, err := p.Unpark(ctx, nil)
	assert.NoError(t, err, "Unpark of no queries is a no-op")
	assert.Empty(t, got)
	got, err = p.Unpark(ctx, []seqstore.ParkQuery{})
	assert.NoError(t, err, "Unpark of no queries is a no-op")
	assert.Empty(t, got)
	assertStreams(t, nil, parkedStreams(t, p, "q"), "ParkedStreams of a new store")
	s := seqstore.Stream{Queue: "q", Group: "g"}
	assertParked(t, nil, unparkAll(t, p, s, 1), "Unpark of a stream never parked")
}

func testParkInvalid(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	ctx := t.Context()
	good := seqstore.Stream{Queue: "q", Group: "good"}
	other := seqstore.Stream{Queue: "q", Group: "other"}
	for _, tc := range []struct {
		name    string
		entries []seqstore.Parked
		fault   map[int]error
	}{
		{"an empty queue name", []seqstore.Parked{pk(good, 1, 1, "x"), pk(seqstore.Stream{}, 1, 1, "x")},
			map[int]error{1: seqstore.ErrInvalidStream}},
		{"a group that is not UTF-8", []seqstore.Parked{pk(seqstore.Stream{Queue: "q", Group: "\xff"}, 1, 1, "x"), pk(good, 1, 2, "x")},
			map[int]error{0: seqstore.ErrInvalidStream}},
		{"a NUL in the queue name", []seqstore.Parked{pk(good, 1, 1, "x"), pk(seqstore.Stream{Queue: "q\x00"}, 1, 1, "x"), pk(other, 1, 1, "x")},
			map[int]error{1: seqstore.ErrInvalidStream}},
		{"a group too long", []seqstore.Parked{pk(good, 1, 1, "x"), pk(seqstore.Stream{Queue: "q", Group: strings.Repeat("g", seqstore.MaxGroupLen+1)}, 1, 1, "x")},
			map[int]error{1: seqstore.ErrInvalidStream}},
		{"seq 0", []seqstore.Parked{pk(good, 1, 1, "x"), pk(other, 1, 0, "x")},
			map[int]error{1: seqstore.ErrInvalidArgument}},
		{"seq beyond MaxSeq", []seqstore.Parked{pk(good, 1, seqstore.MaxSeq+1, "x"), pk(other, 1, 1, "x")},
			map[int]error{0: seqstore.ErrInvalidArgument}},
		{"epoch beyond MaxSeq", []seqstore.Parked{pk(good, 1, 1, "x"), pk(other, seqstore.MaxSeq+1, 1, "x")},
			map[int]error{1: seqstore.ErrInvalidArgument}},
		{"a body over MaxParkBody", []seqstore.Parked{pk(good, 1, 1, "x"), {Stream: other, Epoch: 1, Seq: 1, Body: make([]byte, seqstore.MaxParkBody+1)}},
			map[int]error{1: seqstore.ErrInvalidArgument}},
		{"an entry twice", []seqstore.Parked{pk(good, 1, 1, "x"), pk(other, 1, 1, "x"), pk(good, 1, 1, "y")},
			map[int]error{2: seqstore.ErrInvalidArgument}},
	} {
		err := p.Park(ctx, tc.entries)
		assertAborted(t, err, len(tc.entries), tc.fault, "Park with "+tc.name)
	}
	for _, s := range []seqstore.Stream{good, other} {
		assertParked(t, nil, unparkAll(t, p, s, 1), "a rejected Park must not park %s", s)
	}
	assertStreams(t, nil, parkedStreams(t, p, "q"), "a rejected Park must not park anything")

	for _, tc := range []struct {
		name  string
		q     seqstore.ParkQuery
		fault error
	}{
		{"an empty queue name", seqstore.ParkQuery{Epoch: 1, Max: 1}, seqstore.ErrInvalidStream},
		{"a group that is not UTF-8", seqstore.ParkQuery{Stream: seqstore.Stream{Queue: "q", Group: "\xc3"}, Epoch: 1, Max: 1}, seqstore.ErrInvalidStream},
		{"max=0", seqstore.ParkQuery{Stream: good, Epoch: 1}, seqstore.ErrInvalidArgument},
		{"max=-1", seqstore.ParkQuery{Stream: good, Epoch: 1, Max: -1}, seqstore.ErrInvalidArgument},
	} {
		_, err := p.Unpark(ctx, []seqstore.ParkQuery{{Stream: good, Epoch: 1, Max: 1}, tc.q})
		assertAborted(t, err, 2, map[int]error{1: tc.fault}, "Unpark with "+tc.name)
	}

	for _, queue := range []string{"", strings.Repeat("q", seqstore.MaxQueueLen+1), "q\xff", "q\x00"} {
		_, err := p.ParkedStreams(ctx, queue)
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "ParkedStreams(%q)", queue)
	}
	// Same seqs in other streams or epochs are not duplicates.
	park(t, p, pk(good, 1, 1, "a"), pk(good, 2, 1, "b"), pk(other, 1, 1, "c"))
	assertParked(t, []seqstore.Parked{pk(good, 1, 1, "a")}, unparkAll(t, p, good, 1))
	assertCursor(t, seqstore.Cursor{}, cursor(t, st, good), "Park must not create a cursor")
}

func testParkBounds(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	ctx := t.Context()
	s := seqstore.Stream{Queue: "q", Group: "big"}
	o := seqstore.Stream{Queue: "q", Group: "o"}
	patterned := func(n, salt int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(j*7 + j>>8 + salt) // every byte value, no two bodies alike
		}
		return b
	}
	limit := patterned(seqstore.MaxParkBody, 0)
	park(t, p, seqstore.Parked{Stream: s, Epoch: 1, Seq: 1, Body: limit})
	assertParked(t, []seqstore.Parked{{Stream: s, Epoch: 1, Seq: 1, Body: limit}}, unparkAll(t, p, s, 1), "a body of exactly MaxParkBody bytes")

	over := []seqstore.Parked{pk(o, 1, 1, "innocent"), {Stream: s, Epoch: 1, Seq: 2, Body: patterned(seqstore.MaxParkBody+1, 1)}}
	assertAborted(t, p.Park(ctx, over), 2, map[int]error{1: seqstore.ErrInvalidArgument}, "Park of a body one byte over MaxParkBody")
	assertParked(t, []seqstore.Parked{{Stream: s, Epoch: 1, Seq: 1, Body: limit}}, unparkAll(t, p, s, 1), "a refused body must not be parked")
	assertParked(t, nil, unparkAll(t, p, o, 1), "a Park with a body over the limit must park nothing")

	// A receive batch of MNS bodies at their limit, in one call.
	var batch []seqstore.Parked
	for i := range 16 {
		batch = append(batch, seqstore.Parked{Stream: o, Epoch: 2, Seq: uint64(i + 1), Body: patterned(64<<10, i)})
	}
	park(t, p, batch...)
	assertParked(t, batch, unparkAll(t, p, o, 2), "16 bodies of 64 KiB parked in one call")

	// Seqs and epochs at the top of the range.
	top := []seqstore.Parked{pk(s, seqstore.MaxSeq, seqstore.MaxSeq, "top"), pk(s, seqstore.MaxSeq, seqstore.MaxSeq-1, "below top"), pk(s, 0, 1, "epoch 0")}
	park(t, p, top...)
	assertParked(t, []seqstore.Parked{top[1], top[0]}, unparkAll(t, p, s, seqstore.MaxSeq), "parks at MaxSeq")
	assertParked(t, []seqstore.Parked{top[0]}, unpark(t, p, seqstore.ParkQuery{Stream: s, Epoch: seqstore.MaxSeq, From: seqstore.MaxSeq, Max: 1})[0],
		"Unpark from MaxSeq")
	assertParked(t, top[2:], unparkAll(t, p, s, 0), "a park of epoch 0")
	advance(t, st, seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: seqstore.MaxSeq, Next: seqstore.MaxSeq}})
	assertParked(t, top[:1], unparkAll(t, p, s, seqstore.MaxSeq), "a cursor at MaxSeq keeps the park at MaxSeq")
	assertParked(t, nil, unparkAll(t, p, s, 1), "a cursor at epoch MaxSeq drops older epochs")
}

func testParkBelowCursor(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	ctx := t.Context()
	s := seqstore.Stream{Queue: "q", Group: "s"}
	other := seqstore.Stream{Queue: "q", Group: "other"}
	c := seqstore.Cursor{Epoch: 50, Next: 10, Owner: 3}
	advance(t, st, seqstore.Advance{Stream: s, To: c})

	batch := []seqstore.Parked{
		pk(other, 50, 1, "another stream"),
		pk(s, 50, 9, "just below next"),
		pk(s, 50, 10, "at next"),
		pk(s, 49, 100, "an older epoch"),
		pk(s, 51, 1, "a newer epoch"),
		pk(s, 50, 1, "far below"),
		pk(s, 0, 1, "epoch 0"),
	}
	err := p.Park(ctx, batch)
	require.ErrorIs(t, err, seqstore.ErrConflict, "Park of entries the cursor %d/%d passed", c.Epoch, c.Next)
	assertAborted(t, err, len(batch), map[int]error{1: seqstore.ErrConflict, 3: seqstore.ErrConflict, 5: seqstore.ErrConflict, 6: seqstore.ErrConflict},
		"Park of entries the cursor passed")
	for _, pe := range []struct {
		s     seqstore.Stream
		epoch uint64
	}{{other, 50}, {s, 50}, {s, 49}, {s, 51}, {s, 0}} {
		assertParked(t, nil, unparkAll(t, p, pe.s, pe.epoch), "a refused Park must apply nothing (%s epoch %d)", pe.s, pe.epoch)
	}
	assertStreams(t, nil, parkedStreams(t, p, "q"), "a refused Park must apply nothing")

	// Alone, each passed entry is refused; the others are accepted.
	for _, i := range []int{1, 3, 5, 6} {
		err := p.Park(ctx, batch[i:i+1])
		assertAborted(t, err, 1, map[int]error{0: seqstore.ErrConflict}, fmt.Sprintf("Park of %q alone", batch[i].Body))
	}
	park(t, p, batch[0], batch[2], batch[4])
	assertParked(t, batch[2:3], unparkAll(t, p, s, 50), "entries at and above the cursor are parked")
	assertParked(t, batch[4:5], unparkAll(t, p, s, 51), "entries of a newer epoch are parked")
	assertParked(t, batch[0:1], unparkAll(t, p, other, 50), "entries of a stream without cursor are parked")

	// Once the cursor passes an entry, parking it again is refused.
	c2 := seqstore.Cursor{Epoch: 50, Next: 11}
	advance(t, st, seqstore.Advance{Stream: s, From: c, To: c2})
	assertAborted(t, p.Park(ctx, []seqstore.Parked{pk(s, 50, 10, "again")}), 1, map[int]error{0: seqstore.ErrConflict},
		"Park of an entry the cursor passed after it was parked")
	assertParked(t, nil, unparkAll(t, p, s, 50), "the cursor's Advance dropped the entry and a refused Park must not bring it back")
}

func testParkAdvanceDrops(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	ctx := t.Context()
	s := seqstore.Stream{Queue: "q", Group: "s"}
	o := seqstore.Stream{Queue: "q", Group: "o"}
	const e1, e2, e3 = 10, 20, 30
	seqsOf := func(s seqstore.Stream, epoch uint64, seqs ...uint64) []seqstore.Parked {
		var ps []seqstore.Parked
		for _, q := range seqs {
			ps = append(ps, pk(s, epoch, q, fmt.Sprintf("%s %d/%d", s.Group, epoch, q)))
		}
		return ps
	}
	park(t, p, slices.Concat(seqsOf(s, e1, 3, 5, 7), seqsOf(s, e2, 1, 2, 4, 9), seqsOf(s, e3, 1), seqsOf(o, e2, 1, 2))...)
	check := func(what string, s1, s2, s3, o2 []uint64) {
		t.Helper()
		assertParked(t, seqsOf(s, e1, s1...), unparkAll(t, p, s, e1), "%s: %s epoch %d", what, s, e1)
		assertParked(t, seqsOf(s, e2, s2...), unparkAll(t, p, s, e2), "%s: %s epoch %d", what, s, e2)
		assertParked(t, seqsOf(s, e3, s3...), unparkAll(t, p, s, e3), "%s: %s epoch %d", what, s, e3)
		assertParked(t, seqsOf(o, e2, o2...), unparkAll(t, p, o, e2), "%s: %s epoch %d", what, o, e2)
	}
	check("before any Advance", []uint64{3, 5, 7}, []uint64{1, 2, 4, 9}, []uint64{1}, []uint64{1, 2})

	// The first Advance drops the older epoch and the seqs below Next; it
	// keeps seq == Next, newer epochs and other streams.
	c := seqstore.Cursor{Epoch: e2, Next: 4}
	advance(t, st, seqstore.Advance{Stream: s, To: c})
	check("after Advance to 20/4", nil, []uint64{4, 9}, []uint64{1}, []uint64{1, 2})

	// A conflicting Advance drops nothing, in any of its streams.
	batch := []seqstore.Advance{
		{Stream: o, To: seqstore.Cursor{Epoch: e2, Next: 3}},
		{Stream: s, From: seqstore.Cursor{Epoch: e2, Next: 3}, To: seqstore.Cursor{Epoch: e3, Next: 5}},
	}
	assert.Equal(t, []seqstore.Stream{s}, conflictStreams(t, st.Advance(ctx, batch), batch), "conflict of a stale From")
	check("after a conflicting Advance", nil, []uint64{4, 9}, []uint64{1}, []uint64{1, 2})
	// So does an Advance refused as invalid (a backwards move).
	err := st.Advance(ctx, []seqstore.Advance{
		{Stream: o, To: seqstore.Cursor{Epoch: e2, Next: 3}},
		{Stream: s, From: c, To: seqstore.Cursor{Epoch: e2, Next: 1}},
	})
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "a backwards move")
	check("after a refused Advance", nil, []uint64{4, 9}, []uint64{1}, []uint64{1, 2})

	// Staying put drops nothing more; Next one past a seq drops exactly it.
	advance(t, st, seqstore.Advance{Stream: s, From: c, To: c})
	check("after an Advance that stays put", nil, []uint64{4, 9}, []uint64{1}, []uint64{1, 2})
	c2 := seqstore.Cursor{Epoch: e2, Next: 5, Owner: 1}
	advance(t, st, seqstore.Advance{Stream: s, From: c, To: c2})
	check("after Advance to 20/5", nil, []uint64{9}, []uint64{1}, []uint64{1, 2})

	// One batch drops in each of its streams; seq 1 of the next epoch is
	// kept by a cursor at Next 1.
	c3 := seqstore.Cursor{Epoch: e3, Next: 1}
	oc := seqstore.Cursor{Epoch: e2, Next: 2}
	advance(t, st, seqstore.Advance{Stream: o, To: oc}, seqstore.Advance{Stream: s, From: c2, To: c3})
	check("after one Advance of both streams", nil, nil, []uint64{1}, []uint64{2})
	assertStreams(t, []seqstore.Stream{o, s}, parkedStreams(t, p, "q"), "both streams keep parks")

	// Parks of a stream's cursor epoch ahead of Next stay until passed.
	park(t, p, seqsOf(s, e3, 2, 3)...)
	advance(t, st, seqstore.Advance{Stream: s, From: c3, To: seqstore.Cursor{Epoch: e3, Next: 3}})
	check("after Advance to 30/3", nil, nil, []uint64{3}, []uint64{2})
	// A newer epoch passes every park of older ones.
	advance(t, st, seqstore.Advance{Stream: s, From: seqstore.Cursor{Epoch: e3, Next: 3}, To: seqstore.Cursor{Epoch: e3 + 1, Next: 1}})
	check("after Advance to a newer epoch", nil, nil, nil, []uint64{2})
	assertStreams(t, []seqstore.Stream{o}, parkedStreams(t, p, "q"), "a stream whose last park was dropped is not listed")
}

// testParkAdvanceDropsMany passes more parked entries than a store drops
// in one chunk (seqstore.Parker: stores drop a large park in bounded
// writes, the first with the cursor): once Advance returned, Unpark returns
// none of the passed entries for any epoch or From, every entry at or
// above the cursor is still there, and ParkedStreams lists only streams
// with entries left.
func testParkAdvanceDropsMany(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	big := seqstore.Stream{Queue: "q", Group: "big"}
	small := seqstore.Stream{Queue: "q", Group: "small"}
	const n, cut = 2600, 2001
	body := func(s seqstore.Stream, epoch, seq uint64) []byte {
		return fmt.Appendf(nil, "%s %d/%d", s.Group, epoch, seq)
	}
	entries := func(s seqstore.Stream, epoch, from, to uint64) []seqstore.Parked {
		var ps []seqstore.Parked
		for q := from; q <= to; q++ {
			ps = append(ps, seqstore.Parked{Stream: s, Epoch: epoch, Seq: q, Body: body(s, epoch, q)})
		}
		return ps
	}
	all := slices.Concat(entries(big, 4, 1, 300), entries(big, 5, 1, n), entries(big, 6, 1, 2), entries(small, 5, 1, 3))
	for lo := 0; lo < len(all); lo += 500 {
		park(t, p, all[lo:min(lo+500, len(all))]...)
	}
	// epoch 4 < cursor epoch; epoch 5 from 0, from inside the passed range
	// and from the cursor; the next epoch untouched.
	check := func(what string, big5, small5 []seqstore.Parked, big6 []seqstore.Parked) {
		t.Helper()
		got := unpark(t, p,
			seqstore.ParkQuery{Stream: big, Epoch: 4, Max: 10_000},
			seqstore.ParkQuery{Stream: big, Epoch: 5, Max: 10_000},
			seqstore.ParkQuery{Stream: big, Epoch: 5, From: 1500, Max: 10_000},
			seqstore.ParkQuery{Stream: big, Epoch: 6, Max: 10_000},
			seqstore.ParkQuery{Stream: small, Epoch: 5, Max: 10_000})
		assertParked(t, nil, got[0], "%s: %s epoch 4", what, big)
		assertParked(t, big5, got[1], "%s: %s epoch 5 from 0", what, big)
		var from1500 []seqstore.Parked
		for _, e := range big5 {
			if e.Seq >= 1500 {
				from1500 = append(from1500, e)
			}
		}
		assertParked(t, from1500, got[2], "%s: %s epoch 5 from 1500", what, big)
		assertParked(t, big6, got[3], "%s: %s epoch 6", what, big)
		assertParked(t, small5, got[4], "%s: %s epoch 5", what, small)
	}

	// One batch passes 300 + 2,000 entries of big and 2 of small.
	cb := seqstore.Cursor{Epoch: 5, Next: cut}
	cs := seqstore.Cursor{Epoch: 5, Next: 3}
	advance(t, st, seqstore.Advance{Stream: big, To: cb}, seqstore.Advance{Stream: small, To: cs})
	check("after Advance to 5/2001", entries(big, 5, cut, n), entries(small, 5, 3, 3), entries(big, 6, 1, 2))
	assertStreams(t, []seqstore.Stream{big, small}, parkedStreams(t, p, "q"), "both streams keep parks")

	// A new epoch passes the rest of epoch 5; small's last park goes too.
	cb2 := seqstore.Cursor{Epoch: 6, Next: 1}
	advance(t, st, seqstore.Advance{Stream: big, From: cb, To: cb2}, seqstore.Advance{Stream: small, From: cs, To: seqstore.Cursor{Epoch: 5, Next: 4}})
	check("after Advance to 6/1", nil, nil, entries(big, 6, 1, 2))
	assertStreams(t, []seqstore.Stream{big}, parkedStreams(t, p, "q"), "only big keeps parks (epoch 6)")

	advance(t, st, seqstore.Advance{Stream: big, From: cb2, To: seqstore.Cursor{Epoch: 7, Next: 1}})
	check("after Advance to 7/1", nil, nil, nil)
	assertStreams(t, nil, parkedStreams(t, p, "q"), "no stream keeps parks once every one was passed")
}

// testParkPassedLeftovers plants entries below stored cursors, as a crash
// between an Advance's drop chunks leaves them (Harness.PlantParked):
// Unpark never returns them, for any epoch or From; ParkedStreams does not
// list a stream that has only such entries; Advances go on as before.
func testParkPassedLeftovers(t *testing.T, h Harness) {
	if h.PlantParked == nil {
		t.Skip("Harness.PlantParked is nil: the store's storage cannot be planted")
	}
	st, p, _ := openParker(t, h)
	a := seqstore.Stream{Queue: "q", Group: "a"} // live and passed entries
	b := seqstore.Stream{Queue: "q", Group: "b"} // only passed entries
	park(t, p, pk(a, 2, 5, "a5"), pk(a, 2, 6, "a6"), pk(a, 3, 1, "a3/1"), pk(b, 2, 9, "b9"))
	ca := seqstore.Cursor{Epoch: 2, Next: 5}
	cb := seqstore.Cursor{Epoch: 3, Next: 1}
	advance(t, st, seqstore.Advance{Stream: a, To: ca}, seqstore.Advance{Stream: b, To: cb})
	h.PlantParked(t, st, []seqstore.Parked{pk(a, 1, 7, "a old epoch"), pk(a, 2, 1, "a1"), pk(a, 2, 4, "a4"),
		pk(b, 2, 3, "b3"), pk(b, 2, 10, "b10")})

	got := unpark(t, p,
		seqstore.ParkQuery{Stream: a, Epoch: 1, Max: 100},
		seqstore.ParkQuery{Stream: a, Epoch: 2, Max: 100},
		seqstore.ParkQuery{Stream: a, Epoch: 2, From: 4, Max: 1},
		seqstore.ParkQuery{Stream: a, Epoch: 3, Max: 100},
		seqstore.ParkQuery{Stream: b, Epoch: 2, Max: 100},
		seqstore.ParkQuery{Stream: b, Epoch: 3, Max: 100})
	assertParked(t, nil, got[0], "%s epoch 1 (older than its cursor's)", a)
	assertParked(t, []seqstore.Parked{pk(a, 2, 5, "a5"), pk(a, 2, 6, "a6")}, got[1], "%s epoch 2 from 0", a)
	assertParked(t, []seqstore.Parked{pk(a, 2, 5, "a5")}, got[2], "%s epoch 2 from 4, max 1", a)
	assertParked(t, []seqstore.Parked{pk(a, 3, 1, "a3/1")}, got[3], "%s epoch 3", a)
	assertParked(t, nil, got[4], "%s epoch 2 (older than its cursor's)", b)
	assertParked(t, nil, got[5], "%s epoch 3", b)
	assertStreams(t, []seqstore.Stream{a}, parkedStreams(t, p, "q"), "ParkedStreams with passed entries left")
	assertStreams(t, []seqstore.Stream{a}, parkedStreams(t, p, "q"), "ParkedStreams again")

	// Advances and parks go on; the leftovers stay invisible.
	ca2 := seqstore.Cursor{Epoch: 2, Next: 6}
	advance(t, st, seqstore.Advance{Stream: a, From: ca, To: ca2}, seqstore.Advance{Stream: b, From: cb, To: seqstore.Cursor{Epoch: 3, Next: 2}})
	park(t, p, pk(b, 3, 4, "b3/4"))
	assertParked(t, []seqstore.Parked{pk(a, 2, 6, "a6")}, unparkAll(t, p, a, 2), "%s epoch 2 after an Advance to 2/6", a)
	assertParked(t, nil, unparkAll(t, p, b, 2), "%s epoch 2 after an Advance", b)
	assertParked(t, []seqstore.Parked{pk(b, 3, 4, "b3/4")}, unparkAll(t, p, b, 3), "%s epoch 3 after a Park", b)
	assertStreams(t, []seqstore.Stream{a, b}, parkedStreams(t, p, "q"), "ParkedStreams after a new Park of b")
	advance(t, st, seqstore.Advance{Stream: a, From: ca2, To: seqstore.Cursor{Epoch: 4, Next: 1}})
	assertStreams(t, []seqstore.Stream{b}, parkedStreams(t, p, "q"), "ParkedStreams once a's cursor passed everything")
}

func testParkedStreams(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	qa := seqstore.Stream{Queue: "q", Group: "a"}
	qb := seqstore.Stream{Queue: "q", Group: "b"}
	q0 := seqstore.Stream{Queue: "q"}
	qslash := seqstore.Stream{Queue: "q", Group: "a/b"}
	other := seqstore.Stream{Queue: "q-other", Group: "a"}
	prefix := seqstore.Stream{Queue: "qq", Group: "a"}
	upper := seqstore.Stream{Queue: "Q", Group: "a"}
	// Names that a LIKE pattern or a padding collation would confuse with q.
	underscore := seqstore.Stream{Queue: "_", Group: "a"}
	percent := seqstore.Stream{Queue: "%", Group: "a"}
	padded := seqstore.Stream{Queue: "q ", Group: "a"}
	idle := seqstore.Stream{Queue: "q", Group: "idle"}
	// idle has sender and receiver state but no parks.
	reserve(t, st, idle, 2, [][]byte{[]byte("x"), nil})
	advance(t, st, seqstore.Advance{Stream: idle, To: seqstore.Cursor{Epoch: 1, Next: 1}})

	park(t, p, pk(qb, 1, 3, ""), pk(qa, 1, 2, ""), pk(other, 1, 1, ""), pk(qslash, 1, 1, ""), pk(q0, 1, 1, ""),
		pk(prefix, 1, 1, ""), pk(upper, 1, 1, ""), pk(qb, 1, 4, ""), pk(underscore, 1, 1, ""), pk(percent, 1, 1, ""), pk(padded, 1, 1, ""))
	assertStreams(t, sortStreams(qa, qb, q0, qslash), parkedStreams(t, p, "q"), "ParkedStreams(q), ordered by key")
	assertStreams(t, []seqstore.Stream{other}, parkedStreams(t, p, "q-other"), "ParkedStreams(q-other)")
	assertStreams(t, []seqstore.Stream{prefix}, parkedStreams(t, p, "qq"), "ParkedStreams(qq)")
	assertStreams(t, []seqstore.Stream{upper}, parkedStreams(t, p, "Q"), "ParkedStreams(Q)")
	assertStreams(t, []seqstore.Stream{underscore}, parkedStreams(t, p, "_"), "ParkedStreams(_)")
	assertStreams(t, []seqstore.Stream{percent}, parkedStreams(t, p, "%"), "ParkedStreams(%)")
	assertStreams(t, []seqstore.Stream{padded}, parkedStreams(t, p, "q "), "ParkedStreams(\"q \")")
	assertStreams(t, nil, parkedStreams(t, p, "unknown"), "ParkedStreams of a queue without parks")

	// Dropping a stream's last park forgets it; dropping one of two does not.
	advance(t, st, seqstore.Advance{Stream: qa, To: seqstore.Cursor{Epoch: 1, Next: 3}},
		seqstore.Advance{Stream: qb, To: seqstore.Cursor{Epoch: 1, Next: 4}})
	assertStreams(t, sortStreams(qb, q0, qslash), parkedStreams(t, p, "q"), "after dropping every park of q/a and one of q/b")
	advance(t, st, seqstore.Advance{Stream: q0, To: seqstore.Cursor{Epoch: 2, Next: 1}},
		seqstore.Advance{Stream: qb, From: seqstore.Cursor{Epoch: 1, Next: 4}, To: seqstore.Cursor{Epoch: 1, Next: 5}})
	assertStreams(t, []seqstore.Stream{qslash}, parkedStreams(t, p, "q"), "after a newer epoch dropped q/ and q/b's last park was passed")
	assertStreams(t, []seqstore.Stream{other}, parkedStreams(t, p, "q-other"), "other queues are untouched")

	// A forgotten stream parked again is listed again.
	park(t, p, pk(qa, 1, 3, "again"))
	assertStreams(t, sortStreams(qa, qslash), parkedStreams(t, p, "q"), "a stream parked again")
}

func testParkMany(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	const streams, per = 64, 8
	stream := func(i int) seqstore.Stream { return seqstore.Stream{Queue: "q", Group: fmt.Sprintf("g%02d", i)} }
	body := func(i, k int) []byte { return fmt.Appendf(bytes.Repeat([]byte{byte(i)}, 1000), "%d/%d", i, k) }
	var entries []seqstore.Parked
	for k := per; k >= 1; k-- { // seqs of each stream interleaved, descending
		for i := range streams {
			entries = append(entries, seqstore.Parked{Stream: stream(i), Epoch: 5, Seq: uint64(10 + k), Body: body(i, k)})
		}
	}
	park(t, p, entries...)
	want := func(i, from int) []seqstore.Parked {
		var ps []seqstore.Parked
		for k := from; k <= per; k++ {
			ps = append(ps, seqstore.Parked{Stream: stream(i), Epoch: 5, Seq: uint64(10 + k), Body: body(i, k)})
		}
		return ps
	}
	qs := make([]seqstore.ParkQuery, streams)
	all := make([]seqstore.Stream, streams)
	for i := range qs {
		qs[i] = seqstore.ParkQuery{Stream: stream(i), Epoch: 5, Max: 100}
		all[i] = stream(i)
	}
	got := unpark(t, p, qs...)
	for i := range streams {
		assertParked(t, want(i, 1), got[i], "stream %d of one Park of %d entries", i, len(entries))
	}
	assertStreams(t, all, parkedStreams(t, p, "q"), "every stream of one Park call")

	// One Advance of every stream drops a different number of each.
	var batch []seqstore.Advance
	for i := range streams {
		batch = append(batch, seqstore.Advance{Stream: stream(i), To: seqstore.Cursor{Epoch: 5, Next: uint64(11 + i%(per+1))}})
	}
	advance(t, st, batch...)
	got = unpark(t, p, qs...)
	var left []seqstore.Stream
	for i := range streams {
		w := want(i, 1+i%(per+1))
		assertParked(t, w, got[i], "stream %d after one Advance of %d streams", i, streams)
		if len(w) > 0 {
			left = append(left, stream(i))
		}
	}
	assertStreams(t, left, parkedStreams(t, p, "q"), "streams with parks left after one Advance of %d streams", streams)
}

func testParkReopen(t *testing.T, h Harness) {
	needPersistent(t, h)
	st, p, reopen := openParker(t, h)
	ctx := t.Context()
	s := seqstore.Stream{Queue: "q", Group: "s"}
	o := seqstore.Stream{Queue: "q", Group: "o"}
	bin := []byte{0, 1, 0xff, '\n', '#'}
	park(t, p, pk(s, 4, 5, "five"), seqstore.Parked{Stream: s, Epoch: 4, Seq: 6, Body: bin}, pk(s, 4, 7, "seven"),
		seqstore.Parked{Stream: o, Epoch: 3, Seq: 1}, pk(s, 3, 9, "old epoch"))
	c := seqstore.Cursor{Epoch: 4, Next: 6}
	advance(t, st, seqstore.Advance{Stream: s, To: c})
	require.NoError(t, st.Close(), "Close")

	st2 := reopen(t)
	p2 := st2
	assertParked(t, []seqstore.Parked{{Stream: s, Epoch: 4, Seq: 6, Body: bin}, pk(s, 4, 7, "seven")}, unparkAll(t, p2, s, 4),
		"parks after reopening (seq 5 was dropped before)")
	assertParked(t, nil, unparkAll(t, p2, s, 3), "a park dropped by an epoch change stays dropped after reopening")
	assertParked(t, []seqstore.Parked{pk(o, 3, 1, "")}, unparkAll(t, p2, o, 3), "an empty body after reopening")
	assertStreams(t, []seqstore.Stream{o, s}, parkedStreams(t, p2, "q"), "ParkedStreams after reopening")
	assertAborted(t, p2.Park(ctx, []seqstore.Parked{pk(s, 4, 5, "five again")}), 1, map[int]error{0: seqstore.ErrConflict},
		"a park below the cursor after reopening")
	park(t, p2, pk(s, 4, 7, "seven, replaced"), pk(s, 4, 8, "eight"))
	require.NoError(t, st2.Close())

	st3 := reopen(t)
	p3 := st3
	assertParked(t, []seqstore.Parked{{Stream: s, Epoch: 4, Seq: 6, Body: bin}, pk(s, 4, 7, "seven, replaced"), pk(s, 4, 8, "eight")},
		unparkAll(t, p3, s, 4), "parks after the second reopen: replaced and added")
	advance(t, st3, seqstore.Advance{Stream: s, From: c, To: seqstore.Cursor{Epoch: 4, Next: 8}},
		seqstore.Advance{Stream: o, To: seqstore.Cursor{Epoch: 3, Next: 2}})
	require.NoError(t, st3.Close())

	st4 := reopen(t)
	p4 := st4
	assertParked(t, []seqstore.Parked{pk(s, 4, 8, "eight")}, unparkAll(t, p4, s, 4), "an Advance's drops survive reopening")
	assertParked(t, nil, unparkAll(t, p4, o, 3), "an Advance's drops survive reopening")
	assertStreams(t, []seqstore.Stream{s}, parkedStreams(t, p4, "q"), "ParkedStreams after the drops and a reopen")
}

// testParkConcurrent parks, advances and reads the parks of a few streams
// from many goroutines (over several instances when Harness.Shared). A
// reader that sees a cursor must never then see a park below it: Advance
// drops parks in the cursor's write, and Park refuses what a cursor passed.
// At the end exactly the parks at or above each final cursor are left.
func testParkConcurrent(t *testing.T, h Harness) {
	st, _, reopen := openParker(t, h)
	stores := []seqstore.Store{st}
	if h.Shared {
		for range 3 {
			stores = append(stores, reopen(t))
		}
	}
	pick := func(i int) (seqstore.Store, seqstore.Parker) {
		s := stores[i%len(stores)]
		return s, s.(seqstore.Parker)
	}
	const (
		streams  = 8
		seqs     = 90
		parkers  = 4 // parker w parks streams w and w+parkers
		perCall  = 3 // seqs per stream per Park call
		epoch    = 7
		maxParks = 10_000
	)
	stream := func(i int) seqstore.Stream { return seqstore.Stream{Queue: "q", Group: fmt.Sprintf("c%d", i)} }
	final := func(i int) uint64 { return min(seqs+1, uint64(12*(i+1)+1)) } // stream 7 passes everything
	body := func(i int, seq uint64) []byte { return fmt.Appendf(nil, "%d/%d", i, seq) }

	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var writers, readers sync.WaitGroup
	var done atomic.Bool
	conflicts := make([][]seqstore.Parked, parkers) // per parker, the entries refused with ErrConflict
	for w := range parkers {
		writers.Go(func() {
			_, p := pick(w)
			for call := range seqs / perCall {
				// Odd parkers go from the top down, so that some of their
				// parks come after the cursor passed them.
				seq := uint64(call*perCall + 1)
				if w%2 == 1 {
					seq = uint64(seqs - (call+1)*perCall + 1)
				}
				var batch []seqstore.Parked
				for _, i := range []int{w, w + parkers} {
					for q := seq; q < seq+perCall; q++ {
						batch = append(batch, seqstore.Parked{Stream: stream(i), Epoch: epoch, Seq: q, Body: body(i, q)})
					}
				}
				for len(batch) > 0 {
					err := p.Park(t.Context(), batch)
					if err == nil {
						break
					}
					var be *seqstore.BatchError
					if !errors.As(err, &be) || len(be.Errs) != len(batch) {
						report(fmt.Errorf("parker %d: Park of %d entries: %w", w, len(batch), err))
						return
					}
					// Retry without the entries a cursor passed.
					var retry []seqstore.Parked
					for k, e := range be.Errs {
						switch {
						case errors.Is(e, seqstore.ErrConflict):
							conflicts[w] = append(conflicts[w], batch[k])
						case errors.Is(e, seqstore.ErrAborted):
							retry = append(retry, batch[k])
						case e == nil && h.PerStreamAtomic:
							// Reported as applied: a sharded store is atomic
							// per stream only under a race.
						default:
							report(fmt.Errorf("parker %d: Park of %s seq %d: want ErrConflict or ErrAborted, got %w", w, batch[k].Stream, batch[k].Seq, e))
							return
						}
					}
					if len(retry) == len(batch) {
						report(fmt.Errorf("parker %d: a Park refused with a BatchError named no entry at fault: %w", w, err))
						return
					}
					batch = retry
				}
				time.Sleep(200 * time.Microsecond)
			}
		})
	}
	const advancers = 2 // advancer a moves streams a, a+2, ... in one batch per step
	for a := range advancers {
		writers.Go(func() {
			st, _ := pick(a + 1)
			from := make(map[int]seqstore.Cursor)
			for step := uint64(1); ; step++ {
				var batch []seqstore.Advance
				for i := a; i < streams; i += advancers {
					next := min(final(i), 1+step*uint64(1+i%3))
					if next == from[i].Next {
						continue
					}
					to := seqstore.Cursor{Epoch: epoch, Next: next}
					batch = append(batch, seqstore.Advance{Stream: stream(i), From: from[i], To: to})
					from[i] = to
				}
				if len(batch) == 0 {
					return
				}
				if err := st.Advance(t.Context(), batch); err != nil {
					report(fmt.Errorf("advancer %d step %d: %w", a, step, err))
					return
				}
				time.Sleep(100 * time.Microsecond) // let parkers get ahead and behind
			}
		})
	}
	for r := range 2 {
		readers.Go(func() {
			st, p := pick(r + 2)
			for k := 0; !done.Load(); k++ {
				s := stream((k*5 + r) % streams)
				c, err := CursorOne(t.Context(), st, s)
				if err != nil {
					report(fmt.Errorf("reader %d: Cursors(%s): %w", r, s, err))
					return
				}
				got, err := p.Unpark(t.Context(), []seqstore.ParkQuery{{Stream: s, Epoch: epoch, Max: maxParks}})
				if err != nil {
					report(fmt.Errorf("reader %d: Unpark(%s): %w", r, s, err))
					return
				}
				for j, e := range got[0] {
					if j > 0 && e.Seq <= got[0][j-1].Seq {
						report(fmt.Errorf("reader %d: Unpark(%s) returned seq %d after seq %d: want increasing seqs", r, s, e.Seq, got[0][j-1].Seq))
						return
					}
					if c.Below(e.Epoch, e.Seq) {
						report(fmt.Errorf("reader %d: %s seq %d is still parked after its cursor moved to %d/%d: Advance must drop it in the same write", r, s, e.Seq, c.Epoch, c.Next))
						return
					}
					if want := body(groupIndex(s), e.Seq); !bytes.Equal(e.Body, want) {
						report(fmt.Errorf("reader %d: %s seq %d has body %q, want %q", r, s, e.Seq, e.Body, want))
						return
					}
				}
				if k%8 == 0 {
					if _, err := p.ParkedStreams(t.Context(), "q"); err != nil {
						report(fmt.Errorf("reader %d: ParkedStreams: %w", r, err))
						return
					}
				}
			}
		})
	}
	writers.Wait()
	done.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}

	_, p := pick(0)
	var listed []seqstore.Stream
	for i := range streams {
		s := stream(i)
		assertCursor(t, seqstore.Cursor{Epoch: epoch, Next: final(i)}, cursor(t, st, s), "final cursor of %s", s)
		var want []seqstore.Parked
		for q := final(i); q <= seqs; q++ {
			want = append(want, seqstore.Parked{Stream: s, Epoch: epoch, Seq: q, Body: body(i, q)})
		}
		assertParked(t, want, unparkAll(t, p, s, epoch), "parks of %s left at the end: every seq from the final cursor's Next on", s)
		if len(want) > 0 {
			listed = append(listed, s)
		}
	}
	refused := 0
	for _, cs := range conflicts {
		for _, e := range cs {
			refused++
			assert.Less(t, e.Seq, final(groupIndex(e.Stream)), "%s seq %d was refused with ErrConflict but the cursor never passed it", e.Stream, e.Seq)
		}
	}
	t.Logf("%d parks refused because a cursor had passed them", refused)
	assertStreams(t, sortStreams(listed...), parkedStreams(t, p, "q"), "ParkedStreams at the end")
}

// groupIndex is i of a stream named c<i> by testParkConcurrent.
func groupIndex(s seqstore.Stream) int {
	var i int
	_, _ = fmt.Sscanf(s.Group, "c%d", &i)
	return i
}

func testParkCancelled(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	park(t, p, pk(s, 3, 5, "kept"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	assert.ErrorIs(t, p.Park(ctx, []seqstore.Parked{pk(s, 3, 6, "never"), pk(s, 3, 5, "replaced?")}), context.Canceled, "Park with a cancelled context")
	_, err := p.Unpark(ctx, []seqstore.ParkQuery{{Stream: s, Epoch: 3, Max: 10}})
	assert.ErrorIs(t, err, context.Canceled, "Unpark with a cancelled context")
	_, err = p.ParkedStreams(ctx, "q")
	assert.ErrorIs(t, err, context.Canceled, "ParkedStreams with a cancelled context")
	assert.ErrorIs(t, st.Advance(ctx, []seqstore.Advance{{Stream: s, To: seqstore.Cursor{Epoch: 3, Next: 10}}}), context.Canceled,
		"Advance with a cancelled context")

	assertParked(t, []seqstore.Parked{pk(s, 3, 5, "kept")}, unparkAll(t, p, s, 3),
		"a Park with a cancelled context must not apply, nor an Advance with one drop")
	assertCursor(t, seqstore.Cursor{}, cursor(t, st, s))
}

func testParkClosed(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	park(t, p, pk(s, 1, 1, "x"))
	require.NoError(t, st.Close(), "Close")
	ctx := t.Context()
	assert.ErrorIs(t, p.Park(ctx, []seqstore.Parked{pk(s, 1, 2, "y")}), seqstore.ErrClosed, "Park after Close")
	_, err := p.Unpark(ctx, []seqstore.ParkQuery{{Stream: s, Epoch: 1, Max: 1}})
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Unpark after Close")
	_, err = p.ParkedStreams(ctx, "q")
	assert.ErrorIs(t, err, seqstore.ErrClosed, "ParkedStreams after Close")
}

func testParkHostile(t *testing.T, h Harness) {
	st, p, _ := openParker(t, h)
	streams := hostileStreams()
	name := func(s seqstore.Stream, k int) []byte { return fmt.Appendf(nil, "%s|%s|%d", s.Queue, s.Group, k) }
	var entries []seqstore.Parked
	qs := make([]seqstore.ParkQuery, len(streams))
	for i, s := range streams {
		require.NoError(t, s.Validate(), "test stream %q is meant to be valid", s)
		entries = append(entries, seqstore.Parked{Stream: s, Epoch: 1, Seq: 2, Body: name(s, 2)}, seqstore.Parked{Stream: s, Epoch: 1, Seq: 1, Body: name(s, 1)})
		qs[i] = seqstore.ParkQuery{Stream: s, Epoch: 1, Max: 10}
	}
	park(t, p, entries...)
	got := unpark(t, p, qs...)
	for i, s := range streams {
		assertParked(t, []seqstore.Parked{{Stream: s, Epoch: 1, Seq: 1, Body: name(s, 1)}, {Stream: s, Epoch: 1, Seq: 2, Body: name(s, 2)}},
			got[i], "parks of %q/%q, which must not share them with another stream", s.Queue, s.Group)
	}
	byQueue := map[string][]seqstore.Stream{}
	for _, s := range streams {
		byQueue[s.Queue] = append(byQueue[s.Queue], s)
	}
	for q, ss := range byQueue {
		assertStreams(t, sortStreams(ss...), parkedStreams(t, p, q), "ParkedStreams(%q): stored verbatim and ordered by key", q)
	}

	// One Advance of every stream drops seq 1 only, then seq 2.
	for next := uint64(2); next <= 3; next++ {
		batch := make([]seqstore.Advance, len(streams))
		for i, s := range streams {
			batch[i] = seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: 1, Next: next}}
			if next > 2 {
				batch[i].From = seqstore.Cursor{Epoch: 1, Next: next - 1}
			}
		}
		advance(t, st, batch...)
		got := unpark(t, p, qs...)
		for i, s := range streams {
			var want []seqstore.Parked
			if next == 2 {
				want = []seqstore.Parked{{Stream: s, Epoch: 1, Seq: 2, Body: name(s, 2)}}
			}
			assertParked(t, want, got[i], "parks of %q/%q after its cursor moved to %d", s.Queue, s.Group, next)
		}
	}
	for q := range byQueue {
		assertStreams(t, nil, parkedStreams(t, p, q), "ParkedStreams(%q) once every park was dropped", q)
	}
}

// BenchPark measures parking as a receiver does it when its window is
// full: each op parks a batch of 16 early arrivals (1 KiB bodies), one per
// stream over 16 streams, then makes the one Advance of those streams that
// hands them out and drops them. Goroutines (b.RunParallel) work on their
// own 256 streams each, so a store's group commit can coalesce their
// calls. It reports entries/s (entries parked and dropped per second);
// it skips when h.OpenBench is nil.
func BenchPark(b *testing.B, h Harness) {
	if h.OpenBench == nil {
		b.Skip("Harness.OpenBench is nil: BenchPark needs it to open a store")
	}
	const (
		perCall  = 16
		perGoing = 256 // streams per goroutine
	)
	st := h.OpenBench(b)
	defer func() {
		if err := st.Close(); err != nil {
			b.Errorf("Close: %v", err)
		}
	}()
	p, ok := st.(seqstore.Parker)
	if !ok {
		b.Skipf("%T does not implement seqstore.Parker", st)
	}
	body := bytes.Repeat([]byte("p"), 1024)
	var ids atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		g := ids.Add(1)
		streams := make([]seqstore.Stream, perGoing)
		cursors := make([]seqstore.Cursor, perGoing)
		for i := range streams {
			streams[i] = seqstore.Stream{Queue: "bench", Group: fmt.Sprintf("g%d-s%d", g, i)}
		}
		entries := make([]seqstore.Parked, perCall)
		batch := make([]seqstore.Advance, perCall)
		for op := 0; pb.Next(); op++ {
			base := op * perCall % perGoing
			for k := range perCall {
				i := base + k
				// The arrival after the next one is parked, and the
				// Advance passes both.
				seq := max(cursors[i].Next, 1) + 1
				entries[k] = seqstore.Parked{Stream: streams[i], Epoch: 1, Seq: seq, Body: body}
				to := seqstore.Cursor{Epoch: 1, Next: seq + 1}
				batch[k] = seqstore.Advance{Stream: streams[i], From: cursors[i], To: to}
				cursors[i] = to
			}
			if err := p.Park(b.Context(), entries); err != nil {
				b.Errorf("Park: %v", err)
				return
			}
			if err := st.Advance(b.Context(), batch); err != nil {
				b.Errorf("Advance: %v", err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N*perCall)/b.Elapsed().Seconds(), "entries/s")
}
