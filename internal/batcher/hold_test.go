package batcher

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedBatches is a Handler whose batches each wait at a gate of their own
// (by the batch's first item), and that reports when each one started.
type gatedBatches struct {
	entered chan started
	gates   [8]chan struct{}
}

type started struct {
	batch []int
	at    time.Time
}

func newGatedBatches() *gatedBatches {
	g := &gatedBatches{entered: make(chan started, 16)}
	for i := range g.gates {
		g.gates[i] = make(chan struct{})
	}
	return g
}

func (g *gatedBatches) handle(batch []int, _ []error) {
	g.entered <- started{slices.Clone(batch), time.Now()}
	<-g.gates[batch[0]]
}

func (g *gatedBatches) next(t *testing.T) started {
	t.Helper()
	select {
	case s := <-g.entered:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no batch started")
		return started{}
	}
}

// TestPartialHold: a partial batch in flight holds later partial batches
// back for its hold, then lets one go while it is still in flight (a stuck
// request does not stall them for good): FirstHold while no batch has
// ended. A handler whose batch's hold ended, and that takes another
// partial batch, holds that one for its own hold, and no longer.
func TestPartialHold(t *testing.T) {
	g := newGatedBatches()
	b, err := New(&Options{MaxHandlers: 2, MaxItems: 3, MaxPartial: 1, PartialHold: 20 * time.Millisecond}, g.handle)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range g.gates {
			select {
			case <-c:
			default:
				close(c)
			}
		}
		b.Shutdown()
	})
	partials := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.partials
	}

	require.NoError(t, b.Post(0))
	first := g.next(t)
	require.Equal(t, []int{0}, first.batch)
	require.NoError(t, b.Post(1))
	second := g.next(t) // {0} never ends
	assert.Equal(t, []int{1}, second.batch)
	assert.GreaterOrEqual(t, second.at.Sub(first.at), FirstHold, "a partial batch went before the one in flight was held for FirstHold")

	// {1} outlives its hold too; {2} waits for a handler (both are busy).
	// When {1} ends, its handler takes {2}, whose hold is its own: its
	// timer, which fired for {1}, is set again.
	require.Eventually(t, func() bool { return partials() == 0 }, 5*time.Second, time.Millisecond, "{1} outlived its hold")
	require.NoError(t, b.Post(2))
	close(g.gates[1])
	third := g.next(t)
	assert.Equal(t, []int{2}, third.batch)
	assert.Equal(t, 1, partials(), "{2} holds its place")
	require.Eventually(t, func() bool { return partials() == 0 }, 10*time.Second, time.Millisecond,
		"{2}, stuck, never stopped holding its place")
}

func TestPartialHoldValidate(t *testing.T) {
	_, err := New(&Options{MaxItems: 2, MaxPartial: 1, PartialHold: -time.Second}, func([]int, []error) {})
	assert.Error(t, err)
}

// TestPartialHoldFollowsUsualTime: where batches usually take longer than
// PartialHold (a distant service), a partial batch holds its place for
// HoldFactor times their usual time: a merely slow batch keeps Nagle's
// rule, and only one far slower than usual lets the next partial batch go.
func TestPartialHoldFollowsUsualTime(t *testing.T) {
	const took = 30 * time.Millisecond
	gate := make(chan struct{})
	entered := make(chan started, 16)
	b, err := New(&Options{MaxHandlers: 4, MaxItems: 3, MaxPartial: 1, PartialHold: time.Millisecond}, func(batch []int, _ []error) {
		entered <- started{slices.Clone(batch), time.Now()}
		if batch[0] >= 100 {
			<-gate
			return
		}
		time.Sleep(took)
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		close(gate)
		b.Shutdown()
	})
	for i := range 5 { // the usual time: 30 ms
		require.NoError(t, b.Add(t.Context(), i))
		<-entered
	}
	require.NoError(t, b.Post(100)) // stuck
	first := <-entered
	require.NoError(t, b.Post(101))
	var second started
	select {
	case second = <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the partial batch behind a stuck one never started")
	}
	assert.Equal(t, []int{101}, second.batch)
	assert.GreaterOrEqual(t, second.at.Sub(first.at), HoldFactor*took-5*time.Millisecond,
		"a partial batch went before the one in flight was held for %d times the usual time per batch", HoldFactor)
}
