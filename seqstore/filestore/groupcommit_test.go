package filestore

import (
	"fmt"
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

// TestGroupCommitCoalesces holds the first fsync until every other caller
// is queued, then checks that all of them shared one more commit: N callers,
// two fsyncs.
func TestGroupCommitCoalesces(t *testing.T) {
	const n = 64
	first := make(chan int64, 1)
	release := make(chan struct{})
	var once sync.Once
	hooks := &testHooks{beforeSync: func(records int64) {
		once.Do(func() {
			first <- records
			<-release
		})
	}}
	s := openT(t, t.TempDir(), &Options{hooks: hooks})
	before := s.Stats()

	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(i % 8)}
			_, err := reserve(ctx, s, st, 1, [][]byte{make([]byte, 100)})
			assert.NoError(t, err, "caller %d", i)
		})
	}
	var k int64
	select {
	case k = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("no commit within 10s")
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.queued() < n-int(k) {
		require.True(t, time.Now().Before(deadline), "only %d of %d callers queued after 10s", s.queued(), n-int(k))
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()

	after := s.Stats()
	assert.Equal(t, int64(n), after.Reservations-before.Reservations, "reservations")
	assert.Equal(t, int64(2), after.Commits-before.Commits, "commits for %d callers: the first took %d, the second must take the %d queued during its fsync", n, k, n-int(k))
	assert.Equal(t, int64(2), after.Fsyncs-before.Fsyncs, "fsyncs for %d callers", n)
}

// TestGroupCommitFreeRunning checks the same without any hook: 16 callers
// in a loop for a while produce far fewer fsyncs than reservations.
func TestGroupCommitFreeRunning(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	before := s.Stats()
	var wg sync.WaitGroup
	var done atomic.Int64
	for i := range 16 {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(i)}
			for range 50 {
				_, err := reserve(ctx, s, st, 1, [][]byte{make([]byte, 100)})
				if !assert.NoError(t, err) {
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	after := s.Stats()
	res, syncs := after.Reservations-before.Reservations, after.Fsyncs-before.Fsyncs
	require.Equal(t, int64(16*50), res, "reservations")
	assert.Less(t, syncs, res/3, "fsyncs for %d reservations by 16 concurrent callers", res)
	t.Logf("%d reservations, %d fsyncs: %.1f reservations per fsync", res, syncs, float64(res)/float64(syncs))
}

// TestSentMarksAreLazy checks that Sent never costs an fsync of its own
// under load and that marks written on their own after SentFlushDelay reach
// the log without Close.
func TestSentMarksAreLazy(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, &Options{SentFlushDelay: 10 * time.Millisecond})
	st := seqstore.Stream{Queue: "q"}
	res, err := reserve(ctx, s, st, 2, [][]byte{[]byte("a"), []byte("b")})
	require.NoError(t, err)
	before := s.Stats()
	require.NoError(t, sent(ctx, s, st, []uint64{res.First}))
	assert.Equal(t, before.Fsyncs, s.Stats().Fsyncs, "Sent returned without an fsync")
	require.Eventually(t, func() bool { return s.Stats().Commits == before.Commits+1 }, 5*time.Second, time.Millisecond,
		"the mark is written on its own after SentFlushDelay")

	// Read the log as a crash would leave it: copy the files while the
	// store is open.
	copyDir := t.TempDir()
	for _, name := range []string{logName(1)} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		writeFile(t, filepath.Join(copyDir, name), data)
	}
	s2 := openT(t, copyDir, nil)
	got, err := s2.Pending(ctx, "q")
	require.NoError(t, err)
	require.Len(t, got, 1, "entries pending in the copy")
	assert.Equal(t, res.First+1, got[0].Seq, "the marked entry is gone from the copy")
}
