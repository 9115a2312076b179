package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// The repairs end to end, over memqueue and memstore in a synctest bubble:
// each group is made stuck as an application would see it, repaired
// through the Queue, and then checked in the queue, the store, the
// dead-letter queue and the hooks.

// TestRepairSkipHoleEndToEnd: a group waiting on a hole under GapWait
// (seq 2 never sent) is moved on by SkipHole: when it returns the skip is
// durable in the store, the later seqs are delivered in order, and seq 2,
// sent late, is reported (OnLate) and handed out Unordered, never dropped.
func TestRepairSkipHoleEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{Receive: ordered.ReceiveOptions{GapTimeout: 10 * time.Second}})
		b.receiveInto()
		rxSend(t, b.drv, [][]byte{rxBody("g", 5, 1), rxBody("g", 5, 3), rxBody("g", 5, 4)})
		ack(t, b.next())
		time.Sleep(11 * time.Second)
		b.none("seq 2 is missing: GapWait waits")
		require.Len(t, b.q.Stats().Receive.Stuck, 1, "stuck on the hole")

		ctx := context.Background()
		require.NoError(t, b.q.SkipHole(ctx, "g"))
		c := b.cursor("g")
		assert.Equal(t, []seqstore.Range{{Epoch: 5, First: 2, Last: 2}}, c.Skipped, "the skip is durable when SkipHole returns")
		assert.GreaterOrEqual(t, c.Next, uint64(3))
		for want := uint64(3); want <= 4; want++ {
			m := b.next()
			assert.Equal(t, want, m.Seq, "the group moves on, in order")
			assert.False(t, m.Unordered)
			ack(t, m)
		}
		synctest.Wait()
		repairs := b.evs("repair")
		require.Len(t, repairs, 1, "OnRepair")
		assert.Equal(t, ordered.Event{Group: "g", Epoch: 5, Seq: 2, Last: 2, Age: repairs[0].Age, Action: "skip-hole"}, repairs[0])
		skips := b.evs("skip")
		require.Len(t, skips, 1, "OnSkip")
		assert.Equal(t, [3]uint64{5, 2, 2}, [3]uint64{skips[0].Epoch, skips[0].Seq, skips[0].Last})
		assert.Empty(t, b.q.Stats().Receive.Stuck)
		assert.ErrorIs(t, b.q.SkipHole(ctx, "g"), ordered.ErrNotStuck, "not stuck any more")

		rxSend(t, b.drv, [][]byte{rxBody("g", 5, 2)})
		time.Sleep(2 * time.Second)
		m := b.next()
		assert.Equal(t, uint64(2), m.Seq)
		assert.True(t, m.Unordered, "the skipped seq is handed out flagged Unordered")
		late := b.evs("late")
		require.Len(t, late, 1, "OnLate reports it")
		assert.Equal(t, uint64(2), late[0].Seq)
		ack(t, m)
		b.close()
		assert.Equal(t, uint64(5), b.cursor("g").Next)
		vis, inflight := b.drv.Len()
		assert.Equal(t, 0, vis+inflight, "every message handled and deleted")
	})
}

