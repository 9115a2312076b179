package filestore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/seqstore"
)

type reqKind uint8

const (
	kindReserve reqKind = iota + 1
	kindAdvance
	kindPark
)

// Request states: the caller and the writer race to move a queued request
// to cancelled or taken; whoever wins decides whether it is applied.
const (
	reqQueued int32 = iota
	reqTaken
	reqCancelled
)

// request is one Reserve, Advance or Park call on its way through the
// writer.
type request struct {
	kind    reqKind
	reserve []seqstore.ReserveRequest
	advance []seqstore.Advance
	park    []seqstore.Parked
	crcs    []uint32 // parkCRC of each entry of park, computed by the caller
	size    int      // encoded size bound, for bounding a frame

	state atomic.Int32
	done  chan struct{}          // capacity 1: the writer sends once res and err are set
	res   []seqstore.Reservation // one per reserve request
	err   error                  // a *seqstore.BatchError, or the store failed
}

// Limits of one commit: it stops taking requests once it holds this many or
// their records pass this size.
const (
	maxBatchRequests = 8192
	batchBytes       = 4 << 20
)

// applyChunk is how many arrivals the writer lets queue, while it waits for
// the callers of the previous commit, before it applies and encodes them:
// the calls that came first are encoded while the others are still on
// their way, so little is left to do once the last one arrives.
const applyChunk = 16

// writer is the state of the writer goroutine; only that goroutine (or Open
// before starting it) touches it.
type writer struct {
	f     *os.File
	gen   uint64 // generation of f
	first uint64 // oldest log generation still on disk
	off   int64  // end of the last frame in f
	alloc int64  // size of f: zeros from off on, written ahead (see preallocBytes)
	// noPrealloc: writing zeros ahead failed (a full disk); frames are
	// appended until the next log.
	noPrealloc bool
	batch      []*request

	// The commit being built: calls taken, applied to the state and
	// encoded into frame, waiting for their fsync.
	frame                      []byte
	taken                      []*request
	size                       int   // sum of the taken calls' size bounds
	records                    int64 // records in frame
	reserved, advanced, parked int64 // calls of each kind applied
	durable                    chan struct{}
	bodies                     []int // scratch: where appendParks put the bodies

	syncAvg      time.Duration // moving average of the sync time
	lastReleased int           // requests answered by the previous commit
	waitTimer    *time.Timer
	markTimer    *time.Timer
	markArmed    bool
	nextSnapshot int64 // log size that triggers the next snapshot
}

func (w *writer) init(s *Store) {
	w.waitTimer = time.NewTimer(time.Hour)
	w.waitTimer.Stop()
	w.markTimer = time.NewTimer(time.Hour)
	w.markTimer.Stop()
	w.nextSnapshot = s.opts.SnapshotBytes
	w.frame = make([]byte, frameHeaderSize, 4096)
}

// run is the writer goroutine: it takes every request waiting, applies them
// to the state, writes them as one frame, syncs once and answers them all.
func (s *Store) run() {
	defer close(s.writerDone)
	w := &s.w
	defer w.waitTimer.Stop()
	defer w.markTimer.Stop()
	for {
		batch, closed := s.take(w.batch, 1)
		if len(batch) == 0 {
			if closed {
				s.commit() // flush Sent marks
				return
			}
			select {
			case <-s.wake:
			case <-s.kick:
				if !w.markArmed {
					w.markArmed = true
					w.markTimer.Reset(s.opts.SentFlushDelay)
				}
			case <-w.markTimer.C:
				w.markArmed = false
				s.commit()
			}
			continue
		}
		s.apply(batch)
		// Fewer requests than the previous commit answered: wait a little
		// for those callers to come back, so that N callers in a loop
		// share one fsync rather than alternating between two half-full
		// ones. Those that come are applied in chunks as they arrive.
		if want := w.lastReleased; !closed && len(w.taken) < want {
			if wait := s.commitWait(); wait > 0 {
				start := time.Now()
				w.waitTimer.Reset(wait)
			wait:
				for len(w.taken) < want && !s.full() {
					batch, closed = s.take(batch[:0], min(want-len(w.taken), applyChunk))
					if len(batch) > 0 {
						s.apply(batch)
						continue
					}
					if closed {
						break
					}
					select {
					case <-s.wake:
					case <-w.waitTimer.C:
						s.stats.waitTimeouts.Add(1)
						break wait
					}
				}
				w.waitTimer.Stop()
				batch, _ = s.take(batch[:0], 0)
				s.apply(batch)
				s.stats.waitNanos.Add(int64(time.Since(start)))
			}
		}
		s.commit()
		clear(batch[:cap(batch)]) // every chunk used the same array
		w.batch = batch[:0]
	}
}

