package filestore

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestMultiStreamReserve checks one Reserve call over several streams, one
// of them twice: consecutive ranges in request order, one record in one
// frame, and the same state after reopening.
func TestMultiStreamReserve(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	_, err := reserve(ctx, s, a, 2, nil)
	require.NoError(t, err)
	before := s.Stats()

	res, err := s.Reserve(ctx, []seqstore.ReserveRequest{
		{Stream: a, N: 1, Journal: [][]byte{[]byte("a3")}},
		{Stream: b, N: 2, Journal: [][]byte{[]byte("b1"), []byte("b2")}},
		{Stream: a, N: 2, Journal: [][]byte{[]byte("a4"), []byte("a5")}},
	})
	require.NoError(t, err)
	require.Len(t, res, 3, "one reservation per request")
	assert.Equal(t, uint64(3), res[0].First, "a continues after its earlier call")
	assert.Equal(t, uint64(1), res[1].First, "b is new")
	assert.Equal(t, res[0].Epoch, res[2].Epoch, "one epoch per stream")
	assert.Equal(t, uint64(4), res[2].First, "a's second request follows its first in the same call")
	after := s.Stats()
	assert.Equal(t, int64(1), after.Commits-before.Commits, "one call, one frame")
	assert.Equal(t, int64(1), after.Records-before.Records, "one call, one record")
	assert.Equal(t, int64(1), after.Fsyncs-before.Fsyncs, "one call, one fsync")

	require.NoError(t, s.Sent(ctx, []seqstore.SentMark{{Stream: a, Seqs: []uint64{3}}, {Stream: b, Seqs: []uint64{2, 9}}}))
	want, err := s.Pending(ctx, "q")
	require.NoError(t, err)
	require.Len(t, want, 3, "pending after marking a3 and b2: a4, a5, b1")
	require.NoError(t, s.Close())
	assert.Equal(t, int64(1), s.Stats().Records-after.Records, "both marks in one record, written by Close")

	s2 := openT(t, dir, nil)
	got, err := s2.Pending(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, want, got, "pending after reopen")
	next, err := s2.Reserve(ctx, []seqstore.ReserveRequest{{Stream: b, N: 1}, {Stream: a, N: 1}})
	require.NoError(t, err)
	assert.Equal(t, []seqstore.Reservation{{Epoch: res[1].Epoch, First: 3}, {Epoch: res[0].Epoch, First: 6}}, next, "counters after reopen")
}

