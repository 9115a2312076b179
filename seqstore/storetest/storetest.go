package storetest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// Harness tells the suite how to open stores of one implementation.
type Harness struct {
	// Open prepares one fresh, isolated backing storage (a new temp dir, a
	// unique key prefix or table prefix) and returns a function that opens a
	// Store over it. Every call of the returned function opens that same
	// storage again; the suite closes every store it opens.
	Open func(t *testing.T) func(t *testing.T) seqstore.Store
	// Persistent reports whether a store reopened on the same storage sees
	// what an earlier one wrote. Reopen tests t.Skip with a reason when
	// false.
	Persistent bool
	// Shared reports whether several Stores may be open at once over the
	// same storage (several calls of the opener, as several processes on
	// one database would) and then act as one store: each call is atomic
	// against the other instances' calls. The CrossInstance tests t.Skip
	// with a reason when false (filestore: its directory lock admits one
	// Store at a time). Share turns a store whose instances share nothing
	// (memstore) into such storage.
	Shared bool
	// PerStreamAtomic reports that Reserve, Advance and Park are atomic per
	// stream only when another writer races them (Redis Cluster across
	// hash slots): a call that fails at rest still applies nothing, but
	// under a race its *seqstore.BatchError may report requests that took
	// effect (nil) beside those that failed. The CrossInstance tests then
	// check that the report matches what is stored instead of all or
	// nothing, and Park/Concurrent takes such a Park's entries as parked.
	PerStreamAtomic bool
	// PlantParked, when set, writes entries straight into st's storage as
	// parked entries, without Park's check against the cursor: the state
	// an Advance that crashed between its drop chunks leaves (entries its
	// stored cursor passed, still stored). Park/PassedLeftovers skips when
	// it is nil.
	PlantParked func(t *testing.T, st seqstore.Store, entries []seqstore.Parked)
	// OpenBench opens a Store over fresh, isolated storage for a benchmark
	// (BenchPark), as Open does for a test; the benchmark closes it.
	// Benchmarks skip when it is nil.
	OpenBench func(b *testing.B) seqstore.Store
}

// Run runs the conformance suite against the stores h opens.
func Run(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.Open, "storetest: Harness.Open is nil")
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"Reserve/FirstAndConsecutive", testReserveConsecutive},
		{"Reserve/Epoch", testReserveEpoch},
		{"Reserve/IndependentStreams", testReserveIndependent},
		{"Reserve/InvalidArguments", testReserveInvalid},
		{"Reserve/ManyStreams", testReserveMany},
		{"Reserve/SameStreamTwice", testReserveSameStreamTwice},
		{"Reserve/Atomic", testReserveAtomic},
		{"Reserve/Empty", testReserveEmpty},
		{"Journal/Pending", testJournalPending},
		{"Journal/ManyStreams", testJournalMany},
		{"Journal/Sent", testJournalSent},
		{"Journal/SentManyStreams", testSentMany},
		{"Journal/Copies", testJournalCopies},
		{"Cursor/ZeroWhenAbsent", testCursorZero},
		{"Cursor/ManyStreams", testCursorsMany},
		{"Cursor/InvalidFailsAlone", testCursorsInvalid},
		{"Advance/CompareAndSet", testAdvanceCAS},
		{"Advance/AllOrNothing", testAdvanceAllOrNothing},
		{"Advance/Backwards", testAdvanceBackwards},
		{"Advance/Skipped", testAdvanceSkipped},
		{"Advance/DuplicateStream", testAdvanceDuplicate},
		{"Advance/EmptyBatch", testAdvanceEmpty},
		{"Concurrent/Reserve", testConcurrentReserve},
		{"Concurrent/AdvanceRace", testConcurrentAdvance},
		{"Concurrent/AdvanceManyStreams", testConcurrentAdvanceMany},
		{"Concurrent/IsolatedFailures", testIsolatedFailures},
		{"CrossInstance/Race", testCrossInstanceRace},
		{"Journal/LargeBodies", testJournalLarge},
		{"Reopen/State", testReopenState},
		{"Reopen/CountersNeverGoBack", testReopenCounters},
		{"Context/Cancelled", testCancelled},
		{"Closed", testClosed},
		{"Names/Hostile", testHostileNames},
		{"Names/Invalid", testInvalidNames},
		{"Overflow/Cursor", testOverflowCursor},
		{"Overflow/Reserve", testOverflowReserve},
	}
	tests = append(tests, parkTests...)
	tests = append(tests, listerTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, h)
		})
	}
}

// open prepares fresh storage and opens a store over it. It returns the
// store and a function that opens the same storage again.
func open(t *testing.T, h Harness) (seqstore.Store, func(t *testing.T) seqstore.Store) {
	t.Helper()
	fn := h.Open(t)
	require.NotNil(t, fn, "Harness.Open returned a nil opener")
	reopen := func(t *testing.T) seqstore.Store {
		t.Helper()
		st := fn(t)
		require.NotNil(t, st, "the Harness opener returned a nil Store")
		t.Cleanup(func() { assert.NoError(t, st.Close(), "Close at the end of the test") })
		return st
	}
	return reopen(t), reopen
}

func needPersistent(t *testing.T, h Harness) {
	t.Helper()
	if !h.Persistent {
		t.Skip("store is not persistent (Harness.Persistent is false): nothing survives reopening")
	}
}

// reserve makes a one-request Reserve call.
func reserve(t *testing.T, st seqstore.Store, s seqstore.Stream, n int, journal [][]byte) seqstore.Reservation {
	t.Helper()
	return reserveMany(t, st, seqstore.ReserveRequest{Stream: s, N: n, Journal: journal})[0]
}

func reserveMany(t *testing.T, st seqstore.Store, reqs ...seqstore.ReserveRequest) []seqstore.Reservation {
	t.Helper()
	rs, err := st.Reserve(t.Context(), reqs)
	require.NoError(t, err, "Reserve of %d request(s), first on %s", len(reqs), reqs[0].Stream)
	require.Len(t, rs, len(reqs), "Reserve must return one Reservation per request")
	return rs
}

func sent(t *testing.T, st seqstore.Store, s seqstore.Stream, seqs ...uint64) {
	t.Helper()
	require.NoError(t, st.Sent(t.Context(), []seqstore.SentMark{{Stream: s, Seqs: seqs}}), "Sent(%s, %v)", s, seqs)
}

// cursor makes a one-stream Cursors call.
func cursor(t *testing.T, st seqstore.Store, s seqstore.Stream) seqstore.Cursor {
	t.Helper()
	return cursors(t, st, s)[0]
}

func cursors(t *testing.T, st seqstore.Store, ss ...seqstore.Stream) []seqstore.Cursor {
	t.Helper()
	cs, err := st.Cursors(t.Context(), ss)
	require.NoError(t, err, "Cursors of %d stream(s), first %s", len(ss), ss[0])
	require.Len(t, cs, len(ss), "Cursors must return one Cursor per stream")
	return cs
}

