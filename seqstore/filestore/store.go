package filestore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// ErrUnsafeDir means the store directory or a file in it could be
// controlled by another user: the directory is owned by another user or
// writable by group or others, or the lock file is not a regular file.
var ErrUnsafeDir = errors.New("filestore: unsafe directory")

// ErrReadOnly is returned by Reserve, Advance, Park and Sent on a store
// opened with Options.ReadOnly.
var ErrReadOnly = errors.New("filestore: store opened read-only")

// Options configures a Store. The zero value (and a nil *Options) means the
// defaults documented on each field.
type Options struct {
	// SnapshotBytes is the log size that triggers a snapshot: the writer
	// then saves the whole state to a new snapshot file and continues in a
	// fresh log, deleting the old one. Recovery reads the snapshot and
	// replays the logs written since, so Open reads up to this much. At
	// most 512 GiB; default 64 MiB.
	SnapshotBytes int64

	// SentFlushDelay is how long Sent marks wait in memory for a commit to
	// ride on before the writer writes and fsyncs them on their own. Under
	// load they always ride on the next commit and cost no fsync. Default
	// 100ms; must not be negative.
	SentFlushDelay time.Duration

	// CommitWait caps how long the writer, having found fewer requests
	// waiting than the previous commit released, waits for those callers
	// to come back before it writes. The wait is the average fsync
	// time, at most CommitWait, and ends early once as many requests are
	// waiting as were released. It keeps N concurrent callers in one commit
	// instead of splitting them between two. Default 1ms; negative
	// disables the wait.
	CommitWait time.Duration

	// Logger receives recovery notes (torn tails truncated, leftovers
	// removed) and write failures. Default: discard.
	Logger *slog.Logger

	// ReadOnly opens the store only to read it, for tools that inspect a
	// directory (examples/inorderctl): Open then creates, writes,
	// truncates, renames and removes nothing, and Reserve, Advance, Park
	// and Sent fail with ErrReadOnly. The directory must hold a store (its
	// LOCK file), which is locked all the same, so no store writes it
	// meanwhile. What recovery would repair is left as it is and read as
	// recovery reads it: a torn tail is ignored, leftovers of an
	// unfinished snapshot stay, and a log past SnapshotBytes is not
	// snapshotted. The next Open that may write repairs them.
	ReadOnly bool

	hooks *testHooks // tests only
}

// testHooks let internal tests observe or interrupt the writer.
type testHooks struct {
	// beforeSync runs in the writer after a frame of records records is
	// written and before it is synced.
	beforeSync func(records int64)
	// fs, if set, replaces the real file system (osFS): every write,
	// sync, rename and removal of the store's files goes through it.
	fs fileSystem
}

const (
	defaultSnapshotBytes  = 64 << 20
	defaultSentFlushDelay = 100 * time.Millisecond
	defaultCommitWait     = time.Millisecond
)

