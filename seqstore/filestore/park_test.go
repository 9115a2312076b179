package filestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

func parked(st seqstore.Stream, epoch, seq uint64, body string) seqstore.Parked {
	return seqstore.Parked{Stream: st, Epoch: epoch, Seq: seq, Body: []byte(body)}
}

// unparkAll returns every parked entry of st with epoch.
func unparkAll(t testing.TB, s *Store, st seqstore.Stream, epoch uint64) []seqstore.Parked {
	t.Helper()
	got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: epoch, Max: 1 << 20}})
	require.NoError(t, err, "unpark %s epoch %d", st, epoch)
	return got[0]
}

// seqsOf returns the seqs of entries.
func seqsOf(entries []seqstore.Parked) []uint64 {
	var out []uint64
	for _, e := range entries {
		out = append(out, e.Seq)
	}
	return out
}

func TestParkUnparkReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b/%"}
	other := seqstore.Stream{Queue: "r"}
	require.NoError(t, s.Park(ctx, []seqstore.Parked{
		parked(a, 7, 9, "a9"), parked(a, 7, 3, "a3"), parked(a, 8, 1, "a8.1"), parked(b, 7, 2, "b2"), parked(other, 1, 1, ""),
	}))
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(a, 7, 5, "a5"), parked(a, 6, 100, "a6.100")}))
	require.NoError(t, s.Park(ctx, nil), "an empty call")

	check := func(s *Store, what string) {
		t.Helper()
		got, err := s.Unpark(ctx, []seqstore.ParkQuery{
			{Stream: a, Epoch: 7, Max: 10},
			{Stream: a, Epoch: 7, From: 4, Max: 1},
			{Stream: a, Epoch: 8, Max: 10},
			{Stream: b, Epoch: 8, Max: 10},
			{Stream: seqstore.Stream{Queue: "q", Group: "none"}, Epoch: 7, Max: 10},
		})
		require.NoError(t, err, what)
		assert.Equal(t, [][]seqstore.Parked{
			{parked(a, 7, 3, "a3"), parked(a, 7, 5, "a5"), parked(a, 7, 9, "a9")},
			{parked(a, 7, 5, "a5")},
			{parked(a, 8, 1, "a8.1")},
			nil,
			nil,
		}, got, "%s: unpark", what)
		streams, err := s.ParkedStreams(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, []seqstore.Stream{a, b}, streams, "%s: parked streams of q, by key", what)
		assert.Equal(t, 7, s.Stats().Parked, "%s: entries held", what)
	}
	check(s, "open")

	// Re-parking replaces the body; returned bodies are copies.
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(a, 7, 5, "a5 again")}))
	got := unparkAll(t, s, a, 7)
	got[1].Body[0] = 'X'
	assert.Equal(t, "a5 again", string(unparkAll(t, s, a, 7)[1].Body), "re-park replaces; the caller's copy is its own")
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(a, 7, 5, "a5")}))

	require.NoError(t, s.Close())
	s = openT(t, dir, nil)
	check(s, "reopen")
}

func TestParkRefusedBelowCursor(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	to := seqstore.Cursor{Epoch: 5, Next: 10}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, To: to}}))
	for _, tc := range []struct {
		name       string
		epoch, seq uint64
		refused    bool
	}{
		{"older epoch", 4, 100, true},
		{"below next", 5, 9, true},
		{"at next", 5, 10, false},
		{"newer epoch", 6, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Stats().Parked
			err := s.Park(ctx, []seqstore.Parked{parked(b, 1, 1, "b"), parked(a, tc.epoch, tc.seq, "a")})
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			var be *seqstore.BatchError
			require.ErrorAs(t, err, &be)
			require.Len(t, be.Errs, 2)
			assert.ErrorIs(t, be.Errs[0], seqstore.ErrAborted, "the other entry")
			assert.ErrorIs(t, be.Errs[1], seqstore.ErrConflict, "the entry below the cursor")
			assert.Equal(t, before, s.Stats().Parked, "nothing applied")
		})
	}
	assert.Empty(t, unparkAll(t, s, a, 4), "older epoch")
	assert.Equal(t, []uint64{10}, seqsOf(unparkAll(t, s, a, 5)))
}