func advance(t *testing.T, st seqstore.Store, batch ...seqstore.Advance) {
	t.Helper()
	require.NoError(t, st.Advance(t.Context(), batch), "Advance of %d stream(s)", len(batch))
}

func pending(t *testing.T, st seqstore.Store, queue string) []seqstore.Entry {
	t.Helper()
	es, err := st.Pending(t.Context(), queue)
	require.NoError(t, err, "Pending(%q)", queue)
	return es
}

// assertCursor compares every field, treating nil and empty Skipped alike.
func assertCursor(t *testing.T, want, got seqstore.Cursor, msgAndArgs ...any) {
	t.Helper()
	if len(want.Skipped) == 0 && len(got.Skipped) == 0 {
		want.Skipped, got.Skipped = nil, nil
	}
	assert.Equal(t, want, got, msgAndArgs...)
}

// outcomes requires err to be a *seqstore.BatchError with one error per
// request of a call of n requests, and returns those errors.
func outcomes(t *testing.T, err error, n int, what string) []error {
	t.Helper()
	var be *seqstore.BatchError
	require.ErrorAs(t, err, &be, "%s: want a *seqstore.BatchError, got %v", what, err)
	require.Len(t, be.Errs, n, "%s: the BatchError must hold one error per request", what)
	assert.NotEmpty(t, err.Error())
	return be.Errs
}

// assertAborted checks the error of an atomic call of n requests that
// failed because of the requests in fault (index -> sentinel): each of them
// wraps its sentinel and every other request fails with ErrAborted.
func assertAborted(t *testing.T, err error, n int, fault map[int]error, what string) {
	t.Helper()
	for i, e := range outcomes(t, err, n, what) {
		if want, ok := fault[i]; ok {
			assert.ErrorIs(t, e, want, "%s: request %d is at fault", what, i)
			assert.NotErrorIs(t, e, seqstore.ErrAborted, "%s: request %d is at fault, not aborted", what, i)
			continue
		}
		assert.ErrorIs(t, e, seqstore.ErrAborted, "%s: request %d is innocent and must be aborted, got %v", what, i, e)
	}
}

// conflictStreams returns, sorted by key, the streams of batch whose
// request failed with ErrConflict, after checking that err is a
// *seqstore.BatchError wrapping ErrConflict whose other requests were
// aborted.
func conflictStreams(t *testing.T, err error, batch []seqstore.Advance) []seqstore.Stream {
	t.Helper()
	require.Error(t, err, "Advance succeeded, want a conflict")
	require.ErrorIs(t, err, seqstore.ErrConflict)
	var streams []seqstore.Stream
	for i, e := range outcomes(t, err, len(batch), "conflicting Advance") {
		if errors.Is(e, seqstore.ErrConflict) {
			streams = append(streams, batch[i].Stream)
			continue
		}
		assert.ErrorIs(t, e, seqstore.ErrAborted, "stream %s did not conflict, so it must be aborted", batch[i].Stream)
	}
	return sortStreams(streams...)
}

func sortStreams(ss ...seqstore.Stream) []seqstore.Stream {
	ss = slices.Clone(ss)
	slices.SortFunc(ss, func(a, b seqstore.Stream) int { return cmp.Compare(a.Key(), b.Key()) })
	return ss
}

func testReserveConsecutive(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	r1 := reserve(t, st, s, 1, nil)
	assert.Equal(t, uint64(1), r1.First, "first seq of a new stream")
	for _, tc := range []struct {
		n     int
		first uint64
	}{{3, 2}, {1, 5}, {16, 6}, {1, 22}} {
		r := reserve(t, st, s, tc.n, nil)
		assert.Equal(t, tc.first, r.First, "Reserve(%d) after %d seqs", tc.n, tc.first-1)
		assert.Equal(t, r1.Epoch, r.Epoch, "the epoch of a stream must not change between reservations")
	}
	// Durable (journaled) and fast reservations share one counter.
	r := reserve(t, st, s, 2, [][]byte{[]byte("a"), []byte("b")})
	assert.Equal(t, uint64(23), r.First, "journaled Reserve continues the counter")
	assert.Equal(t, r1.Epoch, r.Epoch)
}

func testReserveEpoch(t *testing.T, h Harness) {
	st, _ := open(t, h)
	before := time.Now().Add(-time.Minute).UnixMilli()
	r := reserve(t, st, seqstore.Stream{Queue: "q"}, 1, nil)
	after := time.Now().Add(time.Minute).UnixMilli()
	require.NotZero(t, r.Epoch, "epoch must be non-zero")
	assert.LessOrEqual(t, r.Epoch, uint64(seqstore.MaxSeq), "epoch must fit MaxSeq")
	// NewEpoch puts the wall clock in milliseconds above 20 random bits.
	ms := int64(r.Epoch >> 20)
	assert.True(t, before <= ms && ms <= after,
		"epoch %d carries the time %v, want about now (%v); epochs must come from seqstore.NewEpoch",
		r.Epoch, time.UnixMilli(ms).UTC(), time.Now().UTC())
}

func testReserveIndependent(t *testing.T, h Harness) {
	st, _ := open(t, h)
	streams := []seqstore.Stream{
		{Queue: "q1"}, {Queue: "q1", Group: "a"}, {Queue: "q1", Group: "b"},
		{Queue: "q2"}, {Queue: "q2", Group: "a"},
	}
	for i, s := range streams {
		// Stream i gets i+1 reservations of 2, interleaved with the others.
		for j := 0; j <= i; j++ {
			r := reserve(t, st, s, 2, nil)
			assert.Equal(t, uint64(2*j+1), r.First, "reservation %d of %s", j, s)
		}
	}
	for i, s := range streams {
		r := reserve(t, st, s, 1, nil)
		assert.Equal(t, uint64(2*(i+1)+1), r.First, "next seq of %s", s)
	}
}

func testReserveInvalid(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q"}
	ctx := t.Context()
	for _, tc := range []struct {
		name    string
		n       int
		journal [][]byte
	}{
		{"n=0", 0, nil},
		{"n=-1", -1, nil},
		{"n=0 with empty journal", 0, [][]byte{}},
		{"fewer bodies than n", 2, [][]byte{[]byte("x")}},
		{"more bodies than n", 1, [][]byte{[]byte("x"), []byte("y")}},
		{"empty journal for n=1", 1, [][]byte{}},
	} {
		_, err := ReserveOne(ctx, st, s, tc.n, tc.journal)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Reserve with %s", tc.name)
	}
	r := reserve(t, st, s, 1, nil)
	assert.Equal(t, uint64(1), r.First, "rejected reservations must not consume seqs")
	assert.Empty(t, pending(t, st, "q"), "rejected reservations must not journal anything")
}

