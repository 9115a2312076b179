//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filestore

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

var errWouldBlock = errors.New("lock held")

// lockFile fails: without a lock two processes could corrupt one directory,
// so the store refuses to open rather than run unprotected.
func lockFile(*os.File) error {
	return fmt.Errorf("file locking is not implemented on %s", runtime.GOOS)
}

func unlockFile(*os.File) error { return nil }
