package filestore

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestUnsafeDir checks that Open refuses a directory that another user
// controls, says why, and writes nothing into it.
func TestUnsafeDir(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o770, 0o702} {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, mode))
		_, err := Open(dir, nil)
		require.ErrorIs(t, err, ErrUnsafeDir, "mode %04o", mode)
		assert.Contains(t, err.Error(), dir, "the error names the directory")
		assert.Contains(t, err.Error(), "lets group or others write it", "the error says what is wrong with mode %04o", mode)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "nothing written into a directory of mode %04o", mode)
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o750))
	s, err := Open(dir, nil)
	require.NoError(t, err, "mode 0750: group may read, not write")
	require.NoError(t, s.Close())

	if os.Geteuid() != 0 {
		t.Log("not root: cannot chown a directory to another user; ownership check not exercised")
		return
	}
	dir = t.TempDir()
	require.NoError(t, os.Chown(dir, 12345, 12345))
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, ErrUnsafeDir, "directory owned by another uid")
	assert.Contains(t, err.Error(), "owned by uid 12345", "the error names the owner")
}

// TestNoFollow plants symbolic links where the store creates files and
// checks that nothing is written through them.
func TestNoFollow(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	writeFile(t, victim, []byte("victim"))
	require.NoError(t, os.Chmod(victim, 0o644))
	checkVictim := func(what string) {
		t.Helper()
		data, err := os.ReadFile(victim)
		require.NoError(t, err)
		assert.Equal(t, "victim", string(data), "%s: the victim is unchanged", what)
		info, err := os.Stat(victim)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o644), info.Mode().Perm(), "%s: the victim's mode is unchanged", what)
	}

	// snapshot.tmp -> victim, planted before Open and again while open,
	// before each snapshot.
	dir := t.TempDir()
	tmp := filepath.Join(dir, snapTmpName)
	require.NoError(t, os.Symlink(victim, tmp))
	s := openT(t, dir, &Options{SnapshotBytes: 1})
	checkVictim("Open with a planted snapshot.tmp")
	st := seqstore.Stream{Queue: "q"}
	for i := range 3 {
		require.NoError(t, os.Symlink(victim, tmp), "plant %d", i)
		_, err := reserve(ctx, s, st, 1, [][]byte{[]byte("secret payload")})
		require.NoError(t, err)
		// The writer snapshots after answering the commit.
		require.Eventually(t, func() bool { return s.Stats().Snapshots == int64(i+1) }, 5*time.Second, time.Millisecond,
			"snapshot %d written despite the planted link", i+1)
		checkVictim("snapshot over a planted snapshot.tmp")
	}
	require.NoError(t, s.Close())
	s = openT(t, dir, nil)
	_, next := senderState(s, st)
	assert.Equal(t, uint64(4), next, "the snapshots hold the reservations")
	require.NoError(t, s.Close())

	// A link planted between the removal of a stale file and its
	// creation: every file the store creates refuses it.
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	for _, name := range []string{snapTmpName, logName(99)} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.Symlink(victim, path))
		_, err := createFile(root, name)
		require.ErrorIs(t, err, os.ErrExist, "creating %s over a link", name)
		checkVictim("creating " + name + " over a link")
		require.NoError(t, os.Remove(path))
	}

	// A dangling LOCK link: Open fails and creates nothing at its target.
	dir = t.TempDir()
	target := filepath.Join(outside, "made-by-lock")
	require.NoError(t, os.Symlink(target, filepath.Join(dir, lockName)))
	_, err = Open(dir, nil)
	require.Error(t, err, "Open with LOCK a dangling link")
	assert.Contains(t, err.Error(), "symbolic link", "the error says why")
	_, err = os.Lstat(target)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing created at the link's target")

	// LOCK linked to an existing file: refused too, the file untouched.
	require.NoError(t, os.Remove(filepath.Join(dir, lockName)))
	require.NoError(t, os.Symlink(victim, filepath.Join(dir, lockName)))
	_, err = Open(dir, nil)
	require.Error(t, err, "Open with LOCK a link to a file")
	checkVictim("LOCK linked to the victim")
}

// TestNoFollowInside plants symbolic links to files inside the store's own
// directory, which the directory handle (os.Root) would follow: each is
// refused as a link all the same, and its target left as it was.
func TestNoFollowInside(t *testing.T) {
	for _, name := range []string{lockName, logName(1), snapName} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "target"), []byte("target"))
			require.NoError(t, os.Symlink("target", filepath.Join(dir, name)))
			s, err := Open(dir, nil)
			if err == nil {
				_ = s.Close()
			}
			require.ErrorIs(t, err, ErrUnsafeDir, "Open with %s a link to a file beside it", name)
			assert.Contains(t, err.Error(), "symbolic link", "the error says why")
			data, err := os.ReadFile(filepath.Join(dir, "target"))
			require.NoError(t, err)
			assert.Equal(t, "target", string(data), "the link's target is unchanged")
		})
	}
}
