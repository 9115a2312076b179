package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// The optional listing capability (seqstore.Lister): every Lister/* test
// skips for a store that does not implement it.

var listerTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"Lister/Streams", testListerStreams},
	{"Lister/PassedParks", testListerPassedParks},
	{"Lister/Reopen", testListerReopen},
	{"Lister/HostileNames", testListerHostile},
	{"Lister/Invalid", testListerInvalid},
	{"Lister/Closed", testListerClosed},
}

// openLister is open for the Lister tests: it skips when the store does
// not implement seqstore.Lister.
func openLister(t *testing.T, h Harness) (seqstore.Store, seqstore.Lister, func(t *testing.T) seqstore.Store) {
	t.Helper()
	st, reopen := open(t, h)
	l, ok := st.(seqstore.Lister)
	if !ok {
		t.Skipf("%T does not implement seqstore.Lister (optional)", st)
	}
	return st, l, reopen
}

func listStreams(t *testing.T, l seqstore.Lister, queue string) []seqstore.StreamState {
	t.Helper()
	states, err := l.Streams(t.Context(), queue)
	require.NoError(t, err, "Streams(%q)", queue)
	return states
}

func streamState(t *testing.T, l seqstore.Lister, s seqstore.Stream) seqstore.StreamState {
	t.Helper()
	state, err := l.State(t.Context(), s)
	require.NoError(t, err, "State(%s)", s)
	return state
}

// normState makes empty slices nil, so that states compare with Equal.
func normState(st seqstore.StreamState) seqstore.StreamState {
	if len(st.Cursor.Skipped) == 0 {
		st.Cursor.Skipped = nil
	}
	if len(st.Journal) == 0 {
		st.Journal = nil
	}
	if len(st.Parked) == 0 {
		st.Parked = nil
	}
	return st
}

func assertStates(t *testing.T, want, got []seqstore.StreamState, msgAndArgs ...any) {
	t.Helper()
	w := make([]seqstore.StreamState, len(want))
	g := make([]seqstore.StreamState, len(got))
	for i := range want {
		w[i] = normState(want[i])
	}
	for i := range got {
		g[i] = normState(got[i])
	}
	assert.Equal(t, w, g, msgAndArgs...)
}