// full reports whether the commit being built takes no more calls.
func (s *Store) full() bool {
	return len(s.w.taken) >= maxBatchRequests || s.w.size >= batchBytes
}

// take moves waiting requests to batch, up to the limits of one commit
// (counting those the commit being built holds), if at least min are
// waiting; if fewer are, it takes none and asks submitters to wake the
// writer once min are queued. It also reports whether Close has begun.
func (s *Store) take(batch []*request, min int) ([]*request, bool) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	s.want = 0
	if len(s.queue) < min && !s.qclosed {
		s.want = min
		select { // drop a stale wake-up
		case <-s.wake:
		default:
		}
		return batch, false
	}
	count, size := len(s.w.taken), s.w.size
	n := 0
	for _, r := range s.queue {
		if count >= maxBatchRequests || count > 0 && size+r.size > batchBytes {
			break // one request alone may pass batchBytes, up to maxRequestBytes
		}
		batch = append(batch, r)
		size += r.size
		count++
		n++
	}
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	return batch, s.qclosed
}

// commitWait bounds the writer's wait for the callers of the previous
// commit: one average fsync, at most Options.CommitWait. While they all
// come back within an fsync, waiting for them costs each caller less than
// the fsync it would wait for if left out; with half an fsync, 64 callers
// on a fast disk missed it in one commit out of ten.
func (s *Store) commitWait() time.Duration {
	if s.opts.CommitWait < 0 {
		return 0
	}
	return min(s.w.syncAvg, s.opts.CommitWait)
}

// apply adds batch to the commit being built: each call whose caller has
// not given up is applied to the state and encoded into the frame. Calls
// that fail against the state (overflow, conflict) get their error and
// leave no record. From the first record on, reads wait for the commit's
// fsync (s.inflight).
func (s *Store) apply(batch []*request) {
	if len(batch) == 0 {
		return
	}
	w := &s.w
	s.mu.Lock()
	defer s.mu.Unlock()
	failed := s.failed
	now := time.Now()
	newEpoch := func() uint64 { return seqstore.NewEpoch(now) }
	for _, r := range batch {
		if !r.state.CompareAndSwap(reqQueued, reqTaken) {
			continue // the caller's ctx ended first
		}
		w.taken = append(w.taken, r)
		w.size += r.size
		if failed != nil {
			r.err = failed
			continue
		}
		switch r.kind {
		case kindReserve:
			if r.err = s.st.reserve(r.reserve, r.res, newEpoch); r.err != nil {
				continue
			}
			w.frame = appendReserves(w.frame, r.reserve, r.res)
			w.reserved++
		case kindAdvance:
			if r.err = s.st.advance(r.advance); r.err != nil {
				continue
			}
			w.frame = appendAdvance(w.frame, r.advance)
			w.advanced++
		case kindPark:
			if r.err = s.st.checkPark(r.park); r.err != nil {
				continue
			}
			// The frame will be written at w.off of w.f: the bodies
			// stay there, and memory keeps only where.
			w.bodies = slices.Grow(w.bodies[:0], len(r.park))[:len(r.park)]
			w.frame = appendParks(w.frame, r.park, r.crcs, w.bodies)
			for i, p := range r.park {
				s.st.park(p.Stream, parkEntry{epoch: p.Epoch, seq: p.Seq, file: w.f, off: w.off + int64(w.bodies[i]), size: uint32(len(p.Body)), crc: r.crcs[i]})
			}
			w.parked++
		}
		w.records++
	}
	s.markInflight()
}

// markInflight makes reads wait for the commit being built, once it holds
// a record; s.mu is held.
func (s *Store) markInflight() {
	if w := &s.w; w.records > 0 && w.durable == nil {
		w.durable = make(chan struct{})
		s.inflight = w.durable
	}
}

