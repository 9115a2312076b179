package filestore

import (
	"os"
)

// fileSystem is the one seam through which the store writes, syncs and
// moves its files: every fsync, fdatasync and directory sync, every rename
// and removal, and the creation, writes and cuts of the files whose
// durability the store relies on (logs and snapshots). The store uses osFS;
// its tests put a recording or failing one in its place (testHooks.fs), so
// that the order of these calls and what a failure of each does are checked
// on the code path the store really runs.
type fileSystem interface {
	// create creates a file that must not exist yet (0600; a symbolic
	// link or anything else at path makes it fail).
	create(path string) (*os.File, error)
	// writeAt writes b at off: a log's header, frames and the zeros
	// written ahead of them; a snapshot's content.
	writeAt(f *os.File, b []byte, off int64) error
	// syncData makes f's data and size durable (fdatasync): a log after a
	// frame.
	syncData(f *os.File) error
	// sync makes f durable, data and metadata (fsync): a new log's header,
	// a log cut to its last frame, a snapshot before its rename.
	sync(f *os.File) error
	// syncDir makes the entries of directory dir durable: the files
	// created, renamed and removed in it.
	syncDir(dir string) error
	// rename moves oldpath to newpath, replacing what is there.
	rename(oldpath, newpath string) error
	// truncate cuts f to size.
	truncate(f *os.File, size int64) error
	// remove removes path.
	remove(path string) error
}

// osFS is the real file system.
type osFS struct{}

func (osFS) create(path string) (*os.File, error) { return createFile(path) }

func (osFS) writeAt(f *os.File, b []byte, off int64) error {
	_, err := f.WriteAt(b, off)
	return err
}

func (osFS) syncData(f *os.File) error { return syncData(f) }

func (osFS) sync(f *os.File) error { return f.Sync() }

func (osFS) syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (osFS) rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFS) truncate(f *os.File, size int64) error { return f.Truncate(size) }

func (osFS) remove(path string) error { return os.Remove(path) }

// createFile creates a file (0600) that must not exist yet: whatever is at
// path, a symbolic link included, makes it fail rather than open it.
func createFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
}

// fileWriter writes a file sequentially through the seam.
type fileWriter struct {
	fs  fileSystem
	f   *os.File
	off int64
}

func (w *fileWriter) Write(b []byte) (int, error) {
	if err := w.fs.writeAt(w.f, b, w.off); err != nil {
		return 0, err
	}
	w.off += int64(len(b))
	return len(b), nil
}
