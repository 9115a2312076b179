package scaleout_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// FIFO queues shard as standard ones do: S FIFO queues, each with one
// leased owner, each group on the queue of its shard and sent with its
// group as the MessageGroupId. Two receivers over four FIFO queues, one of
// them stopping halfway: every group in order, never two receivers on a
// group, nothing lost. Mixing FIFO and standard shards is refused.
func TestFIFOShards(t *testing.T) {
	const nShards, groups, per = 4, 12, 20
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv, err := mnstest.NewServer(&mnstest.Options{Seed: 5, Faults: mnstest.Faults{Redeliver: 0.02}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	cred := mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}
	names := make([]string, nShards)
	for i := range names {
		names[i] = fmt.Sprintf("fifo-%d", i)
		require.NoError(t, srv.CreateQueue(names[i], &mnstest.QueueAttributes{QueueType: mnstest.QueueTypeFIFO, VisibilityTimeout: 5}))
	}
	require.NoError(t, srv.CreateQueue("std", nil))
	open := func(names []string) []scaleout.Shard {
		out := make([]scaleout.Shard, len(names))
		for i, n := range names {
			drv, err := mnsqueue.New(ctx, srv.Endpoint(), n, cred, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = drv.Close() })
			out[i] = scaleout.Shard{Name: n, Queue: drv}
		}
		return out
	}
	store := memstore.New()
	defer store.Close()

	mixed := open([]string{names[0], "std"})
	_, err = scaleout.NewSender(ctx, mixed, memstore.New(), &ordered.Options{Name: "mixed"})
	require.ErrorIs(t, err, seqstore.ErrInvalidArgument, "FIFO and standard shards mixed")

	h := newHistory(t, 2*time.Millisecond)
	start := func(name string) *member {
		m := &member{done: make(chan error, 1)}
		r, err := scaleout.NewReceiver(ctx, open(names), store, &scaleout.Options{
			Queue:  ordered.Options{Name: "fifo", Receive: ordered.ReceiveOptions{Wait: 200 * time.Millisecond}},
			Member: name, Lease: timings, DrainTimeout: 2 * time.Second,
		})
		require.NoError(t, err)
		m.r = r
		rctx, stop := context.WithCancel(ctx)
		m.stop = stop
		go func() { m.done <- r.Run(rctx, h.handler(name)) }()
		return m
	}
	a, b := start("a"), start("b")

	snd, err := scaleout.NewSender(ctx, open(names), memstore.New(), &ordered.Options{Name: "fifo"})
	require.NoError(t, err)
	gs := make([]string, groups)
	for g := range gs {
		gs[g] = fmt.Sprintf("acct-%d", g)
	}
	for k := 1; k <= per; k++ {
		for _, g := range gs {
			_, err := snd.SendAsync(ctx, g, fmt.Appendf(nil, "%s/%d", g, k))
			require.NoError(t, err)
		}
		if k == per/2 {
			a.stop() // a hands its shards over mid-stream
			require.NoError(t, <-a.done)
		}
	}
	require.NoError(t, snd.Close(ctx))
	for h.delivered() < groups*per {
		require.NoError(t, ctx.Err(), "delivered %d of %d", h.delivered(), groups*per)
		time.Sleep(20 * time.Millisecond)
	}
	b.stop()
	require.NoError(t, <-b.done)
	h.checkOrder(gs, per)
}