// commit adds the waiting Sent marks to the commit being built, writes it
// as one frame, syncs, and answers its callers.
func (s *Store) commit() {
	w := &s.w
	if w.markArmed {
		w.markTimer.Stop()
		w.markArmed = false
	}
	s.mu.Lock()
	marks := len(s.marks)
	if s.failed == nil && marks > 0 {
		// The marks that fit below the frame bound; the rest goes in
		// the next frame.
		size := len(w.frame) + 1 + binary.MaxVarintLen64
		for i, m := range s.marks {
			if size += markSize(m); size > maxFrameBytes+frameHeaderSize {
				marks = i
				break
			}
		}
		w.frame = appendSents(w.frame, s.marks[:marks])
		w.records++
	}
	rest := copy(s.marks, s.marks[marks:])
	clear(s.marks[rest:])
	s.marks = s.marks[:rest]
	if rest > 0 {
		select { // make sure the writer comes back for them
		case s.kick <- struct{}{}:
		default:
		}
	}
	s.markInflight()
	s.mu.Unlock()

	records, reserved, advanced, parked := w.records, w.reserved, w.advanced, w.parked
	if records > 0 {
		err := s.writeFrame(w.frame, records)
		s.mu.Lock()
		if err != nil && s.failed == nil {
			s.failed = err
			s.log.Error("filestore: log write failed; the store refuses further calls", "dir", s.dir, "err", err)
		}
		s.inflight = nil
		close(w.durable)
		s.mu.Unlock()
		if err != nil {
			for _, r := range w.taken {
				r.err = err
			}
			reserved, advanced, parked = 0, 0, 0
		} else {
			s.stats.commits.Add(1)
			s.stats.records.Add(records)
		}
	}
	s.stats.reservations.Add(reserved)
	s.stats.advances.Add(advanced)
	s.stats.parks.Add(parked)
	for _, r := range w.taken {
		r.done <- struct{}{} // the caller may recycle r from here on
	}
	if len(w.taken) > 0 {
		w.lastReleased = len(w.taken)
	}
	clear(w.taken)
	w.taken, w.size, w.records, w.reserved, w.advanced, w.parked, w.durable = w.taken[:0], 0, 0, 0, 0, 0, nil
	if cap(w.frame) <= 2*batchBytes {
		w.frame = w.frame[:frameHeaderSize]
	} else {
		w.frame = make([]byte, frameHeaderSize, 4096)
	}
	if records > 0 && w.off >= w.nextSnapshot {
		s.mu.Lock()
		failed := s.failed
		s.mu.Unlock()
		if failed == nil {
			if err := s.snapshot(); err != nil {
				s.mu.Lock()
				if s.failed == nil {
					s.failed = err
				}
				s.mu.Unlock()
				s.log.Error("filestore: snapshot failed; the store refuses further calls", "dir", s.dir, "err", err)
			}
		}
	}
}

// preallocBytes is how far past the last frame the writer fills the log with
// zeros before writing frames there. A frame appended to a file makes
// fdatasync commit the file system's journal too (new size, new blocks); a
// frame written over zeros already on disk needs only its own blocks
// written. On ext4 that halves the fsync time of 2 to 8 KiB frames, the size
// of a commit of 16 to 64 reservations, and brings it below that of a small
// append. The zeros cost one more write of the same size as the frames.
const preallocBytes = 1 << 20

var zeros [64 << 10]byte

// extend writes zeros to the log from its current size to at least end and
// preallocBytes more, unless it is already that long. They become durable
// with the next sync. It is an optimisation only: when it fails (a full
// disk), the frames are appended as they come, until the next log.
func (w *writer) extend(fsys fileSystem, end int64) {
	if end <= w.alloc || w.noPrealloc {
		return
	}
	end = max(end, w.off+preallocBytes)
	for off := w.alloc; off < end; {
		n := min(int64(len(zeros)), end-off)
		if err := fsys.writeAt(w.f, zeros[:n], off); err != nil {
			w.noPrealloc = true
			return
		}
		off += n
		w.alloc = off
	}
}

