package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// The watch section: the seqstore.LeaseWatcher capability, for stores whose
// LeaseHarness sets Watches. With Shared, the changes are made by another
// Store instance than the watcher's (as by another process), so that a
// store waking only its own instance fails.

const (
	// wakeWithin is how long a watcher may wait for a wake-up.
	wakeWithin = time.Second
	// quietFor is how long a watcher must see nothing after a call that
	// sends no wake-up.
	quietFor = 300 * time.Millisecond
)

func watchTests() []struct {
	name string
	fn   func(t *testing.T, h LeaseHarness)
} {
	return []struct {
		name string
		fn   func(t *testing.T, h LeaseHarness)
	}{
		{"Watch/Release", testWatchRelease},
		{"Watch/Leave", testWatchLeave},
		{"Watch/Join", testWatchJoin},
		{"Watch/Sweep", testWatchSweep},
		{"Watch/Quiet", testWatchQuiet},
		{"Watch/Namespaces", testWatchNamespaces},
		{"Watch/Coalesce", testWatchCoalesce},
		{"Watch/SlowReader", testWatchSlowReader},
		{"Watch/Cancel", testWatchCancel},
		{"Watch/Closed", testWatchClosed},
		{"Watch/NotSupported", testWatchNotSupported},
	}
}

// watchEnv is a watch test's storage: the watcher's store and the writer's,
// two instances over it when the harness is Shared.
type watchEnv struct {
	*leaseEnv
	writer seqstore.Leaser
}

func openWatch(t *testing.T, h LeaseHarness) *watchEnv {
	t.Helper()
	if !h.Watches {
		t.Skip("LeaseHarness.Watches is false: the store does not watch")
	}
	e := openLeaser(t, h)
	if !h.Shared {
		return &watchEnv{leaseEnv: e, writer: e.l} // one instance per storage
	}
	return &watchEnv{leaseEnv: e, writer: asLeaser(t, e.open(t))}
}

func asWatcher(t *testing.T, st seqstore.Store) seqstore.LeaseWatcher {
	t.Helper()
	w, ok := st.(seqstore.LeaseWatcher)
	require.True(t, ok, "%T does not implement seqstore.LeaseWatcher", st)
	return w
}

// watch subscribes to ns on e's first store until the test ends.
func (e *watchEnv) watch(t *testing.T, ns string) <-chan struct{} {
	t.Helper()
	ch, err := asWatcher(t, e.st).WatchLeases(t.Context(), ns)
	require.NoError(t, err, "WatchLeases(%q)", ns)
	return ch
}

// awaitWake fails unless ch receives within wakeWithin.
func awaitWake(t *testing.T, ch <-chan struct{}, after string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		require.True(t, ok, "the watch channel closed instead of waking after %s", after)
	case <-time.After(wakeWithin):
		require.Fail(t, "no wake-up", "no wake-up within %v after %s", wakeWithin, after)
	}
}

// settle waits until ch has been quiet for quietFor, so that a wake-up of
// an earlier call cannot pass for the next one's, and fails if it never is.
func settle(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case _, ok := <-ch:
			require.True(t, ok, "the watch channel closed")
		case <-time.After(quietFor):
			return
		}
	}
	require.Fail(t, "the watch channel never settled", "wake-ups kept coming for 10 s with nothing changing")
}

// assertQuiet fails if ch receives within quietFor.
func assertQuiet(t *testing.T, ch <-chan struct{}, after string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		assert.Fail(t, "a wake-up for no change", "a wake-up (or a close: %v) after %s, which changes neither leases nor the view", !ok, after)
	case <-time.After(quietFor):
	}
}

// testWatchRelease: a Release by another instance wakes the watcher, and the
// released shard is free when it wakes (the wake-up follows the commit).
func testWatchRelease(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	ch := e.watch(t, "ns")
	for i := range 5 {
		held := acquire(t, e.writer, "ns", "b-1", longTTL, 0, 1)
		require.Len(t, held, 2, "round %d", i)
		settle(t, ch)
		require.NoError(t, e.writer.Release(t.Context(), "ns", held[:1]))
		awaitWake(t, ch, "a Release")
		// Read at once: a wake-up sent before the release was visible
		// (a notify outside the transaction) would show shard 0 held.
		assert.Equal(t, held[1:], leases(t, e.l, "ns"), "round %d: the wake-up came before the release was visible", i)
		require.NoError(t, e.writer.Release(t.Context(), "ns", held[1:]))
		awaitWake(t, ch, "a second Release")
	}
}

