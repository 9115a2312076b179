package mnsqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// newFIFO creates a FIFO queue on srv and returns its name.
func newFIFO(t *testing.T, srv *mnstest.Server, visibility int) string {
	t.Helper()
	name := uniqueName("fifo")
	require.NoError(t, srv.CreateQueue(name, &mnstest.QueueAttributes{QueueType: mnstest.QueueTypeFIFO, VisibilityTimeout: visibility}))
	return name
}

// The driver finds a FIFO queue's type, refuses to send without groups,
// sends each body's group as its MessageGroupId, and checks the type
// Options.QueueType asks for.
func TestFIFODriver(t *testing.T) {
	srv := newServer(t, nil)
	ctx := t.Context()
	name := newFIFO(t, srv, 5)
	q, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
	require.NoError(t, err)
	defer q.Close()
	require.True(t, q.Grouped(), "a FIFO queue orders its groups itself")

	err = q.SendBatch(ctx, [][]byte{[]byte("x")})
	require.ErrorIs(t, err, driver.ErrInvalidGroup, "a FIFO queue needs every message's group")
	for _, g := range []string{"", strings.Repeat("g", mnsqueue.MaxGroupLen+1), "bad\x00group"} {
		err := q.SendGroups(ctx, [][]byte{[]byte("x")}, []string{g})
		require.ErrorIs(t, err, driver.ErrInvalidGroup, "group %q", g)
	}

	require.NoError(t, q.SendGroups(ctx, [][]byte{[]byte("a1"), []byte("b1"), []byte("a2")}, []string{"a", "b", "a"}))
	gs, err := srv.Groups(name)
	require.NoError(t, err)
	got := map[string]int{}
	for _, g := range gs {
		got[g.ID] = g.Messages
	}
	assert.Equal(t, map[string]int{"a": 2, "b": 1}, got, "the service saw each body's group")
	ms, err := q.ReceiveBatch(ctx, 16, 0)
	require.NoError(t, err)
	var bodies []string
	for _, m := range ms {
		bodies = append(bodies, string(m.Body))
		assert.Equal(t, string(m.Body[:1]), m.Group, "the MessageGroupId the service returned, on driver.Message")
	}
	assert.ElementsMatch(t, []string{"a1", "b1"}, bodies, "one message of a group at a time: a2 waits behind a1")

	// The type asked for is checked.
	_, err = mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), &mnsqueue.Options{QueueType: mnsqueue.QueueTypeNormal})
	require.ErrorIs(t, err, mnsqueue.ErrQueueType)
	std := uniqueName("std")
	require.NoError(t, srv.CreateQueue(std, nil))
	_, err = mnsqueue.New(ctx, srv.Endpoint(), std, serverCred(srv), &mnsqueue.Options{QueueType: mnsqueue.QueueTypeFIFO})
	require.ErrorIs(t, err, mnsqueue.ErrQueueType)
	s, err := mnsqueue.New(ctx, srv.Endpoint(), std, serverCred(srv), nil)
	require.NoError(t, err)
	defer s.Close()
	require.False(t, s.Grouped())
}

// ordered.Queue over a FIFO queue keeps its API and its promises, in each
// delivery mode, with the emulator's faults on: every group sees 1..n in
// order, once.
func TestOrderedOverFIFO(t *testing.T) {
	for _, mode := range []ordered.Mode{ordered.AtLeastOnce, ordered.AtMostOnce, ordered.ExactlyOnce} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			const groups, n = 20, 30
			srv := newServer(t, &mnstest.Options{Seed: 7, Faults: mnstest.Faults{Redeliver: 0.05, Error5xx: 0.02}})
			name := newFIFO(t, srv, 5)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			open := func(o *ordered.Options, store *memstore.Store) *ordered.Queue {
				drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), &mnsqueue.Options{QueueType: mnsqueue.QueueTypeFIFO})
				require.NoError(t, err)
				q, err := ordered.New(ctx, drv, store, o)
				require.NoError(t, err)
				t.Cleanup(func() {
					cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					defer cancel()
					assert.NoError(t, q.Close(cctx))
					assert.NoError(t, drv.Close())
				})
				return q
			}
			tx := open(nil, memstore.New())
			rxStore := memstore.New()
			rx := open(&ordered.Options{Receive: ordered.ReceiveOptions{Mode: mode, Wait: time.Second, Concurrency: 32}}, rxStore)
			rec := newGroupRecorder(groups * n)
			if mode == ordered.ExactlyOnce {
				// The application's write: with a SQL store, AdvanceTx in
				// its own transaction; here the store's Advance.
				rec.apply = func(ctx context.Context, m *ordered.Message) error {
					return rxStore.Advance(ctx, []seqstore.Advance{m.CursorAdvance()})
				}
			}
			runErr := make(chan error, 1)
			start := time.Now()
			go func() { runErr <- runUntil(rx, rec, 50*time.Second) }()
			sendGroups(t, ctx, tx, groups, n, 4)
			require.NoError(t, <-runErr, "receiving every message")
			took := time.Since(start)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			assert.Empty(t, rec.bad, "out-of-order, duplicate or unordered deliveries")
			for g, last := range rec.next {
				assert.Equal(t, n, last, "last body of group %s", g)
			}
			st := srv.Stats()
			t.Logf("%d groups x %d in %v (%.0f msgs/s); server: sent %d, received %d, deleted %d; injected %d 5xx, %d redeliveries",
				groups, n, took.Round(time.Millisecond), float64(groups*n)/took.Seconds(), st.Sent, st.Received, st.Deleted, st.Errors5xx, st.Redelivered)
		})
	}
}

