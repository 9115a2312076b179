package filestore

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestPlainCursors walks a stream through the forms the state keeps it in:
// nothing, a plain cursor (a cursor with no owner and no skipped ranges,
// and nothing else), and a whole streamState; and checks that each step
// keeps what the stream holds and frees what it no longer needs.
func TestPlainCursors(t *testing.T) {
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	plainForm := func(st *state, s seqstore.Stream) bool {
		_, ok := st.queues[s.Queue].plain[s.Group]
		return ok && st.get(s) == nil
	}
	st := newState()

	st.setCursor(a, seqstore.Cursor{})
	assert.False(t, st.has(a), "the zero cursor of a stream without state is no state")
	assert.Zero(t, st.streams)
	assert.Empty(t, st.queues, "no queue kept for it")

	st.setCursor(a, seqstore.Cursor{Epoch: 1, Next: 5})
	assert.True(t, plainForm(st, a), "a cursor alone is kept plain")
	assert.Equal(t, seqstore.Cursor{Epoch: 1, Next: 5}, st.cursor(a))
	assert.Equal(t, 1, st.streams)

	owned := seqstore.Cursor{Epoch: 1, Next: 6, Owner: 7, Skipped: []seqstore.Range{{Epoch: 1, First: 5, Last: 5}}}
	st.setCursor(a, owned)
	require.NotNil(t, st.get(a), "an owner and skipped ranges need the whole state")
	assert.Equal(t, owned, st.cursor(a))
	assert.Equal(t, 1, st.streams)
	st.setCursor(a, seqstore.Cursor{Epoch: 1, Next: 7})
	assert.True(t, plainForm(st, a), "plain again once the owner and ranges are gone")

	// Parked entries need the whole state; the Advance that passes
	// them frees it.
	st.park(a, parkEntry{epoch: 1, seq: 9, size: 3})
	require.NotNil(t, st.get(a))
	assert.Equal(t, seqstore.Cursor{Epoch: 1, Next: 7}, st.cursor(a), "the cursor kept when the state grows")
	st.setCursor(a, seqstore.Cursor{Epoch: 1, Next: 10})
	assert.True(t, plainForm(st, a), "plain again once its parked entries are dropped")
	assert.Zero(t, st.parked)

	// Sender state is kept for ever, with the cursor.
	res := make([]seqstore.Reservation, 1)
	require.NoError(t, st.reserve([]seqstore.ReserveRequest{{Stream: a, N: 2}}, res, func() uint64 { return 3 }))
	require.NotNil(t, st.get(a))
	assert.Equal(t, seqstore.Cursor{Epoch: 1, Next: 10}, st.cursor(a))
	st.setCursor(a, seqstore.Cursor{Epoch: 3, Next: 1})
	require.NotNil(t, st.get(a), "a stream with sender state stays whole")
	assert.Equal(t, uint64(3), st.get(a).next)

	// A stream with only parked entries (no cursor yet) survives a
	// snapshot, and so do plain cursors.
	body := []byte("xyz")
	st.park(b, parkEntry{epoch: 2, seq: 4, size: 3, crc: parkCRC(b.Key(), 2, 4, body), file: bytes.NewReader(body)})
	c := seqstore.Stream{Queue: "r", Group: "c"}
	st.setCursor(c, seqstore.Cursor{Epoch: 5, Next: 6})
	enc, seg, err := st.encodeSnapshot(1)
	require.NoError(t, err)
	again, _, err := decodeSnapshot(enc, bytes.NewReader(enc), func(uint64) (io.ReaderAt, int64, error) {
		return bytes.NewReader(seg), int64(len(seg)), nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, again.streams)
	assert.True(t, plainForm(again, c), "a plain cursor decodes plain")
	assert.Equal(t, seqstore.Cursor{Epoch: 5, Next: 6}, again.cursor(c))
	require.NotNil(t, again.get(b))
	assert.Len(t, again.get(b).parks, 1, "the parked entry of a stream without a cursor")
	assert.Equal(t, uint64(3), again.get(a).next)
	assert.Equal(t, seqstore.Cursor{Epoch: 3, Next: 1}, again.cursor(a))
}
