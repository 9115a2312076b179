package filestore

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

var ctx = context.Background()

func TestReserveSequenceAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	a := seqstore.Stream{Queue: "orders", Group: "a"}
	b := seqstore.Stream{Queue: "orders", Group: "b/#;%"}

	r1, err := reserve(ctx, s, a, 3, [][]byte{[]byte("1"), []byte("2"), []byte("3")})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), r1.First, "first reservation of a new stream")
	assert.NotZero(t, r1.Epoch, "epoch of a new stream")
	r2, err := reserve(ctx, s, a, 2, nil)
	require.NoError(t, err)
	assert.Equal(t, seqstore.Reservation{Epoch: r1.Epoch, First: 4}, r2, "second reservation continues the first")
	rb, err := reserve(ctx, s, b, 1, [][]byte{{}})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), rb.First, "other stream starts at 1")

	require.NoError(t, sent(ctx, s, a, []uint64{2, 99}))
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{
		Stream: a,
		To:     seqstore.Cursor{Epoch: r1.Epoch, Next: 3, Skipped: []seqstore.Range{{Epoch: r1.Epoch, First: 1, Last: 1}}},
	}}))
	wantPending := []seqstore.Entry{
		{Stream: a, Epoch: r1.Epoch, Seq: 1, Body: []byte("1")},
		{Stream: a, Epoch: r1.Epoch, Seq: 3, Body: []byte("3")},
		{Stream: b, Epoch: rb.Epoch, Seq: 1, Body: []byte{}},
	}
	got, err := s.Pending(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, wantPending, got, "pending before reopen")
	require.NoError(t, s.Close())

	s2 := openT(t, dir, nil)
	got, err = s2.Pending(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, wantPending, got, "pending after reopen: the lazy Sent mark was flushed by Close")
	c, err := cursor(ctx, s2, a)
	require.NoError(t, err)
	assert.Equal(t, seqstore.Cursor{Epoch: r1.Epoch, Next: 3, Skipped: []seqstore.Range{{Epoch: r1.Epoch, First: 1, Last: 1}}}, c, "cursor after reopen")
	r3, err := reserve(ctx, s2, a, 1, nil)
	require.NoError(t, err)
	assert.Equal(t, seqstore.Reservation{Epoch: r1.Epoch, First: 6}, r3, "counter after reopen")
	none, err := s2.Pending(ctx, "other")
	require.NoError(t, err)
	assert.Empty(t, none, "pending of a queue without streams")
}

func TestAdvanceCompareAndSet(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	c1 := seqstore.Cursor{Epoch: 7, Next: 5}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, To: c1}}))

	// b's From is wrong: nothing of the batch applies.
	err := s.Advance(ctx, []seqstore.Advance{
		{Stream: a, From: c1, To: seqstore.Cursor{Epoch: 7, Next: 9}},
		{Stream: b, From: seqstore.Cursor{Epoch: 7, Next: 1}, To: seqstore.Cursor{Epoch: 7, Next: 2}},
	})
	require.ErrorIs(t, err, seqstore.ErrConflict)
	var be *seqstore.BatchError
	require.ErrorAs(t, err, &be)
	require.Len(t, be.Errs, 2, "one error per request")
	assert.ErrorIs(t, be.Errs[0], seqstore.ErrAborted, "a, whose From matched, is aborted")
	assert.ErrorIs(t, be.Errs[1], seqstore.ErrConflict, "b, whose From is wrong, conflicts")
	got, err := cursor(ctx, s, a)
	require.NoError(t, err)
	assert.Equal(t, c1, got, "a must not move when its batch conflicts")

	// Owner is compared too.
	err = s.Advance(ctx, []seqstore.Advance{{Stream: a, From: seqstore.Cursor{Epoch: 7, Next: 5, Owner: 1}, To: seqstore.Cursor{Epoch: 7, Next: 6, Owner: 1}}})
	assert.ErrorIs(t, err, seqstore.ErrConflict, "owner mismatch")

	err = s.Advance(ctx, []seqstore.Advance{{Stream: a, From: c1, To: seqstore.Cursor{Epoch: 7, Next: 4}}})
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "moving backwards")
	err = s.Advance(ctx, []seqstore.Advance{{Stream: a, From: c1, To: c1}, {Stream: a, From: c1, To: c1}})
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "stream twice in a batch")
	assert.NoError(t, s.Advance(ctx, nil), "empty batch")

	require.NoError(t, s.Advance(ctx, []seqstore.Advance{
		{Stream: a, From: c1, To: seqstore.Cursor{Epoch: 8, Next: 1}},
		{Stream: b, To: seqstore.Cursor{Epoch: 3, Next: 2}},
	}))
	got, err = cursor(ctx, s, b)
	require.NoError(t, err)
	assert.Equal(t, seqstore.Cursor{Epoch: 3, Next: 2}, got, "b after a good batch")
	assert.Equal(t, int64(2), s.Stats().Advances, "successful Advance calls")
}

