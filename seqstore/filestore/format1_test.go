package filestore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestReadsFormat1 opens a store written by the release before the
// multi-stream contract (testdata/format1, made by its filestore: a
// snapshot, then a log of single-stream reserve and sent records and an
// advance), checks every counter, journal entry and cursor, then writes to
// it with today's records and checks that both kinds replay together.
func TestReadsFormat1(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{snapName, logName(2)} {
		data, err := os.ReadFile(filepath.Join("testdata", "format1", name))
		require.NoError(t, err)
		writeFile(t, filepath.Join(dir, name), data)
	}
	a := seqstore.Stream{Queue: "orders", Group: "a"}
	b := seqstore.Stream{Queue: "orders", Group: "b/#;%"}
	c := seqstore.Stream{Queue: "refunds"}
	const epochA, epochB, epochC = 1883386877409978228, 1883386877635981566, 1883386877631418327
	cursorA := seqstore.Cursor{Epoch: 11, Next: 9, Owner: 5, Skipped: []seqstore.Range{{Epoch: 11, First: 4, Last: 6}}}
	cursorB := seqstore.Cursor{Epoch: 12, Next: 2}
	pending := []seqstore.Entry{
		{Stream: a, Epoch: epochA, Seq: 5, Body: []byte("a5")},
		{Stream: a, Epoch: epochA, Seq: 6, Body: []byte("a6")},
		{Stream: a, Epoch: epochA, Seq: 7, Body: []byte("a7")},
		{Stream: b, Epoch: epochB, Seq: 1, Body: []byte("b1")},
		{Stream: b, Epoch: epochB, Seq: 2, Body: []byte("b2")},
	}
	check := func(s *Store, what string) {
		t.Helper()
		for _, want := range []struct {
			st          seqstore.Stream
			epoch, next uint64
		}{{a, epochA, 8}, {b, epochB, 3}, {c, epochC, 6}} {
			epoch, next := senderState(s, want.st)
			assert.Equal(t, [2]uint64{want.epoch, want.next}, [2]uint64{epoch, next}, "%s: sender state of %s", what, want.st)
		}
		cs, err := s.Cursors(ctx, []seqstore.Stream{a, b, c})
		require.NoError(t, err)
		assert.Equal(t, []seqstore.Cursor{cursorA, cursorB, {}}, cs, "%s: cursors", what)
		got, err := s.Pending(ctx, "orders")
		require.NoError(t, err)
		assert.Equal(t, pending, got, "%s: pending entries", what)
	}

	s, err := Open(dir, nil)
	require.NoError(t, err, "open a format-1 store")
	check(s, "format 1")

	// Today's records after the old ones, in the same log.
	res, err := s.Reserve(ctx, []seqstore.ReserveRequest{{Stream: a, N: 1, Journal: [][]byte{[]byte("a8")}}, {Stream: c, N: 2}})
	require.NoError(t, err)
	assert.Equal(t, []seqstore.Reservation{{Epoch: epochA, First: 8}, {Epoch: epochC, First: 6}}, res, "counters continue")
	require.NoError(t, s.Sent(ctx, []seqstore.SentMark{{Stream: a, Seqs: []uint64{5}}, {Stream: b, Seqs: []uint64{1}}}))
	next := seqstore.Cursor{Epoch: epochA, Next: 1}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, From: cursorA, To: next}}))
	require.NoError(t, s.Close())

	s = openT(t, dir, nil)
	cursorA = next
	pending = []seqstore.Entry{ // a5 and b1 were marked sent
		{Stream: a, Epoch: epochA, Seq: 6, Body: []byte("a6")},
		{Stream: a, Epoch: epochA, Seq: 7, Body: []byte("a7")},
		{Stream: a, Epoch: epochA, Seq: 8, Body: []byte("a8")},
		{Stream: b, Epoch: epochB, Seq: 2, Body: []byte("b2")},
	}
	_, nextA := senderState(s, a)
	_, nextC := senderState(s, c)
	assert.Equal(t, [2]uint64{9, 8}, [2]uint64{nextA, nextC}, "counters after old and new records replay")
	cs, err := s.Cursors(ctx, []seqstore.Stream{a, b})
	require.NoError(t, err)
	assert.Equal(t, []seqstore.Cursor{cursorA, cursorB}, cs, "cursors after old and new records replay")
	got, err := s.Pending(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, pending, got, "pending after old and new records replay")
}