func testJournalPending(t *testing.T, h Harness) {
	st, _ := open(t, h)
	binary := []byte{0, 0xff, '#', '\n', 0x80, 0}
	sb := seqstore.Stream{Queue: "q", Group: "b"}
	sa := seqstore.Stream{Queue: "q", Group: "a"}
	s0 := seqstore.Stream{Queue: "q"}
	other := seqstore.Stream{Queue: "q-other", Group: "a"}
	prefix := seqstore.Stream{Queue: "qq", Group: "a"}

	rb := reserve(t, st, sb, 3, [][]byte{binary, {}, []byte("third")})
	ra := reserve(t, st, sa, 1, nil) // fast mode: not journaled
	ra2 := reserve(t, st, sa, 2, [][]byte{[]byte("a2"), nil})
	r0 := reserve(t, st, s0, 1, [][]byte{[]byte("default group")})
	reserve(t, st, other, 1, [][]byte{[]byte("other queue")})
	reserve(t, st, prefix, 1, [][]byte{[]byte("prefix queue")})
	require.Equal(t, uint64(2), ra2.First)

	want := []seqstore.Entry{
		{Stream: s0, Epoch: r0.Epoch, Seq: 1, Body: []byte("default group")},
		{Stream: sa, Epoch: ra.Epoch, Seq: 2, Body: []byte("a2")},
		{Stream: sa, Epoch: ra.Epoch, Seq: 3, Body: []byte{}},
		{Stream: sb, Epoch: rb.Epoch, Seq: 1, Body: binary},
		{Stream: sb, Epoch: rb.Epoch, Seq: 2, Body: []byte{}},
		{Stream: sb, Epoch: rb.Epoch, Seq: 3, Body: []byte("third")},
	}
	slices.SortStableFunc(want, func(a, b seqstore.Entry) int { return cmp.Compare(a.Stream.Key(), b.Stream.Key()) })
	assertEntries(t, want, pending(t, st, "q"), "Pending(q)")
	assert.Empty(t, pending(t, st, "unknown"), "Pending of a queue without streams")
	got := pending(t, st, "q-other")
	require.Len(t, got, 1, "Pending(q-other)")
	assert.Equal(t, other, got[0].Stream)
}

// assertEntries compares entries field by field, treating nil and empty
// bodies alike.
func assertEntries(t *testing.T, want, got []seqstore.Entry, what string) {
	t.Helper()
	format := func(es []seqstore.Entry) string {
		var b strings.Builder
		for _, e := range es {
			fmt.Fprintf(&b, "\n  %s epoch=%d seq=%d body=%q", e.Stream, e.Epoch, e.Seq, e.Body)
		}
		return b.String()
	}
	ok := len(want) == len(got)
	for i := 0; ok && i < len(want); i++ {
		w, g := want[i], got[i]
		ok = w.Stream == g.Stream && w.Epoch == g.Epoch && w.Seq == g.Seq && bytes.Equal(w.Body, g.Body)
	}
	assert.True(t, ok, "%s: want (ordered by stream key, then seq):%s\ngot:%s", what, format(want), format(got))
}

func testJournalSent(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	other := seqstore.Stream{Queue: "q", Group: "h"}
	bodies := [][]byte{[]byte("1"), []byte("2"), []byte("3"), []byte("4"), []byte("5")}
	r := reserve(t, st, s, 5, bodies)
	ro := reserve(t, st, other, 2, [][]byte{[]byte("o1"), []byte("o2")})
	ctx := t.Context()

	require.NoError(t, st.Sent(ctx, []seqstore.SentMark{{Stream: s, Seqs: []uint64{2, 4, 999}}}), "Sent with an unknown seq must ignore it")
	require.NoError(t, st.Sent(ctx, []seqstore.SentMark{{Stream: s}}), "Sent of no seqs")
	require.NoError(t, st.Sent(ctx, nil), "Sent of no marks")
	require.NoError(t, st.Sent(ctx, []seqstore.SentMark{{Stream: seqstore.Stream{Queue: "q", Group: "never reserved"}, Seqs: []uint64{1}}}),
		"Sent on a stream without state")
	require.NoError(t, st.Sent(ctx, []seqstore.SentMark{{Stream: other, Seqs: []uint64{1, 1}}}), "Sent naming a seq twice")

	want := []seqstore.Entry{
		{Stream: s, Epoch: r.Epoch, Seq: 1, Body: []byte("1")},
		{Stream: s, Epoch: r.Epoch, Seq: 3, Body: []byte("3")},
		{Stream: s, Epoch: r.Epoch, Seq: 5, Body: []byte("5")},
		{Stream: other, Epoch: ro.Epoch, Seq: 2, Body: []byte("o2")},
	}
	// Sent may be lazy, so give the marks a moment to show.
	got := eventuallyPending(t, st, "q", len(want))
	assertEntries(t, want, got, "Pending after Sent")

	sent(t, st, s, 1, 3, 5)
	sent(t, st, other, 2)
	assertEntries(t, nil, eventuallyPending(t, st, "q", 0), "Pending after every entry was sent")

	// Sent entries do not give their seqs back.
	assert.Equal(t, uint64(6), reserve(t, st, s, 1, [][]byte{[]byte("6")}).First)
}