func TestAdvanceDropsParks(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	var entries []seqstore.Parked
	for seq := uint64(1); seq <= 5; seq++ {
		entries = append(entries, parked(a, 1, seq, fmt.Sprint("a1.", seq)), parked(a, 2, seq, fmt.Sprint("a2.", seq)), parked(b, 1, seq, fmt.Sprint("b1.", seq)))
	}
	require.NoError(t, s.Park(ctx, entries))

	c1 := seqstore.Cursor{Epoch: 1, Next: 3}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, To: c1}}))
	assert.Equal(t, []uint64{3, 4, 5}, seqsOf(unparkAll(t, s, a, 1)), "seqs below Next dropped")
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, seqsOf(unparkAll(t, s, a, 2)), "a newer epoch is kept")
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, seqsOf(unparkAll(t, s, b, 1)), "another stream is kept")

	// A conflicting batch drops nothing, not even for the stream that
	// would have moved.
	err := s.Advance(ctx, []seqstore.Advance{{Stream: a, From: c1, To: seqstore.Cursor{Epoch: 2, Next: 1}}, {Stream: b, From: c1, To: c1}})
	require.ErrorIs(t, err, seqstore.ErrConflict)
	assert.Equal(t, []uint64{3, 4, 5}, seqsOf(unparkAll(t, s, a, 1)), "after a failed advance")

	c2 := seqstore.Cursor{Epoch: 2, Next: 4}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, From: c1, To: c2}}))
	check := func(s *Store, what string) {
		t.Helper()
		assert.Empty(t, unparkAll(t, s, a, 1), "%s: an older epoch is dropped whole", what)
		assert.Equal(t, []uint64{4, 5}, seqsOf(unparkAll(t, s, a, 2)), "%s: epoch 2 below 4 dropped", what)
		assert.Equal(t, []uint64{1, 2, 3, 4, 5}, seqsOf(unparkAll(t, s, b, 1)), "%s: b untouched", what)
		assert.Equal(t, 7, s.Stats().Parked, "%s: entries held", what)
	}
	check(s, "open")
	require.NoError(t, s.Close())
	s = openT(t, dir, nil)
	check(s, "reopen (replayed)")

	// Draining a stream takes it out of ParkedStreams.
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: b, To: seqstore.Cursor{Epoch: 1, Next: 6}}}))
	streams, err := s.ParkedStreams(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, []seqstore.Stream{a}, streams)
}

var tornParkStream = seqstore.Stream{Queue: "q", Group: "tornpark"}

// parkLog writes a store whose log ends with one Park call of three
// entries, after a reservation and an advance, and returns its directory,
// the log's bytes and where the park frame starts.
func parkLog(t *testing.T) (dir string, data []byte, last int) {
	dir = t.TempDir()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	reserveN(t, s, tornStream, 1)
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: tornParkStream, To: seqstore.Cursor{Epoch: 3, Next: 2}}}))
	require.NoError(t, s.Park(ctx, []seqstore.Parked{parked(tornParkStream, 3, 2, "two"), parked(tornParkStream, 3, 7, "seven"), parked(tornParkStream, 4, 1, "four")}))
	require.NoError(t, s.Close())
	data, err = os.ReadFile(logPath(dir, 1))
	require.NoError(t, err)
	offs := frameOffsets(t, data, 1)
	require.Len(t, offs, 3, "one frame per call")
	return dir, data, offs[2]
}

// checkParkTail opens dir and checks that it holds all three entries of
// the last Park call (all true) or none, and the calls before it.
func checkParkTail(t *testing.T, dir string, all bool, what string) {
	t.Helper()
	s, err := Open(dir, nil)
	require.NoError(t, err, "%s: open", what)
	defer s.Close()
	_, next := senderState(s, tornStream)
	require.Equal(t, uint64(2), next, "%s: the reservation before", what)
	c, err := cursor(ctx, s, tornParkStream)
	require.NoError(t, err)
	require.Equal(t, seqstore.Cursor{Epoch: 3, Next: 2}, c, "%s: the advance before", what)
	got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: tornParkStream, Epoch: 3, Max: 10}, {Stream: tornParkStream, Epoch: 4, Max: 10}})
	require.NoError(t, err, "%s: unpark", what)
	if all {
		require.Equal(t, [][]seqstore.Parked{{parked(tornParkStream, 3, 2, "two"), parked(tornParkStream, 3, 7, "seven")}, {parked(tornParkStream, 4, 1, "four")}}, got, "%s: the whole Park call", what)
	} else {
		require.Equal(t, [][]seqstore.Parked{nil, nil}, got, "%s: nothing of the torn Park call", what)
	}
	streams, err := s.ParkedStreams(ctx, tornParkStream.Queue)
	require.NoError(t, err)
	require.Equal(t, all, len(streams) == 1, "%s: parked streams %v", what, streams)
}