func TestValidationAndOverflow(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	st := seqstore.Stream{Queue: "q"}
	_, err := reserve(ctx, s, seqstore.Stream{}, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "empty queue name")
	_, err = reserve(ctx, s, seqstore.Stream{Queue: "q", Group: "a\x00"}, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "NUL in group")
	_, err = reserve(ctx, s, st, 0, nil)
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "n = 0")
	_, err = reserve(ctx, s, st, 2, [][]byte{nil})
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "journal shorter than n")
	_, err = cursor(ctx, s, seqstore.Stream{Queue: string(make([]byte, seqstore.MaxQueueLen+1))})
	assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "long queue name")
	_, err = s.Pending(ctx, "")
	assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "pending of empty queue name")

	res, err := reserve(ctx, s, st, seqstore.MaxSeq-1, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.First)
	_, err = reserve(ctx, s, st, 2, nil)
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "two seqs when one is left")
	res, err = reserve(ctx, s, st, 1, nil)
	require.NoError(t, err, "the last seq")
	assert.Equal(t, uint64(seqstore.MaxSeq), res.First, "the last seq is MaxSeq")
	_, err = reserve(ctx, s, st, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "past MaxSeq")
	require.NoError(t, s.Close())

	s2 := openT(t, s.Dir(), nil)
	_, err = reserve(ctx, s2, st, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrOverflow, "past MaxSeq after reopen")
}

func TestClosed(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.NoError(t, s.Close(), "second Close")
	st := seqstore.Stream{Queue: "q"}
	_, err = reserve(ctx, s, st, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Reserve")
	assert.ErrorIs(t, sent(ctx, s, st, []uint64{1}), seqstore.ErrClosed, "Sent")
	_, err = s.Pending(ctx, "q")
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Pending")
	_, err = cursor(ctx, s, st)
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Cursor")
	assert.ErrorIs(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Next: 1}}}), seqstore.ErrClosed, "Advance")
}

func TestCloseDuringLoad(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, closed int
	for i := range 16 {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "q", Group: string(rune('a' + i))}
			for {
				_, err := reserve(ctx, s, st, 1, [][]byte{[]byte("x")})
				mu.Lock()
				if err != nil {
					closed++
					mu.Unlock()
					assert.ErrorIs(t, err, seqstore.ErrClosed)
					return
				}
				ok++
				mu.Unlock()
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, s.Close())
	wg.Wait()
	assert.Equal(t, 16, closed, "every caller ends with ErrClosed")

	s2 := openT(t, s.Dir(), nil)
	assert.Equal(t, ok, s2.Stats().Pending, "every acknowledged reservation is journaled after Close")
}

func TestCancelledContext(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	st := seqstore.Stream{Queue: "q"}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := reserve(cctx, s, st, 1, [][]byte{[]byte("x")})
	assert.ErrorIs(t, err, context.Canceled, "Reserve")
	err = s.Advance(cctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 2}}})
	assert.ErrorIs(t, err, context.Canceled, "Advance")
	_, err = cursor(cctx, s, st)
	assert.ErrorIs(t, err, context.Canceled, "Cursor")
	assert.Equal(t, Stats{Fsyncs: s.Stats().Fsyncs, LogBytes: s.Stats().LogBytes}, s.Stats(), "nothing applied or written")
	res, err := reserve(ctx, s, st, 1, nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), res.First, "the cancelled reservation took no seq")
	c, err := cursor(ctx, s, st)
	require.NoError(t, err)
	assert.Zero(t, c, "the cancelled advance left no cursor")
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, seqstore.ErrLocked, "second Open of the same directory")
	assert.Contains(t, err.Error(), dir, "the error names the directory")
	require.NoError(t, s.Close())
	s2, err := Open(dir, nil)
	require.NoError(t, err, "Open after Close")
	require.NoError(t, s2.Close())
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "store")
	s := openT(t, dir, &Options{SnapshotBytes: 1})
	st := seqstore.Stream{Queue: "q"}
	reserveN(t, s, st, 3) // SnapshotBytes 1: every commit writes a snapshot
	require.NoError(t, s.Close())
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o700), info.Mode().Perm(), "mode of the created directory")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o600), info.Mode().Perm(), "mode of %s", e.Name())
		names[e.Name()] = true
	}
	assert.Equal(t, map[string]bool{lockName: true, snapName: true, logName(4): true}, names, "files after three snapshots")
}

