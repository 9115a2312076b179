package ordered_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestReceiveBoundedMemory floods the receiver with early arrivals and a
// forged seq far ahead while every group's seq 1 is missing: the buffer
// must stay within Window per group and MaxMemory overall, and no message
// may be deleted unseen. Once the seq 1s arrive, everything is delivered in
// order: what was not kept came back. (MaxMemory covers everything held,
// group state included: 20 groups cost about 16 KB of it.)
//
// With parking, arrivals beyond the bounds are parked; without
// (ReceiveOptions.NoPark), they go back to the queue and come back, about
// ten receives per message here, so that variant lifts MaxUndeletedRate (at
// the default 900/s net it would take a minute).
func TestReceiveBoundedMemory(t *testing.T) {
	t.Run("park", func(t *testing.T) { testReceiveBoundedMemory(t, true, 0) })
	t.Run("no-park", func(t *testing.T) { testReceiveBoundedMemory(t, false, 1e6) })
}

func testReceiveBoundedMemory(t *testing.T, parks bool, rate float64) {
	store := memstore.New()
	// What the budget may be passed by: a batch being routed and the next
	// one received, per fetcher (2), 16 messages of about 500 charged
	// bytes each (the msg record, body, id and receipt). Seen up to 27.6
	// KB over under -race on a loaded machine.
	const memSlack = 2 * 2 * 16 * 512
	const (
		window   = 32
		maxBytes = 48 << 10
		groups   = 20
		n        = 150
	)
	drv := memqueue.New(&memqueue.Options{Shards: 4, Seed: 5, Visibility: 50 * time.Millisecond})
	q := rxQueue(t, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{
		Wait: 10 * time.Millisecond, Window: window, MaxMemory: maxBytes, ReapInterval: 10 * time.Millisecond,
		MaxUndeletedRate: rate, NoPark: !parks,
	}})
	bs := [][]byte{rxBody("g0", 1, 1<<40)} // forged, far ahead
	for g := range groups {
		bs = append(bs, rxBodies(fmt.Sprintf("g%d", g), 1, 2, n, nil)...)
	}
	rxSend(t, drv, bs)

	var delivered deliveries
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan error, 1)
	go func() {
		runDone <- q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
			delivered.add(m)
			return nil
		})
	}()
	var maxBytesSeen, maxMsgsSeen, maxMemSeen int
	sample := func() {
		st := q.Stats().Receive
		maxBytesSeen = max(maxBytesSeen, st.BufferedBytes)
		maxMsgsSeen = max(maxMsgsSeen, st.Buffered)
		maxMemSeen = max(maxMemSeen, st.Memory)
	}
	// Wait until the flood has reached the receiver (as many messages
	// received as were sent) and met the bounds (some parked, or given
	// back): a condition, not a fixed time, so that a loaded machine
	// cannot fail the checks below for being slow.
	deadline := time.Now().Add(20 * time.Second)
	for {
		sample()
		st := q.Stats().Receive
		if st.Received >= int64(len(bs)) && (parks && st.Parked > 0 || !parks && st.NotKept > 0) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the flood of %d messages not taken in after 20s: received %d, parked %d, not kept %d",
			len(bs), st.Received, st.Parked, st.NotKept)
		time.Sleep(5 * time.Millisecond)
	}
	// The queue's count first: a message is parked before its delete, so
	// parks counted after deletes cover them.
	deleted := drv.Stats().Deleted
	st := q.Stats().Receive
	assert.Zero(t, delivered.total, "nothing is deliverable while every seq 1 is missing")
	if parks {
		assert.Positive(t, st.Parked, "arrivals beyond the bounds were parked")
		assert.LessOrEqual(t, deleted, st.Parked, "nothing undelivered is deleted unless parked")
	} else {
		assert.Zero(t, deleted, "nothing undelivered is deleted")
		assert.Positive(t, st.NotKept, "arrivals beyond the bounds were not kept")
	}
	assert.LessOrEqual(t, st.MaxBuffered, groups*window, "per-group window")
	assert.LessOrEqual(t, maxBytesSeen, maxBytes, "global byte bound")
	assert.LessOrEqual(t, maxMemSeen, maxBytes+memSlack, "memory budget, give or take two receive batches per fetcher")

	var firsts [][]byte
	for g := range groups {
		firsts = append(firsts, rxBody(fmt.Sprintf("g%d", g), 1, 1))
	}
	rxSend(t, drv, firsts)
	deadline = time.Now().Add(20 * time.Second)
	for {
		sample()
		delivered.mu.Lock()
		total := delivered.total
		delivered.mu.Unlock()
		if total == groups*n {
			break
		}
		require.True(t, time.Now().Before(deadline), "delivered %d of %d", total, groups*n)
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-runDone)
	rxClose(t, q)
	for g := range groups {
		name := fmt.Sprintf("g%d", g)
		consecutive(t, "bounded", name, delivered.seqs[name], 1)
		assert.Len(t, delivered.seqs[name], n, "group %q", name)
	}
	st = q.Stats().Receive
	assert.LessOrEqual(t, st.MaxBuffered, groups*window)
	assert.LessOrEqual(t, maxBytesSeen, maxBytes)
	assert.LessOrEqual(t, maxMemSeen, maxBytes+memSlack, "memory budget, give or take two receive batches per fetcher")
	t.Logf("peak buffered %d messages, %d bytes, %d bytes charged (budget %d); not kept %d, parked %d", st.MaxBuffered, maxBytesSeen, maxMemSeen, maxBytes, st.NotKept, st.Parked)
	vis, inflight := drv.Len()
	if !parks {
		// Besides the forged message, copies given back late may still be
		// on their way back (a later receiver deletes them as duplicates):
		// each must be of a seq that was delivered.
		assert.GreaterOrEqual(t, vis+inflight, 1, "the forged message is never deleted")
		time.Sleep(100 * time.Millisecond) // their visibility (50 ms) ends
		forged := 0
		for {
			ms, err := drv.ReceiveBatch(context.Background(), 16, 0)
			require.NoError(t, err)
			if len(ms) == 0 {
				break
			}
			for _, m := range ms {
				h, _, ok := envelope.Parse(m.Body)
				require.True(t, ok, "a tagged body")
				if h.Group == "g0" && h.Seq == 1<<40 {
					forged++
				} else {
					assert.LessOrEqual(t, h.Seq, uint64(n), "%s/%d left in the queue was delivered", h.Group, h.Seq)
				}
				require.NoError(t, drv.DeleteBatch(context.Background(), []string{m.Receipt}))
			}
		}
		assert.Equal(t, 1, forged, "the forged message is left, never deleted")
		return
	}
	// The forged message was parked, then deleted from the queue: the park
	// holds it, still waiting for its turn.
	assert.Zero(t, vis+inflight, "the forged message left the queue once parked")
	got, err := store.Unpark(context.Background(), []seqstore.ParkQuery{
		{Stream: seqstore.Stream{Queue: "default", Group: "g0"}, Epoch: 1, From: 1, Max: 10}})
	require.NoError(t, err)
	require.Len(t, got[0], 1, "the park holds the forged message")
	assert.Equal(t, uint64(1<<40), got[0][0].Seq)
}

