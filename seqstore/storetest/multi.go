package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// The multi-stream side of the contract: many streams per call, the same
// stream twice in one call, and calls that fail for one request.

func testReserveMany(t *testing.T, h Harness) {
	st, _ := open(t, h)
	const streams = 40
	stream := func(i int) seqstore.Stream {
		return seqstore.Stream{Queue: fmt.Sprintf("q%d", i%3), Group: fmt.Sprintf("g%d", i)}
	}
	next := make([]uint64, streams)
	epochs := make([]uint64, streams)
	for i := range next {
		next[i] = 1
	}
	for round := range 3 {
		reqs := make([]seqstore.ReserveRequest, streams)
		for i := range reqs {
			reqs[i] = seqstore.ReserveRequest{Stream: stream(i), N: 1 + (i+round)%4}
		}
		rs := reserveMany(t, st, reqs...)
		for i, r := range rs {
			if round == 0 {
				require.NotZero(t, r.Epoch, "epoch of new stream %s", stream(i))
				epochs[i] = r.Epoch
			}
			assert.Equal(t, seqstore.Reservation{Epoch: epochs[i], First: next[i]}, r,
				"round %d: reservation of %s in a call of %d streams", round, stream(i), streams)
			next[i] += uint64(reqs[i].N)
		}
	}
	for i := range streams {
		assert.Equal(t, next[i], reserve(t, st, stream(i), 1, nil).First, "next seq of %s after multi-stream calls", stream(i))
	}
}

func testReserveSameStreamTwice(t *testing.T, h Harness) {
	st, _ := open(t, h)
	s := seqstore.Stream{Queue: "q", Group: "s"}
	o := seqstore.Stream{Queue: "q", Group: "o"}
	rs := reserveMany(t, st,
		seqstore.ReserveRequest{Stream: s, N: 2, Journal: [][]byte{[]byte("s1"), []byte("s2")}},
		seqstore.ReserveRequest{Stream: o, N: 1, Journal: [][]byte{[]byte("o1")}},
		seqstore.ReserveRequest{Stream: s, N: 3},
		seqstore.ReserveRequest{Stream: s, N: 1, Journal: [][]byte{[]byte("s6")}},
	)
	epoch := rs[0].Epoch
	require.NotZero(t, epoch)
	assert.Equal(t, []seqstore.Reservation{{Epoch: epoch, First: 1}, {Epoch: rs[1].Epoch, First: 1}, {Epoch: epoch, First: 3}, {Epoch: epoch, First: 6}},
		rs, "a stream in several requests of one call gets consecutive ranges in request order, under one epoch")
	want := []seqstore.Entry{
		{Stream: o, Epoch: rs[1].Epoch, Seq: 1, Body: []byte("o1")},
		{Stream: s, Epoch: epoch, Seq: 1, Body: []byte("s1")},
		{Stream: s, Epoch: epoch, Seq: 2, Body: []byte("s2")},
		{Stream: s, Epoch: epoch, Seq: 6, Body: []byte("s6")},
	}
	assertEntries(t, want, pending(t, st, "q"), "Pending after a call with a stream twice")
	assert.Equal(t, seqstore.Reservation{Epoch: epoch, First: 7}, reserve(t, st, s, 1, nil), "the counter continues after the call")
}

