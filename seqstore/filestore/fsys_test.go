package filestore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Test file systems for the seam (fsys.go): recFS records every call and
// fails the ones a test picks; powerFS loses power.

// fsOp is one call through the seam. Paths are relative to the store's
// directory; to is the new path of a rename.
type fsOp struct {
	kind     string // create, write, fdatasync, fsync, fsync-dir, rename, truncate, remove
	path, to string
}

func (o fsOp) String() string {
	if o.to != "" {
		return fmt.Sprintf("%s %s -> %s", o.kind, o.path, o.to)
	}
	return o.kind + " " + o.path
}

var errInjected = errors.New("injected file-system error")

// recFS records the calls a store makes through the seam and passes them to
// the real file system, unless fail returns an error for one: the call then
// returns that error and does nothing.
type recFS struct {
	dir  string
	real fileSystem

	mu      sync.Mutex
	ops     []fsOp
	written map[string]int64    // bytes written, by path
	fail    func(op fsOp) error // called with mu held
}

func newRecFS(dir string) *recFS { return &recFS{dir: dir, real: osFS{}} }

func (r *recFS) rel(path string) string {
	if rel, err := filepath.Rel(r.dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// record notes op and says whether it is to fail.
func (r *recFS) record(op fsOp) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	if r.fail != nil {
		return r.fail(op)
	}
	return nil
}

// writtenTo returns the bytes written so far to the files whose name
// (relative to the store's directory) match says.
func (r *recFS) writtenTo(match func(name string) bool) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for name, b := range r.written {
		if match(name) {
			n += b
		}
	}
	return n
}

// calls returns the calls recorded so far, writes left out unless writes.
func (r *recFS) calls(writes bool) []fsOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []fsOp
	for _, op := range r.ops {
		if writes || op.kind != "write" {
			out = append(out, op)
		}
	}
	return out
}

func (r *recFS) create(dir *os.Root, name string) (*os.File, error) {
	if err := r.record(fsOp{kind: "create", path: r.rel(filepath.Join(dir.Name(), name))}); err != nil {
		return nil, err
	}
	return r.real.create(dir, name)
}

func (r *recFS) writeAt(f *os.File, b []byte, off int64) error {
	if err := r.record(fsOp{kind: "write", path: r.rel(f.Name())}); err != nil {
		return err
	}
	r.mu.Lock()
	if r.written == nil {
		r.written = map[string]int64{}
	}
	r.written[r.rel(f.Name())] += int64(len(b))
	r.mu.Unlock()
	return r.real.writeAt(f, b, off)
}

func (r *recFS) syncData(f *os.File) error {
	if err := r.record(fsOp{kind: "fdatasync", path: r.rel(f.Name())}); err != nil {
		return err
	}
	return r.real.syncData(f)
}

func (r *recFS) sync(f *os.File) error {
	if err := r.record(fsOp{kind: "fsync", path: r.rel(f.Name())}); err != nil {
		return err
	}
	return r.real.sync(f)
}

func (r *recFS) syncDir(d *os.File) error {
	if err := r.record(fsOp{kind: "fsync-dir", path: r.rel(d.Name())}); err != nil {
		return err
	}
	return r.real.syncDir(d)
}

func (r *recFS) rename(dir *os.Root, oldname, newname string) error {
	op := fsOp{kind: "rename", path: r.rel(filepath.Join(dir.Name(), oldname)), to: r.rel(filepath.Join(dir.Name(), newname))}
	if err := r.record(op); err != nil {
		return err
	}
	return r.real.rename(dir, oldname, newname)
}

func (r *recFS) truncate(f *os.File, size int64) error {
	if err := r.record(fsOp{kind: "truncate", path: r.rel(f.Name())}); err != nil {
		return err
	}
	return r.real.truncate(f, size)
}

func (r *recFS) remove(dir *os.Root, name string) error {
	if err := r.record(fsOp{kind: "remove", path: r.rel(filepath.Join(dir.Name(), name))}); err != nil {
		return err
	}
	return r.real.remove(dir, name)
}

var errPowerCut = errors.New("simulated power cut")

