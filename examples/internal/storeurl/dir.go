package storeurl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// UserDir returns the directory in which the example programs keep their
// state when no -store is given: inorder-examples/elem... under the user's
// cache directory (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux,
// ~/Library/Caches on macOS, %LocalAppData% on Windows). No other user can
// create it first or link it elsewhere, as they could a fixed path under the
// shared temporary directory. UserDir does not create it: filestore.Open
// creates it and its missing parents, mode 0700. Each elem must be one path
// element (a queue name, say), so that the directory stays inside.
func UserDir(elem ...string) (string, error) {
	for _, e := range elem {
		if e == "" || e == "." || e == ".." || strings.ContainsAny(e, `/\`) {
			return "", fmt.Errorf("storeurl: %q is not one path element", e)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("storeurl: no per-user directory: %w", err)
	}
	return filepath.Join(append([]string{cache, "inorder-examples"}, elem...)...), nil
}
