package redisstore

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func awaitWake(t *testing.T, ch <-chan struct{}, within time.Duration, after string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		require.True(t, ok, "the watch channel closed instead of waking after %s", after)
	case <-time.After(within):
		require.Fail(t, "no wake-up", "no wake-up within %v after %s", within, after)
	}
}

// TestWatchRing: on a *redis.Ring the watcher subscribes on the shard that
// holds the namespace's keys, where the scripts PUBLISH (the channel
// carries the namespace's hash tag), for namespaces on either shard.
func TestWatchRing(t *testing.T) {
	c, prefix := ringBackend.open(t)
	w, x := newStore(t, c, prefix), newStore(t, c, prefix)
	for _, ns := range []string{"a", "b", "c", "d", "e", "f"} {
		ch, err := w.WatchLeases(t.Context(), ns)
		require.NoError(t, err)
		held, err := x.Acquire(t.Context(), ns, []int{0}, "x-1", time.Minute)
		require.NoError(t, err)
		require.NoError(t, x.Release(t.Context(), ns, held))
		awaitWake(t, ch, time.Second, "a Release in "+ns)
	}
}

// TestWatchReconnect: after the server went away and came back, the watch
// subscribes again and wakes (what was published meanwhile is lost), and
// wakes again on the next Release.
func TestWatchReconnect(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	prefix := uniquePrefix(t)
	w, x := newStore(t, c, prefix), newStore(t, c, prefix)
	ch, err := w.WatchLeases(t.Context(), "ns")
	require.NoError(t, err)
	mr.Close()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, mr.Restart())
	awaitWake(t, ch, 10*time.Second, "a reconnection")
	// Drain what the reconnection left, then a change must wake again.
	for len(ch) > 0 {
		<-ch
	}
	require.Eventually(t, func() bool {
		held, err := x.Acquire(t.Context(), "ns", []int{0}, "x-1", time.Minute)
		if err != nil || len(held) != 1 {
			return false
		}
		if x.Release(t.Context(), "ns", held) != nil {
			return false
		}
		select {
		case _, ok := <-ch:
			return ok
		case <-time.After(time.Second):
			return false
		}
	}, 10*time.Second, 10*time.Millisecond, "no wake-up after a Release once reconnected")
}

// TestWatchClientClosed: closing the client closes the watch channel (the
// subscription failed for good).
func TestWatchClientClosed(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	w := newStore(t, c, uniquePrefix(t))
	ch, err := w.WatchLeases(t.Context(), "ns")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	select {
	case _, ok := <-ch:
		assert.False(t, ok, "a wake-up instead of a close")
	case <-time.After(5 * time.Second):
		t.Fatal("the watch channel stayed open after the client closed")
	}
}
