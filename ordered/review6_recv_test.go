package ordered_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestReview6ReceiveCtxEndsAtTake: a Receive caller whose ctx ends between
// the step that hands it a message and the check after it (here: while
// Lease runs in that check) gets ctx's error; the message is given back as
// the same attempt, next in line, not counted as delivered, and the next
// Receive gets it, then the rest in order.
func TestReview6ReceiveCtxEndsAtTake(t *testing.T) {
	for _, mode := range []ordered.Mode{ordered.AtLeastOnce, ordered.ExactlyOnce} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
			var ctx1 context.Context
			cancel1 := func() {}   // the ctx of the Receive under test, cancelled by Lease
			var calls atomic.Int32 // armed: Lease calls left before the cancel
			calls.Store(-1)
			o := &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Mode: mode, Lease: func() error {
				if calls.Load() > 0 && calls.Add(-1) == 0 {
					cancel1()
				}
				return nil
			}}}
			q := rxQueue(t, drv, memstore.New(), o)
			defer rxClose(t, q)
			rxSend(t, drv, rxBodies("a", 1, 1, 3, nil))
			bg := context.Background()
			tctx, tc := context.WithTimeout(bg, 10*time.Second)
			defer tc()
			// Round 1: the hand-out comes through the waiter.
			calls.Store(2)
			ctx1, cancel1 = context.WithCancel(tctx)
			defer cancel1()
			m, err := q.Receive(ctx1)
			require.ErrorIs(t, err, context.Canceled, "got %v", m)
			m, err = q.Receive(tctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), m.Seq)
			assert.Equal(t, 1, m.Attempt)
			require.Eventually(t, func() bool { return q.Stats().Receive.Buffered >= 2 }, 5*time.Second, time.Millisecond)
			require.NoError(t, m.Ack(tctx))
			// Round 2: seq 2 is ready at the step (the new check).
			calls.Store(2)
			ctx1, cancel1 = context.WithCancel(tctx)
			defer cancel1()
			m, err = q.Receive(ctx1)
			require.ErrorIs(t, err, context.Canceled, "got %v", m)
			st := q.Stats().Receive
			var got []uint64
			for range 2 {
				m, err := q.Receive(tctx)
				require.NoError(t, err)
				got = append(got, m.Seq)
				if len(got) == 1 {
					assert.Equal(t, 1, m.Attempt, "the given-back message keeps its attempt")
				}
				require.NoError(t, m.Ack(tctx))
			}
			assert.Equal(t, []uint64{2, 3}, got)
			assert.Equal(t, int64(1), st.Delivered, "Delivered counts only seq 1 after two give-backs")
		})
	}
}

// TestReview6RunCloseAtTake: Close begins while a busy Run worker checks
// the hand-out its ack step made: the message is given back to the queue
// (visibility shortened), Run returns ErrClosed, and a second receiver gets
// the rest in order within seconds (the visibility timeout is 30 s).
func TestReview6RunCloseAtTake(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for _, mode := range []ordered.Mode{ordered.AtLeastOnce, ordered.ExactlyOnce} {
		for _, sync := range []bool{false, true} {
			t.Run(fmt.Sprint(mode, sync), func(t *testing.T) {
				drv := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
				store := memstore.New()
				var calls atomic.Int32
				calls.Store(-1)
				var q *ordered.Queue
				closed := make(chan error, 1)
				o := &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Mode: mode, SyncAck: sync && mode == ordered.AtLeastOnce, Concurrency: 1, Lease: func() error {
					if calls.Load() > 0 && calls.Add(-1) == 0 {
						go func() {
							ctx, c := context.WithTimeout(context.Background(), 10*time.Second)
							defer c()
							closed <- q.Close(ctx)
						}()
						time.Sleep(50 * time.Millisecond)
					}
					return nil
				}}}
				q = rxQueue(t, drv, store, o)
				rxSend(t, drv, rxBodies("a", 1, 1, 3, nil))
				var handled []uint64
				ctx, c := context.WithTimeout(context.Background(), 10*time.Second)
				defer c()
				err := q.Run(ctx, func(_ context.Context, m *ordered.Message) error {
					handled = append(handled, m.Seq)
					if mode == ordered.ExactlyOnce {
						require.NoError(t, store.Advance(context.Background(), []seqstore.Advance{m.CursorAdvance()}))
					}
					if m.Seq == 1 {
						require.Eventually(t, func() bool { return q.Stats().Receive.Buffered >= 2 }, 5*time.Second, time.Millisecond)
						if sync && mode == ordered.AtLeastOnce {
							calls.Store(3) // ack, top, take
						} else {
							calls.Store(2) // top, take
						}
					}
					return nil
				})
				require.ErrorIs(t, err, ordered.ErrClosed)
				require.NoError(t, <-closed)
				assert.Equal(t, []uint64{1}, handled)
				assert.Equal(t, []uint64{2, 3}, review6Next(t, drv, store, mode, 2), "the next receiver, within 5 s")
			})
		}
	}
}