func (o *Options) validate() error {
	if o.SnapshotBytes < 0 || o.SnapshotBytes > maxLogBytes/2 {
		return fmt.Errorf("filestore: SnapshotBytes must be in 0..%d, got %d: %w", int64(maxLogBytes/2), o.SnapshotBytes, seqstore.ErrInvalidArgument)
	}
	if o.SentFlushDelay < 0 {
		return fmt.Errorf("filestore: SentFlushDelay must not be negative, got %v: %w", o.SentFlushDelay, seqstore.ErrInvalidArgument)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	r.SnapshotBytes = cmp.Or(r.SnapshotBytes, defaultSnapshotBytes)
	r.SentFlushDelay = cmp.Or(r.SentFlushDelay, defaultSentFlushDelay)
	r.CommitWait = cmp.Or(r.CommitWait, defaultCommitWait)
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.hooks == nil {
		r.hooks = &testHooks{}
	}
	if r.hooks.fs == nil {
		h := *r.hooks
		h.fs = osFS{}
		r.hooks = &h
	}
	return r
}

// Stats counts what a Store has done since Open.
type Stats struct {
	Fsyncs          int64         // fsync or fdatasync calls: log commits, snapshots, directories
	SyncTime        time.Duration // time spent in the log commits' fsyncs
	WaitTime        time.Duration // time the writer waited for the callers of the previous commit (see Options.CommitWait)
	WaitTimeouts    int64         // waits that ended at their bound, not because the callers were back
	Commits         int64         // frames written to the log, each followed by one fsync
	Records         int64         // records in those frames (reserves, advances, parks, sent marks)
	Snapshots       int64         // snapshots written (each starts a fresh log)
	SnapshotWritten int64         // bytes written by snapshots: snapshot files and the park segments they wrote
	Reservations    int64         // Reserve calls that succeeded
	Advances        int64         // Advance calls that succeeded
	Parks           int64         // Park calls that succeeded
	SentMarks       int64         // journal entries dropped by Sent
	LogBytes        int64         // size of the current log file
	Streams         int           // streams with any state
	Pending         int           // journal entries not marked sent
	Parked          int           // parked entries held (their bodies are on disk)
	ParkedBytes     int64         // bytes of those bodies
}

// Store is a seqstore.Store kept in one local directory. Create it with Open.
type Store struct {
	dir  string   // the path given to Open, for messages
	root *os.Root // the directory opened by Open: every file is opened, created, renamed and removed in it
	dirf *os.File // the same directory, for its syncs
	opts Options
	log  *slog.Logger
	lock *os.File
	fs   fileSystem // osFS, or a test's

	// Requests wait in queue for the writer. The writer sets want before
	// it sleeps; the submitter that makes the queue that long wakes it, so
	// a commit of N requests costs the writer one wake-up, not N.
	qmu     sync.Mutex
	queue   []*request
	want    int  // wake the writer once len(queue) >= want; 0: it is not waiting
	qclosed bool // Close began: no more requests
	wake    chan struct{}

	// requests recycles the requests of calls, with their done channels:
	// two allocations a call fewer. Per store, so that a store used in a
	// synctest bubble keeps its channels there.
	requests sync.Pool

	kick       chan struct{} // Sent marks are waiting
	writerDone chan struct{}
	isClosed   atomic.Bool // set at the start of Close, checked first by every call

	closeOnce sync.Once
	closeErr  error

	mu       sync.Mutex
	st       *state
	marks    []seqstore.SentMark // sent marks not yet written
	inflight chan struct{}       // closed when the frame being written is durable; nil if none
	failed   error               // a write or sync failed: the store is unusable

	w writer // owned by the writer goroutine (and Open before it starts)

	// Parked bodies are read from w.f and bodyFiles (the park segments,
	// the logs before w.f, and a version 2 snapshot until the next
	// snapshot moves its bodies to a segment). Readers hold fileMu for reading while they read;
	// the writer holds it to close files (after a snapshot), Close to
	// close them all.
	fileMu      sync.RWMutex
	bodyFiles   []*os.File
	filesClosed bool
	segs        []*segment // the park segments the snapshot names; owned by the writer (and Open)

	stats struct {
		fsyncs, syncNanos, waitNanos, waitTimeouts, commits, records, snapshots, snapshotWritten, reservations, advances, parks, sentMarks, logBytes atomic.Int64
	}
}

// Open opens the store in dir, creating dir (mode 0700) if needed, and
// recovers its state: the snapshot, then every log written since. A torn
// tail of the last log (a frame cut short or with a bad checksum, with
// nothing valid after it) is truncated and logged; any other damage is an
// error wrapping seqstore.ErrCorrupt. If another Store, in this process or
// another, has dir open, Open returns an error wrapping seqstore.ErrLocked.
func Open(dir string, opts *Options) (*Store, error) {
	if opts != nil {
		if err := opts.validate(); err != nil {
			return nil, err
		}
	}
	o := opts.withDefaults()
	if !o.ReadOnly {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("filestore: open %s: %w", dir, err)
		}
	}
	root, dirf, err := openDir(dir)
	if err != nil {
		return nil, fmt.Errorf("filestore: open %s: %w", dir, err)
	}
	var lock *os.File
	if o.ReadOnly {
		// An flock needs no write access: the lock file is opened for
		// reading, and must be there.
		if lock, err = openRegular(root, lockName, os.O_RDONLY, 0); errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("no store in this directory (no %s file): %w", lockName, err)
		}
	} else {
		lock, err = openLock(root)
	}
	if err == nil {
		if err = lockFile(lock); err != nil {
			_ = lock.Close()
			if errors.Is(err, errWouldBlock) {
				err = fmt.Errorf("directory is in use by another store: %w", seqstore.ErrLocked)
			} else {
				err = fmt.Errorf("lock: %w", err)
			}
		}
	}
	if err != nil {
		_ = dirf.Close()
		_ = root.Close()
		return nil, fmt.Errorf("filestore: open %s: %w", dir, err)
	}
	s := &Store{
		dir:        dir,
		root:       root,
		dirf:       dirf,
		opts:       o,
		log:        o.Logger,
		lock:       lock,
		fs:         o.hooks.fs,
		wake:       make(chan struct{}, 1),
		kick:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
	}
	if err := s.recover(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if !s.opts.ReadOnly && s.w.off > logHeaderSize && s.w.off >= s.opts.SnapshotBytes {
		if err := s.snapshot(); err != nil {
			s.closeFiles()
			return nil, err
		}
	}
	s.w.init(s)
	go s.run()
	return s, nil
}