// eventuallyPending polls Pending until it lists n entries or 5 s pass,
// and returns the last listing.
func eventuallyPending(t *testing.T, st seqstore.Store, queue string, n int) []seqstore.Entry {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		es := pending(t, st, queue)
		if len(es) == n || time.Now().After(deadline) {
			return es
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testJournalCopies(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q"}
	body, body2 := []byte("original"), []byte("second")
	reserve(t, st, s, 2, [][]byte{body, body2})
	copy(body, "mutated!")
	copy(body2, "mutate")
	got := pending(t, st, "q")
	require.Len(t, got, 2)
	assert.Equal(t, "original", string(got[0].Body), "the store must keep its own copy of a journal body")
	assert.Equal(t, "second", string(got[1].Body), "the store must keep its own copy of a journal body")
	copy(got[0].Body, "mutated!")
	got[1].Body = append(got[1].Body[:0], "overwritten"...)
	again := pending(t, st, "q")
	require.Len(t, again, 2)
	assert.Equal(t, "original", string(again[0].Body), "Pending must return copies, not the store's bytes")
	assert.Equal(t, "second", string(again[1].Body), "Pending must return copies, not the store's bytes")

	c := seqstore.Cursor{Epoch: 1, Next: 2, Skipped: []seqstore.Range{{Epoch: 1, First: 1, Last: 1}}}
	advance(t, st, seqstore.Advance{Stream: s, To: c})
	c.Skipped[0].Last = 99
	got1 := cursor(t, st, s)
	require.Len(t, got1.Skipped, 1)
	assert.Equal(t, uint64(1), got1.Skipped[0].Last, "the store must keep its own copy of Skipped")
	got1.Skipped[0].Last = 77
	assert.Equal(t, uint64(1), cursor(t, st, s).Skipped[0].Last, "Cursor must return a copy of Skipped")
}

func testCursorZero(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	assertCursor(t, seqstore.Cursor{}, cursor(t, st, s), "cursor of an unknown stream")
	reserve(t, st, s, 3, nil)
	assertCursor(t, seqstore.Cursor{}, cursor(t, st, s), "reserving must not create a cursor")
}

func testAdvanceCAS(t *testing.T, h Harness) {
	st, _ := open(t, h)
	ctx := t.Context()
	s := seqstore.Stream{Queue: "q", Group: "g"}
	c1 := seqstore.Cursor{Epoch: 100, Next: 5}
	advance(t, st, seqstore.Advance{Stream: s, From: seqstore.Cursor{}, To: c1})
	assertCursor(t, c1, cursor(t, st, s), "cursor after the first Advance")

	c2 := seqstore.Cursor{Epoch: 100, Next: 9, Owner: 7}
	for _, stale := range []struct {
		name string
		from seqstore.Cursor
	}{
		{"zero cursor", seqstore.Cursor{}},
		{"wrong epoch", seqstore.Cursor{Epoch: 99, Next: 5}},
		{"wrong next", seqstore.Cursor{Epoch: 100, Next: 4}},
		{"wrong owner", seqstore.Cursor{Epoch: 100, Next: 5, Owner: 1}},
	} {
		batch := []seqstore.Advance{{Stream: s, From: stale.from, To: c2}}
		assert.Equal(t, []seqstore.Stream{s}, conflictStreams(t, st.Advance(ctx, batch), batch), "conflict with %s", stale.name)
		assertCursor(t, c1, cursor(t, st, s), "a conflicting Advance (%s) must not change the cursor", stale.name)
	}
	// Skipped is not compared: a From with other ranges still matches.
	advance(t, st, seqstore.Advance{Stream: s, From: seqstore.Cursor{Epoch: 100, Next: 5,
		Skipped: []seqstore.Range{{Epoch: 1, First: 1, Last: 2}}}, To: c2})
	assertCursor(t, c2, cursor(t, st, s), "cursor after taking ownership")

	// The owner token is compared too.
	c3 := seqstore.Cursor{Epoch: 100, Next: 10}
	batch := []seqstore.Advance{{Stream: s, From: seqstore.Cursor{Epoch: 100, Next: 9}, To: c3}}
	assert.Equal(t, []seqstore.Stream{s}, conflictStreams(t, st.Advance(ctx, batch), batch), "Advance without the owner token")
	advance(t, st, seqstore.Advance{Stream: s, From: c2, To: c3})
	assertCursor(t, c3, cursor(t, st, s))

	// A new epoch may start again at 1; staying put is allowed.
	c4 := seqstore.Cursor{Epoch: 200, Next: 1}
	advance(t, st, seqstore.Advance{Stream: s, From: c3, To: c4})
	advance(t, st, seqstore.Advance{Stream: s, From: c4, To: c4})
	assertCursor(t, c4, cursor(t, st, s), "cursor after switching epochs")
}

func testAdvanceAllOrNothing(t *testing.T, h Harness) {
	st, _ := open(t, h)
	ctx := t.Context()
	s1 := seqstore.Stream{Queue: "q", Group: "1"}
	s2 := seqstore.Stream{Queue: "q", Group: "2"}
	s3 := seqstore.Stream{Queue: "q2", Group: "3"}
	base := seqstore.Cursor{Epoch: 5, Next: 10}
	advance(t, st,
		seqstore.Advance{Stream: s1, To: base},
		seqstore.Advance{Stream: s2, To: base},
		seqstore.Advance{Stream: s3, To: base})
	for _, s := range []seqstore.Stream{s1, s2, s3} {
		assertCursor(t, base, cursor(t, st, s), "cursor of %s after a batch Advance", s)
	}

	to := seqstore.Cursor{Epoch: 5, Next: 20}
	stale := seqstore.Cursor{Epoch: 5, Next: 9}
	batch := []seqstore.Advance{
		{Stream: s1, From: base, To: to},
		{Stream: s2, From: stale, To: to},
		{Stream: s3, From: base, To: to},
	}
	assert.Equal(t, []seqstore.Stream{s2}, conflictStreams(t, st.Advance(ctx, batch), batch), "streams named by the conflict")
	for _, s := range []seqstore.Stream{s1, s2, s3} {
		assertCursor(t, base, cursor(t, st, s), "one conflicting stream must stop the whole batch (%s)", s)
	}

	batch = []seqstore.Advance{
		{Stream: s1, From: stale, To: to},
		{Stream: s2, From: base, To: to},
		{Stream: s3, From: seqstore.Cursor{}, To: to},
	}
	assert.Equal(t, sortStreams(s1, s3), conflictStreams(t, st.Advance(ctx, batch), batch), "every conflicting stream is named")
	for _, s := range []seqstore.Stream{s1, s2, s3} {
		assertCursor(t, base, cursor(t, st, s), "cursor of %s after a failed batch", s)
	}

	// A new stream (zero From) in a batch with existing ones.
	s4 := seqstore.Stream{Queue: "q", Group: "4"}
	advance(t, st,
		seqstore.Advance{Stream: s1, From: base, To: to},
		seqstore.Advance{Stream: s4, To: to})
	assertCursor(t, to, cursor(t, st, s1))
	assertCursor(t, to, cursor(t, st, s4))
	assertCursor(t, base, cursor(t, st, s2), "a stream outside the batch must not move")
}

func testAdvanceBackwards(t *testing.T, h Harness) {
	st, _ := open(t, h)
	ctx := t.Context()
	s := seqstore.Stream{Queue: "q", Group: "g"}
	other := seqstore.Stream{Queue: "q", Group: "other"}
	c := seqstore.Cursor{Epoch: 50, Next: 10}
	advance(t, st, seqstore.Advance{Stream: s, To: c})
	for _, back := range []struct {
		name string
		to   seqstore.Cursor
	}{
		{"lower next", seqstore.Cursor{Epoch: 50, Next: 9}},
		{"lower epoch", seqstore.Cursor{Epoch: 49, Next: 100}},
		{"zero cursor", seqstore.Cursor{}},
	} {
		err := st.Advance(ctx, []seqstore.Advance{
			{Stream: other, To: seqstore.Cursor{Epoch: 1, Next: 1}},
			{Stream: s, From: c, To: back.to},
		})
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "moving backwards (%s)", back.name)
		assertAborted(t, err, 2, map[int]error{1: seqstore.ErrInvalidArgument}, "a batch with a backwards move ("+back.name+")")
		assertCursor(t, c, cursor(t, st, s), "a backwards move (%s) must not apply", back.name)
		assertCursor(t, seqstore.Cursor{}, cursor(t, st, other), "a batch with a backwards move (%s) must not apply at all", back.name)
	}
}

func testAdvanceSkipped(t *testing.T, h Harness) {
	st, _ := open(t, h)
	ctx := t.Context()
	s := seqstore.Stream{Queue: "q", Group: "g"}
	c1 := seqstore.Cursor{Epoch: 7, Next: 30, Skipped: []seqstore.Range{
		{Epoch: 6, First: 3, Last: 3}, {Epoch: 7, First: 10, Last: 12}, {Epoch: 7, First: 20, Last: 29},
	}}
	advance(t, st, seqstore.Advance{Stream: s, To: c1})
	assertCursor(t, c1, cursor(t, st, s), "Skipped ranges must be stored and returned in order")

	full := seqstore.Cursor{Epoch: 7, Next: 100}
	for i := range seqstore.MaxSkipped {
		full.Skipped = append(full.Skipped, seqstore.Range{Epoch: 7, First: uint64(31 + 2*i), Last: uint64(31 + 2*i)})
	}
	advance(t, st, seqstore.Advance{Stream: s, From: c1, To: full})
	assertCursor(t, full, cursor(t, st, s), "MaxSkipped ranges")

	tooMany := seqstore.Cursor{Epoch: 7, Next: 200, Skipped: append(slices.Clone(full.Skipped), seqstore.Range{Epoch: 7, First: 150, Last: 160})}
	err := st.Advance(ctx, []seqstore.Advance{{Stream: s, From: full, To: tooMany}})
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "more than MaxSkipped ranges")
	assertCursor(t, full, cursor(t, st, s), "a rejected Advance must not change the cursor")

	cleared := seqstore.Cursor{Epoch: 7, Next: 101}
	advance(t, st, seqstore.Advance{Stream: s, From: full, To: cleared})
	assertCursor(t, cleared, cursor(t, st, s), "To.Skipped replaces the stored list")
}

