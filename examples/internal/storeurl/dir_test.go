package storeurl

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUserDir checks the examples' default location: under the user's cache
// directory, one element per elem, created 0700 with its parents by the file
// store that opens it.
func TestUserDir(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // Linux; elsewhere os.UserCacheDir ignores it
	userCache, err := os.UserCacheDir()
	require.NoError(t, err)

	dir, err := UserDir("q1", "send")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(userCache, "inorder-examples", "q1", "send"), dir)
	for _, bad := range []string{"", ".", "..", "a/b", "../x", `a\b`} {
		_, err := UserDir(bad, "send")
		assert.ErrorContains(t, err, "not one path element", "UserDir(%q) must stay inside", bad)
	}

	if runtime.GOOS != "linux" {
		return
	}
	b, err := Open(t.Context(), "file:"+dir, nil)
	require.NoError(t, err, "open the default file store")
	require.NoError(t, b.Close())
	for _, d := range []string{filepath.Join(cache, "inorder-examples"), filepath.Join(cache, "inorder-examples", "q1"), dir} {
		info, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "%s should be created 0700, got %v", d, info.Mode().Perm())
	}

	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	_, err = UserDir("q1", "send")
	assert.ErrorContains(t, err, "no per-user directory", "with no $XDG_CACHE_HOME and no $HOME")
}