// openDir opens the store directory at path, following symbolic links in
// the path, and checks that it is private (see checkPrivate): the check is
// made on the directory opened, which the store then uses whatever becomes
// of path. It returns the directory as a root, in which the store opens,
// creates, renames and removes its files, and as a file, for its syncs.
func openDir(path string) (*os.Root, *os.File, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, nil, err
	}
	d, err := root.Open(".")
	var info fs.FileInfo
	if err == nil {
		info, err = d.Stat()
		if err == nil {
			err = checkPrivate(info)
		}
		if err != nil {
			_ = d.Close()
		}
	}
	if err != nil {
		_ = root.Close()
		return nil, nil, err
	}
	return root, d, nil
}

// openLock opens (creating if needed) the lock file of dir, refusing a
// symbolic link or anything but a regular file (see openRegular). It is
// never removed: a process holding a lock on the old file would not see a
// new one.
func openLock(dir *os.Root) (*os.File, error) {
	return openRegular(dir, lockName, os.O_RDWR|os.O_CREATE, 0o600)
}

// openRegular opens file name of dir with flag (and perm, if flag creates
// it), refusing anything but a regular file: a symbolic link, a directory,
// a FIFO, a device or a socket fails with an error wrapping ErrUnsafeDir
// that says what is there. Whoever can plant one in the store's directory
// could feed the store what it likes or hang it: what is there is looked
// at (lstat) before it is opened, the open never waits (a FIFO opened for
// reading waits for a writer, a terminal for its carrier), and the file
// opened must be the regular file found at name afterwards (a link
// resolved by the open, or a file swapped in meanwhile, is not), before
// anything is read from it.
func openRegular(dir *os.Root, name string, flag int, perm os.FileMode) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	if info, err := dir.Lstat(name); err == nil && !info.Mode().IsRegular() {
		return nil, notRegular(path, info.Mode())
	}
	f, err := dir.OpenFile(name, flag|oNoFollow|oNonBlock, perm)
	if err != nil {
		// What cannot be opened as asked (a symbolic link with
		// O_NOFOLLOW, a directory for writing, a socket at all) is
		// reported for what it is.
		if info, lerr := dir.Lstat(name); lerr == nil && !info.Mode().IsRegular() {
			return nil, notRegular(path, info.Mode())
		}
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = notRegular(path, info.Mode())
	}
	if err == nil {
		var at fs.FileInfo
		if at, err = dir.Lstat(name); err == nil && !os.SameFile(info, at) {
			if !at.Mode().IsRegular() {
				err = notRegular(path, at.Mode())
			} else {
				err = fmt.Errorf("%w: %s was replaced while it was opened", ErrUnsafeDir, path)
			}
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func notRegular(path string, mode fs.FileMode) error {
	what := "of mode " + mode.String()
	switch {
	case mode&fs.ModeSymlink != 0:
		what = "a symbolic link"
	case mode.IsDir():
		what = "a directory"
	case mode&fs.ModeNamedPipe != 0:
		what = "a FIFO"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	case mode&fs.ModeDevice != 0:
		what = "a device"
	}
	return fmt.Errorf("%w: %s is not a regular file: it is %s", ErrUnsafeDir, path, what)
}

// Dir returns the path given to Open. The store keeps its files in the
// directory it found there at Open, even if that has moved since.
func (s *Store) Dir() string { return s.dir }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	st := Stats{
		Fsyncs:          s.stats.fsyncs.Load(),
		SyncTime:        time.Duration(s.stats.syncNanos.Load()),
		WaitTime:        time.Duration(s.stats.waitNanos.Load()),
		WaitTimeouts:    s.stats.waitTimeouts.Load(),
		Commits:         s.stats.commits.Load(),
		Records:         s.stats.records.Load(),
		Snapshots:       s.stats.snapshots.Load(),
		SnapshotWritten: s.stats.snapshotWritten.Load(),
		Reservations:    s.stats.reservations.Load(),
		Advances:        s.stats.advances.Load(),
		Parks:           s.stats.parks.Load(),
		SentMarks:       s.stats.sentMarks.Load(),
		LogBytes:        s.stats.logBytes.Load(),
	}
	s.mu.Lock()
	st.Streams, st.Pending, st.Parked, st.ParkedBytes = s.st.streams, s.st.entries, s.st.parked, s.st.parkedBytes
	s.mu.Unlock()
	return st
}

// Reserve implements seqstore.Store. It returns once the frame holding the
// call's record (the reservations and their journal) is fsynced. A request
// at fault (an invalid stream, N < 1, a journal of the wrong length, a
// counter that would pass MaxSeq, a call whose encoding passes 64 MiB)
// fails the call with a *seqstore.BatchError naming it, and nothing is
// applied. A ctx that ends before the writer takes the call makes Reserve
// return ctx's error with nothing applied; once the writer has taken it,
// Reserve waits for the fsync (about a millisecond) and reports its
// outcome, so an error never hides an applied reservation, except when the
// log write itself fails (see Errors in the package documentation).
func (s *Store) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("filestore: reserve: %w", err)
	}
	err := seqstore.CheckReserve(reqs)
	size := 1 + binary.MaxVarintLen64
	for i := 0; err == nil && i < len(reqs); i++ {
		if size += reservationSize(reqs[i]); size > maxRequestBytes {
			err = tooLarge(len(reqs), i, fmt.Errorf("%w: reserve %s: the call's encoding passes %d bytes here", seqstore.ErrInvalidArgument, reqs[i].Stream, maxRequestBytes))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("filestore: reserve: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filestore: reserve: %w", err)
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	res := make([]seqstore.Reservation, len(reqs))
	r := s.newRequest()
	r.kind, r.reserve, r.res, r.size = kindReserve, reqs, res, size
	if err := s.do(ctx, r); err != nil {
		return nil, fmt.Errorf("filestore: reserve: %w", err)
	}
	return res, nil
}

// tooLarge is the error of a call of n requests whose encoding passes
// maxRequestBytes at request i: request i is at fault, the others are
// aborted.
func tooLarge(n, i int, err error) error {
	errs := make([]error, n)
	errs[i] = err
	return seqstore.Abort(errs)
}

// Advance implements seqstore.Store. Requests at fault (an invalid or
// backward move, a stream twice, a call whose encoding passes 64 MiB, a
// conflict) fail it as for Reserve, and cancellation works as for Reserve.
func (s *Store) Advance(ctx context.Context, batch []seqstore.Advance) error {
	if err := s.checkOpen(); err != nil {
		return fmt.Errorf("filestore: advance: %w", err)
	}
	err := seqstore.CheckAdvance(batch)
	size := 1 + binary.MaxVarintLen64
	for i := 0; err == nil && i < len(batch); i++ {
		if size += advanceSize(batch[i]); size > maxRequestBytes {
			err = tooLarge(len(batch), i, fmt.Errorf("%w: advance %s: the call's encoding passes %d bytes here", seqstore.ErrInvalidArgument, batch[i].Stream, maxRequestBytes))
		}
	}
	if err != nil {
		return fmt.Errorf("filestore: advance: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("filestore: advance: %w", err)
	}
	if len(batch) == 0 {
		return nil
	}
	r := s.newRequest()
	r.kind, r.advance, r.size = kindAdvance, batch, size
	if err := s.do(ctx, r); err != nil {
		return fmt.Errorf("filestore: advance: %w", err)
	}
	return nil
}

// Sent implements seqstore.Store. The entries leave memory (and Pending) at
// once; the marks reach the log with the next commit, or on their own after
// Options.SentFlushDelay if no commit comes. Sent never waits for an fsync.
// A mark with an invalid stream fails the call with a *seqstore.BatchError
// and no mark of the call is applied.
func (s *Store) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	if err := s.checkOpen(); err != nil {
		return fmt.Errorf("filestore: sent: %w", err)
	}
	if err := seqstore.CheckSent(marks); err != nil {
		return fmt.Errorf("filestore: sent: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("filestore: sent: %w", err)
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("filestore: sent: %w", ErrReadOnly)
	}
	s.mu.Lock()
	if s.failed != nil {
		err := s.failed
		s.mu.Unlock()
		return fmt.Errorf("filestore: sent: %w", err)
	}
	held := len(s.marks)
	s.marks = s.st.sent(marks, s.marks)
	marked := 0
	for _, m := range s.marks[held:] {
		marked += len(m.Seqs)
	}
	s.mu.Unlock()
	if marked > 0 {
		s.stats.sentMarks.Add(int64(marked))
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// Pending implements seqstore.Store. Like every read it reflects only
// durable reservations: if a frame is being written it waits for its fsync.
func (s *Store) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("filestore: pending %q: %w", queue, err)
	}
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("filestore: pending: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filestore: pending %q: %w", queue, err)
	}
	s.mu.Lock()
	entries := s.st.pending(queue)
	wait := s.inflight
	s.mu.Unlock()
	if err := s.awaitDurable(ctx, wait); err != nil {
		return nil, fmt.Errorf("filestore: pending %q: %w", queue, err)
	}
	return entries, nil
}

// Cursors implements seqstore.Store. It waits for a frame being written, as
// Pending does. An invalid stream fails alone: the error is a
// *seqstore.BatchError and the other cursors are valid.
func (s *Store) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("filestore: cursors: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filestore: cursors: %w", err)
	}
	var errs []error
	cursors := make([]seqstore.Cursor, len(streams))
	s.mu.Lock()
	for i, st := range streams {
		if err := st.Validate(); err != nil {
			if errs == nil {
				errs = make([]error, len(streams))
			}
			errs[i] = err
			continue
		}
		c := s.st.cursor(st)
		c.Skipped = cloneRanges(c.Skipped)
		cursors[i] = c
	}
	wait := s.inflight
	s.mu.Unlock()
	if err := s.awaitDurable(ctx, wait); err != nil {
		return nil, fmt.Errorf("filestore: cursors: %w", err)
	}
	if errs != nil {
		return cursors, fmt.Errorf("filestore: cursors: %w", &seqstore.BatchError{Errs: errs})
	}
	return cursors, nil
}