func testAdvanceDuplicate(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	other := seqstore.Stream{Queue: "q", Group: "h"}
	a := seqstore.Cursor{Epoch: 1, Next: 2}
	b := seqstore.Cursor{Epoch: 1, Next: 3}
	err := st.Advance(t.Context(), []seqstore.Advance{
		{Stream: other, To: a},
		{Stream: s, To: a},
		{Stream: s, From: a, To: b},
	})
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "a stream twice in one batch")
	assertAborted(t, err, 3, map[int]error{2: seqstore.ErrInvalidArgument}, "a stream twice in one batch (the second is at fault)")
	assertCursor(t, seqstore.Cursor{}, cursor(t, st, s), "a rejected batch must not apply")
	assertCursor(t, seqstore.Cursor{}, cursor(t, st, other), "a rejected batch must not apply")
}

func testAdvanceEmpty(t *testing.T, h Harness) {
	st, _ := open(t, h)
	assert.NoError(t, st.Advance(t.Context(), nil), "an empty batch is a no-op")
	assert.NoError(t, st.Advance(t.Context(), []seqstore.Advance{}), "an empty batch is a no-op")
}

func testConcurrentReserve(t *testing.T, h Harness) {
	st, _ := open(t, h)
	const (
		workers = 32
		streams = 12
		calls   = 40
	)
	type grant struct {
		epoch, first uint64
		n            int
		journal      [][]byte
	}
	stream := func(i int) seqstore.Stream {
		return seqstore.Stream{Queue: fmt.Sprintf("q%d", i%2), Group: fmt.Sprintf("g%d", i)}
	}
	got := make([][][]grant, workers) // worker, stream, grants in call order
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		got[w] = make([][]grant, streams)
		wg.Go(func() {
			for c := range calls {
				si := (w*7 + c*5) % streams
				n := 1 + (w+c)%4
				var journal [][]byte
				if (w+c)%3 == 0 {
					journal = make([][]byte, n)
					for i := range journal {
						journal[i] = fmt.Appendf(nil, "w%d c%d i%d", w, c, i)
					}
				}
				r, err := ReserveOne(t.Context(), st, stream(si), n, journal)
				if err != nil {
					errs <- fmt.Errorf("worker %d call %d: %w", w, c, err)
					return
				}
				got[w][si] = append(got[w][si], grant{r.Epoch, r.First, n, journal})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "concurrent Reserve")
	}
	for si := range streams {
		var all []grant
		for w := range workers {
			gs := got[w][si]
			for i := 1; i < len(gs); i++ {
				assert.Greater(t, gs[i].first, gs[i-1].first,
					"worker %d: later reservations of %s must get later seqs", w, stream(si))
			}
			all = append(all, gs...)
		}
		require.NotEmpty(t, all, "stream %s got no reservations", stream(si))
		slices.SortFunc(all, func(a, b grant) int { return cmp.Compare(a.first, b.first) })
		next := uint64(1)
		for _, g := range all {
			assert.Equal(t, all[0].epoch, g.epoch, "epoch of %s changed under concurrency", stream(si))
			if !assert.Equal(t, next, g.first, "stream %s: seqs must be handed out exactly once, without gaps", stream(si)) {
				break
			}
			next += uint64(g.n)
		}
		r := reserve(t, st, stream(si), 1, nil)
		assert.Equal(t, next, r.First, "next seq of %s after the concurrent reservations", stream(si))
	}
	// Exactly the journaled bodies are pending, under the seqs they were
	// reserved with.
	var want []seqstore.Entry
	for w := range workers {
		for si := range streams {
			for _, g := range got[w][si] {
				for i, body := range g.journal {
					want = append(want, seqstore.Entry{Stream: stream(si), Epoch: g.epoch, Seq: g.first + uint64(i), Body: body})
				}
			}
		}
	}
	slices.SortFunc(want, func(a, b seqstore.Entry) int {
		return cmp.Or(cmp.Compare(a.Stream.Key(), b.Stream.Key()), cmp.Compare(a.Seq, b.Seq))
	})
	got0 := pending(t, st, "q0")
	assertEntries(t, want, append(got0, pending(t, st, "q1")...), "Pending after concurrent journaled reservations")
}

func testConcurrentAdvance(t *testing.T, h Harness) {
	st, _ := open(t, h)
	const (
		racers = 8
		rounds = 15
	)
	s := seqstore.Stream{Queue: "q", Group: "hot"}
	var from seqstore.Cursor
	for round := range rounds {
		start := make(chan struct{})
		results := make([]error, racers)
		var wg sync.WaitGroup
		for r := range racers {
			wg.Go(func() {
				to := seqstore.Cursor{Epoch: 9, Next: uint64(round + 1), Owner: uint64(r + 1)}
				<-start
				results[r] = st.Advance(t.Context(), []seqstore.Advance{{Stream: s, From: from, To: to}})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for r, err := range results {
			if err == nil {
				assert.Equal(t, -1, winner, "round %d: racers %d and %d both won the same compare-and-set", round, winner, r)
				winner = r
				continue
			}
			assert.ErrorIs(t, err, seqstore.ErrConflict, "round %d: a losing racer must get ErrConflict", round)
		}
		require.NotEqual(t, -1, winner, "round %d: no racer won the compare-and-set", round)
		from = seqstore.Cursor{Epoch: 9, Next: uint64(round + 1), Owner: uint64(winner + 1)}
		assertCursor(t, from, cursor(t, st, s), "round %d: the stored cursor must be the winner's", round)
	}
}

func testReopenState(t *testing.T, h Harness) {
	needPersistent(t, h)
	st, reopen := open(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	fast := seqstore.Stream{Queue: "q", Group: "fast"}
	r := reserve(t, st, s, 3, [][]byte{[]byte("one"), {0, 1, 2}, {}})
	rf := reserve(t, st, fast, 5, nil)
	c := seqstore.Cursor{Epoch: r.Epoch, Next: 2, Owner: 3, Skipped: []seqstore.Range{{Epoch: r.Epoch, First: 1, Last: 1}}}
	advance(t, st, seqstore.Advance{Stream: s, To: c})
	sent(t, st, s, 1)
	require.NoError(t, st.Close(), "Close")

	st2 := reopen(t)
	assertCursor(t, c, cursor(t, st2, s), "cursor after reopening")
	assertCursor(t, seqstore.Cursor{}, cursor(t, st2, fast), "absent cursor after reopening")
	// A lost Sent mark only costs a duplicate, so seq 1 may or may not be
	// listed; seqs 2 and 3 must be.
	got := pending(t, st2, "q")
	want := []seqstore.Entry{
		{Stream: s, Epoch: r.Epoch, Seq: 2, Body: []byte{0, 1, 2}},
		{Stream: s, Epoch: r.Epoch, Seq: 3, Body: []byte{}},
	}
	if len(got) == 3 {
		want = append([]seqstore.Entry{{Stream: s, Epoch: r.Epoch, Seq: 1, Body: []byte("one")}}, want...)
	}
	assertEntries(t, want, got, "Pending after reopening")

	r2 := reserve(t, st2, s, 1, nil)
	assert.Equal(t, seqstore.Reservation{Epoch: r.Epoch, First: 4}, r2, "reservation after reopening continues the stream")
	rf2 := reserve(t, st2, fast, 1, nil)
	assert.Equal(t, seqstore.Reservation{Epoch: rf.Epoch, First: 6}, rf2, "fast-mode counter after reopening")

	// The same holds across a second reopen, including the new writes.
	c2 := seqstore.Cursor{Epoch: r.Epoch, Next: 4}
	advance(t, st2, seqstore.Advance{Stream: s, From: c, To: c2})
	require.NoError(t, st2.Close())
	st3 := reopen(t)
	assertCursor(t, c2, cursor(t, st3, s), "cursor after the second reopen")
	assert.Equal(t, seqstore.Reservation{Epoch: r.Epoch, First: 5}, reserve(t, st3, s, 1, nil))
}

func testReopenCounters(t *testing.T, h Harness) {
	needPersistent(t, h)
	st, reopen := open(t, h)
	streams := []seqstore.Stream{{Queue: "q", Group: "a"}, {Queue: "q", Group: "b"}, {Queue: "r"}}
	next := make([]uint64, len(streams))
	epochs := make([]uint64, len(streams))
	for i := range next {
		next[i] = 1
	}
	for round := range 4 {
		for i, s := range streams {
			n := 1 + (round+i)%3
			r := reserve(t, st, s, n, nil)
			assert.Equal(t, next[i], r.First, "round %d: counter of %s", round, s)
			if epochs[i] == 0 {
				epochs[i] = r.Epoch
			}
			assert.Equal(t, epochs[i], r.Epoch, "round %d: epoch of %s must survive reopening", round, s)
			next[i] = r.First + uint64(n)
		}
		require.NoError(t, st.Close())
		st = reopen(t)
	}
}

func testCancelled(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := st.Reserve(ctx, []seqstore.ReserveRequest{{Stream: s, N: 1, Journal: [][]byte{[]byte("x")}}, {Stream: s, N: 2}})
	assert.ErrorIs(t, err, context.Canceled, "Reserve with a cancelled context")
	assert.ErrorIs(t, st.Advance(ctx, []seqstore.Advance{{Stream: s, To: seqstore.Cursor{Epoch: 1, Next: 5}}}),
		context.Canceled, "Advance with a cancelled context")
	_, err = st.Pending(ctx, "q")
	assert.ErrorIs(t, err, context.Canceled, "Pending with a cancelled context")
	_, err = st.Cursors(ctx, []seqstore.Stream{s})
	assert.ErrorIs(t, err, context.Canceled, "Cursors with a cancelled context")

	assert.Equal(t, uint64(1), reserve(t, st, s, 1, [][]byte{[]byte("y")}).First,
		"a Reserve with a cancelled context must not consume seqs")
	got := pending(t, st, "q")
	require.Len(t, got, 1, "a Reserve with a cancelled context must not journal")
	assert.Equal(t, "y", string(got[0].Body))
	assertCursor(t, seqstore.Cursor{}, cursor(t, st, s), "an Advance with a cancelled context must not apply")

	assert.ErrorIs(t, st.Sent(ctx, []seqstore.SentMark{{Stream: s, Seqs: []uint64{1}}}), context.Canceled, "Sent with a cancelled context")
}

func testClosed(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	reserve(t, st, s, 1, [][]byte{[]byte("x")})
	require.NoError(t, st.Close(), "first Close")
	assert.NoError(t, st.Close(), "Close must be idempotent")
	ctx := t.Context()

	_, err := st.Reserve(ctx, []seqstore.ReserveRequest{{Stream: s, N: 1}})
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Reserve after Close")
	assert.ErrorIs(t, st.Sent(ctx, []seqstore.SentMark{{Stream: s, Seqs: []uint64{1}}}), seqstore.ErrClosed, "Sent after Close")
	_, err = st.Pending(ctx, "q")
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Pending after Close")
	_, err = st.Cursors(ctx, []seqstore.Stream{s})
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Cursors after Close")
	assert.ErrorIs(t, st.Advance(ctx, []seqstore.Advance{{Stream: s, To: seqstore.Cursor{Epoch: 1, Next: 2}}}),
		seqstore.ErrClosed, "Advance after Close")
}

// hostileStreams are valid streams whose names break naive key building,
// SQL and file names. Pairs that would collide under naive joining are
// included on purpose.
func hostileStreams() []seqstore.Stream {
	return []seqstore.Stream{
		{Queue: "a/b", Group: "c"},
		{Queue: "a", Group: "b/c"},
		{Queue: "a", Group: "b"},
		{Queue: "a", Group: ""},
		{Queue: "a", Group: " "},
		{Queue: "a%2Fb", Group: "c"},
		{Queue: "a", Group: "b%2Fc"},
		{Queue: "a:b", Group: "c"},
		{Queue: "a", Group: "b:c"},
		{Queue: "'; DROP TABLE x; --", Group: "\"quoted\" 'single' `back`"},
		{Queue: "q", Group: "'; DROP TABLE x; --"},
		{Queue: "q", Group: "{}"},
		{Queue: "q", Group: "{hash}tag}"},
		{Queue: "q", Group: "%"},
		{Queue: "q", Group: "%%"},
		{Queue: "q", Group: "/"},
		{Queue: "q", Group: "."},
		{Queue: "q", Group: ".."},
		{Queue: "q", Group: "../../etc/passwd"},
		{Queue: "q", Group: "line\nbreak\r\n"},
		{Queue: "q", Group: "tab\there"},
		{Queue: "q", Group: "\\backslash\\"},
		{Queue: "q", Group: "*?[]$"},
		{Queue: "q", Group: "订单-ñ-🙂"},
		{Queue: "q", Group: "A"},
		{Queue: "q", Group: "a"},
		{Queue: "q", Group: strings.Repeat("g", seqstore.MaxGroupLen)},
		{Queue: "q", Group: strings.Repeat("é", seqstore.MaxGroupLen/2)},
		{Queue: strings.Repeat("q", seqstore.MaxQueueLen), Group: "g"},
		{Queue: strings.Repeat("/", seqstore.MaxQueueLen), Group: strings.Repeat("%", seqstore.MaxGroupLen)},
		{Queue: "\x01\x7f", Group: "\x1b[31m"},
	}
}

func testHostileNames(t *testing.T, h Harness) {
	st, _ := open(t, h)
	streams := hostileStreams()
	for i, s := range streams {
		require.NoError(t, s.Validate(), "test stream %q is meant to be valid", s)
		// Names that collide would share a counter and journal.
		for seq := uint64(1); seq <= 2; seq++ {
			r := reserve(t, st, s, 1, [][]byte{[]byte(s.Queue + "|" + s.Group)})
			assert.Equal(t, seq, r.First, "stream %q/%q must have its own counter", s.Queue, s.Group)
		}
		advance(t, st, seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: 1, Next: uint64(100 + i)}})
	}
	for i, s := range streams {
		assertCursor(t, seqstore.Cursor{Epoch: 1, Next: uint64(100 + i)}, cursor(t, st, s), "cursor of %q/%q", s.Queue, s.Group)
	}
	byQueue := map[string][]seqstore.Stream{}
	for _, s := range streams {
		byQueue[s.Queue] = append(byQueue[s.Queue], s)
	}
	for q, ss := range byQueue {
		got := pending(t, st, q)
		var gotStreams []seqstore.Stream
		for _, e := range got {
			assert.Equal(t, e.Stream.Queue+"|"+e.Stream.Group, string(e.Body), "journal body of %q seq %d", e.Stream, e.Seq)
			if e.Seq == 1 {
				gotStreams = append(gotStreams, e.Stream)
			}
		}
		assert.Len(t, got, 2*len(ss), "Pending(%q)", q)
		assert.Equal(t, sortStreams(ss...), gotStreams, "streams of queue %q, stored verbatim and ordered by key", q)
	}
}

func testInvalidNames(t *testing.T, h Harness) {
	st, _ := open(t, h)
	ctx := t.Context()
	invalid := []seqstore.Stream{
		{Queue: ""},
		{Queue: "", Group: "g"},
		{Queue: strings.Repeat("q", seqstore.MaxQueueLen+1)},
		{Queue: "q", Group: strings.Repeat("g", seqstore.MaxGroupLen+1)},
		{Queue: "q\xff"},
		{Queue: "q", Group: "\xc3"},
		{Queue: "q\x00"},
		{Queue: "q", Group: "a\x00b"},
	}
	fine := seqstore.Stream{Queue: "fine"}
	for _, s := range invalid {
		_, err := st.Reserve(ctx, []seqstore.ReserveRequest{{Stream: fine, N: 1, Journal: [][]byte{[]byte("x")}}, {Stream: s, N: 1}})
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "Reserve(%q)", s)
		assertAborted(t, err, 2, map[int]error{1: seqstore.ErrInvalidStream}, fmt.Sprintf("Reserve(%q)", s))
		err = st.Sent(ctx, []seqstore.SentMark{{Stream: fine, Seqs: []uint64{1}}, {Stream: s, Seqs: []uint64{1}}})
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "Sent(%q)", s)
		assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrInvalidStream, "Sent(%q): the invalid mark is named", s)
		cs, err := st.Cursors(ctx, []seqstore.Stream{fine, s})
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "Cursors(%q)", s)
		if errs := outcomes(t, err, 2, fmt.Sprintf("Cursors(%q)", s)); assert.Len(t, cs, 2, "Cursors with one invalid stream") {
			assert.NoError(t, errs[0], "the valid stream of Cursors(%q) is read", s)
			assertCursor(t, seqstore.Cursor{}, cs[0], "the valid stream of Cursors(%q) is read", s)
		}
		err = st.Advance(ctx, []seqstore.Advance{
			{Stream: fine, To: seqstore.Cursor{Epoch: 1, Next: 2}},
			{Stream: s, To: seqstore.Cursor{Epoch: 1, Next: 2}},
		})
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "Advance(%q)", s)
		assertAborted(t, err, 2, map[int]error{1: seqstore.ErrInvalidStream}, fmt.Sprintf("Advance(%q)", s))
		if s.Group == "" {
			_, err = st.Pending(ctx, s.Queue)
			assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "Pending(%q)", s.Queue)
		}
	}
	assert.Empty(t, pending(t, st, "fine"), "a Reserve with an invalid stream must not journal the valid one")
	assert.Equal(t, uint64(1), reserve(t, st, fine, 1, nil).First, "a Reserve with an invalid stream must not reserve the valid one")
	assertCursor(t, seqstore.Cursor{}, cursor(t, st, seqstore.Stream{Queue: "fine"}),
		"a batch with an invalid stream must not apply")
}