// TestReceiveSenderReset wipes the sender's store mid-run: the new sender
// starts a new epoch at seq 1 and the receiver must switch to it and keep
// delivering.
func TestReceiveSenderReset(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Shards: 4, Seed: 8, Redeliver: 0.05})
	var epochs []ordered.Event
	var mu sync.Mutex
	rq := rxQueue(t, drv, memstore.New(), &ordered.Options{
		Hooks: ordered.Hooks{OnEpoch: func(e ordered.Event) { mu.Lock(); epochs = append(epochs, e); mu.Unlock() }},
		Receive: ordered.ReceiveOptions{
			Wait: 10 * time.Millisecond, GapTimeout: 100 * time.Millisecond,
		},
	})
	var got deliveries
	rc := newRxRecorder(80)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() {
		runDone <- rq.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
			got.add(m)
			defer rc.record(m)()
			return nil
		})
	}()
	send := func(store seqstore.Store, from, to int) {
		sq := rxQueue(t, drv, store, nil)
		for i := from; i <= to; i++ {
			require.NoError(t, sq.Send(context.Background(), "g", []byte(fmt.Sprint(i))))
		}
		rxClose(t, sq)
	}
	send(memstore.New(), 1, 40)
	time.Sleep(5 * time.Millisecond) // epochs are ordered by the millisecond
	send(memstore.New(), 41, 80)     // a wiped store: new epoch, seqs from 1 again
	rxWait(t, rc, 20*time.Second)
	cancel()
	require.NoError(t, <-runDone)
	rxClose(t, rq)
	consecutive(t, "sender reset", "g", got.seqs["g"][:40], 1)
	consecutive(t, "sender reset", "g", got.seqs["g"][40:], 1)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, epochs, 1, "one epoch switch")
	assert.Less(t, epochs[0].From, epochs[0].Epoch)
}