// testWatchLeave: a Leave by another instance wakes the watcher.
func testWatchLeave(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	ch := e.watch(t, "ns")
	heartbeat(t, e.writer, "ns", seqstore.Member{Name: "b", Incarnation: "b-1", Weight: 1}, longTTL)
	settle(t, ch)
	require.NoError(t, e.writer.Leave(t.Context(), "ns", "b-1"))
	awaitWake(t, ch, "a Leave")
	a := seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}
	assert.Equal(t, []seqstore.Member{a}, heartbeat(t, e.l, "ns", a, longTTL).Members, "the member that left is gone when the watcher wakes")
}

// testWatchJoin: a new member's first Heartbeat wakes the watcher, and so
// does a member's new Weight; its renewals do not.
func testWatchJoin(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	ch := e.watch(t, "ns")
	heartbeat(t, e.l, "ns", seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}, longTTL)
	settle(t, ch)
	b := seqstore.Member{Name: "b", Incarnation: "b-1", Weight: 1}
	heartbeat(t, e.writer, "ns", b, longTTL)
	awaitWake(t, ch, "a join")
	settle(t, ch)
	heartbeat(t, e.writer, "ns", b, longTTL)
	assertQuiet(t, ch, "a renewing Heartbeat")
	b.Weight = 0
	heartbeat(t, e.writer, "ns", b, longTTL)
	awaitWake(t, ch, "a Heartbeat with a new Weight")
}

// testWatchSweep: a member whose heartbeat expired, swept by another's
// Heartbeat, wakes the watcher.
func testWatchSweep(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	ch := e.watch(t, "ns")
	a := seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}
	heartbeat(t, e.writer, "ns", seqstore.Member{Name: "b", Incarnation: "b-1", Weight: 1}, e.h.TTL)
	heartbeat(t, e.writer, "ns", a, longTTL)
	e.expire(t)
	settle(t, ch)
	v := heartbeat(t, e.writer, "ns", a, longTTL)
	require.Equal(t, []seqstore.Member{a}, v.Members, "b expired")
	awaitWake(t, ch, "a Heartbeat that swept an expired member")
}

// testWatchQuiet: Acquire, Renew, Topology, renewing heartbeats and calls
// that change nothing send no wake-up (members answer a wake-up with a
// heartbeat: one that woke them again would never stop).
func testWatchQuiet(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	ctx, w := t.Context(), e.writer
	ch := e.watch(t, "ns")
	a := seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}
	heartbeat(t, w, "ns", a, longTTL)
	settle(t, ch)
	heartbeat(t, w, "ns", a, longTTL)
	require.NoError(t, w.Topology(ctx, "ns", topology(2)))
	held := acquire(t, w, "ns", "a-1", longTTL, 0, 1)
	require.Len(t, held, 2)
	assert.Empty(t, renew(t, w, "ns", longTTL, held...))
	leases(t, w, "ns")
	assertQuiet(t, ch, "Heartbeat (a renewal), Topology, Acquire, Renew and Leases")
	require.NoError(t, w.Release(ctx, "ns", []seqstore.Lease{{Shard: 0, Token: held[0].Token, Owner: "x-1"}}))
	require.NoError(t, w.Leave(ctx, "ns", "never-joined"))
	assertQuiet(t, ch, "a Release and a Leave that changed nothing")
}

// testWatchNamespaces: a change in one namespace does not wake the watchers
// of another; every watcher of the namespace wakes.
func testWatchNamespaces(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	chA, chA2, chB := e.watch(t, "a"), e.watch(t, "a"), e.watch(t, "a/b")
	held := acquire(t, e.writer, "a/b", "x-1", longTTL, 0)
	require.Len(t, held, 1)
	heldA := acquire(t, e.writer, "a", "x-1", longTTL, 0)
	require.Len(t, heldA, 1)
	settle(t, chA)
	settle(t, chA2)
	settle(t, chB)
	require.NoError(t, e.writer.Release(t.Context(), "a/b", held))
	awaitWake(t, chB, "a Release in a/b")
	assertQuiet(t, chA, "a Release in another namespace")
	require.NoError(t, e.writer.Release(t.Context(), "a", heldA))
	awaitWake(t, chA, "a Release in a")
	awaitWake(t, chA2, "a Release in a, at its second watcher")
}

