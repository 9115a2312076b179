package ordered_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// measures collects OnSettle and OnCommit events.
type measures struct {
	mu      sync.Mutex
	settles []ordered.Event
	commits []ordered.Event
}

func (m *measures) hooks() ordered.Hooks {
	return ordered.Hooks{
		OnSettle: func(ev ordered.Event) { m.mu.Lock(); m.settles = append(m.settles, ev); m.mu.Unlock() },
		OnCommit: func(ev ordered.Event) { m.mu.Lock(); m.commits = append(m.commits, ev); m.mu.Unlock() },
	}
}

func (m *measures) settled() []ordered.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ordered.Event(nil), m.settles...)
}

func (m *measures) committed() []ordered.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ordered.Event(nil), m.commits...)
}

// OnSettle reports each accepted Ack and Nack, with the time the message
// was out, before Ack or Nack returns; OnCommit reports each cursor write.
func TestHooksOnSettleOnCommit(t *testing.T) {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	var ms measures
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "orders", Hooks: ms.hooks(),
		Retry:   ordered.RetryOptions{Initial: time.Millisecond, Max: 5 * time.Millisecond},
		Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, MaxUndeleted: 100}})
	require.NoError(t, err)
	assert.Equal(t, "orders", q.Name())
	require.NoError(t, q.Send(ctx, "g", []byte("one")))
	require.NoError(t, q.Send(ctx, "g", []byte("two")))

	m, err := q.Receive(ctx)
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	cause := errors.New("not yet")
	require.NoError(t, m.Nack(ctx, cause))
	require.Len(t, ms.settled(), 1, "OnSettle ran before Nack returned")
	assert.ErrorIs(t, m.Nack(ctx, cause), ordered.ErrAcked)
	m, err = q.Receive(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, m.Attempt, "the nacked message again")
	require.NoError(t, m.Ack(ctx))
	assert.ErrorIs(t, m.Ack(ctx), ordered.ErrAcked)
	got := ms.settled()
	require.Len(t, got, 2, "one event per accepted Ack or Nack, before it returns")
	assert.Equal(t, "g", got[0].Group)
	assert.Equal(t, uint64(1), got[0].Seq)
	assert.Equal(t, 1, got[0].Attempt)
	assert.ErrorIs(t, got[0].Err, cause, "a Nack's cause")
	assert.GreaterOrEqual(t, got[0].Duration, 20*time.Millisecond, "from the hand-out to the Nack")
	assert.Equal(t, 2, got[1].Attempt)
	assert.NoError(t, got[1].Err, "an Ack")

	// Run: each handler's Ack is reported before the next message comes,
	// even when none does.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- q.Run(runCtx, func(context.Context, *ordered.Message) error { time.Sleep(10 * time.Millisecond); return nil })
	}()
	require.Eventually(t, func() bool { return len(ms.settled()) == 3 }, 5*time.Second, time.Millisecond,
		"the Run handler's Ack of seq 2 is reported while Run waits for more")
	cancel()
	require.NoError(t, <-done)
	last := ms.settled()[2]
	assert.Equal(t, uint64(2), last.Seq)
	assert.GreaterOrEqual(t, last.Duration, 10*time.Millisecond)

	rxClose(t, q)
	st := q.Stats()
	commits := ms.committed()
	require.NotEmpty(t, commits)
	assert.Equal(t, int(st.Receive.Commits+st.Receive.CommitFailures), len(commits), "one OnCommit per store write")
	for _, ev := range commits {
		assert.NoError(t, ev.Err)
		assert.Positive(t, ev.Duration)
	}
	assert.Equal(t, 100, st.Receive.UndeletedLimit)
}

// Stats says how many sent messages wait for their Sent mark, and the
// receive side's cap on undeleted messages, default applied, before
// anything was received.
func TestStatsUnmarkedAndLimit(t *testing.T) {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Hour}})
	require.NoError(t, err)
	assert.Equal(t, 4000, q.Stats().Receive.UndeletedLimit, "the default cap")
	require.NoError(t, q.SendBatch(ctx, "g", [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
	assert.Equal(t, int64(3), q.Stats().Send.Unmarked, "sent, their marks wait for MarkInterval")
	rxClose(t, q)
	assert.Zero(t, q.Stats().Send.Unmarked, "Close flushes the marks")
}
