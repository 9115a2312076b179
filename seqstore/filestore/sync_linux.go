package filestore

import (
	"os"
	"syscall"
)

// syncData makes the data written to f durable. fdatasync also flushes the
// file size, which is all the metadata an appended log needs, and costs about
// half an fsync on ext4.
func syncData(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
