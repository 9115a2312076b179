package filestore

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestSentFlushDelay checks the timer that writes lazy Sent marks on their
// own: nothing before SentFlushDelay, one commit right after it, and none
// at all if a commit comes first.
func TestSentFlushDelay(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		const delay = 100 * time.Millisecond
		s, err := Open(dir, &Options{SentFlushDelay: delay})
		require.NoError(t, err)
		defer s.Close()
		st := seqstore.Stream{Queue: "q"}
		res, err := reserve(ctx, s, st, 3, [][]byte{{1}, {2}, {3}})
		require.NoError(t, err)
		commits, records := s.Stats().Commits, s.Stats().Records

		require.NoError(t, sent(ctx, s, st, []uint64{res.First}))
		time.Sleep(delay - time.Millisecond)
		synctest.Wait()
		assert.Equal(t, commits, s.Stats().Commits, "no commit before SentFlushDelay")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.Equal(t, commits+1, s.Stats().Commits, "the mark is committed at SentFlushDelay")

		// A mark followed by a reservation rides on its commit.
		require.NoError(t, sent(ctx, s, st, []uint64{res.First + 1}))
		_, err = reserve(ctx, s, st, 1, nil)
		require.NoError(t, err)
		time.Sleep(2 * delay)
		synctest.Wait()
		assert.Equal(t, commits+2, s.Stats().Commits, "one commit for the reservation and the mark, none for the timer")
		assert.Equal(t, records+3, s.Stats().Records, "records since the first reservation: two marks and a reservation")
	})
}

// TestCommitWaitBounded checks that the wait for callers of the previous
// commit ends at CommitWait when they do not come back.
func TestCommitWaitBounded(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		const wait = 5 * time.Millisecond
		release := make(chan struct{})
		var held atomic.Bool
		hooks := &testHooks{beforeSync: func(int64) {
			if held.CompareAndSwap(false, true) {
				<-release
			}
		}}
		s, err := Open(dir, &Options{CommitWait: wait, hooks: hooks})
		require.NoError(t, err)
		defer s.Close()
		// Inside the bubble an fsync takes no time, so fake a slow one
		// for the wait formula (the average sync time, at most
		// CommitWait).
		s.w.syncAvg = time.Hour

		// A first commit is held in its fsync while eight callers queue;
		// they then share the next commit, so the writer expects eight.
		done := make(chan struct{})
		reserveG := func(g string) {
			_, err := reserve(ctx, s, seqstore.Stream{Queue: "q", Group: g}, 1, nil)
			assert.NoError(t, err)
			done <- struct{}{}
		}
		go reserveG("first")
		synctest.Wait()
		for i := range 8 {
			go reserveG(string(rune('a' + i)))
		}
		synctest.Wait()
		require.Equal(t, 8, s.queued(), "callers queued behind the held commit")
		close(release)
		for range 9 {
			<-done
		}
		// One caller comes back alone: its commit waits CommitWait for
		// the others, then goes ahead.
		before := s.Stats()
		start := time.Now()
		_, err = reserve(ctx, s, seqstore.Stream{Queue: "q"}, 1, nil)
		require.NoError(t, err)
		assert.Equal(t, wait, time.Since(start), "a lone caller waits exactly CommitWait")
		after := s.Stats()
		assert.Equal(t, wait, after.WaitTime-before.WaitTime, "Stats.WaitTime counts the wait")
		assert.Equal(t, int64(1), after.WaitTimeouts-before.WaitTimeouts, "Stats.WaitTimeouts counts a wait that ended at its bound")
		start = time.Now()
		_, err = reserve(ctx, s, seqstore.Stream{Queue: "q"}, 1, nil)
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "after a commit of one the writer expects one and does not wait")
	})
}

// TestCommitWaitFormula checks the bound of the wait for returning
// callers: one average fsync, at most CommitWait, none when disabled.
func TestCommitWaitFormula(t *testing.T) {
	for _, c := range []struct {
		syncAvg, commitWait, want time.Duration
	}{
		{300 * time.Microsecond, 0, 300 * time.Microsecond}, // default CommitWait 1ms
		{3 * time.Millisecond, 0, time.Millisecond},
		{3 * time.Millisecond, 5 * time.Millisecond, 3 * time.Millisecond},
		{3 * time.Millisecond, -1, 0},
	} {
		s := openT(t, t.TempDir(), &Options{CommitWait: c.commitWait})
		s.w.syncAvg = c.syncAvg // the writer is idle: no call was made
		assert.Equal(t, c.want, s.commitWait(), "wait bound with an average fsync of %v and CommitWait %v", c.syncAvg, c.commitWait)
	}
}
