package filestore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestSnapshotsCopyParksOnce parks 200 bodies of 16 KiB with a snapshot
// every 256 KiB of log, then writes 20 more snapshots, and counts the bytes
// written to anything but the logs (snapshot files and park segments).
// A snapshot used to copy every body still parked into the new snapshot
// file: about 25 times the bytes parked here (and 739 MiB for 16,000
// bodies of 16 KiB). A body is now copied once, out of the log into a park
// segment, and later snapshots refer to it there. Then it advances past
// 90% of the entries: the segments, each mostly garbage, are compacted and
// removed, and what is left reads back after a reopen.
func TestSnapshotsCopyParksOnce(t *testing.T) {
	dir := t.TempDir()
	rec := newRecFS(dir)
	opts := &Options{SnapshotBytes: 256 << 10, hooks: &testHooks{fs: rec}}
	s := openT(t, dir, opts)
	st := seqstore.Stream{Queue: "q", Group: "parked"}
	const n, size = 200, 16 << 10
	body := func(seq uint64) []byte {
		return bytes.Repeat([]byte{byte(seq)}, size)
	}
	// In shuffled order, so that every segment holds some of the first
	// seqs, handed out below, and some of the last.
	for i := range uint64(n) {
		seq := i*79%n + 2
		require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: seq, Body: body(seq)}}))
	}
	// More snapshots, from a sender's log traffic.
	sender := seqstore.Stream{Queue: "q", Group: "sender"}
	for target := s.Stats().Snapshots + 20; s.Stats().Snapshots < target; {
		res, err := reserve(ctx, s, sender, 1, [][]byte{make([]byte, size)})
		require.NoError(t, err)
		require.NoError(t, s.Sent(ctx, []seqstore.SentMark{{Stream: sender, Seqs: []uint64{res.First}}}))
	}
	notLog := func(name string) bool { return !strings.HasPrefix(name, logPrefix) }
	written := rec.writtenTo(notLog)
	parkedBytes := int64(n * size)
	t.Logf("%d snapshots; %d bodies of %d bytes parked (%.1f MiB): snapshots wrote %.1f MiB (%.2f x the bytes parked)",
		s.Stats().Snapshots, n, size, float64(parkedBytes)/(1<<20), float64(written)/(1<<20), float64(written)/float64(parkedBytes))
	assert.LessOrEqual(t, written, parkedBytes*3/2, "bytes written by snapshots: each parked body copied once, not once per snapshot")

	// Hand out 90% of them: the segments are compacted by the next
	// snapshots and the space comes back.
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: n*9/10 + 2}}}))
	for target := s.Stats().Snapshots + 2; s.Stats().Snapshots < target; {
		res, err := reserve(ctx, s, sender, 1, [][]byte{make([]byte, size)})
		require.NoError(t, err)
		require.NoError(t, s.Sent(ctx, []seqstore.SentMark{{Stream: sender, Seqs: []uint64{res.First}}}))
	}
	left := s.Stats()
	require.Equal(t, n/10, left.Parked)
	segBytes := func() (total int64, files int) {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), segPrefix) {
				info, err := e.Info()
				require.NoError(t, err)
				total += info.Size()
				files++
			}
		}
		return total, files
	}
	total, files := segBytes()
	t.Logf("after handing out 90%%: %d park segments of %d bytes for %d bytes parked", files, total, left.ParkedBytes)
	assert.LessOrEqual(t, total, 2*left.ParkedBytes+int64(files*segHeaderSize), "park segments hold at most twice the bytes parked")
	require.NoError(t, s.Close())

	s = openT(t, dir, nil)
	got := unparkAll(t, s, st, 1)
	require.Len(t, got, n/10)
	for _, p := range got {
		require.Equal(t, body(p.Seq), p.Body, "body of seq %d", p.Seq)
	}
	// Everything handed out: the next snapshot removes the segments.
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, From: seqstore.Cursor{Epoch: 1, Next: n*9/10 + 2}, To: seqstore.Cursor{Epoch: 1, Next: n + 2}}}))
	require.NoError(t, s.Close())
	s = openT(t, dir, &Options{SnapshotBytes: 1})
	require.NoError(t, s.Close())
	total, files = segBytes()
	assert.Zero(t, files, "no park segment left once nothing is parked (%d bytes)", total)
}

// TestSegmentRecovery damages the park segments a snapshot names: a
// missing one, a bad header and a body cut off are errors wrapping
// seqstore.ErrCorrupt; a segment no snapshot names (left by a snapshot that
// did not finish) is removed.
func TestSegmentRecovery(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, &Options{SnapshotBytes: 1})
	st := seqstore.Stream{Queue: "q", Group: "g"}
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(st, 1, 5, "five"), parked(st, 1, 6, "six")}))
	require.NoError(t, s.Close())
	require.Len(t, s.segs, 1, "one park segment")
	name := segName(s.segs[0].gen)
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	require.NoError(t, err)

	leftover := filepath.Join(dir, segName(99))
	writeFile(t, leftover, []byte("a segment no snapshot names"))
	s = openT(t, dir, nil)
	assert.Len(t, unparkAll(t, s, st, 1), 2)
	require.NoError(t, s.Close())
	_, err = os.Stat(leftover)
	assert.ErrorIs(t, err, os.ErrNotExist, "a segment no snapshot names is removed")

	// A store that fails to open keeps its segments for whoever
	// repairs it: with its snapshot gone, the logs do not start at 1.
	snap, err := os.ReadFile(filepath.Join(dir, snapName))
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, snapName)))
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "snapshot missing")
	_, err = os.Stat(path)
	require.NoError(t, err, "the segment is kept when Open fails")
	writeFile(t, filepath.Join(dir, snapName), snap)

	for what, bad := range map[string][]byte{
		"bad header": append([]byte("INORDXXX"), data[8:]...),
		"cut body":   data[:len(data)-1],
	} {
		writeFile(t, path, bad)
		_, err := Open(dir, nil)
		require.ErrorIs(t, err, seqstore.ErrCorrupt, what)
		assert.Contains(t, err.Error(), name, "%s: the error names the segment", what)
	}
	require.NoError(t, os.Remove(path))
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrCorrupt, "missing segment")
	assert.Contains(t, err.Error(), fmt.Sprintf("%s is missing", name))
}

// TestSmallSegmentsMerged keeps one small body parked per snapshot for 40
// snapshots: without merging, each would stay alone in a segment of its
// own (a file and an open descriptor each, for ever); merged into the next
// segment written, at most a few are left, and every body reads back.
func TestSmallSegmentsMerged(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, &Options{SnapshotBytes: 1})
	st := seqstore.Stream{Queue: "q", Group: "g"}
	const n = 40
	for seq := uint64(1); seq <= n; seq++ {
		require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(st, 1, seq, fmt.Sprint("body ", seq))}))
	}
	require.GreaterOrEqual(t, s.Stats().Snapshots, int64(n-1), "a snapshot per park")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	segs := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), segPrefix) {
			segs++
		}
	}
	assert.LessOrEqual(t, segs, 2, "park segments left after %d snapshots, each with a small body still parked", n)
	require.NoError(t, s.Close())
	assert.LessOrEqual(t, len(s.segs), 2, "park segments open") // the writer has stopped
	s = openT(t, dir, nil)
	got := unparkAll(t, s, st, 1)
	require.Len(t, got, n)
	for i, p := range got {
		assert.Equal(t, fmt.Sprint("body ", i+1), string(p.Body))
	}
}
