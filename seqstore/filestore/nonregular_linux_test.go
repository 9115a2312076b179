package filestore

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNonRegularFiles plants what is not a regular file (a FIFO, a
// character device, a socket, a directory) where the store keeps its files:
// the LOCK file, the only log, an older log, the snapshot. Open must refuse
// each, at once (a FIFO opened for reading waits for a writer; a device
// such as /dev/zero reads for ever), with an error wrapping ErrUnsafeDir
// that names the file and says what is wrong with it. Whoever can plant
// such a file in the store's directory can feed the store what it likes or
// hang it.
func TestNonRegularFiles(t *testing.T) {
	kinds := []struct {
		name string
		make func(path string) error
	}{
		{"fifo", func(path string) error { return syscall.Mkfifo(path, 0o600) }},
		// 1:3 is /dev/null: a device that can be opened and read here
		// (1:5, /dev/zero, would fill memory when read whole).
		{"device", func(path string) error { return syscall.Mknod(path, syscall.S_IFCHR|0o600, 1<<8|3) }},
		{"socket", func(path string) error { return syscall.Mknod(path, syscall.S_IFSOCK|0o600, 0) }},
		{"directory", func(path string) error { return os.Mkdir(path, 0o700) }},
	}
	places := []struct {
		name string
		file string
		// prepare writes the other files the place needs to be read:
		// an older log is read only if a later one exists.
		prepare func(t *testing.T, dir string)
	}{
		{name: "LOCK", file: lockName},
		{name: "only log", file: logName(1)},
		{name: "older log", file: logName(1), prepare: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, logName(2)), logHeader(2))
		}},
		{name: "snapshot", file: snapName},
	}
	for _, k := range kinds {
		for _, p := range places {
			t.Run(k.name+" as "+p.name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, p.file)
				if err := k.make(path); err != nil {
					if k.name == "device" && os.IsPermission(err) {
						t.Skipf("cannot create a device node without CAP_MKNOD: %v", err)
					}
					require.NoError(t, err, "make a %s at %s", k.name, p.file)
				}
				if p.prepare != nil {
					p.prepare(t, dir)
				}
				type result struct {
					s   *Store
					err error
				}
				done := make(chan result, 1)
				go func() {
					s, err := Open(dir, nil)
					done <- result{s, err}
				}()
				var r result
				select {
				case r = <-done:
				case <-time.After(5 * time.Second):
					// Unblock a FIFO reader so that the goroutine ends.
					if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						_ = f.Close()
					}
					t.Fatalf("Open with a %s as the %s still blocked after 5s", k.name, p.name)
				}
				if r.err == nil {
					_ = r.s.Close()
				}
				require.Error(t, r.err, "Open with a %s as the %s", k.name, p.name)
				t.Log(r.err)
				assert.ErrorIs(t, r.err, ErrUnsafeDir, "the error says the directory is unsafe")
				assert.Contains(t, r.err.Error(), path, "the error names the file")
				assert.Contains(t, r.err.Error(), "not a regular file", "the error says what is wrong")
				info, err := os.Lstat(path)
				require.NoError(t, err)
				assert.Equal(t, k.name == "directory", info.IsDir(), "the planted %s is left as it was", k.name)
			})
		}
	}
}
