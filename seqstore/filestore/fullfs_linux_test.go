package filestore

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// smallFS mounts a tmpfs of size bytes for the test, or skips it when this
// process cannot mount (not root, no mount privilege in a container).
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// TestDiskFull fills a small file system: the call that meets ENOSPC and
// every later one fail with it, Close reports it, and reopening finds every
// reservation that was acknowledged.
func TestDiskFull(t *testing.T) {
	dir := filepath.Join(smallFS(t, "256k"), "store")
	s, err := Open(dir, nil)
	require.NoError(t, err)
	st := seqstore.Stream{Queue: "q"}
	var acked uint64
	for i := range 1000 {
		res, err := reserve(ctx, s, st, 1, [][]byte{make([]byte, 8<<10)})
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, "call %d: the error is the file system's", i)
			break
		}
		acked = res.First
	}
	require.Positive(t, acked, "reservations before the disk filled")
	_, err = reserve(ctx, s, st, 1, nil)
	assert.ErrorIs(t, err, syscall.ENOSPC, "a later call fails with the same error")
	assert.ErrorIs(t, sent(ctx, s, st, []uint64{1}), syscall.ENOSPC, "Sent after the failure")
	assert.ErrorIs(t, s.Close(), syscall.ENOSPC, "Close reports the failure")

	s = openT(t, dir, nil)
	_, next := senderState(s, st)
	assert.GreaterOrEqual(t, next, acked+1, "every acknowledged reservation survives a full disk")
	assert.GreaterOrEqual(t, s.Stats().Pending, int(acked), "every acknowledged journal entry survives")
}

// TestReadOnlyFS opens a store on a file system mounted read-only: Open
// fails with EROFS and the store is intact once the file system is
// writable again.
func TestReadOnlyFS(t *testing.T) {
	mnt := smallFS(t, "1m")
	dir := filepath.Join(mnt, "store")
	s, err := Open(dir, nil)
	require.NoError(t, err)
	st := seqstore.Stream{Queue: "q"}
	reserveN(t, s, st, 3)
	require.NoError(t, s.Close())

	require.NoError(t, syscall.Mount("", mnt, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""), "remount read-only")
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, syscall.EROFS, "Open on a read-only file system")
	assert.Contains(t, err.Error(), dir, "the error names the directory")

	require.NoError(t, syscall.Mount("", mnt, "", syscall.MS_REMOUNT, ""), "remount read-write")
	s = openT(t, dir, nil)
	_, next := senderState(s, st)
	assert.Equal(t, uint64(4), next, "the store is intact")
	_, err = os.Stat(filepath.Join(dir, snapTmpName))
	assert.True(t, errors.Is(err, os.ErrNotExist), "nothing left behind")
}