func testOverflowCursor(t *testing.T, h Harness) {
	st, _ := open(t, h)
	ctx := t.Context()
	s := seqstore.Stream{Queue: "q", Group: "g"}
	near := seqstore.Cursor{Epoch: seqstore.MaxSeq, Next: seqstore.MaxSeq - 1}
	top := seqstore.Cursor{Epoch: seqstore.MaxSeq, Next: seqstore.MaxSeq}
	advance(t, st, seqstore.Advance{Stream: s, To: near})
	advance(t, st, seqstore.Advance{Stream: s, From: near, To: top})
	assertCursor(t, top, cursor(t, st, s), "a cursor at MaxSeq")

	err := st.Advance(ctx, []seqstore.Advance{{Stream: s, From: top, To: seqstore.Cursor{Epoch: seqstore.MaxSeq, Next: seqstore.MaxSeq + 1}}})
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "Next beyond MaxSeq")
	err = st.Advance(ctx, []seqstore.Advance{{Stream: s, From: top, To: seqstore.Cursor{Epoch: seqstore.MaxSeq + 1, Next: 1}}})
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "Epoch beyond MaxSeq")
	assertCursor(t, top, cursor(t, st, s), "an overflowing Advance must not apply")
}

func testOverflowReserve(t *testing.T, h Harness) {
	st, reopen := open(t, h)
	ctx := t.Context()
	s := seqstore.Stream{Queue: "q", Group: "g"}
	// A fast-mode Reserve is a counter bump, so this must be cheap.
	r := reserve(t, st, s, seqstore.MaxSeq-10, nil)
	assert.Equal(t, uint64(1), r.First)

	_, err := ReserveOne(ctx, st, s, 11, nil)
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "Reserve passing MaxSeq")
	_, err = ReserveOne(ctx, st, s, seqstore.MaxSeq, nil)
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "Reserve of MaxSeq seqs on a used stream")

	r2 := reserve(t, st, s, 9, nil)
	assert.Equal(t, seqstore.Reservation{Epoch: r.Epoch, First: seqstore.MaxSeq - 9}, r2, "an overflowing Reserve must not consume seqs")
	r3 := reserve(t, st, s, 1, [][]byte{[]byte("last")})
	assert.Equal(t, uint64(seqstore.MaxSeq), r3.First, "the last seq is MaxSeq")
	_, err = ReserveOne(ctx, st, s, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "Reserve on an exhausted stream")

	got := pending(t, st, "q")
	require.Len(t, got, 1, "journal entry at MaxSeq")
	assert.Equal(t, uint64(seqstore.MaxSeq), got[0].Seq)

	// A fresh stream may take MaxSeq seqs at once, and no more.
	fresh := seqstore.Stream{Queue: "q", Group: "fresh"}
	_, err = ReserveOne(ctx, st, fresh, seqstore.MaxSeq, nil)
	assert.NoError(t, err, "Reserve of exactly MaxSeq seqs on a new stream")

	if !h.Persistent {
		return
	}
	require.NoError(t, st.Close())
	st2 := reopen(t)
	_, err = ReserveOne(ctx, st2, s, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "an exhausted stream stays exhausted after reopening")
	_, err = ReserveOne(ctx, st2, fresh, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "an exhausted stream stays exhausted after reopening")
}