func testReserveAtomic(t *testing.T, h Harness) {
	st, _ := open(t, h)
	ctx := t.Context()
	used := seqstore.Stream{Queue: "q", Group: "used"}
	exhausted := seqstore.Stream{Queue: "q", Group: "exhausted"}
	fresh := seqstore.Stream{Queue: "q", Group: "fresh"}
	ru := reserve(t, st, used, 4, nil)
	reserve(t, st, exhausted, seqstore.MaxSeq, nil)
	body := [][]byte{[]byte("must not be journaled")}

	for _, tc := range []struct {
		name  string
		reqs  []seqstore.ReserveRequest
		fault map[int]error
	}{
		{"an exhausted stream", []seqstore.ReserveRequest{
			{Stream: fresh, N: 1, Journal: body}, {Stream: used, N: 1, Journal: body}, {Stream: exhausted, N: 1},
		}, map[int]error{2: seqstore.ErrOverflow}},
		{"the same stream overflowing in its second request", []seqstore.ReserveRequest{
			{Stream: used, N: 2, Journal: [][]byte{nil, nil}}, {Stream: fresh, N: 1}, {Stream: used, N: seqstore.MaxSeq - 5},
		}, map[int]error{2: seqstore.ErrOverflow}},
		{"n=0", []seqstore.ReserveRequest{{Stream: fresh, N: 1, Journal: body}, {Stream: used}}, map[int]error{1: seqstore.ErrInvalidArgument}},
		{"a journal of the wrong length", []seqstore.ReserveRequest{
			{Stream: used, N: 1, Journal: body}, {Stream: fresh, N: 2, Journal: body},
		}, map[int]error{1: seqstore.ErrInvalidArgument}},
		{"an invalid stream", []seqstore.ReserveRequest{
			{Stream: seqstore.Stream{Queue: "q", Group: "\xff"}, N: 1}, {Stream: fresh, N: 1, Journal: body}, {Stream: used, N: 3},
		}, map[int]error{0: seqstore.ErrInvalidStream}},
	} {
		rs, err := st.Reserve(ctx, tc.reqs)
		assertAborted(t, err, len(tc.reqs), tc.fault, "Reserve with "+tc.name)
		assert.Empty(t, rs, "Reserve with %s returned reservations", tc.name)
	}
	// Nothing of the failed calls was applied.
	assert.Empty(t, pending(t, st, "q"), "a failed Reserve must journal nothing")
	assert.Equal(t, seqstore.Reservation{Epoch: ru.Epoch, First: 5}, reserve(t, st, used, 1, nil), "a failed Reserve must not consume seqs")
	assert.Equal(t, uint64(1), reserve(t, st, fresh, 1, nil).First, "a failed Reserve must not consume seqs of a new stream")
}

func testReserveEmpty(t *testing.T, h Harness) {
	st, _ := open(t, h)
	rs, err := st.Reserve(t.Context(), nil)
	assert.NoError(t, err, "a Reserve of no requests is a no-op")
	assert.Empty(t, rs)
	cs, err := st.Cursors(t.Context(), nil)
	assert.NoError(t, err, "Cursors of no streams is a no-op")
	assert.Empty(t, cs)
}

func testJournalMany(t *testing.T, h Harness) {
	st, _ := open(t, h)
	var reqs []seqstore.ReserveRequest
	for i, s := range hostileStreams() {
		journal := make([][]byte, 1+i%3)
		for k := range journal {
			journal[k] = fmt.Appendf(nil, "%d/%d", i, k)
		}
		reqs = append(reqs, seqstore.ReserveRequest{Stream: s, N: len(journal), Journal: journal})
	}
	rs := reserveMany(t, st, reqs...)
	byQueue := map[string][]seqstore.Entry{}
	for i, r := range rs {
		require.Equal(t, uint64(1), r.First, "stream %q is new", reqs[i].Stream)
		for k, b := range reqs[i].Journal {
			byQueue[reqs[i].Stream.Queue] = append(byQueue[reqs[i].Stream.Queue],
				seqstore.Entry{Stream: reqs[i].Stream, Epoch: r.Epoch, Seq: uint64(k + 1), Body: b})
		}
	}
	for q, want := range byQueue {
		slices.SortStableFunc(want, func(a, b seqstore.Entry) int { return cmp.Compare(a.Stream.Key(), b.Stream.Key()) })
		assertEntries(t, want, pending(t, st, q), fmt.Sprintf("Pending(%q) after one Reserve of %d streams", q, len(reqs)))
	}
}