func cloneRanges(r []seqstore.Range) []seqstore.Range {
	if len(r) == 0 {
		return nil
	}
	return append([]seqstore.Range(nil), r...)
}

// Close flushes Sent marks, waits for the writer, closes the files and
// releases the directory lock. It returns the error that made the store
// unusable, if any. Close is idempotent; calls after the first return nil.
func (s *Store) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.isClosed.Store(true)
		s.qmu.Lock()
		s.qclosed = true
		s.signalLocked()
		s.qmu.Unlock()
		<-s.writerDone

		var errs []error
		s.mu.Lock()
		failed := s.failed
		s.mu.Unlock()
		if failed != nil {
			errs = append(errs, failed)
		} else if s.w.alloc > s.w.off {
			// Drop the zeros written ahead, so that a log closed
			// cleanly ends with its last frame. Not synced: after a
			// crash recovery cuts them like any torn tail.
			if err := s.fs.truncate(s.w.f, s.w.off); err != nil {
				errs = append(errs, err)
			}
		}
		s.fileMu.Lock()
		if s.w.f == nil {
			// A read-only store of a directory without a log.
		} else if err := s.w.f.Close(); err != nil {
			errs = append(errs, err)
		}
		for _, f := range s.bodyFiles {
			_ = f.Close() // read-only
		}
		s.bodyFiles, s.filesClosed = nil, true
		s.fileMu.Unlock()
		if err := unlockFile(s.lock); err != nil {
			errs = append(errs, err)
		}
		if err := s.lock.Close(); err != nil {
			errs = append(errs, err)
		}
		_ = s.dirf.Close() // read-only
		if err := s.root.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("filestore: close %s: %w", s.dir, err)
		}
	})
	if !first {
		return nil
	}
	return s.closeErr
}