func TestParkTornEveryOffset(t *testing.T) {
	dir, data, last := parkLog(t)
	path := logPath(dir, 1)
	for cut := last; cut < len(data); cut++ {
		writeFile(t, path, data[:cut])
		checkParkTail(t, dir, false, "log cut at "+strconv.Itoa(cut))
	}
	for p := last; p < len(data); p++ {
		bad := bytes.Clone(data)
		bad[p] ^= 0x20
		writeFile(t, path, bad)
		checkParkTail(t, dir, false, "byte "+strconv.Itoa(p)+" of the park frame flipped")
	}
	writeFile(t, path, append(bytes.Clone(data), make([]byte, 100)...))
	checkParkTail(t, dir, true, "zeros after the log")
	writeFile(t, path, data)
	checkParkTail(t, dir, true, "whole log")
	// The bodies are read from the log after a reopen, then from a
	// snapshot after one.
	s := openT(t, dir, &Options{SnapshotBytes: 1})
	require.NoError(t, s.Close())
	info, err := os.Stat(filepath.Join(dir, snapName))
	require.NoError(t, err, "snapshot written at open")
	require.Positive(t, info.Size())
	checkParkTail(t, dir, true, "after a snapshot")
}

// TestParkSnapshotRoundTrip parks, re-parks and advances across many
// snapshots, and checks that the bodies, moved to each new snapshot
// while the old files are deleted, read back the same before and after
// a reopen.
func TestParkSnapshotRoundTrip(t *testing.T) {
	dir := t.TempDir()
	opts := &Options{SnapshotBytes: 8 << 10}
	s := openT(t, dir, opts)
	streams := []seqstore.Stream{{Queue: "q", Group: "a"}, {Queue: "q", Group: "b"}, {Queue: "r"}}
	var wg sync.WaitGroup
	for _, st := range streams {
		wg.Go(func() {
			var c seqstore.Cursor
			for i := range 300 {
				body := bytes.Repeat([]byte{byte(i)}, 50+i)
				seq := uint64(i + 10)
				if !assert.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: seq, Body: body}, {Stream: st, Epoch: 2, Seq: seq, Body: body}})) {
					return
				}
				if i%7 == 0 { // re-park an earlier one
					if !assert.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: seq - 3, Body: []byte(fmt.Sprint("again ", seq-3))}})) {
						return
					}
				}
				if i%10 == 9 {
					to := seqstore.Cursor{Epoch: 1, Next: uint64(i)}
					if !assert.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, From: c, To: to}})) {
						return
					}
					c = to
				}
			}
		})
	}
	wg.Wait()
	require.Greater(t, s.Stats().Snapshots, int64(5), "snapshots with an 8 KiB threshold")
	before := map[seqstore.Stream][][]seqstore.Parked{}
	for _, st := range streams {
		got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 1000}, {Stream: st, Epoch: 2, Max: 1000}})
		require.NoError(t, err)
		assert.Equal(t, uint64(299), got[0][0].Seq, "first of epoch 1 in %s", st)
		assert.Len(t, got[0], 11, "entries of epoch 1 in %s", st)
		assert.Len(t, got[1], 300, "entries of epoch 2 in %s", st)
		before[st] = got
	}
	stats := s.Stats()
	require.NoError(t, s.Close())

	for _, o := range []*Options{opts, {SnapshotBytes: 1}, nil} {
		s = openT(t, dir, o)
		for _, st := range streams {
			got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 1000}, {Stream: st, Epoch: 2, Max: 1000}})
			require.NoError(t, err)
			assert.Equal(t, before[st], got, "parks of %s after reopen", st)
		}
		assert.Equal(t, [2]int64{int64(stats.Parked), stats.ParkedBytes}, [2]int64{int64(s.Stats().Parked), s.Stats().ParkedBytes}, "entries and bytes held")
		require.NoError(t, s.Close())
	}
}

// flipOnDisk flips one byte of body, found in the store's files, on disk.
func flipOnDisk(t *testing.T, dir string, body []byte) {
	t.Helper()
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range names {
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		if i := bytes.Index(data, body); i >= 0 {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte{data[i+len(body)/2] ^ 0x01}, int64(i+len(body)/2))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			return
		}
	}
	t.Fatalf("body %q not found in %s", body, dir)
}