// powerFS is the file system of a machine that loses power. It passes every
// call to the real file system and keeps, per file, the span of bytes
// written since the file's last fsync or fdatasync: what a power cut may
// lose. Until it is armed it only keeps count. Once armed, the call that
// the cut falls on (picked by cutAt) does not happen: instead, of each
// file's unsynced span a random prefix is kept (possibly all of it, possibly
// nothing) and the rest reads as zeros, as if it never reached the disk;
// from then on every call fails with errPowerCut, as if the machine had
// stopped.
//
// What it does not model: a file's directory entry lost with its
// directory's unsynced changes (a creation, rename or removal not yet made
// durable by a directory fsync). The order in which the store makes those
// durable is checked by TestSnapshotSyncOrder instead.
type powerFS struct {
	real fileSystem
	rnd  *rand.Rand

	mu    sync.Mutex
	dirty map[string]*span // by path: written since the last sync
	armed bool
	cutAt func(op fsOp) bool // armed: whether the cut falls on op, a sync of any kind
	cut   bool
	on    fsOp // the call the cut fell on
}

type span struct{ lo, hi int64 }

func newPowerFS(rnd *rand.Rand) *powerFS {
	return &powerFS{real: osFS{}, rnd: rnd, dirty: map[string]*span{}}
}

// arm makes the cut fall on the first sync for which at returns true.
func (p *powerFS) arm(at func(op fsOp) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.cutAt = true, at
}

// fell reports whether the power was cut, and on which call.
func (p *powerFS) fell() (bool, fsOp) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut, p.on
}

func (p *powerFS) create(dir *os.Root, name string) (*os.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return nil, errPowerCut
	}
	f, err := p.real.create(dir, name)
	if err == nil {
		p.dirty[f.Name()] = &span{} // empty and new: nothing of it is durable
	}
	return f, err
}

func (p *powerFS) writeAt(f *os.File, b []byte, off int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return errPowerCut
	}
	if err := p.real.writeAt(f, b, off); err != nil {
		return err
	}
	end := off + int64(len(b))
	if d := p.dirty[f.Name()]; d != nil && d.hi > d.lo {
		d.lo, d.hi = min(d.lo, off), max(d.hi, end)
	} else {
		p.dirty[f.Name()] = &span{off, end}
	}
	return nil
}

// syncing runs a sync of kind on path: the cut may fall on it.
func (p *powerFS) syncing(op fsOp, sync func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return errPowerCut
	}
	if p.armed && p.cutAt(op) {
		p.cut, p.on = true, op
		for path, d := range p.dirty {
			if err := p.lose(path, d); err != nil {
				return fmt.Errorf("power cut: %w", err)
			}
		}
		return errPowerCut
	}
	if err := sync(); err != nil {
		return err
	}
	if op.kind != "fsync-dir" {
		delete(p.dirty, op.path)
	}
	return nil
}

// lose zeroes a random suffix of d, the unsynced span of the file at path.
func (p *powerFS) lose(path string, d *span) error {
	if d.hi <= d.lo {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	hi := min(d.hi, info.Size())
	from := d.lo + p.rnd.Int64N(d.hi-d.lo+1)
	if from >= hi {
		return nil
	}
	_, err = f.WriteAt(make([]byte, hi-from), from)
	return err
}

func (p *powerFS) syncData(f *os.File) error {
	return p.syncing(fsOp{kind: "fdatasync", path: f.Name()}, func() error { return p.real.syncData(f) })
}

func (p *powerFS) sync(f *os.File) error {
	return p.syncing(fsOp{kind: "fsync", path: f.Name()}, func() error { return p.real.sync(f) })
}

func (p *powerFS) syncDir(d *os.File) error {
	return p.syncing(fsOp{kind: "fsync-dir", path: d.Name()}, func() error { return p.real.syncDir(d) })
}

// rootPath is the path of file name of dir, as the name of a file opened
// there reads.
func rootPath(dir *os.Root, name string) string {
	return dir.Name() + string(filepath.Separator) + name
}

func (p *powerFS) rename(dir *os.Root, oldname, newname string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return errPowerCut
	}
	if err := p.real.rename(dir, oldname, newname); err != nil {
		return err
	}
	oldpath, newpath := rootPath(dir, oldname), rootPath(dir, newname)
	// The file keeps what it has not synced under its new name; the file
	// it replaced is gone.
	delete(p.dirty, newpath)
	if d, ok := p.dirty[oldpath]; ok {
		p.dirty[newpath] = d
		delete(p.dirty, oldpath)
	}
	return nil
}

func (p *powerFS) truncate(f *os.File, size int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return errPowerCut
	}
	return p.real.truncate(f, size)
}

func (p *powerFS) remove(dir *os.Root, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return errPowerCut
	}
	if err := p.real.remove(dir, name); err != nil {
		return err
	}
	delete(p.dirty, rootPath(dir, name))
	return nil
}
