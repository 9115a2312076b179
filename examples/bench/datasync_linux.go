package main

import (
	"os"
	"syscall"
)

// datasync makes the data written to f durable with fdatasync, the call the
// filestore's commits make on Linux.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