func TestSnapshotRecovery(t *testing.T) {
	dir := t.TempDir()
	opts := &Options{SnapshotBytes: 4 << 10}
	s := openT(t, dir, opts)
	streams := []seqstore.Stream{{Queue: "q", Group: "a"}, {Queue: "q", Group: "b"}, {Queue: "r"}}
	var wg sync.WaitGroup
	for _, st := range streams {
		wg.Go(func() {
			for i := range 200 {
				res, err := reserve(ctx, s, st, 2, [][]byte{body(st, uint64(2*i+1)), body(st, uint64(2*i+2))})
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, uint64(2*i+1), res.First, "reservation %d of %s", i, st)
				if i%3 != 0 {
					assert.NoError(t, sent(ctx, s, st, []uint64{res.First}))
				}
				next := uint64(2*i + 3)
				from := seqstore.Cursor{Epoch: res.Epoch, Next: next - 2}
				if i == 0 {
					from = seqstore.Cursor{}
				}
				assert.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, From: from, To: seqstore.Cursor{Epoch: res.Epoch, Next: next}}}))
			}
		})
	}
	wg.Wait()
	require.Greater(t, s.Stats().Snapshots, int64(3), "snapshots written with a 4 KiB threshold")
	before := map[string][]seqstore.Entry{}
	for _, q := range []string{"q", "r"} {
		before[q], _ = s.Pending(ctx, q)
	}
	require.NoError(t, s.Close())

	s2 := openT(t, dir, opts)
	for _, q := range []string{"q", "r"} {
		got, err := s2.Pending(ctx, q)
		require.NoError(t, err)
		assert.Equal(t, before[q], got, "pending of %s after reopen", q)
		perStream := 67*2 + 133 // both seqs of every third reservation, the second of the others
		assert.Len(t, got, perStream*map[string]int{"q": 2, "r": 1}[q], "entries of %s", q)
	}
	for _, st := range streams {
		_, next := senderState(s2, st)
		assert.Equal(t, uint64(401), next, "counter of %s", st)
		c, err := cursor(ctx, s2, st)
		require.NoError(t, err)
		assert.Equal(t, uint64(401), c.Next, "cursor of %s", st)
	}
}

// TestCancelWhileQueued cancels one caller whose request waits behind a
// commit in progress (it must return at once with nothing applied) and one
// whose request is in that commit (it must report the true outcome).
func TestCancelWhileQueued(t *testing.T) {
	blocked := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hooks := &testHooks{beforeSync: func(int64) {
		once.Do(func() {
			close(blocked)
			<-release
		})
	}}
	s := openT(t, t.TempDir(), &Options{hooks: hooks})
	st := seqstore.Stream{Queue: "q"}

	ctxA, cancelA := context.WithCancel(ctx)
	defer cancelA()
	type result struct {
		res seqstore.Reservation
		err error
	}
	resA := make(chan result, 1)
	go func() {
		r, err := reserve(ctxA, s, st, 1, [][]byte{[]byte("a")})
		resA <- result{r, err}
	}()
	<-blocked // A's frame is written, its fsync held

	ctxB, cancelB := context.WithCancel(ctx)
	resB := make(chan error, 1)
	go func() {
		_, err := reserve(ctxB, s, st, 1, [][]byte{[]byte("b")})
		resB <- err
	}()
	require.Eventually(t, func() bool { return s.queued() == 1 }, 5*time.Second, time.Millisecond, "B queued")
	cancelB()
	select {
	case err := <-resB:
		assert.ErrorIs(t, err, context.Canceled, "B, cancelled while queued")
	case <-time.After(5 * time.Second):
		t.Fatal("B did not return within 5s of its cancellation while the writer was blocked")
	}
	cancelA()
	time.Sleep(10 * time.Millisecond)
	select {
	case r := <-resA:
		t.Fatalf("A returned %+v before its fsync finished", r)
	default:
	}
	close(release)
	a := <-resA
	require.NoError(t, a.err, "A was in the commit when its ctx ended: its outcome is success")
	assert.Equal(t, uint64(1), a.res.First, "A's seq")

	c, err := reserve(ctx, s, st, 1, nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), c.First, "B took no seq")
	pending, err := s.Pending(ctx, "q")
	require.NoError(t, err)
	require.Len(t, pending, 1, "only A is journaled")
	assert.Equal(t, []byte("a"), pending[0].Body, "A's body")
}