// TestRepairDeadLetterHeadEndToEnd: a group stuck on a poison message
// (PoisonBlock) is moved on by DeadLetterHead: while the dead-letter queue
// refuses the copy, DeadLetterHead fails and the message stays in the
// queue, the group stuck; once the copy is sent and the cursor past it is
// durable, DeadLetterHead returns, the group delivers its next message,
// and the poison message is deleted from the queue.
func TestRepairDeadLetterHeadEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dlq := &downQueue{Queue: memqueue.New(nil)}
		b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{
			Retry:   ordered.RetryOptions{Initial: time.Second, Max: 16 * time.Second},
			Receive: ordered.ReceiveOptions{MaxAttempts: 2, DeadLetter: dlq, VisibilityExtend: time.Minute},
		})
		b.receiveInto()
		rxSend(t, b.drv, [][]byte{rxBody("g", 1, 1), rxBody("g", 1, 2)})
		ctx := context.Background()
		cause := errors.New("handler failed")
		m := b.next()
		require.NoError(t, m.Nack(ctx, cause))
		time.Sleep(2 * time.Second)
		m = b.next()
		require.Equal(t, 2, m.Attempt)
		require.NoError(t, m.Nack(ctx, cause))
		synctest.Wait()
		require.Len(t, b.evs("stuck"), 1, "stuck on the poison message")

		dlq.down.Store(true)
		require.ErrorIs(t, b.q.DeadLetterHead(ctx, "g"), errDeadLetterDown, "the send's error")
		time.Sleep(5 * time.Second)
		b.none("still stuck")
		vis, inflight := b.drv.Len()
		assert.Equal(t, 2, vis+inflight, "nothing deleted without its dead-letter copy")
		assert.Less(t, b.cursor("g").Next, uint64(2), "nor passed")
		dlq.down.Store(false)
		require.NoError(t, b.q.DeadLetterHead(ctx, "g"), "asked again: waits for the send retried")
		got, err := dlq.ReceiveBatch(ctx, 16, 0)
		require.NoError(t, err)
		require.Len(t, got, 1, "the copy is in the dead-letter queue when DeadLetterHead returns")
		assert.Equal(t, rxBody("g", 1, 1), got[0].Body, "as it was on the queue")
		assert.Equal(t, uint64(2), b.cursor("g").Next, "and the cursor past it is durable")
		require.Len(t, b.evs("dead"), 1, "OnDeadLetter")
		m = b.next()
		assert.Equal(t, uint64(2), m.Seq, "the group moves on")
		ack(t, m)
		assert.Empty(t, b.q.Stats().Receive.Stuck)
		b.close()
		vis, inflight = b.drv.Len()
		assert.Equal(t, 0, vis+inflight, "the poison message was deleted (after its copy), seq 2 after its Ack")
	})
}

// TestRepairRereadEndToEnd: a group stopped by a corrupt stored cursor is
// read again at once by Reread once the store is mended, and delivers.
func TestRepairRereadEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drv := memqueue.New(&memqueue.Options{Shards: 1})
		store := &mendStore{Store: memstore.New()}
		store.bad.Store(true)
		q := rxQueue(t, drv, store, &ordered.Options{
			Retry:   ordered.RetryOptions{Max: time.Hour}, // no read again on its own within the test
			Receive: ordered.ReceiveOptions{Wait: time.Second},
		})
		rxSend(t, drv, rxBodies("g", 1, 1, 3, nil))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		go func() { _, _ = q.Receive(ctx) }() // starts the receive side: the group fails
		time.Sleep(5 * time.Second)
		st := q.Stats().Receive
		require.Len(t, st.Stuck, 1)
		require.Equal(t, "store", st.Stuck[0].Reason)

		err := q.Reread(ctx, "g")
		require.ErrorIs(t, err, seqstore.ErrCorrupt, "read again, still corrupt: the read's error")
		store.bad.Store(false)
		require.NoError(t, q.Reread(ctx, "g"))
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for want := uint64(1); want <= 3; want++ {
			m, err := q.Receive(ctx)
			require.NoError(t, err)
			assert.Equal(t, want, m.Seq)
			require.NoError(t, m.Ack(ctx))
		}
		rxClose(t, q)
	})
}

// downQueue is a dead-letter queue that refuses sends while down is set.
type downQueue struct {
	*memqueue.Queue
	down atomic.Bool
}

var errDeadLetterDown = errors.New("dead-letter queue down")

func (q *downQueue) SendBatch(ctx context.Context, bodies [][]byte) error {
	if q.down.Load() {
		return errDeadLetterDown
	}
	return q.Queue.SendBatch(ctx, bodies)
}

// mendStore reports every stored cursor as corrupt while bad is set.
type mendStore struct {
	*memstore.Store
	bad atomic.Bool
}

func (s *mendStore) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	if s.bad.Load() {
		errs := make([]error, len(streams))
		for i, st := range streams {
			errs[i] = fmt.Errorf("cursor of %s: %w", st, seqstore.ErrCorrupt)
		}
		return nil, &seqstore.BatchError{Errs: errs}
	}
	return s.Store.Cursors(ctx, streams)
}

