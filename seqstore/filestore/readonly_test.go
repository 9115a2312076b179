package filestore

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// dirSums returns the SHA-256 of every file under dir, by path, and of the
// directory listing itself (names and modes).
func dirSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			sums[rel+"/"] = info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		sums[rel] = info.Mode().String() + " " + hex.EncodeToString(h[:])
		return nil
	}))
	return sums
}

// TestReadOnly: a store opened ReadOnly reads what a writable Open recovers,
// refuses every write with ErrReadOnly, and leaves the directory byte for
// byte as it was: after a clean Close, after a crash that left a torn tail
// and zeros ahead, and with a leftover temporary file.
func TestReadOnly(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	s := openT(t, dir, nil)
	r, err := reserve(ctx, s, a, 3, [][]byte{[]byte("one"), []byte("two"), []byte("three")})
	require.NoError(t, err)
	require.NoError(t, sent(ctx, s, a, []uint64{1}))
	c := seqstore.Cursor{Epoch: 4, Next: 2, Owner: 9, Skipped: []seqstore.Range{{Epoch: 4, First: 1, Last: 1}}}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: b, To: c}}))
	require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: b, Epoch: 4, Seq: 5, Body: []byte("five")}}))
	want, err := s.Streams(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, s.Close())

	check := func(t *testing.T, what string) {
		t.Helper()
		before := dirSums(t, dir)
		ro, err := Open(dir, &Options{ReadOnly: true})
		require.NoError(t, err, "read-only Open (%s)", what)
		_, err = Open(dir, &Options{ReadOnly: true})
		assert.ErrorIs(t, err, seqstore.ErrLocked, "a read-only store locks the directory too")
		got, err := ro.Streams(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, want, got, "Streams read-only (%s)", what)
		ps, err := ro.Unpark(ctx, []seqstore.ParkQuery{{Stream: b, Epoch: 4, From: 1, Max: 10}})
		require.NoError(t, err)
		require.Len(t, ps[0], 1)
		assert.Equal(t, "five", string(ps[0][0].Body), "a parked body read back read-only")
		es, err := ro.Pending(ctx, "q")
		require.NoError(t, err)
		assert.Len(t, es, 2, "Pending read-only")

		_, err = ro.Reserve(ctx, []seqstore.ReserveRequest{{Stream: a, N: 1}})
		assert.ErrorIs(t, err, ErrReadOnly, "Reserve")
		err = ro.Advance(ctx, []seqstore.Advance{{Stream: b, From: c, To: seqstore.Cursor{Epoch: 4, Next: 3}}})
		assert.ErrorIs(t, err, ErrReadOnly, "Advance")
		err = ro.Park(ctx, []seqstore.Parked{{Stream: b, Epoch: 4, Seq: 6}})
		assert.ErrorIs(t, err, ErrReadOnly, "Park")
		assert.ErrorIs(t, sent(ctx, ro, a, []uint64{2}), ErrReadOnly, "Sent")
		require.NoError(t, ro.Close())
		assert.Equal(t, before, dirSums(t, dir), "a read-only Open and Close changed the directory (%s)", what)
	}
	check(t, "after a clean Close")

	// A crash: zeros written ahead of the last frame, then a torn frame.
	log := logPath(dir, 1)
	data, err := os.ReadFile(log)
	require.NoError(t, err)
	writeFile(t, log, append(append(data, make([]byte, 4096)...), 0x17, 0, 0, 0, 1, 2, 3))
	writeFile(t, filepath.Join(dir, snapTmpName), []byte("half a snapshot"))
	check(t, "after a crash")

	// The next writable Open repairs what the read-only ones left.
	s = openT(t, dir, nil)
	got, err := s.Streams(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, r.Epoch, got[0].SendEpoch)
	require.NoError(t, s.Close())
	_, err = os.Stat(filepath.Join(dir, snapTmpName))
	assert.ErrorIs(t, err, fs.ErrNotExist, "the writable Open removed the leftover")
}

// TestReadOnlyNoStore: a read-only Open creates nothing where there is no
// store: no directory, no LOCK file, no log.
func TestReadOnlyNoStore(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := Open(missing, &Options{ReadOnly: true})
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = os.Stat(missing)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the directory was created")

	empty := t.TempDir()
	_, err = Open(empty, &Options{ReadOnly: true})
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), "no store in this directory")
	names, err := os.ReadDir(empty)
	require.NoError(t, err)
	assert.Empty(t, names, "a read-only Open wrote into an empty directory")
}
