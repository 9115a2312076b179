package filestore

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// format2Env, set to 1, makes TestWriteFormat2 write testdata/format2
// again. Only do that when the format version changes: the files pin what
// the release that introduced parking wrote.
const format2Env = "INORDER_FILESTORE_WRITE_FORMAT2"

var (
	format2A = seqstore.Stream{Queue: "orders", Group: "a"}
	format2B = seqstore.Stream{Queue: "orders", Group: "b/#;%"}
)

// TestWriteFormat2 writes testdata/format2: a snapshot of version 2
// holding parked entries, then a log that parks, re-parks and advances.
func TestWriteFormat2(t *testing.T) {
	if os.Getenv(format2Env) != "1" {
		t.Skip("set " + format2Env + "=1 to write testdata/format2")
	}
	dir := t.TempDir()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = reserve(ctx, s, format2A, 2, [][]byte{[]byte("j1"), []byte("j2")})
	require.NoError(t, err)
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: format2A, To: seqstore.Cursor{Epoch: 11, Next: 5}}}))
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(format2A, 11, 5, "a5"), parked(format2A, 11, 7, "a7"), parked(format2A, 12, 1, "a12.1")}))
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(format2B, 3, 2, "b2")}))
	require.NoError(t, s.Close())
	s, err = Open(dir, &Options{SnapshotBytes: 1}) // writes the snapshot
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(format2A, 11, 9, "a9"), parked(format2A, 11, 7, "a7 again")}))
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: format2A, From: seqstore.Cursor{Epoch: 11, Next: 5}, To: seqstore.Cursor{Epoch: 11, Next: 6}}}))
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(format2B, 3, 3, "b3")}))
	require.NoError(t, s.Close())
	out := filepath.Join("testdata", "format2")
	require.NoError(t, os.MkdirAll(out, 0o755))
	for _, name := range []string{snapName, logName(2)} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out, name), data, 0o644))
	}
}

// TestReadsFormat2 opens the store of testdata/format2 (see
// TestWriteFormat2), checks its parked entries, cursors and journal, then
// moves its parks to a new snapshot and checks them again.
func TestReadsFormat2(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{snapName, logName(2)} {
		data, err := os.ReadFile(filepath.Join("testdata", "format2", name))
		require.NoError(t, err)
		if name == snapName {
			require.Equal(t, uint32(2), binary.LittleEndian.Uint32(data[8:]), "testdata/format2 holds a version 2 snapshot")
		}
		writeFile(t, filepath.Join(dir, name), data)
	}
	check := func(s *Store, what string) {
		t.Helper()
		got, err := s.Unpark(ctx, []seqstore.ParkQuery{
			{Stream: format2A, Epoch: 11, Max: 10},
			{Stream: format2A, Epoch: 12, Max: 10},
			{Stream: format2B, Epoch: 3, Max: 10},
		})
		require.NoError(t, err, what)
		assert.Equal(t, [][]seqstore.Parked{
			{parked(format2A, 11, 7, "a7 again"), parked(format2A, 11, 9, "a9")},
			{parked(format2A, 12, 1, "a12.1")},
			{parked(format2B, 3, 2, "b2"), parked(format2B, 3, 3, "b3")},
		}, got, "%s: parked entries", what)
		cs, err := s.Cursors(ctx, []seqstore.Stream{format2A, format2B})
		require.NoError(t, err)
		assert.Equal(t, []seqstore.Cursor{{Epoch: 11, Next: 6}, {}}, cs, "%s: cursors", what)
		pending, err := s.Pending(ctx, "orders")
		require.NoError(t, err)
		assert.Len(t, pending, 2, "%s: journal", what)
		streams, err := s.ParkedStreams(ctx, "orders")
		require.NoError(t, err)
		assert.Equal(t, []seqstore.Stream{format2A, format2B}, streams, "%s: parked streams", what)
	}
	s, err := Open(dir, nil)
	require.NoError(t, err, "open a format-2 store")
	check(s, "format 2")
	require.NoError(t, s.Close())
	s = openT(t, dir, &Options{SnapshotBytes: 1})
	require.Equal(t, int64(1), s.Stats().Snapshots, "a new snapshot at open")
	check(s, "after a new snapshot")
}
