package filestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/inorder/inorder/seqstore"
)

// File names inside a store directory.
const (
	lockName    = "LOCK"
	snapName    = "snapshot"
	snapTmpName = "snapshot.tmp"
	logTmpName  = "log.tmp" // a log being created whole (see createLogWhole)
	logPrefix   = "log-"
	segPrefix   = "park-"
)

func logName(gen uint64) string { return fmt.Sprintf("%s%016x", logPrefix, gen) }

// segName is the name of park segment gen, written by the snapshot that
// started log gen.
func segName(gen uint64) string { return fmt.Sprintf("%s%016x", segPrefix, gen) }

// parseSegName returns the generation of a park segment file name.
func parseSegName(name string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, segPrefix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	gen, err := strconv.ParseUint(hex, 16, 64)
	return gen, err == nil
}

// parseLogName returns the generation of a log file name.
func parseLogName(name string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, logPrefix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	gen, err := strconv.ParseUint(hex, 16, 64)
	return gen, err == nil
}

// openRead opens file name of dir with flag, refusing anything but a
// regular file (see openRegular), and reads it whole. The file stays open:
// parked bodies are read from it later.
func openRead(dir *os.Root, name string, flag int) (*os.File, []byte, error) {
	f, err := openRegular(dir, name, flag, 0)
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, data, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("filestore: "+format+": %w", append(args, seqstore.ErrCorrupt)...)
}

// replayLog applies the frames of one log file to st. data is the whole file
// and must start with a valid header. A bad frame (short, bad length, bad
// checksum) is a torn tail if last is true and no valid frame follows it:
// replayLog then returns the offset where the good prefix ends. Otherwise,
// and for any frame that verifies but does not replay, it returns an error
// wrapping seqstore.ErrCorrupt. Frames are applied in order, so on error st
// holds a prefix and must be discarded. file is the log, read later for
// its parked bodies.
func replayLog(name string, data []byte, gen uint64, last bool, st *state, file io.ReaderAt) (end int, err error) {
	off := logHeaderSize
	for off < len(data) {
		payload, size, ok := frameAt(data, gen, off)
		if !ok {
			if !last {
				return off, corruptf("%s: bad frame at offset %d of a completed log", name, off)
			}
			if validFrameAfter(data, gen, off) {
				return off, corruptf("%s: bad frame at offset %d followed by valid frames", name, off)
			}
			return off, nil
		}
		if err := st.replay(payload, file, int64(off+frameHeaderSize)); err != nil {
			return off, corruptf("%s: frame at offset %d: %v", name, off, err)
		}
		off += size
	}
	return off, nil
}

