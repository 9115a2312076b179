package filestore_test

// Ported from shared/regressions/review2/seqstore/filestore/sec3_test.go:
// its reproducers, each turned from "log what we saw" into an assertion of
// the fixed behaviour (issue 21: a directory swapped after Open, a short
// last log, per-stream memory).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/storetest"
)

var sec3Stream = seqstore.Stream{Queue: "q", Group: "g"}

// Turn-2 finding 3: a directory another user can write or owns; links.
func TestSec3UnsafeDirAndLinks(t *testing.T) {
	base := t.TempDir()

	d777 := filepath.Join(base, "d777")
	require.NoError(t, os.Mkdir(d777, 0o700))
	require.NoError(t, os.Chmod(d777, 0o777))
	_, err := filestore.Open(d777, nil)
	t.Logf("0777 dir: %v", err)
	require.ErrorIs(t, err, filestore.ErrUnsafeDir)

	d1777 := filepath.Join(base, "d1777")
	require.NoError(t, os.Mkdir(d1777, 0o700))
	require.NoError(t, os.Chmod(d1777, 0o1777|os.ModeSticky))
	_, err = filestore.Open(d1777, nil)
	t.Logf("sticky 1777 dir: %v", err)
	require.ErrorIs(t, err, filestore.ErrUnsafeDir)

	if os.Geteuid() == 0 {
		dOther := filepath.Join(base, "other")
		require.NoError(t, os.Mkdir(dOther, 0o700))
		require.NoError(t, os.Chown(dOther, 65534, 65534))
		_, err = filestore.Open(dOther, nil)
		t.Logf("dir owned by uid 65534: %v", err)
		require.ErrorIs(t, err, filestore.ErrUnsafeDir)
	}

	// LOCK planted as a link to a file of the victim's.
	dl := filepath.Join(base, "lock")
	require.NoError(t, os.Mkdir(dl, 0o700))
	victim := filepath.Join(base, "victim-file")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600))
	require.NoError(t, os.Symlink(victim, filepath.Join(dl, "LOCK")))
	_, err = filestore.Open(dl, nil)
	t.Logf("LOCK symlink: %v", err)
	require.Error(t, err)

	// A log name planted as a link: recovery opens logs O_NOFOLLOW.
	dlog := filepath.Join(base, "loglink")
	require.NoError(t, os.Mkdir(dlog, 0o700))
	require.NoError(t, os.Symlink(victim, filepath.Join(dlog, "log-0000000000000001")))
	_, err = filestore.Open(dlog, nil)
	t.Logf("log symlink: %v", err)
	require.Error(t, err)
	b, _ := os.ReadFile(victim)
	require.Equal(t, "precious", string(b), "victim file changed")

	// The store path itself a link to a private dir: accepted (os.Stat
	// follows). Only the final directory is checked, not its parents.
	real := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(real, 0o700))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(real, link))
	s, err := filestore.Open(link, nil)
	t.Logf("store path is a symlink to a private dir: err=%v", err)
	if err == nil {
		_ = s.Close()
	}
}

// Parked bodies at rest: the log and snapshot files are 0600 and the
// directory 0700 when created by Open.
func TestSec3ParkedFileModes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a", "b")
	s, err := filestore.Open(dir, &filestore.Options{SnapshotBytes: 4096})
	require.NoError(t, err)
	_, err = storetest.ReserveOne(ctx, s, sec3Stream, 1, nil)
	require.NoError(t, err)
	for i := 2; i < 60; i++ {
		require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: sec3Stream, Epoch: 99, Seq: uint64(i), Body: []byte(strings.Repeat("parked-secret ", 20))}}))
	}
	require.NoError(t, s.Close())
	for _, p := range []string{filepath.Dir(dir), dir} {
		info, _ := os.Stat(p)
		t.Logf("%s %v", filepath.Base(p), info.Mode())
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		info, _ := e.Info()
		t.Logf("%s %v %d", e.Name(), info.Mode(), info.Size())
		if info.Mode().IsRegular() {
			require.Zero(t, info.Mode().Perm()&0o077, "%s readable by others", e.Name())
		}
	}
}

// Turn-2 finding 4: a short last log. After a snapshot it is ErrCorrupt; so
// it is in a store that has not snapshotted yet (its only log), whose first
// log is created whole (header synced under a temporary name, then
// renamed): a cut header there is damage, never a crash, and Open must not
// silently start again from nothing.
func TestSec3ShortLastLog(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		snap int64
	}{{"after-snapshot", 4096}, {"no-snapshot-yet", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			var opts *filestore.Options
			if tc.snap > 0 {
				opts = &filestore.Options{SnapshotBytes: tc.snap}
			}
			s, err := filestore.Open(dir, opts)
			require.NoError(t, err)
			var last seqstore.Reservation
			for i := 0; i < 100 || tc.snap > 0 && s.Stats().Snapshots == 0 || i < 400; i++ {
				last, err = storetest.ReserveOne(ctx, s, sec3Stream, 1, nil)
				require.NoError(t, err)
			}
			if tc.snap > 0 {
				require.Positive(t, s.Stats().Snapshots, "a snapshot before close")
			} else {
				require.Zero(t, s.Stats().Snapshots, "no snapshot before close")
			}
			require.NoError(t, s.Close())
			logs := sec3Logs(t, dir)
			require.NotEmpty(t, logs)
			lastLog := filepath.Join(dir, logs[len(logs)-1])
			data, err := os.ReadFile(lastLog)
			require.NoError(t, err)
			for _, cut := range []int64{0, 1, 10, 23} {
				require.NoError(t, os.Truncate(lastLog, cut))
				s, err = filestore.Open(dir, opts)
				if err == nil {
					r, rerr := storetest.ReserveOne(ctx, s, sec3Stream, 1, nil)
					_ = s.Close()
					t.Fatalf("reopen after cutting the last log to %d bytes succeeded (next reservation %d/%d, err %v; was %d/%d): state silently reset",
						cut, r.Epoch, r.First, rerr, last.Epoch, last.First)
				}
				require.ErrorIs(t, err, seqstore.ErrCorrupt, "last log cut to %d bytes", cut)
				require.Contains(t, err.Error(), logs[len(logs)-1], "the error names the damaged log")
			}
			// A torn record at the end (a crash mid-append) is still
			// cut and the store opens with everything before it.
			require.NoError(t, os.WriteFile(lastLog, append(data, 9, 9, 9), 0o600))
			s, err = filestore.Open(dir, opts)
			require.NoError(t, err, "a torn tail after the last frame opens")
			defer s.Close()
			r, err := storetest.ReserveOne(ctx, s, sec3Stream, 1, nil)
			require.NoError(t, err)
			require.Equal(t, seqstore.Reservation{Epoch: last.Epoch, First: last.First + 1}, r, "the counter survives a torn tail")
		})
	}
}