func TestReceiveUntagged(t *testing.T) {
	for _, policy := range []ordered.UntaggedPolicy{ordered.UntaggedDeliver, ordered.UntaggedDeadLetter, ordered.UntaggedReject} {
		t.Run(policy.String(), func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: time.Minute})
			dlq := memqueue.New(nil)
			var untagged atomic.Int64
			q := rxQueue(t, drv, memstore.New(), &ordered.Options{
				Hooks: ordered.Hooks{OnUntagged: func(ordered.Event) { untagged.Add(1) }},
				Receive: ordered.ReceiveOptions{
					Wait: 10 * time.Millisecond, Untagged: policy, DeadLetter: dlq, ReapInterval: 5 * time.Millisecond,
				},
			})
			rxSend(t, drv, [][]byte{[]byte("plain #body"), rxBody("g", 1, 1)})
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			var ms []*ordered.Message
			for {
				m, err := q.Receive(ctx)
				if err != nil {
					break
				}
				ms = append(ms, m)
				ack(t, m)
			}
			rxClose(t, q)
			assert.Equal(t, int64(1), untagged.Load(), "OnUntagged")
			var plain []*ordered.Message
			for _, m := range ms {
				if m.Unordered {
					plain = append(plain, m)
				} else {
					assert.Equal(t, uint64(1), m.Seq)
				}
			}
			vis, inflight := drv.Len()
			dvis, _ := dlq.Len()
			switch policy {
			case ordered.UntaggedDeliver:
				require.Len(t, plain, 1, "delivered once, flagged Unordered")
				assert.Equal(t, "plain #body", string(plain[0].Body))
				assert.Equal(t, 0, vis+inflight, "acked: deleted")
			case ordered.UntaggedDeadLetter:
				assert.Empty(t, plain)
				assert.Equal(t, 1, dvis, "in the dead-letter queue")
				assert.Equal(t, 0, vis+inflight, "deleted once dead-lettered")
			case ordered.UntaggedReject:
				assert.Empty(t, plain)
				assert.Equal(t, 1, vis+inflight, "left in the queue")
			}
		})
	}
}

// TestReceiveConflict runs two receivers on one stream by mistake, each
// over its own copy of the messages: the second one's advance fails its
// compare-and-set; it reports the conflict, re-reads the cursor and never
// delivers what the stored cursor covers.
func TestReceiveConflict(t *testing.T) {
	store := memstore.New()
	ctx := context.Background()
	newRx := func(conflicts *atomic.Int64) (*memqueue.Queue, *ordered.Queue) {
		drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 100 * time.Millisecond})
		rxSend(t, drv, rxBodies("g", 1, 1, 4, nil))
		q := rxQueue(t, drv, store, &ordered.Options{
			Hooks:   ordered.Hooks{OnConflict: func(ordered.Event) { conflicts.Add(1) }},
			Receive: ordered.ReceiveOptions{Wait: 10 * time.Millisecond, SyncAck: true},
		})
		return drv, q
	}
	var c1, c2 atomic.Int64
	_, q1 := newRx(&c1)
	_, q2 := newRx(&c2)
	m, err := q2.Receive(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), m.Seq)
	for want := uint64(1); want <= 2; want++ {
		m1, err := q1.Receive(ctx)
		require.NoError(t, err)
		require.Equal(t, want, m1.Seq)
		require.NoError(t, m1.Ack(ctx), "the first receiver's SyncAck")
	}
	err = m.Ack(ctx)
	require.ErrorIs(t, err, seqstore.ErrConflict, "the second receiver's advance from the zero cursor conflicts")
	assert.ErrorIs(t, err, ordered.ErrConflict)
	// The hook runs after the step that resolved the Ack's wait, outside
	// the lock: the Ack may return first.
	assert.Eventually(t, func() bool { return c2.Load() == 1 }, 5*time.Second, time.Millisecond, "OnConflict")
	assert.Equal(t, int64(1), c2.Load(), "OnConflict once")
	assert.Equal(t, int64(1), q2.Stats().Receive.Conflicts)

	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	m, err = q2.Receive(rctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), m.Seq, "after re-reading the cursor {1,3}, seq 2 is a duplicate")
	require.NoError(t, m.Ack(ctx))
	rxClose(t, q2)
	rxClose(t, q1)
	assert.Zero(t, c1.Load())
	c, err := storeCursor(ctx, store, seqstore.Stream{Queue: "default", Group: "g"})
	require.NoError(t, err)
	assert.Equal(t, uint64(4), c.Next)
}