// closeFiles closes the files a failed Open opened and releases the lock.
func (s *Store) closeFiles() {
	if s.w.f != nil {
		_ = s.w.f.Close()
	}
	for _, f := range s.bodyFiles {
		_ = f.Close()
	}
	s.bodyFiles = nil
	_ = unlockFile(s.lock)
	_ = s.lock.Close()
	_ = s.dirf.Close()
	_ = s.root.Close()
}

func (s *Store) checkOpen() error {
	if s.isClosed.Load() {
		return seqstore.ErrClosed
	}
	return nil
}

// awaitDurable waits until the frame wait stands for is durable, then
// reports whether the store is still usable.
func (s *Store) awaitDurable(ctx context.Context, wait chan struct{}) error {
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// signalLocked wakes the writer; s.qmu is held.
func (s *Store) signalLocked() {
	s.want = 0
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// queued returns the number of requests waiting for the writer.
func (s *Store) queued() int {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return len(s.queue)
}

// newRequest returns a request from the store's pool, queued and empty.
func (s *Store) newRequest() *request {
	r, _ := s.requests.Get().(*request)
	if r == nil {
		r = &request{done: make(chan struct{}, 1)}
	}
	r.state.Store(reqQueued)
	return r
}

// recycle returns the outcome of r and puts r back in the pool. Only a
// request the writer no longer holds may be recycled.
func (s *Store) recycle(r *request) error {
	err := r.err
	r.reserve, r.advance, r.park, r.crcs, r.res, r.err = nil, nil, nil, nil, nil, nil
	s.requests.Put(r)
	return err
}

// do hands r (from newRequest) to the writer, waits for its outcome and
// recycles r, unless its ctx ended while r was queued: the writer may still
// hold r then, and skips it.
func (s *Store) do(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		r.err = err
		return s.recycle(r)
	}
	if s.opts.ReadOnly {
		r.err = ErrReadOnly
		return s.recycle(r)
	}
	s.qmu.Lock()
	if s.qclosed {
		s.qmu.Unlock()
		r.err = seqstore.ErrClosed
		return s.recycle(r)
	}
	s.queue = append(s.queue, r)
	if s.want > 0 && len(s.queue) >= s.want {
		s.signalLocked()
	}
	s.qmu.Unlock()
	done := ctx.Done()
	if done == nil { // a ctx that never ends: a plain receive is cheaper than a select
		<-r.done
		return s.recycle(r)
	}
	select {
	case <-r.done:
	case <-done:
		if r.state.CompareAndSwap(reqQueued, reqCancelled) {
			return ctx.Err()
		}
		<-r.done
	}
	return s.recycle(r)
}