func sec3Logs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var logs []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "log-") {
			logs = append(logs, e.Name())
		}
	}
	return logs
}

// After Open, the directory was used by name: whoever controls its parent
// could swap it, and the next log and snapshot (with every parked body)
// were created in the swapped-in directory. The store now keeps the
// directory it opened (os.Root): nothing is ever written into the
// swapped-in directory, and the store goes on in the original one, moved.
// (Needs a parent writable by the attacker, e.g. a non-sticky shared dir.)
func TestSec3DirSwappedAfterOpen(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	s, err := filestore.Open(dir, &filestore.Options{SnapshotBytes: 4096})
	require.NoError(t, err)
	defer s.Close()
	_, err = storetest.ReserveOne(ctx, s, sec3Stream, 1, [][]byte{[]byte("body-1")})
	require.NoError(t, err)
	parked := []byte(strings.Repeat("parked secret ", 10))
	require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: sec3Stream, Epoch: 7, Seq: 9, Body: parked}}))
	// The attacker renames the store away and puts an open directory there.
	require.NoError(t, os.Rename(dir, dir+".moved"))
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o777))
	before := s.Stats().Snapshots
	for range 200 {
		_, err = storetest.ReserveOne(ctx, s, sec3Stream, 1, [][]byte{[]byte(strings.Repeat("secret body ", 10))})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return s.Stats().Snapshots > before }, 5*time.Second, time.Millisecond,
		"snapshots written (new logs, a new snapshot with the parked body) after the swap")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, names(ents), "files written into the swapped-in 0777 directory")
	require.NoError(t, s.Close())

	// Everything went to the directory the store opened, now moved.
	s, err = filestore.Open(dir+".moved", nil)
	require.NoError(t, err)
	defer s.Close()
	r, err := storetest.ReserveOne(ctx, s, sec3Stream, 1, nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(202), r.First, "the counter, kept in the moved directory")
	got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: sec3Stream, Epoch: 7, From: 1, Max: 10}})
	require.NoError(t, err)
	require.Len(t, got[0], 1, "the parked entry, kept in the moved directory")
	assert.Equal(t, parked, got[0][0].Body)
	ents, err = os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, names(ents), "the swapped-in directory is still empty")
}

func names(es []os.DirEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// Turn-2 finding 8: per-stream memory is never freed. A hostile sender
// without Key makes one stream per group name it invents (each seq 1 is
// delivered and its cursor stored). A stream's cursor must be kept, but a
// stream whose only state is a plain cursor is now kept as 16 bytes beside
// its name in the map, not as a whole stream state: measured with these
// 128-byte names, 260 B a stream before, 181 after (with 14-byte names,
// 147 before, 68 after). The bound below is the name plus 80 bytes.
func TestSec3StreamsNeverFreed(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	s, err := filestore.Open(dir, nil)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	stream := func(j int) seqstore.Stream {
		return seqstore.Stream{Queue: "q", Group: fmt.Sprintf("hostile-%0120d", j)}
	}
	h0 := sec3Heap()
	const n = 200_000
	for i := 0; i < n; i += 1000 {
		var batch []seqstore.Advance
		for j := i; j < i+1000; j++ {
			batch = append(batch, seqstore.Advance{Stream: stream(j), From: seqstore.Cursor{}, To: seqstore.Cursor{Epoch: 1, Next: 2}})
		}
		require.NoError(t, s.Advance(ctx, batch))
	}
	h1 := sec3Heap()
	perStream := float64(h1-h0) / n
	t.Logf("%d streams with a cursor: heap +%.1f MiB (%.0f B/stream), Streams=%d", n, float64(h1-h0)/(1<<20), perStream, s.Stats().Streams)
	nameLen := len(stream(0).Group)
	assert.LessOrEqual(t, perStream, float64(nameLen+80), "bytes of heap per stream holding only a cursor (its name is %d bytes)", nameLen)
	assert.Equal(t, n, s.Stats().Streams)

	// The cursors are all kept, in memory and on disk.
	check := func(what string) {
		t.Helper()
		streams := []seqstore.Stream{stream(0), stream(n / 2), stream(n - 1), stream(n)}
		got, err := s.Cursors(ctx, streams)
		require.NoError(t, err)
		want := seqstore.Cursor{Epoch: 1, Next: 2}
		assert.Equal(t, []seqstore.Cursor{want, want, want, {}}, got, "%s: the cursors stored, and none for a stream never advanced", what)
	}
	check("open")
	require.NoError(t, s.Close())
	s, err = filestore.Open(dir, nil)
	require.NoError(t, err)
	check("reopened")
	assert.Equal(t, n, s.Stats().Streams, "reopened")
}

func sec3Heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