// eventuallyState polls State until its journal has n entries or 5 s pass
// (Sent may be lazy), and returns the last state read.
func eventuallyState(t *testing.T, l seqstore.Lister, s seqstore.Stream, journal int) seqstore.StreamState {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := streamState(t, l, s)
		if len(st.Journal) == journal || time.Now().After(deadline) {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listerFixture writes, in queue q, a stream of each kind of state, and
// others beside it; it returns the states Streams("q") must list.
func listerFixture(t *testing.T, st seqstore.Store, sent bool) []seqstore.StreamState {
	t.Helper()
	send := seqstore.Stream{Queue: "q", Group: "send"}   // sender with a journal
	fast := seqstore.Stream{Queue: "q"}                  // sender without a journal (the default group)
	cur := seqstore.Stream{Queue: "q", Group: "cur"}     // a cursor with an owner and skipped ranges
	plain := seqstore.Stream{Queue: "q", Group: "plain"} // only a plain cursor
	parks := seqstore.Stream{Queue: "q", Group: "parks"} // parks, some passed by its cursor
	r := reserve(t, st, send, 4, [][]byte{[]byte("a"), []byte("bb"), {}, []byte("dddd")})
	rf := reserve(t, st, fast, 3, nil)
	curC := seqstore.Cursor{Epoch: 7, Next: 10, Owner: 3, Skipped: []seqstore.Range{{Epoch: 7, First: 2, Last: 4}, {Epoch: 6, First: 9, Last: seqstore.MaxSeq}}}
	advance(t, st, seqstore.Advance{Stream: cur, To: curC},
		seqstore.Advance{Stream: plain, To: seqstore.Cursor{Epoch: 1, Next: 2}})
	require.NoError(t, st.Park(t.Context(), []seqstore.Parked{
		pk(parks, 5, 3, "333"), pk(parks, 5, 4, ""), pk(parks, 5, 6, "66666"), pk(parks, 6, 1, "1"),
	}), "Park")
	parksC := seqstore.Cursor{Epoch: 5, Next: 4}
	advance(t, st, seqstore.Advance{Stream: parks, To: parksC})
	// Not of queue q.
	reserve(t, st, seqstore.Stream{Queue: "qq", Group: "send"}, 1, [][]byte{[]byte("x")})
	advance(t, st, seqstore.Advance{Stream: seqstore.Stream{Queue: "q-other", Group: "cur"}, To: seqstore.Cursor{Epoch: 1, Next: 5}})
	require.NoError(t, st.Park(t.Context(), []seqstore.Parked{pk(seqstore.Stream{Queue: "Q", Group: "parks"}, 1, 1, "x")}))

	journal := []seqstore.EntryInfo{{Epoch: r.Epoch, Seq: 1, Size: 1}, {Epoch: r.Epoch, Seq: 2, Size: 2}, {Epoch: r.Epoch, Seq: 3}, {Epoch: r.Epoch, Seq: 4, Size: 4}}
	if sent {
		sentMark := []seqstore.SentMark{{Stream: send, Seqs: []uint64{2}}}
		require.NoError(t, st.Sent(t.Context(), sentMark), "Sent")
		journal = append(journal[:1], journal[2:]...)
	}
	return sortStates(
		seqstore.StreamState{Stream: send, SendEpoch: r.Epoch, LastSeq: 4, Journal: journal},
		seqstore.StreamState{Stream: fast, SendEpoch: rf.Epoch, LastSeq: 3},
		seqstore.StreamState{Stream: cur, Cursor: curC},
		seqstore.StreamState{Stream: plain, Cursor: seqstore.Cursor{Epoch: 1, Next: 2}},
		seqstore.StreamState{Stream: parks, Cursor: parksC, Parked: []seqstore.EntryInfo{
			{Epoch: 5, Seq: 4}, {Epoch: 5, Seq: 6, Size: 5}, {Epoch: 6, Seq: 1, Size: 1}}},
	)
}

func sortStates(states ...seqstore.StreamState) []seqstore.StreamState {
	ss := make([]seqstore.Stream, len(states))
	for i, st := range states {
		ss[i] = st.Stream
	}
	ss = sortStreams(ss...)
	out := make([]seqstore.StreamState, 0, len(states))
	for _, s := range ss {
		for _, st := range states {
			if st.Stream == s {
				out = append(out, st)
			}
		}
	}
	return out
}

func testListerStreams(t *testing.T, h Harness) {
	st, l, _ := openLister(t, h)
	want := listerFixture(t, st, true)
	// Sent may be lazy: wait for the mark before comparing.
	eventuallyState(t, l, seqstore.Stream{Queue: "q", Group: "send"}, 3)
	assertStates(t, want, listStreams(t, l, "q"), "Streams(q): every stream with state, ordered by key, nothing of other queues")
	for _, w := range want {
		assertStates(t, []seqstore.StreamState{w}, []seqstore.StreamState{streamState(t, l, w.Stream)}, "State(%s)", w.Stream)
	}
	unknown := seqstore.Stream{Queue: "q", Group: "unknown"}
	got := streamState(t, l, unknown)
	assert.True(t, got.Empty(), "State of a stream without state is empty, got %+v", got)
	assert.Equal(t, unknown, got.Stream, "State names the stream asked for")
	assert.Empty(t, listStreams(t, l, "unknown"), "Streams of a queue without streams")
	assert.Len(t, listStreams(t, l, "qq"), 1, "Streams(qq)")
	assert.Len(t, listStreams(t, l, "Q"), 1, "Streams(Q): names are case sensitive")

	// A stream whose parks are all passed is listed for its cursor; one
	// whose journal is all sent for its counter.
	parks := seqstore.Stream{Queue: "q", Group: "parks"}
	advance(t, st, seqstore.Advance{Stream: parks, From: seqstore.Cursor{Epoch: 5, Next: 4}, To: seqstore.Cursor{Epoch: 7, Next: 1}})
	got = streamState(t, l, parks)
	assert.Empty(t, got.Parked, "parks passed by an Advance to a newer epoch")
	assert.Equal(t, seqstore.Cursor{Epoch: 7, Next: 1}, normState(got).Cursor)
	assert.Len(t, listStreams(t, l, "q"), len(want), "Streams(q) after the Advance")
}

// testListerPassedParks plants parked entries below a cursor, as an
// Advance that crashed between its drop chunks leaves them: Streams and
// State must not show them (Unpark does not return them).
func testListerPassedParks(t *testing.T, h Harness) {
	if h.PlantParked == nil {
		t.Skip("Harness.PlantParked is nil")
	}
	st, l, _ := openLister(t, h)
	s := seqstore.Stream{Queue: "q", Group: "g"}
	advance(t, st, seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: 3, Next: 10}})
	h.PlantParked(t, st, []seqstore.Parked{pk(s, 3, 5, "passed"), pk(s, 2, 20, "older epoch")})
	require.NoError(t, st.Park(t.Context(), []seqstore.Parked{pk(s, 3, 12, "live")}))
	want := []seqstore.StreamState{{Stream: s, Cursor: seqstore.Cursor{Epoch: 3, Next: 10}, Parked: []seqstore.EntryInfo{{Epoch: 3, Seq: 12, Size: 4}}}}
	assertStates(t, want, listStreams(t, l, "q"), "Streams leaves out parks the cursor passed")
	assertStates(t, want, []seqstore.StreamState{streamState(t, l, s)}, "State leaves out parks the cursor passed")
}

