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
// back for PartialHold, then lets one go while it is still in flight (a
// stuck request does not stall them for good); the count starts again for
// each batch a handler takes.
func TestPartialHold(t *testing.T) {
	const hold = 200 * time.Millisecond
	g := newGatedBatches()
	b, err := New(&Options{MaxHandlers: 4, MaxItems: 3, MaxPartial: 1, PartialHold: hold}, g.handle)
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

	require.NoError(t, b.Post(0))
	first := g.next(t)
	require.Equal(t, []int{0}, first.batch)
	require.NoError(t, b.Post(1))
	second := g.next(t) // {0} never ends
	assert.Equal(t, []int{1}, second.batch)
	assert.GreaterOrEqual(t, second.at.Sub(first.at), hold, "a partial batch went before the one in flight was held for PartialHold")

	// {1} ends before its hold: the handler takes {2}, and its hold starts
	// then, not when the handler took {1}.
	require.NoError(t, b.Post(2))
	time.Sleep(hold / 2)
	close(g.gates[1])
	third := g.next(t)
	assert.Equal(t, []int{2}, third.batch)
	require.NoError(t, b.Post(3))
	fourth := g.next(t)
	assert.Equal(t, []int{3}, fourth.batch)
	assert.GreaterOrEqual(t, fourth.at.Sub(third.at), hold, "the hold of a handler's next partial batch counts from when it was taken")
}

func TestPartialHoldValidate(t *testing.T) {
	_, err := New(&Options{MaxItems: 2, MaxPartial: 1, PartialHold: -time.Second}, func([]int, []error) {})
	assert.Error(t, err)
}