// TestReview6RunLeaseEndsAtTakeThenClose: the lease ends at the check after
// the ack step; Run returns the lease's error with only seq 1 handled; after
// Close, the next receiver gets 2 and 3 in order, within seconds.
func TestReview6RunLeaseEndsAtTakeThenClose(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for _, mode := range []ordered.Mode{ordered.AtLeastOnce, ordered.ExactlyOnce} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
			store := memstore.New()
			var left atomic.Int32
			left.Store(-1)
			o := &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Mode: mode, Concurrency: 2, Lease: func() error {
				if left.Load() < 0 || left.Add(-1) >= 0 {
					return nil
				}
				return errLeaseGone
			}}}
			q := rxQueue(t, drv, store, o)
			rxSend(t, drv, rxBodies("a", 1, 1, 3, nil))
			var handled []uint64
			ctx, c := context.WithTimeout(context.Background(), 10*time.Second)
			defer c()
			err := q.Run(ctx, func(_ context.Context, m *ordered.Message) error {
				handled = append(handled, m.Seq)
				if mode == ordered.ExactlyOnce {
					require.NoError(t, store.Advance(context.Background(), []seqstore.Advance{m.CursorAdvance()}))
				}
				if m.Seq == 1 {
					require.Eventually(t, func() bool { return q.Stats().Receive.Buffered >= 2 }, 5*time.Second, time.Millisecond)
					left.Store(1)
				}
				return nil
			})
			require.ErrorIs(t, err, errLeaseGone)
			assert.Equal(t, []uint64{1}, handled)
			rxClose(t, q)
			assert.Equal(t, int64(1), q.Stats().Receive.Delivered)
			assert.Equal(t, []uint64{2, 3}, review6Next(t, drv, store, mode, 2), "the next receiver, within 5 s")
		})
	}
}

// TestReview6ReceiveCloseFinishedAtTake: Close runs while a Receive caller
// is between the step that handed it a message and its check (here: in a
// slow Lease call). Close waits for that check, which sees Close and gives
// the message back to the queue: the next receiver gets it within seconds
// (the visibility timeout is 30 s). The review found Close returning first,
// and the give-back, after it, never sent.
func TestReview6ReceiveCloseFinishedAtTake(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
	store := memstore.New()
	var calls atomic.Int32
	calls.Store(-1)
	inLease, release := make(chan struct{}), make(chan struct{})
	o := &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Lease: func() error {
		if calls.Load() > 0 && calls.Add(-1) == 0 {
			close(inLease)
			<-release
		}
		return nil
	}}}
	q := rxQueue(t, drv, store, o)
	rxSend(t, drv, rxBodies("a", 1, 1, 2, nil))
	ctx, c := context.WithTimeout(context.Background(), 10*time.Second)
	defer c()
	m, err := q.Receive(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return q.Stats().Receive.Buffered >= 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, m.Ack(ctx))
	calls.Store(2) // the check at the top, then the one after the step
	cerr := make(chan error, 1)
	go func() {
		<-inLease
		cctx, cc := context.WithTimeout(context.Background(), 5*time.Second)
		defer cc()
		cerr <- q.Close(cctx)
	}()
	go func() {
		<-inLease
		time.Sleep(200 * time.Millisecond) // Close is under way
		close(release)
	}()
	m, err = q.Receive(ctx)
	require.ErrorIs(t, err, ordered.ErrClosed, "got %v", m)
	require.NoError(t, <-cerr, "Close")
	assert.Equal(t, int64(1), q.Stats().Receive.GivenBack, "the hand-out given back to the queue")
	assert.Equal(t, []uint64{2}, review6Next(t, drv, store, ordered.AtLeastOnce, 1), "seq 2 comes back within 5 s")
}

// review6Next opens the next receiver on drv and store in mode and returns
// the seqs of the n messages it receives within 5 s, each settled (in
// ExactlyOnce, its advance written as the application's transaction would).
func review6Next(t *testing.T, drv *memqueue.Queue, store *memstore.Store, mode ordered.Mode, n int) []uint64 {
	t.Helper()
	q := rxQueue(t, drv, store, &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Mode: mode}})
	defer rxClose(t, q)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []uint64
	for range n {
		m, err := q.Receive(ctx)
		require.NoError(t, err, "got %v", got)
		got = append(got, m.Seq)
		if mode == ordered.ExactlyOnce {
			require.NoError(t, store.Advance(ctx, []seqstore.Advance{m.CursorAdvance()}))
		}
		require.NoError(t, m.Ack(ctx))
	}
	return got
}