// TestRepairStartAtEndToEnd: a receiver with no stored cursor that joins
// a running stream (StartFirst, GapWait: it waits for a seq 1 long gone)
// starts where StartAt says: durable when it returns, the later seqs
// delivered in order, a seq below reported late and handed out Unordered.
func TestRepairStartAtEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{Receive: ordered.ReceiveOptions{GapTimeout: 10 * time.Second}})
		b.receiveInto()
		rxSend(t, b.drv, rxBodies("g", 5, 40, 42, nil))
		time.Sleep(11 * time.Second)
		b.none("waiting for seq 1")
		require.Len(t, b.q.Stats().Receive.Stuck, 1)

		ctx := context.Background()
		assert.Error(t, b.q.StartAt(ctx, "g", 5, 0), "seq 0 is no seq")
		require.NoError(t, b.q.StartAt(ctx, "g", 5, 40))
		assert.Equal(t, seqstore.Cursor{Epoch: 5, Next: 40, Skipped: []seqstore.Range{{Epoch: 5, First: 1, Last: 39}}}, b.cursor("g"),
			"the start is durable when StartAt returns")
		for want := uint64(40); want <= 42; want++ {
			m := b.next()
			assert.Equal(t, want, m.Seq)
			assert.False(t, m.Unordered)
			ack(t, m)
		}
		assert.ErrorIs(t, b.q.StartAt(ctx, "g", 5, 50), ordered.ErrNotStuck, "it has a cursor now")
		rxSend(t, b.drv, [][]byte{rxBody("g", 5, 7)})
		time.Sleep(2 * time.Second)
		m := b.next()
		assert.True(t, m.Unordered, "below the start: late")
		assert.Equal(t, uint64(7), m.Seq)
		require.Len(t, b.evs("late"), 1)
		ack(t, m)
		b.close()
	})
}

// TestRepairRefusals: the repairs refuse what they cannot do, and do
// nothing then.
func TestRepairRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{Receive: ordered.ReceiveOptions{MaxAttempts: 1, GapTimeout: 10 * time.Second}})
		ctx := context.Background()
		all := map[string]func(string) error{
			"dead-letter-head": func(g string) error { return b.q.DeadLetterHead(ctx, g) },
			"skip-hole":        func(g string) error { return b.q.SkipHole(ctx, g) },
			"reread":           func(g string) error { return b.q.Reread(ctx, g) },
			"start-at":         func(g string) error { return b.q.StartAt(ctx, g, 1, 5) },
		}
		for name, f := range all {
			assert.ErrorIs(t, f("g"), ordered.ErrNotStuck, "%s before anything was received", name)
		}
		b.receiveInto()
		rxSend(t, b.drv, [][]byte{rxBody("p", 1, 1), rxBody("p", 1, 2), rxBody("g", 1, 1), rxBody("g", 1, 2)})
		for range 3 {
			m := b.next()
			if m.Group == "p" {
				require.NoError(t, m.Nack(ctx, errors.New("poison")))
			} else {
				ack(t, m)
			}
		}
		synctest.Wait()
		err := b.q.DeadLetterHead(ctx, "p")
		assert.ErrorIs(t, err, ordered.ErrNoDeadLetter, "no dead-letter queue: refused, the message would be lost")
		assert.ErrorContains(t, err, `ordered: dead-letter-head: group "p": `)
		for name, f := range all {
			if name != "dead-letter-head" { // (refused for its missing dead-letter queue first)
				assert.ErrorIs(t, f("g"), ordered.ErrNotStuck, "%s on a healthy group", name)
			}
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		assert.ErrorIs(t, b.q.SkipHole(cctx, "g"), context.Canceled)
		b.close()
		for name, f := range all {
			assert.ErrorIs(t, f("g"), ordered.ErrClosed, "%s after Close", name)
		}
		vis, inflight := b.drv.Len()
		assert.Equal(t, 2, vis+inflight, "the poison message and the one behind it stay in the queue")
		assert.Empty(t, b.evs("repair"), "nothing refused is reported as a repair")
	})
}