// A hot group on a FIFO queue is bounded by the service's one message in
// flight per group: each message waits for the previous one's delete.
// Measured here against the same stream on a standard queue. The sender
// pipelines its batches, so some land out of order: the receiver parks
// each early arrival at once (recvcore.Config.ParkEarly), or the group
// would wait for ever for a seq the service holds back behind it (with
// ParkEarly off this test receives 1 of 200).
func TestFIFOHotGroup(t *testing.T) {
	const n = 200
	rate := map[string]float64{}
	for _, fifo := range []bool{false, true} {
		srv := newServer(t, nil)
		name := uniqueName("hot")
		typ := mnstest.QueueTypeNormal
		if fifo {
			typ = mnstest.QueueTypeFIFO
		}
		require.NoError(t, srv.CreateQueue(name, &mnstest.QueueAttributes{QueueType: typ, VisibilityTimeout: 5}))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
		require.NoError(t, err)
		tx, err := ordered.New(ctx, drv, memstore.New(), nil)
		require.NoError(t, err)
		sendGroups(t, ctx, tx, 1, n, 1)
		rx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{Wait: time.Second}})
		require.NoError(t, err)
		rec := newGroupRecorder(n)
		start := time.Now()
		require.NoError(t, runUntil(rx, rec, 30*time.Second), "%s queue", typ)
		took := time.Since(start)
		rec.mu.Lock()
		assert.Empty(t, rec.bad)
		rec.mu.Unlock()
		rate[typ] = n / took.Seconds()
		require.NoError(t, errors.Join(rx.Close(ctx), tx.Close(ctx), drv.Close()))
		cancel()
	}
	t.Logf("one group of %d: %.0f msgs/s on a standard queue, %.0f on a FIFO queue (ratio %.2f)",
		n, rate[mnstest.QueueTypeNormal], rate[mnstest.QueueTypeFIFO], rate[mnstest.QueueTypeFIFO]/rate[mnstest.QueueTypeNormal])
}

// mnsqueue.CreateQueue makes a FIFO queue when asked (the SDK v1.0.11
// cannot say QueueType): the driver then finds it FIFO; creating it again
// the same way succeeds, as a standard queue fails with ErrQueueExists.
func TestCreateFIFOQueue(t *testing.T) {
	srv := newServer(t, nil)
	ctx := t.Context()
	name := uniqueName("made-fifo")
	attrs := &mnsqueue.QueueAttributes{QueueType: mnsqueue.QueueTypeFIFO, Visibility: 5 * time.Second}
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), serverCred(srv), name, attrs))
	info, err := srv.Queue(name)
	require.NoError(t, err)
	require.Equal(t, mnstest.QueueTypeFIFO, info.Attributes.QueueType, "the service made a FIFO queue")
	require.Equal(t, 5, info.Attributes.VisibilityTimeout)
	q, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), &mnsqueue.Options{QueueType: mnsqueue.QueueTypeFIFO})
	require.NoError(t, err)
	require.True(t, q.Grouped())
	require.NoError(t, q.Close())
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), serverCred(srv), name, attrs), "idempotent")
	err = mnsqueue.CreateQueue(ctx, srv.Endpoint(), serverCred(srv), name, &mnsqueue.QueueAttributes{Visibility: 5 * time.Second})
	require.ErrorIs(t, err, mnsqueue.ErrQueueExists, "a standard queue of the same name")
	err = mnsqueue.CreateQueue(ctx, srv.Endpoint(), serverCred(srv), uniqueName("bad"), &mnsqueue.QueueAttributes{QueueType: "lifo"})
	require.ErrorContains(t, err, "QueueType")
}

// A FIFO queue needs parking: New refuses NoPark on it.
func TestFIFONeedsParking(t *testing.T) {
	srv := newServer(t, nil)
	name := newFIFO(t, srv, 5)
	drv, err := mnsqueue.New(t.Context(), srv.Endpoint(), name, serverCred(srv), nil)
	require.NoError(t, err)
	defer drv.Close()
	_, err = ordered.New(t.Context(), drv, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{NoPark: true}})
	require.ErrorContains(t, err, "NoPark on a queue that orders each group itself")
}