func testConcurrentAdvanceMany(t *testing.T, h Harness) {
	st, _ := open(t, h)
	const (
		workers = 16
		perW    = 3 // streams per worker, advanced together in one batch
		steps   = 20
	)
	stream := func(w, i int) seqstore.Stream {
		return seqstore.Stream{Queue: "q", Group: fmt.Sprintf("w%d-s%d", w, i)}
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			from := make([]seqstore.Cursor, perW)
			for step := range steps {
				batch := make([]seqstore.Advance, perW)
				for i := range batch {
					to := seqstore.Cursor{Epoch: 3, Next: uint64(step*(i+1) + 1), Owner: uint64(w)}
					batch[i] = seqstore.Advance{Stream: stream(w, i), From: from[i], To: to}
					from[i] = to
				}
				if err := st.Advance(t.Context(), batch); err != nil {
					errs <- fmt.Errorf("worker %d step %d: %w", w, step, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "Advance batches on disjoint streams must not conflict")
	}
	for w := range workers {
		for i := range perW {
			want := seqstore.Cursor{Epoch: 3, Next: uint64((steps-1)*(i+1) + 1), Owner: uint64(w)}
			assertCursor(t, want, cursor(t, st, stream(w, i)), "final cursor of %s", stream(w, i))
		}
	}
}

// testIsolatedFailures checks that calls which fail (conflicts, overflow)
// do not fail other callers' calls that a store may coalesce with them into
// one write.
func testIsolatedFailures(t *testing.T, h Harness) {
	st, _ := open(t, h)
	exhausted := seqstore.Stream{Queue: "q", Group: "exhausted"}
	reserve(t, st, exhausted, seqstore.MaxSeq, nil)
	contested := seqstore.Stream{Queue: "q", Group: "contested"}
	advance(t, st, seqstore.Advance{Stream: contested, To: seqstore.Cursor{Epoch: 1, Next: 5}})

	const workers, calls = 16, 25
	type result struct {
		worker int
		epoch  uint64
		err    error
	}
	results := make(chan result, workers*calls)
	var wg sync.WaitGroup
	for w := range workers {
		good := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("good-%d", w)}
		wg.Go(func() {
			ctx := t.Context()
			for c := range calls {
				switch (w + c) % 4 {
				case 0: // must overflow
					_, err := ReserveOne(ctx, st, exhausted, 1, [][]byte{[]byte("x")})
					if !errors.Is(err, seqstore.ErrOverflow) {
						results <- result{w, 0, fmt.Errorf("reserve on an exhausted stream: got %v, want ErrOverflow", err)}
					}
				case 1: // must conflict: the From is stale
					err := st.Advance(ctx, []seqstore.Advance{{Stream: contested,
						From: seqstore.Cursor{Epoch: 1, Next: 4}, To: seqstore.Cursor{Epoch: 1, Next: 6}}})
					var be *seqstore.BatchError
					if !errors.As(err, &be) || len(be.Errs) != 1 || !errors.Is(be.Errs[0], seqstore.ErrConflict) {
						results <- result{w, 0, fmt.Errorf("stale Advance: got %v, want a BatchError whose only request conflicts", err)}
					}
				default: // must succeed
					r, err := ReserveOne(ctx, st, good, 1, [][]byte{[]byte("y")})
					if err == nil {
						// Only this worker uses good, so its cursor trails its counter.
						from := seqstore.Cursor{Epoch: r.Epoch, Next: r.First}
						if r.First == 1 {
							from = seqstore.Cursor{}
						}
						err = st.Advance(ctx, []seqstore.Advance{{Stream: good, From: from,
							To: seqstore.Cursor{Epoch: r.Epoch, Next: r.First + 1}}})
					}
					results <- result{w, r.Epoch, err}
				}
			}
		})
	}
	wg.Wait()
	close(results)
	succeeded := make([]uint64, workers)
	epochs := make([]uint64, workers)
	for r := range results {
		require.NoError(t, r.err, "worker %d: a call failed because of another caller's failing call", r.worker)
		succeeded[r.worker]++
		epochs[r.worker] = r.epoch
	}
	for w := range workers {
		good := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("good-%d", w)}
		assertCursor(t, seqstore.Cursor{Epoch: epochs[w], Next: succeeded[w] + 1}, cursor(t, st, good), "cursor of %s", good)
	}
	assertCursor(t, seqstore.Cursor{Epoch: 1, Next: 5}, cursor(t, st, contested), "the contested cursor must not move")
}

func testJournalLarge(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q", Group: "large"}
	const size = 64 << 10 // an MNS message body at its limit
	bodies := make([][]byte, 4)
	for i := range bodies {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(j*7 + i) // every byte value, no two bodies alike
		}
		bodies[i] = b
	}
	r := reserve(t, st, s, len(bodies), bodies)
	var want []seqstore.Entry
	for i, b := range bodies {
		want = append(want, seqstore.Entry{Stream: s, Epoch: r.Epoch, Seq: uint64(i + 1), Body: b})
	}
	got := pending(t, st, "q")
	require.Len(t, got, len(want), "Pending of large bodies")
	for i := range want {
		assert.True(t, bytes.Equal(want[i].Body, got[i].Body), "body %d (%d bytes) came back as %d different bytes", i, size, len(got[i].Body))
		assert.Equal(t, want[i].Seq, got[i].Seq)
	}
}