// TestReceiveExactlyOnce: the application advances the cursor itself (here
// straight on the store, as sqlstore.AdvanceTx would inside its
// transaction); the Queue never writes it, and a failed compare-and-set
// reported through Nack makes the group re-read its cursor.
func TestReceiveExactlyOnce(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 100 * time.Millisecond})
	store := memstore.New()
	ctx := context.Background()
	q := rxQueue(t, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{
		Mode: ordered.ExactlyOnce, Wait: 10 * time.Millisecond, ReapInterval: 5 * time.Millisecond,
	}})
	rxSend(t, drv, rxBodies("g", 3, 1, 6, nil))
	stream := seqstore.Stream{Queue: "default", Group: "g"}
	for want := uint64(1); want <= 3; want++ {
		m, err := q.Receive(ctx)
		require.NoError(t, err)
		require.Equal(t, want, m.Seq)
		adv := m.CursorAdvance()
		assert.Equal(t, stream, adv.Stream)
		assert.Equal(t, seqstore.Cursor{Epoch: 3, Next: want + 1}, adv.To)
		require.NoError(t, store.Advance(ctx, []seqstore.Advance{adv}), "the application's transaction")
		require.NoError(t, m.Ack(ctx))
	}
	// Someone else moves the cursor to 5: the application's next advance
	// fails, it reports that through Nack.
	require.NoError(t, store.Advance(ctx, []seqstore.Advance{{Stream: stream,
		From: seqstore.Cursor{Epoch: 3, Next: 4}, To: seqstore.Cursor{Epoch: 3, Next: 5}}}))
	m, err := q.Receive(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(4), m.Seq)
	err = store.Advance(ctx, []seqstore.Advance{m.CursorAdvance()})
	require.ErrorIs(t, err, seqstore.ErrConflict)
	require.NoError(t, m.Nack(ctx, err))
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	m, err = q.Receive(rctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), m.Seq, "resumes at the stored cursor")
	require.NoError(t, store.Advance(ctx, []seqstore.Advance{m.CursorAdvance()}))
	require.NoError(t, m.Ack(ctx))
	rxClose(t, q)
	assert.Zero(t, q.Stats().Requests.Advance, "the Queue never writes the cursor in ExactlyOnce")
	c, err := storeCursor(ctx, store, stream)
	require.NoError(t, err)
	assert.Equal(t, uint64(6), c.Next)
}

// countingStore is a store wrapped as a user would, for metrics: it embeds
// the seqstore.Store interface and counts cursor writes.
type countingStore struct {
	seqstore.Store
	advances atomic.Int64
}

func (s *countingStore) Advance(ctx context.Context, b []seqstore.Advance) error {
	s.advances.Add(1)
	return s.Store.Advance(ctx, b)
}

// TestReceiveWrappedStoreParks: parking is part of the store contract
// (seqstore.Store embeds seqstore.Parker), so a store wrapped by embedding
// the interface keeps it. When parking was found by a type assertion, such
// a wrapper silently lost it: a hot group then delivered 2,067 of 50,000 in
// 150 s, with parking all of them in 11 s.
func TestReceiveWrappedStoreParks(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: time.Minute})
	st := &countingStore{Store: memstore.New()}
	q := rxQueue(t, drv, st, &ordered.Options{Receive: ordered.ReceiveOptions{Wait: 10 * time.Millisecond, Window: 4}})
	rxSend(t, drv, rxBodies("g", 1, 2, 40, nil)) // seq 1 missing: beyond the window of 4, the rest is parked
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := q.Receive(withTimeout(t, 200*time.Millisecond))
	require.Error(t, err, "nothing is deliverable while seq 1 is missing")
	require.Eventually(t, func() bool { return q.Stats().Receive.Parked >= 30 }, 5*time.Second, 5*time.Millisecond,
		"the wrapped store parks what lies beyond the window")
	rxSend(t, drv, [][]byte{rxBody("g", 1, 1)})
	for s := uint64(1); s <= 40; s++ {
		m, err := q.Receive(ctx)
		require.NoError(t, err)
		require.Equal(t, s, m.Seq)
		require.NoError(t, m.Ack(ctx))
	}
	rxClose(t, q)
	assert.Positive(t, st.advances.Load(), "the wrapper saw the cursor writes")
}

func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