// writeFrame seals frame for the current end of the log, writes it and syncs.
func (s *Store) writeFrame(frame []byte, records int64) error {
	w := &s.w
	sealFrame(frame, w.gen, uint64(w.off))
	w.extend(s.fs, w.off+int64(len(frame)))
	err := s.fs.writeAt(w.f, frame, w.off)
	if err == nil {
		if h := s.opts.hooks.beforeSync; h != nil {
			h(records)
		}
		start := time.Now()
		err = s.fs.syncData(w.f)
		s.observeSync(time.Since(start))
	}
	if err != nil {
		return fmt.Errorf("filestore: write log %s: %w", w.f.Name(), err)
	}
	w.off += int64(len(frame))
	s.stats.logBytes.Store(w.off)
	return nil
}

func (s *Store) observeSync(d time.Duration) {
	s.stats.fsyncs.Add(1)
	s.stats.syncNanos.Add(int64(d))
	w := &s.w
	if w.syncAvg == 0 {
		w.syncAvg = d
		return
	}
	w.syncAvg += (d - w.syncAvg) / 8
}

// snapshot saves the state to a new snapshot that names a fresh log, switches
// to that log and deletes the old ones. Crash safety: the current log is cut
// to its last frame and synced, the new log is created and synced, the
// parked bodies to move are written to a new park segment, synced, and the
// directory synced, the snapshot is written to a temporary file, synced and
// renamed, and the directory is synced before anything is written to the
// new log and before the old logs and dropped segments are removed.
// Recovery of any prefix of these steps finds either the old snapshot with
// every old log and the segments it names, or the new snapshot with the
// segments it names (and creates the new log if its directory entry was
// lost); it removes the segments the snapshot found does not name. A
// failure before the rename leaves the old log in use and is only logged;
// after the rename the store must not write the old log again, so a
// failure there is returned.
func (s *Store) snapshot() error {
	w := &s.w
	newGen := w.gen + 1
	newName := logName(newGen)
	retryLater := func(err error) error {
		w.nextSnapshot = w.off + s.opts.SnapshotBytes
		s.log.Warn("filestore: snapshot failed; continuing with the current log", "dir", s.dir, "err", err)
		return nil
	}
	// A log that is not the last must end with its last frame: cut the
	// zeros written ahead, durably, before the next log exists.
	if w.alloc > w.off {
		if err := s.fs.truncate(w.f, w.off); err != nil {
			return retryLater(err)
		}
		w.alloc = w.off
		if err := s.sync(w.f); err != nil {
			return retryLater(err)
		}
	}
	nf, err := s.createLog(newName, newGen)
	if err != nil {
		return retryLater(err)
	}
	// The parked entries change only in this goroutine: they can be read
	// without s.mu while their bodies are copied.
	s.mu.Lock()
	head, parked := s.st.snapshotHead(newGen)
	s.mu.Unlock()
	// Bodies in a park segment that stays are referred to where they
	// are; the others are copied to a new segment, whose directory entry
	// is made durable before a snapshot names it.
	keep := s.segmentsToKeep(parked)
	seg, refs, err := s.writeSegment(newGen, parked, keep)
	if err == nil && seg != nil {
		err = s.syncDir()
	}
	if err == nil {
		err = s.writeSnapshotFile(snapTmpName, head, parked, refs)
	}
	if err == nil {
		err = s.fs.rename(s.root, snapTmpName, snapName)
	}
	if err != nil {
		_ = nf.Close()
		_ = s.fs.remove(s.root, newName)
		_ = s.fs.remove(s.root, snapTmpName)
		if seg != nil {
			_ = seg.f.Close()
			_ = s.fs.remove(s.root, segName(newGen))
		}
		return retryLater(err)
	}
	// From here the parked bodies copied are read from the new segment.
	// Readers of bodies hold fileMu: none is reading the files closed
	// here.
	s.fileMu.Lock()
	if seg != nil {
		s.mu.Lock()
		relocate(parked, refs, newGen, seg.f)
		s.mu.Unlock()
	}
	old := w.f
	w.f, w.gen, w.off, w.alloc, w.noPrealloc = nf, newGen, logHeaderSize, logHeaderSize, false
	_ = old.Close()
	var segs, dropped []*segment
	for _, sg := range s.segs {
		if keep[sg.f] != nil {
			segs = append(segs, sg)
		} else {
			dropped = append(dropped, sg)
		}
	}
	if seg != nil {
		segs = append(segs, seg)
	}
	for _, f := range s.bodyFiles {
		if keep[f] == nil {
			_ = f.Close()
		}
	}
	s.bodyFiles = s.bodyFiles[:0]
	for _, sg := range segs {
		s.bodyFiles = append(s.bodyFiles, sg.f)
	}
	s.segs = segs
	s.fileMu.Unlock()
	w.nextSnapshot = s.opts.SnapshotBytes
	s.stats.logBytes.Store(w.off)
	if err := s.syncDir(); err != nil {
		return fmt.Errorf("filestore: snapshot %s: %w", s.dir, err)
	}
	for g := w.first; g < newGen; g++ {
		if err := s.fs.remove(s.root, logName(g)); err != nil && !os.IsNotExist(err) {
			s.log.Warn("filestore: cannot remove old log", "dir", s.dir, "gen", g, "err", err)
		}
	}
	for _, sg := range dropped {
		if err := s.fs.remove(s.root, segName(sg.gen)); err != nil && !os.IsNotExist(err) {
			s.log.Warn("filestore: cannot remove a park segment", "dir", s.dir, "gen", sg.gen, "err", err)
		}
	}
	w.first = newGen
	s.stats.snapshots.Add(1)
	s.log.Debug("filestore: snapshot written", "dir", s.dir, "gen", newGen, "segments", len(segs), "dropped_segments", len(dropped))
	return nil
}

