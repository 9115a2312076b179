package filestore

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

var tornStream = seqstore.Stream{Queue: "q", Group: "torn"}

// cleanLog writes k serial reservations (one frame each) to a new store and
// returns its directory and the log's bytes.
func cleanLog(t *testing.T, k int) (dir string, data []byte) {
	t.Helper()
	dir = t.TempDir()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	reserveN(t, s, tornStream, k)
	require.NoError(t, s.Close())
	data, err = os.ReadFile(logPath(dir, 1))
	require.NoError(t, err)
	require.Len(t, frameOffsets(t, data, 1), k, "one frame per serial reservation")
	return dir, data
}

// checkPrefix opens dir and checks it holds exactly the first k reservations
// and that the log was cut to wantSize.
func checkPrefix(t *testing.T, dir string, k int, wantSize int, what string) {
	t.Helper()
	s, err := Open(dir, nil)
	require.NoError(t, err, "%s: open", what)
	_, next := senderState(s, tornStream)
	pending, err := s.Pending(ctx, tornStream.Queue)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Equal(t, uint64(k+1), next, "%s: counter must keep every good frame", what)
	require.Len(t, pending, k, "%s: journal entries", what)
	for i, e := range pending {
		require.Equal(t, body(tornStream, uint64(i+1)), e.Body, "%s: body of #%d", what, i+1)
	}
	info, err := os.Stat(logPath(dir, 1))
	require.NoError(t, err)
	require.Equal(t, int64(wantSize), info.Size(), "%s: log must be truncated to the good prefix", what)
}

func TestTornTailEveryOffset(t *testing.T) {
	const k = 5
	dir, data := cleanLog(t, k)
	offs := frameOffsets(t, data, 1)
	last := offs[k-1]
	path := logPath(dir, 1)
	for cut := last; cut < len(data); cut++ {
		writeFile(t, path, data[:cut])
		checkPrefix(t, dir, k-1, last, "log cut at "+strconv.Itoa(cut))
	}
	// The truncation is logged.
	var logBuf bytes.Buffer
	writeFile(t, path, data[:len(data)-1])
	s, err := Open(dir, &Options{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.Contains(t, logBuf.String(), "level=WARN msg=\"filestore: truncating a torn log tail\"", "log of the truncation")
	assert.Contains(t, logBuf.String(), "dropped_bytes="+strconv.Itoa(len(data)-1-last), "log of the truncation")
	// A whole last frame with a bad checksum, anywhere in it, is torn too.
	for p := last; p < len(data); p++ {
		bad := bytes.Clone(data)
		bad[p] ^= 0x5a
		writeFile(t, path, bad)
		checkPrefix(t, dir, k-1, last, "byte "+strconv.Itoa(p)+" of the last frame flipped")
	}
	// Zeros after the last good frame, as a file system may leave after a
	// crash that extended the file, are a torn tail as well.
	writeFile(t, path, append(bytes.Clone(data), make([]byte, 4096)...))
	checkPrefix(t, dir, k, len(data), "zeros after the log")
	// Megabytes of random bytes after a torn frame: still a torn tail,
	// and the scan for valid frames in them stays fast.
	garbage := make([]byte, 8<<20)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(garbage)
	writeFile(t, path, append(bytes.Clone(data[:last+5]), garbage...))
	start := time.Now()
	checkPrefix(t, dir, k-1, last, "8 MiB of random bytes after a torn frame")
	assert.Less(t, time.Since(start), 10*time.Second, "open with an 8 MiB garbage tail")
	// The untouched log keeps everything.
	writeFile(t, path, data)
	checkPrefix(t, dir, k, len(data), "clean log")
}

func TestCorruptMiddleFrame(t *testing.T) {
	const k = 5
	dir, data := cleanLog(t, k)
	offs := frameOffsets(t, data, 1)
	path := logPath(dir, 1)
	for f := 0; f < k-1; f++ {
		end := offs[f+1]
		for p := offs[f]; p < end; p++ {
			bad := bytes.Clone(data)
			bad[p] ^= 0x01
			writeFile(t, path, bad)
			_, err := Open(dir, nil)
			require.ErrorIs(t, err, seqstore.ErrCorrupt, "byte %d of frame %d of %d flipped", p, f, k)
		}
	}
	// A cut inside a middle frame, with later frames moved up: corrupt.
	writeFile(t, path, append(bytes.Clone(data[:offs[1]+3]), data[offs[2]:]...))
	_, err := Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "bytes missing in the middle")
	// Two frames swapped: each verifies only at its own offset.
	swapped := append(bytes.Clone(data[:offs[1]]), data[offs[2]:offs[3]]...)
	swapped = append(swapped, data[offs[1]:offs[2]]...)
	swapped = append(swapped, data[offs[3]:]...)
	writeFile(t, path, swapped)
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "frames swapped")
	// A damaged header.
	bad := bytes.Clone(data)
	bad[3] ^= 0xff
	writeFile(t, path, bad)
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "bad log header")
}

// snapshotDir makes a store with a snapshot and a log after it.
func snapshotDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, &Options{SnapshotBytes: 512})
	require.NoError(t, err)
	reserveN(t, s, tornStream, 12)
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: tornStream, To: seqstore.Cursor{Epoch: 1, Next: 5}}}))
	require.Positive(t, s.Stats().Snapshots, "a snapshot was written")
	require.NoError(t, s.Close())
	return dir
}