func testListerReopen(t *testing.T, h Harness) {
	needPersistent(t, h)
	st, _, reopen := openLister(t, h)
	want := listerFixture(t, st, false)
	require.NoError(t, st.Close())
	l := reopen(t).(seqstore.Lister)
	assertStates(t, want, listStreams(t, l, "q"), "Streams(q) after reopening")
}

func testListerHostile(t *testing.T, h Harness) {
	st, l, _ := openLister(t, h)
	streams := hostileStreams()
	byQueue := map[string][]seqstore.StreamState{}
	for i, s := range streams {
		r := reserve(t, st, s, 1, [][]byte{[]byte(s.Group)})
		c := seqstore.Cursor{Epoch: 1, Next: uint64(100 + i)}
		advance(t, st, seqstore.Advance{Stream: s, To: c})
		byQueue[s.Queue] = append(byQueue[s.Queue], seqstore.StreamState{Stream: s, SendEpoch: r.Epoch, LastSeq: 1, Cursor: c,
			Journal: []seqstore.EntryInfo{{Epoch: r.Epoch, Seq: 1, Size: len(s.Group)}}})
	}
	for q, want := range byQueue {
		assertStates(t, sortStates(want...), listStreams(t, l, q), "Streams(%q): names stored verbatim, no other queue's", q)
	}
}

func testListerInvalid(t *testing.T, h Harness) {
	_, l, _ := openLister(t, h)
	ctx := t.Context()
	for _, q := range []string{"", strings.Repeat("q", seqstore.MaxQueueLen+1), "\xff", "a\x00b"} {
		_, err := l.Streams(ctx, q)
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "Streams(%q)", q)
	}
	_, err := l.State(ctx, seqstore.Stream{Queue: "q", Group: strings.Repeat("g", seqstore.MaxGroupLen+1)})
	assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "State of a group too long")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Streams(cctx, "q")
	assert.ErrorIs(t, err, context.Canceled, "Streams with a cancelled context")
	_, err = l.State(cctx, seqstore.Stream{Queue: "q"})
	assert.ErrorIs(t, err, context.Canceled, "State with a cancelled context")
}

func testListerClosed(t *testing.T, h Harness) {
	st, l, _ := openLister(t, h)
	require.NoError(t, st.Close())
	_, err := l.Streams(t.Context(), "q")
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Streams after Close")
	_, err = l.State(t.Context(), seqstore.Stream{Queue: "q"})
	assert.ErrorIs(t, err, seqstore.ErrClosed, "State after Close")
}