// TestMultiStreamAtomic checks that a request at fault fails the whole call
// with a *seqstore.BatchError naming it, and that nothing of the call is
// applied or written: bad arguments found before the writer, and an
// overflow found against the state.
func TestMultiStreamAtomic(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	full := seqstore.Stream{Queue: "q", Group: "full"}
	_, err := reserve(ctx, s, full, seqstore.MaxSeq, nil)
	require.NoError(t, err)
	before := s.Stats()

	cases := []struct {
		name string
		reqs []seqstore.ReserveRequest
		bad  int
		want error
	}{
		{"invalid stream", []seqstore.ReserveRequest{{Stream: a, N: 1}, {Stream: seqstore.Stream{}, N: 1}}, 1, seqstore.ErrInvalidStream},
		{"n = 0", []seqstore.ReserveRequest{{Stream: a, N: 0}, {Stream: a, N: 1}}, 0, seqstore.ErrInvalidArgument},
		{"journal of the wrong length", []seqstore.ReserveRequest{{Stream: a, N: 1}, {Stream: a, N: 2, Journal: [][]byte{nil}}}, 1, seqstore.ErrInvalidArgument},
		{"call too large", []seqstore.ReserveRequest{{Stream: a, N: 1, Journal: [][]byte{make([]byte, maxRequestBytes/2)}}, {Stream: a, N: 1, Journal: [][]byte{make([]byte, maxRequestBytes/2)}}}, 1, seqstore.ErrInvalidArgument},
		{"overflow", []seqstore.ReserveRequest{{Stream: a, N: 1, Journal: [][]byte{[]byte("x")}}, {Stream: full, N: 1}}, 1, seqstore.ErrOverflow},
	}
	for _, c := range cases {
		_, err := s.Reserve(ctx, c.reqs)
		require.ErrorIs(t, err, c.want, c.name)
		var be *seqstore.BatchError
		require.ErrorAs(t, err, &be, "%s: a *BatchError", c.name)
		require.Len(t, be.Errs, len(c.reqs), "%s: one error per request", c.name)
		for i, e := range be.Errs {
			if i == c.bad {
				assert.ErrorIs(t, e, c.want, "%s: request %d is at fault", c.name, i)
			} else {
				assert.ErrorIs(t, e, seqstore.ErrAborted, "%s: request %d is aborted", c.name, i)
			}
		}
	}
	after := s.Stats()
	assert.Equal(t, before.Commits, after.Commits, "nothing written for refused calls")
	assert.Equal(t, before.Streams, after.Streams, "no stream created by refused calls")
	epoch, next := senderState(s, a)
	assert.Equal(t, [2]uint64{0, 0}, [2]uint64{epoch, next}, "a has no sender state")

	// Advance: a conflict and a stream twice.
	c1 := seqstore.Cursor{Epoch: 1, Next: 2}
	err = s.Advance(ctx, []seqstore.Advance{{Stream: a, To: c1}, {Stream: full, From: c1, To: c1}})
	require.ErrorIs(t, err, seqstore.ErrConflict, "full has no cursor")
	assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrAborted, "a is aborted")
	err = s.Advance(ctx, []seqstore.Advance{{Stream: a, To: c1}, {Stream: full, To: c1}, {Stream: a, To: c1}})
	require.ErrorIs(t, err, seqstore.ErrInvalidArgument, "a twice")
	assert.ErrorIs(t, seqstore.Failed(err, 2, 3), seqstore.ErrInvalidArgument, "the second a is at fault")
	assert.ErrorIs(t, seqstore.Failed(err, 1, 3), seqstore.ErrAborted, "full is aborted")
	cs, err := s.Cursors(ctx, []seqstore.Stream{a, full})
	require.NoError(t, err)
	assert.Equal(t, []seqstore.Cursor{{}, {}}, cs, "no cursor moved")
	assert.Equal(t, before.Commits, s.Stats().Commits, "nothing written for refused advances")

	// Sent with an invalid stream marks nothing.
	_, err = reserve(ctx, s, a, 1, [][]byte{[]byte("x")})
	require.NoError(t, err)
	err = s.Sent(ctx, []seqstore.SentMark{{Stream: a, Seqs: []uint64{1}}, {Stream: seqstore.Stream{Queue: "q\x00"}}})
	require.ErrorIs(t, err, seqstore.ErrInvalidStream)
	assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrAborted, "a's mark is aborted")
	assert.Equal(t, 1, s.Stats().Pending, "a's entry is still pending")
}

// TestCursorsInvalidStream checks that an invalid stream fails alone.
func TestCursorsInvalidStream(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	c := seqstore.Cursor{Epoch: 3, Next: 7}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, To: c}}))
	cs, err := s.Cursors(ctx, []seqstore.Stream{{Queue: ""}, a})
	require.ErrorIs(t, err, seqstore.ErrInvalidStream)
	require.Len(t, cs, 2, "one cursor per stream")
	assert.Equal(t, c, cs[1], "a's cursor is valid beside an invalid stream")
	assert.NoError(t, seqstore.Failed(err, 1, 2), "a did not fail")
}

// TestOneCallOneFrame checks on disk that a multi-stream Reserve is one
// record: its frame, cut anywhere, loses every stream of the call.
func TestOneCallOneFrame(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	_, err := reserve(ctx, s, a, 1, nil)
	require.NoError(t, err)
	_, err = s.Reserve(ctx, []seqstore.ReserveRequest{{Stream: a, N: 1}, {Stream: b, N: 1}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	data, err := os.ReadFile(logPath(dir, 1))
	require.NoError(t, err)
	offs := frameOffsets(t, data, 1)
	require.Len(t, offs, 2, "two calls, two frames")
	writeFile(t, logPath(dir, 1), data[:len(data)-1])
	s2 := openT(t, dir, nil)
	_, nextA := senderState(s2, a)
	_, nextB := senderState(s2, b)
	assert.Equal(t, [2]uint64{2, 0}, [2]uint64{nextA, nextB}, "a torn last frame loses the whole call, for both streams")
}