func TestCorruptSnapshot(t *testing.T) {
	dir := snapshotDir(t)
	path := filepath.Join(dir, snapName)
	data, err := os.ReadFile(path)
	require.NoError(t, err)

	s, err := Open(dir, nil)
	require.NoError(t, err, "intact snapshot")
	_, next := senderState(s, tornStream)
	assert.Equal(t, uint64(13), next, "counter from snapshot and log")
	require.NoError(t, s.Close())

	for p := 0; p < len(data); p++ {
		bad := bytes.Clone(data)
		bad[p] ^= 0x10
		writeFile(t, path, bad)
		_, err := Open(dir, nil)
		require.ErrorIs(t, err, seqstore.ErrCorrupt, "byte %d of the snapshot flipped", p)
	}
	for _, n := range []int{0, 10, len(data) - 1} {
		writeFile(t, path, data[:n])
		_, err := Open(dir, nil)
		require.ErrorIs(t, err, seqstore.ErrCorrupt, "snapshot cut to %d bytes", n)
	}
	require.NoError(t, os.Remove(path))
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "snapshot missing while logs start after generation 1")
}

func TestMissingLog(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	reserveN(t, s, tornStream, 2)
	require.NoError(t, s.Close())
	// A later log without the one before it.
	require.NoError(t, os.WriteFile(logPath(dir, 3), logHeader(3), 0o600))
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "log 2 missing")
	// A completed log with a torn tail followed by another log.
	require.NoError(t, os.Rename(logPath(dir, 3), logPath(dir, 2)))
	require.NoError(t, os.WriteFile(logPath(dir, 2), logHeader(2), 0o600))
	data, err := os.ReadFile(logPath(dir, 1))
	require.NoError(t, err)
	writeFile(t, logPath(dir, 1), data[:len(data)-1])
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "torn frame in a log that is not the last")
}

func TestRecoverInterruptedSnapshot(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{SnapshotBytes: 1}) // a snapshot after every commit
	require.NoError(t, err)
	reserveN(t, s, tornStream, 3)
	require.NoError(t, s.Close())
	gen := s.w.gen // the writer has stopped
	require.Equal(t, uint64(4), gen, "three snapshots after log 1")

	check := func(what string) {
		t.Helper()
		s, err := Open(dir, nil)
		require.NoError(t, err, "%s: open", what)
		_, next := senderState(s, tornStream)
		require.NoError(t, s.Close())
		assert.Equal(t, uint64(4), next, "%s: counter from the snapshot", what)
		data, err := os.ReadFile(logPath(dir, gen))
		require.NoError(t, err, "%s: the snapshot's log exists again", what)
		assert.Equal(t, logHeader(gen), data, "%s: an empty log", what)
	}

	// A crash after the rename, before the new log's directory entry was
	// durable: the snapshot names a log that does not exist.
	require.NoError(t, os.Remove(logPath(dir, gen)))
	check("log of the snapshot missing")

	// A crash while the next snapshot's log header was being written,
	// before that snapshot was renamed into place, with a temporary
	// snapshot and an older log left behind.
	writeFile(t, logPath(dir, gen+1), logHeader(gen + 1)[:7])
	writeFile(t, filepath.Join(dir, snapTmpName), []byte("half a snapshot"))
	writeFile(t, logPath(dir, gen-1), []byte("stale"))
	check("torn header of the next log and leftovers")
	_, err = os.Stat(filepath.Join(dir, snapTmpName))
	assert.ErrorIs(t, err, os.ErrNotExist, "temporary snapshot removed")
	_, err = os.Stat(logPath(dir, gen-1))
	assert.ErrorIs(t, err, os.ErrNotExist, "log older than the snapshot removed")
	data, err := os.ReadFile(logPath(dir, gen+1))
	require.NoError(t, err, "the next log, recreated")
	assert.Equal(t, logHeader(gen+1), data, "the next log holds a whole header and nothing else")
}

// TestTornHeaderAfterSnapshot cuts the log a snapshot continues in to every
// length short of its header, and damages the header. That header was
// synced before the snapshot was renamed into place, so none of these is a
// torn tail: each is ErrCorrupt, never a fresh log that would forget the
// records written since the snapshot. (A cut to exactly the header leaves
// a valid empty log, which, like a cut at any frame boundary, no log can
// tell from one that was never longer.)
func TestTornHeaderAfterSnapshot(t *testing.T) {
	dir := snapshotDir(t)
	s, err := Open(dir, nil)
	require.NoError(t, err)
	gen := s.w.gen
	require.NoError(t, s.Close())
	require.Greater(t, gen, uint64(1), "the log after a snapshot")
	path := logPath(dir, gen)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(data), logHeaderSize, "records written since the snapshot")
	for cut := 0; cut < logHeaderSize; cut++ {
		writeFile(t, path, data[:cut])
		_, err := Open(dir, nil)
		require.ErrorIs(t, err, seqstore.ErrCorrupt, "log after the snapshot cut to %d bytes", cut)
		assert.Contains(t, err.Error(), "the snapshot continues in", "the error says why a short header is not torn")
	}
	bad := bytes.Clone(data)
	bad[logHeaderSize-1] ^= 1
	writeFile(t, path, bad)
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "bad header checksum in the log after the snapshot")
	writeFile(t, path, data)
	s = openT(t, dir, nil)
	_, next := senderState(s, tornStream)
	assert.Equal(t, uint64(13), next, "the intact log still opens")
}
