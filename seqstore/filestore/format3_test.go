package filestore

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// format3Env, set to 1, makes TestWriteFormat3 write testdata/format3
// again. Only do that when the format version changes: the files pin what
// the release that introduced park segments wrote.
const format3Env = "INORDER_FILESTORE_WRITE_FORMAT3"

// TestWriteFormat3 writes testdata/format3: a snapshot of version 3 whose
// parked bodies are in a park segment, then a log that parks, re-parks and
// advances (the same calls as testdata/format2).
func TestWriteFormat3(t *testing.T) {
	if os.Getenv(format3Env) != "1" {
		t.Skip("set " + format3Env + "=1 to write testdata/format3")
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
	s, err = Open(dir, &Options{SnapshotBytes: 1}) // writes the snapshot and its segment
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(format2A, 11, 9, "a9"), parked(format2A, 11, 7, "a7 again")}))
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: format2A, From: seqstore.Cursor{Epoch: 11, Next: 5}, To: seqstore.Cursor{Epoch: 11, Next: 6}}}))
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(format2B, 3, 3, "b3")}))
	require.NoError(t, s.Close())
	out := filepath.Join("testdata", "format3")
	require.NoError(t, os.MkdirAll(out, 0o755))
	for _, name := range []string{snapName, logName(2), segName(2)} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out, name), data, 0o644))
	}
}

// TestReadsFormat3 opens the store of testdata/format3 (see
// TestWriteFormat3) and checks it as TestReadsFormat2 checks format 2,
// before and after a new snapshot.
func TestReadsFormat3(t *testing.T) {
	dir := t.TempDir()
	ents, err := os.ReadDir(filepath.Join("testdata", "format3"))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		data, err := os.ReadFile(filepath.Join("testdata", "format3", e.Name()))
		require.NoError(t, err)
		if e.Name() == snapName {
			require.Equal(t, uint32(3), binary.LittleEndian.Uint32(data[8:]), "testdata/format3 holds a version 3 snapshot")
		}
		writeFile(t, filepath.Join(dir, e.Name()), data)
	}
	require.Contains(t, strings.Join(names, " "), segPrefix, "testdata/format3 holds a park segment")
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
	require.NoError(t, err, "open a format-3 store")
	check(s, "format 3")
	require.NoError(t, s.Close())
	s = openT(t, dir, &Options{SnapshotBytes: 1})
	require.Equal(t, int64(1), s.Stats().Snapshots, "a new snapshot at open")
	check(s, "after a new snapshot")
}