// segment is a park segment: a file of parked bodies, written whole by a
// snapshot (the bodies it moved out of the logs, an older snapshot or
// segments being dropped) and then only read, until a snapshot drops it.
type segment struct {
	gen  uint64
	f    *os.File
	size int64
}

// segmentsToKeep returns, by file, the park segments that a snapshot of
// parked keeps: those at least half of whose bodies are still parked. The
// live bodies of the others are copied to the snapshot's new segment and
// they are removed, so that the segments on disk hold at most about twice
// the bytes parked, and a body is copied once out of the log and then
// only when its segment is mostly garbage, not by every snapshot. When
// the snapshot writes a new segment anyway, the small segments (see
// smallSegment) are merged into it too: otherwise a long-parked body or
// two per snapshot would leave one small file, and one open descriptor,
// per snapshot, for ever.
func (s *Store) segmentsToKeep(parked []parkedStream) map[io.ReaderAt]*segment {
	keep := make(map[io.ReaderAt]*segment, len(s.segs))
	if len(s.segs) == 0 {
		return keep
	}
	bySeg := make(map[io.ReaderAt]*segment, len(s.segs))
	for _, sg := range s.segs {
		bySeg[sg.f] = sg
	}
	live := make(map[*segment]int64, len(s.segs))
	for _, p := range parked {
		for _, e := range p.ss.parks {
			if sg := bySeg[e.file]; sg != nil {
				live[sg] += int64(e.size)
			}
		}
	}
	for _, sg := range s.segs {
		if l := live[sg]; l > 0 && 2*l >= sg.size-segHeaderSize {
			keep[sg.f] = sg
		}
	}
	moves := false
	for _, p := range parked {
		for _, e := range p.ss.parks {
			moves = moves || keep[e.file] == nil
		}
	}
	if moves {
		small := s.smallSegment()
		for f, sg := range keep {
			if sg.size < small {
				delete(keep, f)
			}
		}
	}
	return keep
}

// smallSegment is the size below which a park segment is merged into the
// next one written: a quarter of Options.SnapshotBytes, at least 64 KiB
// and at most 1 MiB, so that merging them copies little per snapshot
// besides the bodies moved out of the logs. Of the segments a snapshot
// keeps, at most the one it wrote is then small, and the others hold at
// least half of that size in parked bodies each.
func (s *Store) smallSegment() int64 {
	return min(1<<20, max(64<<10, s.opts.SnapshotBytes/4))
}