// testWatchCoalesce: many changes while nobody reads leave at most a
// wake-up or two, not one per change.
func testWatchCoalesce(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	ch := e.watch(t, "ns")
	settle(t, ch)
	const n = 50
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range n {
			m := seqstore.Member{Name: "m", Incarnation: fmt.Sprintf("m-%d", i), Weight: 1}
			if _, err := e.writer.Heartbeat(t.Context(), "ns", m, longTTL); !assert.NoError(t, err) {
				return
			}
		}
	}()
	select {
	case <-wrote:
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the watcher blocks the writers", "%d joins with an unread watcher did not finish in 30 s", n)
	}
	time.Sleep(quietFor) // let the wake-ups in flight arrive
	got := 0
	for {
		select {
		case _, ok := <-ch:
			require.True(t, ok, "the watch channel closed")
			got++
			continue
		case <-time.After(quietFor):
		}
		break
	}
	assert.GreaterOrEqual(t, got, 1, "%d joins woke nobody", n)
	assert.LessOrEqual(t, got, 2, "%d joins unread: the channel must coalesce them", n)
}

// testWatchSlowReader: a watcher that never reads does not slow the writers
// down, and still closes at once when its context ends.
func testWatchSlowReader(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := asWatcher(t, e.st).WatchLeases(ctx, "ns")
	require.NoError(t, err)
	ctxW, cancelW := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancelW()
	const n = 100
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 4 {
				shard := g*n/4 + i
				got, err := e.writer.Acquire(ctxW, "ns", []int{shard}, "w-1", longTTL)
				if !assert.NoError(t, err) || !assert.Len(t, got, 1) {
					return
				}
				if !assert.NoError(t, e.writer.Release(ctxW, "ns", got)) {
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctxW.Done():
		require.FailNow(t, "the watcher blocks the writers", "%d acquires and releases with an unread watcher did not finish in 30 s", n)
	}
	t.Logf("%d acquires and releases with an unread watcher: %v", n, time.Since(start))
	cancel()
	assertClosed(t, ch, "the context of an unread watcher ended")
}

// assertClosed fails unless ch is closed within wakeWithin, after at most
// the one wake-up it may hold.
func assertClosed(t *testing.T, ch <-chan struct{}, after string) {
	t.Helper()
	deadline := time.After(wakeWithin)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			require.Fail(t, "the watch channel stayed open", "not closed within %v after %s", wakeWithin, after)
		}
	}
}

// testWatchCancel: the end of ctx closes the channel; a watch of an ended
// context fails or closes at once.
func testWatchCancel(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := asWatcher(t, e.st).WatchLeases(ctx, "ns")
	require.NoError(t, err)
	other := e.watch(t, "ns")
	cancel()
	assertClosed(t, ch, "its context ended")
	held := acquire(t, e.writer, "ns", "b-1", longTTL, 0)
	require.NoError(t, e.writer.Release(t.Context(), "ns", held))
	awaitWake(t, other, "a Release, after another watcher ended")

	ch, err = asWatcher(t, e.st).WatchLeases(ctx, "ns")
	if err != nil {
		assert.ErrorIs(t, err, context.Canceled, "WatchLeases with an ended context")
	} else {
		assertClosed(t, ch, "a watch with an ended context")
	}
	_, err = asWatcher(t, e.st).WatchLeases(t.Context(), "bad\x00ns")
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "WatchLeases of an invalid namespace")
}

// testWatchClosed: Close closes the store's watch channels; WatchLeases on
// a closed store fails with ErrClosed.
func testWatchClosed(t *testing.T, h LeaseHarness) {
	e := openWatch(t, h)
	ch := e.watch(t, "ns")
	require.NoError(t, e.st.Close())
	assertClosed(t, ch, "its store closed")
	_, err := asWatcher(t, e.st).WatchLeases(t.Context(), "ns")
	assert.ErrorIs(t, err, seqstore.ErrClosed, "WatchLeases on a closed store")
}

// testWatchNotSupported: a store whose harness says it does not watch
// either lacks the method or says ErrNotSupported.
func testWatchNotSupported(t *testing.T, h LeaseHarness) {
	if h.Watches {
		t.Skip("LeaseHarness.Watches is true")
	}
	e := openLeaser(t, h)
	w, ok := e.st.(seqstore.LeaseWatcher)
	if !ok {
		return
	}
	ch, err := w.WatchLeases(t.Context(), "ns")
	require.Error(t, err, "WatchLeases of a store whose harness says it does not watch")
	assert.True(t, errors.Is(err, seqstore.ErrNotSupported), "WatchLeases: want ErrNotSupported, got %v", err)
	assert.Nil(t, ch)
}