// openSegment opens park segment gen for the snapshot being read, found
// says whether the directory lists it, and returns it with its size. Each
// is opened once and kept in s.segs.
func (s *Store) openSegment(gen uint64, found bool) (io.ReaderAt, int64, error) {
	for _, sg := range s.segs {
		if sg.gen == gen {
			return sg.f, sg.size, nil
		}
	}
	if !found {
		return nil, 0, fmt.Errorf("park segment %s is missing", segName(gen))
	}
	f, err := openRegular(s.root, segName(gen), os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	h := make([]byte, segHeaderSize)
	if n, _ := f.ReadAt(h, 0); n < segHeaderSize || string(h) != string(segHeader(gen)) {
		_ = f.Close()
		return nil, 0, fmt.Errorf("park segment %s has a bad header", segName(gen))
	}
	s.segs = append(s.segs, &segment{gen: gen, f: f, size: info.Size()})
	s.bodyFiles = append(s.bodyFiles, f)
	return f, info.Size(), nil
}

// readDir lists the entries of dir.
func readDir(dir *os.Root) ([]os.DirEntry, error) {
	d, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

// recover loads the snapshot and replays the logs into s.st, truncates a
// torn tail, and opens the last log for appending (creating it if needed).
func (s *Store) recover() error {
	names, err := readDir(s.root)
	if err != nil {
		return fmt.Errorf("filestore: open %s: %w", s.dir, err)
	}
	var gens []uint64
	segs := map[uint64]bool{} // park segments found
	for _, e := range names {
		if gen, ok := parseLogName(e.Name()); ok {
			gens = append(gens, gen)
		}
		if gen, ok := parseSegName(e.Name()); ok {
			segs[gen] = true
		}
		switch name := e.Name(); {
		case (name == snapTmpName || name == logTmpName) && s.opts.ReadOnly:
			// Never read: left for the next Open that may write.
		case name == snapTmpName:
			if err := s.fs.remove(s.root, snapTmpName); err != nil {
				return fmt.Errorf("filestore: open %s: %w", s.dir, err)
			}
			s.log.Info("filestore: removed an unfinished snapshot", "dir", s.dir)
		case name == logTmpName:
			if err := s.fs.remove(s.root, logTmpName); err != nil {
				return fmt.Errorf("filestore: open %s: %w", s.dir, err)
			}
			s.log.Info("filestore: removed an unfinished log", "dir", s.dir)
		}
	}
	slices.Sort(gens)

	st, nextGen := newState(), uint64(1)
	snapPath := filepath.Join(s.dir, snapName)
	sf, data, err := openRead(s.root, snapName, os.O_RDONLY)
	haveSnapshot := err == nil
	switch {
	case err == nil:
		s.bodyFiles = append(s.bodyFiles, sf)
		st, nextGen, err = decodeSnapshot(data, sf, func(gen uint64) (io.ReaderAt, int64, error) {
			return s.openSegment(gen, segs[gen])
		})
		if err != nil {
			return corruptf("%s: %v", snapPath, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("filestore: open %s: %w", s.dir, err)
	}

	// Logs older than the snapshot are leftovers of a snapshot whose
	// cleanup did not finish. Without a snapshot, every log counts.
	for haveSnapshot && len(gens) > 0 && gens[0] < nextGen {
		if s.opts.ReadOnly {
			gens = gens[1:] // never read: left for the next Open that may write
			continue
		}
		if err := s.fs.remove(s.root, logName(gens[0])); err != nil {
			return fmt.Errorf("filestore: open %s: %w", s.dir, err)
		}
		s.log.Info("filestore: removed a log already in the snapshot", "dir", s.dir, "gen", gens[0])
		gens = gens[1:]
	}
	for i, g := range gens {
		if g != nextGen+uint64(i) {
			return corruptf("%s: log %s is missing (found %s)", s.dir, logName(nextGen+uint64(i)), logName(g))
		}
	}

	// Park segments the snapshot does not name are leftovers of a
	// snapshot that did not finish, or whose cleanup did not. They go
	// only once the snapshot and the logs are found consistent.
	for gen := range segs {
		if !slices.ContainsFunc(s.segs, func(sg *segment) bool { return sg.gen == gen }) && !s.opts.ReadOnly {
			if err := s.fs.remove(s.root, segName(gen)); err != nil {
				return fmt.Errorf("filestore: open %s: %w", s.dir, err)
			}
			s.log.Info("filestore: removed a park segment no snapshot names", "dir", s.dir, "gen", gen)
		}
	}

	w := &s.w
	w.first = nextGen
	if len(gens) == 0 && s.opts.ReadOnly {
		// Read-only, the log stays missing: nothing is written to it.
		s.st = st
		return nil
	}
	if len(gens) == 0 {
		// A fresh directory, or the new log of a snapshot whose directory
		// entry was lost in a crash: nothing was ever written to it. It
		// is created whole, so that a short header in it is damage.
		f, err := s.createLogWhole(nextGen)
		if err != nil {
			return fmt.Errorf("filestore: open %s: %w", s.dir, err)
		}
		s.st, w.f, w.gen, w.off, w.alloc = st, f, nextGen, logHeaderSize, logHeaderSize
		return nil
	}

	for i, g := range gens {
		path := filepath.Join(s.dir, logName(g))
		last := i == len(gens)-1
		flag := os.O_RDONLY
		if last && !s.opts.ReadOnly {
			flag = os.O_RDWR
		}
		f, data, err := openRead(s.root, logName(g), flag)
		if err != nil {
			return fmt.Errorf("filestore: open %s: %w", s.dir, err)
		}
		if !checkLogHeader(data, g) {
			_ = f.Close()
			if haveSnapshot && g == nextGen {
				// Its header was synced before the snapshot that
				// names it was renamed into place: a short or bad
				// header means the log was damaged, not torn.
				return corruptf("%s: bad header (%d bytes) in the log the snapshot continues in", path, len(data))
			}
			if g == nextGen {
				// The first log of a store without a snapshot was
				// created whole (createLogWhole): it was cut or
				// damaged since, and the state it held is lost.
				return corruptf("%s: bad header (%d bytes) in the store's first log, which was created whole", path, len(data))
			}
			if last && len(data) <= logHeaderSize {
				// Created by a snapshot that did not finish, its
				// header never synced: no frame was written to it.
				if s.opts.ReadOnly {
					s.st = st // it holds nothing; left as it is
					return nil
				}
				if err := s.fs.remove(s.root, logName(g)); err != nil {
					return fmt.Errorf("filestore: open %s: %w", s.dir, err)
				}
				s.log.Warn("filestore: recreating a log whose header was torn", "path", path)
				f, err := s.createLog(logName(g), g)
				if err != nil {
					return fmt.Errorf("filestore: open %s: %w", s.dir, err)
				}
				if err := s.syncDir(); err != nil {
					_ = f.Close()
					return fmt.Errorf("filestore: open %s: %w", s.dir, err)
				}
				s.st, w.f, w.gen, w.off, w.alloc = st, f, g, logHeaderSize, logHeaderSize
				return nil
			}
			return corruptf("%s: bad log header", path)
		}
		end, err := replayLog(path, data, g, last, st, f)
		if err != nil {
			_ = f.Close()
			return err
		}
		if !last {
			s.bodyFiles = append(s.bodyFiles, f)
			continue
		}
		if end < len(data) && s.opts.ReadOnly {
			s.log.Info("filestore: read-only: ignoring the log's tail after its last frame", "path", path, "offset", end, "bytes", len(data)-end)
		} else if end < len(data) {
			if allZero(data[end:]) {
				// The zeros the writer writes ahead of its frames: a
				// crash, or a copy of an open store, leaves them.
				s.log.Info("filestore: cutting the zeros written ahead of the log", "path", path, "offset", end, "dropped_bytes", len(data)-end)
			} else {
				s.log.Warn("filestore: truncating a torn log tail", "path", path, "offset", end, "dropped_bytes", len(data)-end)
			}
			err := s.fs.truncate(f, int64(end))
			if err == nil {
				err = s.sync(f)
			}
			if err != nil {
				_ = f.Close()
				return fmt.Errorf("filestore: open %s: truncate torn tail: %w", s.dir, err)
			}
		}
		s.st, w.f, w.gen, w.off, w.alloc = st, f, g, int64(end), int64(end)
		s.stats.logBytes.Store(w.off)
	}
	return nil
}