// writeSegment copies the parked bodies of parked that are not in a
// segment of keep to a new park segment gen, synced, and returns it (nil
// if there is nothing to copy) and the places of every entry (see
// placeParks). A segment file left by a failed attempt is removed first:
// no segment of that gen is in use, since gen is that of the log the
// snapshot starts.
func (s *Store) writeSegment(gen uint64, parked []parkedStream, keep map[io.ReaderAt]*segment) (*segment, []segRef, error) {
	kept := func(f io.ReaderAt) (uint64, bool) {
		if sg := keep[f]; sg != nil {
			return sg.gen, true
		}
		return 0, false
	}
	moves := false
	for _, p := range parked {
		for _, e := range p.ss.parks {
			if keep[e.file] == nil {
				moves = true
				break
			}
		}
	}
	if !moves {
		refs, _, _, err := placeParks(parked, kept, gen, io.Discard, segHeaderSize)
		return nil, refs, err
	}
	name := segName(gen)
	if err := s.fs.remove(s.root, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	f, err := s.fs.create(s.root, name)
	if err != nil {
		return nil, nil, err
	}
	fw := &fileWriter{fs: s.fs, f: f}
	bw := bufio.NewWriterSize(fw, 256<<10)
	_, _ = bw.Write(segHeader(gen))
	refs, _, bad, err := placeParks(parked, kept, gen, bw, segHeaderSize)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = s.sync(f)
	}
	if err != nil {
		_ = f.Close()
		_ = s.fs.remove(s.root, name)
		return nil, nil, err
	}
	s.stats.snapshotWritten.Add(fw.off)
	if len(bad) > 0 {
		s.log.Warn("filestore: parked bodies fail their checksum; copied as they are, Unpark reports them", "dir", s.dir, "entries", bad)
	}
	return &segment{gen: gen, f: f, size: fw.off}, refs, nil
}

// createLog creates log gen as file name of the store's directory, with its
// header, synced. A log it could not finish is removed: left there, it
// would make the next attempt (the next snapshot) fail to create it, for
// good.
func (s *Store) createLog(name string, gen uint64) (*os.File, error) {
	f, err := s.fs.create(s.root, name)
	if err != nil {
		return nil, err
	}
	err = s.fs.writeAt(f, logHeader(gen), 0)
	if err == nil {
		err = s.sync(f)
	}
	if err != nil {
		_ = f.Close()
		_ = s.fs.remove(s.root, name)
		return nil, err
	}
	return f, nil
}

// createLogWhole creates log gen so that it never exists with less than its
// whole header: the header is written to logTmpName and synced, the file
// renamed to the log's name and the directory synced. Recovery then tells
// a first log cut short (damage) from one a crash interrupted (there is
// none). It returns the log, open for writing under its name.
func (s *Store) createLogWhole(gen uint64) (*os.File, error) {
	f, err := s.createLog(logTmpName, gen)
	if err != nil {
		return nil, err
	}
	_ = f.Close()
	if err := s.fs.rename(s.root, logTmpName, logName(gen)); err != nil {
		_ = s.fs.remove(s.root, logTmpName)
		return nil, err
	}
	if err := s.syncDir(); err != nil {
		return nil, err
	}
	// Opened again under its name, which its writes and errors report.
	return openRegular(s.root, logName(gen), os.O_RDWR, 0)
}

// writeSnapshotFile writes a snapshot (see writeSnapshot) to a new file
// name of the store's directory (0600), syncs and closes it. A file left
// there is removed first; whatever is there then (a link planted since)
// makes it fail rather than write through it.
func (s *Store) writeSnapshotFile(name string, head []byte, parked []parkedStream, refs []segRef) error {
	if err := s.fs.remove(s.root, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := s.fs.create(s.root, name)
	if err != nil {
		return err
	}
	fw := &fileWriter{fs: s.fs, f: f}
	bw := bufio.NewWriterSize(fw, 256<<10)
	err = writeSnapshot(bw, head, parked, refs)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = s.sync(f)
	}
	s.stats.snapshotWritten.Add(fw.off)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// sync makes f durable (fsync) and counts it.
func (s *Store) sync(f *os.File) error {
	s.stats.fsyncs.Add(1)
	return s.fs.sync(f)
}

// syncDir makes the store directory's entries durable and counts it.
func (s *Store) syncDir() error {
	s.stats.fsyncs.Add(1)
	return s.fs.syncDir(s.dirf)
}