// TestCursorsWaitForFsync holds the fsync of an Advance's frame and reads
// the cursor meanwhile. The store's doc says every read reflects only
// durable state and Cursors waits for a frame being written: a reader must
// not act on a cursor that a crash or a failed fsync could take away. So
// Cursors does not return while the fsync is held (a short ctx ends it with
// the ctx's error, never with the new cursor), and once the fsync is
// released it returns the new cursor.
func TestCursorsWaitForFsync(t *testing.T) {
	var armed atomic.Bool
	blocked := make(chan struct{})
	release := make(chan struct{})
	hooks := &testHooks{beforeSync: func(int64) {
		if armed.CompareAndSwap(true, false) {
			close(blocked)
			<-release
		}
	}}
	s := openT(t, t.TempDir(), &Options{hooks: hooks})
	st := seqstore.Stream{Queue: "q", Group: "g"}
	c1 := seqstore.Cursor{Epoch: 7, Next: 5}
	c2 := seqstore.Cursor{Epoch: 7, Next: 9}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: c1}}))

	armed.Store(true)
	advanced := make(chan error, 1)
	go func() { advanced <- s.Advance(ctx, []seqstore.Advance{{Stream: st, From: c1, To: c2}}) }()
	select {
	case <-blocked: // the advance's frame is written, its fsync held
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the advance's frame reached no fsync within 10s")
	}

	type result struct {
		c   seqstore.Cursor
		err error
	}
	waiting := make(chan result, 1)
	go func() {
		c, err := cursor(ctx, s, st)
		waiting <- result{c, err}
	}()

	// Deterministic whatever the scheduling: the fsync stays held until
	// this call returns, so a Cursors that does not wait returns c2 here.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	got, err := cursor(short, s, st)
	cancel()
	if err == nil {
		close(release)
		t.Fatalf("Cursors returned %+v while the fsync of the advance to it was held: reads must reflect only durable state", got)
	}
	require.ErrorIs(t, err, context.DeadlineExceeded, "Cursors during the held fsync ends by its ctx")

	select {
	case r := <-waiting:
		close(release)
		t.Fatalf("a concurrent Cursors returned %+v (err %v) while the advance's fsync was held", r.c, r.err)
	default:
	}
	close(release)
	require.NoError(t, <-advanced, "the advance")
	select {
	case r := <-waiting:
		require.NoError(t, r.err, "Cursors once the fsync is done")
		assert.Equal(t, c2, r.c, "Cursors once the fsync is done: the new cursor")
	case <-time.After(10 * time.Second):
		t.Fatal("Cursors did not return within 10s of the fsync's release")
	}
}

func TestRequestTooLarge(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	_, err := reserve(ctx, s, seqstore.Stream{Queue: "q"}, 1, [][]byte{make([]byte, maxRequestBytes)})
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "a journal above the request bound")
	assert.Zero(t, s.Stats().Reservations, "nothing reserved")
}

// TestLogWrittenOverZeros checks the log's preallocation: while the store
// is open the log is longer than its frames (zeros written ahead), a clean
// Close cuts it to its last frame, and reopening finds every frame.
func TestLogWrittenOverZeros(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	st := seqstore.Stream{Queue: "q"}
	reserveN(t, s, st, 3)
	frames := s.Stats().LogBytes
	info, err := os.Stat(logPath(dir, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(logHeaderSize+preallocBytes), info.Size(), "log size while open: the first commit wrote zeros %d bytes ahead (frames end at %d)", preallocBytes, frames)

	// A crash leaves the zeros: recovery cuts them, and says so at Info,
	// not as a torn tail.
	crashed := t.TempDir()
	data, err := os.ReadFile(logPath(dir, 1))
	require.NoError(t, err)
	writeFile(t, logPath(crashed, 1), data)
	var logBuf bytes.Buffer
	c, err := Open(crashed, &Options{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	require.NoError(t, err)
	_, next := senderState(c, st)
	require.NoError(t, c.Close())
	assert.Equal(t, uint64(4), next, "counter after a crash")
	assert.Contains(t, logBuf.String(), "level=INFO msg=\"filestore: cutting the zeros written ahead of the log\"", "log of the cut")
	assert.NotContains(t, logBuf.String(), "level=WARN", "no warning for zeros")

	require.NoError(t, s.Close())
	info, err = os.Stat(logPath(dir, 1))
	require.NoError(t, err)
	assert.Equal(t, frames, info.Size(), "log size after Close: the frames only")
	s = openT(t, dir, nil)
	_, next = senderState(s, st)
	assert.Equal(t, uint64(4), next, "counter after reopening")
}