func testSentMany(t *testing.T, h Harness) {
	st, _ := open(t, h)
	const streams = 12
	stream := func(i int) seqstore.Stream { return seqstore.Stream{Queue: "q", Group: fmt.Sprintf("g%02d", i)} }
	reqs := make([]seqstore.ReserveRequest, streams)
	for i := range reqs {
		reqs[i] = seqstore.ReserveRequest{Stream: stream(i), N: 3, Journal: [][]byte{[]byte("1"), []byte("2"), []byte("3")}}
	}
	rs := reserveMany(t, st, reqs...)
	// Every even stream loses seqs 1 and 3, every odd one seq 2, in one call
	// that also names an unknown stream, an unknown seq, no seqs, and one
	// stream twice.
	var marks []seqstore.SentMark
	var want []seqstore.Entry
	for i := range streams {
		seqs := []uint64{1, 3}
		if i%2 == 1 {
			seqs = []uint64{2, 99}
		}
		marks = append(marks, seqstore.SentMark{Stream: stream(i), Seqs: seqs})
		for q := uint64(1); q <= 3; q++ {
			if !slices.Contains(seqs, q) && !(i == 0 && q == 2) {
				want = append(want, seqstore.Entry{Stream: stream(i), Epoch: rs[i].Epoch, Seq: q, Body: []byte{byte('0' + q)}})
			}
		}
	}
	marks = append(marks,
		seqstore.SentMark{Stream: seqstore.Stream{Queue: "q", Group: "never reserved"}, Seqs: []uint64{1}},
		seqstore.SentMark{Stream: stream(3)},
		seqstore.SentMark{Stream: stream(0), Seqs: []uint64{2}},
	)
	require.NoError(t, st.Sent(t.Context(), marks), "Sent of %d marks", len(marks))
	assertEntries(t, want, eventuallyPending(t, st, "q", len(want)), "Pending after one Sent of many streams")
}

func testCursorsMany(t *testing.T, h Harness) {
	st, _ := open(t, h)
	const streams = 30
	stream := func(i int) seqstore.Stream {
		return seqstore.Stream{Queue: fmt.Sprintf("q%d", i%2), Group: fmt.Sprintf("g%d", i)}
	}
	var batch []seqstore.Advance
	for i := 0; i < streams; i += 2 { // only the even streams get a cursor
		batch = append(batch, seqstore.Advance{Stream: stream(i), To: seqstore.Cursor{Epoch: uint64(i + 1), Next: uint64(2 * i), Owner: uint64(i % 3),
			Skipped: []seqstore.Range{{Epoch: uint64(i + 1), First: 1, Last: uint64(i + 1)}}}})
	}
	advance(t, st, batch...)
	var ask []seqstore.Stream
	for i := streams - 1; i >= 0; i-- { // another order than the Advance
		ask = append(ask, stream(i))
	}
	ask = append(ask, stream(4)) // a stream twice
	got := cursors(t, st, ask...)
	for k, s := range ask {
		var want seqstore.Cursor
		if i := slices.IndexFunc(batch, func(a seqstore.Advance) bool { return a.Stream == s }); i >= 0 {
			want = batch[i].To
		}
		assertCursor(t, want, got[k], "cursor %d (%s) of one Cursors call of %d streams", k, s, len(ask))
	}
}

func testCursorsInvalid(t *testing.T, h Harness) {
	st, _ := open(t, h)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	ca := seqstore.Cursor{Epoch: 3, Next: 4}
	cb := seqstore.Cursor{Epoch: 5, Next: 6, Owner: 7}
	advance(t, st, seqstore.Advance{Stream: a, To: ca}, seqstore.Advance{Stream: b, To: cb})
	cs, err := st.Cursors(t.Context(), []seqstore.Stream{a, {Queue: ""}, b})
	errs := outcomes(t, err, 3, "Cursors with an invalid stream")
	assert.ErrorIs(t, errs[1], seqstore.ErrInvalidStream, "the invalid stream fails")
	assert.NoError(t, errs[0], "a valid stream beside an invalid one is read")
	assert.NoError(t, errs[2], "a valid stream beside an invalid one is read")
	require.Len(t, cs, 3, "Cursors returns the valid cursors with its BatchError")
	assertCursor(t, ca, cs[0])
	assertCursor(t, cb, cs[2])
}
