package filestore

import (
	"os"
)

// fileSystem is the one seam through which the store writes, syncs and
// moves its files: every fsync, fdatasync and directory sync, every rename
// and removal, and the creation, writes and cuts of the files whose
// durability the store relies on (logs and snapshots). Files are named
// relative to the store's directory, dir, opened once by Open: whatever
// happens to the directory's path afterwards (renamed, replaced), the
// store's files stay in the directory it opened. The store uses osFS;
// its tests put a recording or failing one in its place (testHooks.fs), so
// that the order of these calls and what a failure of each does are checked
// on the code path the store really runs.
type fileSystem interface {
	// create creates file name of dir, which must not exist yet (0600;
	// a symbolic link or anything else there makes it fail).
	create(dir *os.Root, name string) (*os.File, error)
	// writeAt writes b at off: a log's header, frames and the zeros
	// written ahead of them; a snapshot's content.
	writeAt(f *os.File, b []byte, off int64) error
	// syncData makes f's data and size durable (fdatasync): a log after a
	// frame.
	syncData(f *os.File) error
	// sync makes f durable, data and metadata (fsync): a new log's header,
	// a log cut to its last frame, a snapshot before its rename.
	sync(f *os.File) error
	// syncDir makes the entries of directory d durable: the files
	// created, renamed and removed in it.
	syncDir(d *os.File) error
	// rename moves oldname of dir to newname, replacing what is there.
	rename(dir *os.Root, oldname, newname string) error
	// truncate cuts f to size.
	truncate(f *os.File, size int64) error
	// remove removes name of dir.
	remove(dir *os.Root, name string) error
}

// osFS is the real file system.
type osFS struct{}

func (osFS) create(dir *os.Root, name string) (*os.File, error) { return createFile(dir, name) }

func (osFS) writeAt(f *os.File, b []byte, off int64) error {
	_, err := f.WriteAt(b, off)
	return err
}

func (osFS) syncData(f *os.File) error { return syncData(f) }

func (osFS) sync(f *os.File) error { return f.Sync() }

func (osFS) syncDir(d *os.File) error { return d.Sync() }

func (osFS) rename(dir *os.Root, oldname, newname string) error {
	return dir.Rename(oldname, newname)
}

func (osFS) truncate(f *os.File, size int64) error { return f.Truncate(size) }

func (osFS) remove(dir *os.Root, name string) error { return dir.Remove(name) }

// createFile creates file name of dir (0600), which must not exist yet:
// whatever is there, a symbolic link included, makes it fail rather than
// open it.
func createFile(dir *os.Root, name string) (*os.File, error) {
	return dir.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
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
