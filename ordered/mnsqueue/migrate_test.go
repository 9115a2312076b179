package mnsqueue_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore/memstore"
)

// Moving a live stream from a standard queue to a FIFO queue and back,
// without losing order: the streams are (Options.Name, group) in the
// stores, not the queue, so a sender and a receiver that keep their stores
// and Name continue each group's seqs across queues. The procedure the
// README gives: the senders switch to the new queue at once (what they
// send waits there); the receiver drains the old queue, closes, and starts
// on the new one. Each leg sends n more messages per group; every group
// sees 1..3n in order, once, with no gap, skip or epoch switch.
func TestMigrateStandardFIFO(t *testing.T) {
	const groups, n = 8, 25
	srv := newServer(t, &mnstest.Options{Seed: 3, Faults: mnstest.Faults{Redeliver: 0.05}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	txStore, rxStore := memstore.New(), memstore.New()
	legs := []string{mnstest.QueueTypeNormal, mnstest.QueueTypeFIFO, mnstest.QueueTypeNormal}
	names := make([]string, len(legs))
	for i, typ := range legs {
		names[i] = uniqueName("migrate-" + typ)
		require.NoError(t, srv.CreateQueue(names[i], &mnstest.QueueAttributes{QueueType: typ, VisibilityTimeout: 5}))
	}
	open := func(name string, o *ordered.Options, store *memstore.Store) (*ordered.Queue, func()) {
		drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
		require.NoError(t, err)
		q, err := ordered.New(ctx, drv, store, o)
		require.NoError(t, err)
		return q, func() { require.NoError(t, errors.Join(q.Close(ctx), drv.Close())) }
	}
	send := func(q *ordered.Queue, leg int) {
		var rs []*ordered.SendResult
		for g := range groups {
			for i := leg*n + 1; i <= (leg+1)*n; i++ {
				r, err := q.SendAsync(ctx, "g"+strconv.Itoa(g), []byte(strconv.Itoa(i)))
				require.NoError(t, err)
				rs = append(rs, r)
			}
		}
		for _, r := range rs {
			require.NoError(t, r.Wait(ctx))
		}
	}
	var hooks ordered.Hooks
	var mu sync.Mutex
	var anomalies []string
	note := func(what string) func(ordered.Event) {
		return func(e ordered.Event) {
			mu.Lock()
			defer mu.Unlock()
			anomalies = append(anomalies, what+" "+e.Group)
		}
	}
	hooks.OnGap, hooks.OnSkip, hooks.OnEpoch, hooks.OnLate = note("gap"), note("skip"), note("epoch"), note("late")

	next := map[string]int{}
	tx, closeTx := open(names[0], nil, txStore)
	send(tx, 0)
	for leg := range legs {
		// The sender switches to the next queue first; the receiver then
		// drains this one.
		if leg+1 < len(legs) {
			closeTx()
			tx, closeTx = open(names[leg+1], nil, txStore)
			send(tx, leg+1)
		}
		rx, closeRx := open(names[leg], &ordered.Options{Hooks: hooks, Receive: ordered.ReceiveOptions{Wait: time.Second, Concurrency: 8}}, rxStore)
		rec := newGroupRecorder(groups * n)
		rec.next = next
		require.NoError(t, runUntil(rx, rec, 40*time.Second), "leg %d (%s queue)", leg, legs[leg])
		closeRx()
		rec.mu.Lock()
		require.Empty(t, rec.bad, "leg %d (%s queue): out of order, duplicate or Unordered", leg, legs[leg])
		for g := range groups {
			require.Equal(t, (leg+1)*n, next["g"+strconv.Itoa(g)], "leg %d: group g%d continues", leg, g)
		}
		rec.mu.Unlock()
	}
	closeTx()
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, anomalies, "no gap, skip, epoch switch or late arrival across the moves")
}