func TestParkCorruptBody(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snapshot), func(t *testing.T) {
			dir := t.TempDir()
			s := openT(t, dir, &Options{SnapshotBytes: 4 << 10})
			st := seqstore.Stream{Queue: "q", Group: "c"}
			good := []byte("a good body that stays")
			bad := []byte("a body damaged on disk after it was parked")
			require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: 1, Body: good}, {Stream: st, Epoch: 1, Seq: 2, Body: bad}}))
			if snapshot {
				for s.Stats().Snapshots == 0 {
					reserveN(t, s, tornStream, 10)
				}
			}
			flipOnDisk(t, dir, bad)
			_, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 10}})
			require.ErrorIs(t, err, seqstore.ErrCorrupt, "a parked body that fails its checksum")
			got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 1}})
			require.NoError(t, err, "the good one alone")
			assert.Equal(t, good, got[0][0].Body)
			// Handing the bad one out drops it, and the store is fine.
			require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 3}}}))
			assert.Empty(t, unparkAll(t, s, st, 1))
		})
	}
}

// TestParkTruncatedFile reads a body past the end of its file (a log cut
// while the store is open): ErrCorrupt, not a short body.
func TestParkTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	st := seqstore.Stream{Queue: "q", Group: "c"}
	require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: 1, Body: []byte("some body")}}))
	require.NoError(t, os.Truncate(logPath(dir, 1), logHeaderSize+frameHeaderSize+20))
	_, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 10}})
	require.ErrorIs(t, err, seqstore.ErrCorrupt)
}

// TestParkGroupCommit holds the first fsync until Park and Advance callers
// are queued behind it, then checks that they all shared one more commit:
// one fsync per batch of Park calls, shared with Advance.
func TestParkGroupCommit(t *testing.T) {
	const n = 32
	first := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hooks := &testHooks{beforeSync: func(int64) {
		once.Do(func() {
			close(first)
			<-release
		})
	}}
	s := openT(t, t.TempDir(), &Options{hooks: hooks})
	blocker := seqstore.Stream{Queue: "q", Group: "blocker"}
	before := s.Stats()
	var wg sync.WaitGroup
	wg.Go(func() {
		assert.NoError(t, s.Park(ctx, []seqstore.Parked{parked(blocker, 1, 1, "x")}))
	})
	<-first
	for i := range n {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(i)}
			if i%2 == 0 {
				assert.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 1}}}))
				return
			}
			var batch []seqstore.Parked
			for seq := range uint64(10) {
				batch = append(batch, parked(st, 1, seq+1, "body"))
			}
			assert.NoError(t, s.Park(ctx, batch))
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.queued() < n {
		require.True(t, time.Now().Before(deadline), "only %d of %d callers queued after 10s", s.queued(), n)
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	after := s.Stats()
	assert.Equal(t, int64(n/2+1), after.Parks-before.Parks, "park calls (with the first)")
	assert.Equal(t, int64(2), after.Commits-before.Commits, "commits: the blocked one, then one for the %d Park and Advance calls queued behind it", n)
	assert.Equal(t, int64(2), after.Fsyncs-before.Fsyncs, "fsyncs: the blocked commit's, then one for the %d Park and Advance calls queued behind it", n)
	assert.Equal(t, 1+n/2*10, after.Parked)
}

// TestParkCancelledAndClosed: a ctx that ended applies nothing; a closed
// store refuses every Parker call.
func TestParkCancelledAndClosed(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	st := seqstore.Stream{Queue: "q", Group: "g"}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s.Park(cctx, []seqstore.Parked{parked(st, 1, 1, "x")}), context.Canceled)
	_, err = s.Unpark(cctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 1}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, unparkAll(t, s, st, 1), "nothing applied")
	require.ErrorIs(t, s.Park(ctx, []seqstore.Parked{{Stream: seqstore.Stream{}, Epoch: 1, Seq: 1}}), seqstore.ErrInvalidStream)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Park(ctx, []seqstore.Parked{parked(st, 1, 1, "x")}), seqstore.ErrClosed)
	_, err = s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 1}})
	require.ErrorIs(t, err, seqstore.ErrClosed)
	_, err = s.ParkedStreams(ctx, "q")
	require.ErrorIs(t, err, seqstore.ErrClosed)
	assert.False(t, errors.Is(err, seqstore.ErrCorrupt))
}
