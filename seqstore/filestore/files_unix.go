//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filestore

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// oNoFollow makes an open fail on a symbolic link instead of following it.
const oNoFollow = syscall.O_NOFOLLOW

// oNonBlock makes an open return at once where it could wait (a FIFO, some
// devices). It changes nothing for a regular file.
const oNonBlock = syscall.O_NONBLOCK

// checkPrivate reports why dir (as os.Stat describes it) is not private
// to this process's user: owned by another user, or writable by group or
// others. Whoever else can write the directory can replace the log or
// plant links in it.
func checkPrivate(info fs.FileInfo) error {
	if !info.IsDir() {
		return fmt.Errorf("%w: not a directory", ErrUnsafeDir)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: owned by uid %d, not by this process's uid %d", ErrUnsafeDir, st.Uid, os.Geteuid())
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: mode %04o lets group or others write it (chmod go-w)", ErrUnsafeDir, perm)
	}
	return nil
}
