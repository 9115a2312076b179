package scaleout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
)

type failingQueue struct {
	driver.Queue
	err error
}

func (f failingQueue) SendBatch(context.Context, [][]byte) error { return f.err }

func body(group string, seq uint64) []byte {
	return envelope.Append(nil, envelope.Header{Group: group, Epoch: 1, Seq: seq}, []byte("p"))
}

// The router sends each body to its group's shard, and reports the
// outcome body by body when one shard fails.
func TestRouterSplitsByShard(t *testing.T) {
	ctx := context.Background()
	qs := []*memqueue.Queue{memqueue.New(nil), memqueue.New(nil), memqueue.New(nil)}
	down := errors.New("shard 2 is down")
	drvs := []driver.Queue{qs[0], qs[1], failingQueue{qs[2], down}}
	r, err := newRouter(drvs, 16)
	require.NoError(t, err)
	groups := []string{groupOn(t, 0, 3), groupOn(t, 1, 3), groupOn(t, 2, 3), groupOn(t, 0, 3)}
	bodies := make([][]byte, len(groups))
	for i, g := range groups {
		bodies[i] = body(g, uint64(i+1))
	}
	err = r.SendBatch(ctx, bodies)
	var be *driver.BatchError
	require.ErrorAs(t, err, &be)
	require.Len(t, be.Errs, 4)
	require.NoError(t, be.Errs[0])
	require.NoError(t, be.Errs[1])
	require.ErrorIs(t, be.Errs[2], down)
	require.NoError(t, be.Errs[3])

	for s, want := range map[int][]string{0: {groups[0], groups[3]}, 1: {groups[1]}} {
		msgs, err := qs[s].ReceiveBatch(ctx, 16, 10*time.Millisecond)
		require.NoError(t, err)
		var got []string
		for _, m := range msgs {
			h, _, ok := envelope.Parse(m.Body)
			require.True(t, ok)
			require.Equal(t, s, ShardOf(h.Group, 3))
			got = append(got, h.Group)
		}
		require.ElementsMatch(t, want, got, "shard %d", s)
	}
	_, err = r.ReceiveBatch(ctx, 1, 0)
	require.ErrorIs(t, err, errSendOnly)
}

// slowQueue counts send requests and the bodies they carry, each request
// taking a while, as a network round trip does.
type slowQueue struct {
	driver.Queue
	mu       sync.Mutex
	requests int
	bodies   int
}

func (q *slowQueue) SendBatch(ctx context.Context, bodies [][]byte) error {
	q.mu.Lock()
	q.requests++
	q.bodies += len(bodies)
	q.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	return q.Queue.SendBatch(ctx, bodies)
}

// The router merges concurrent batches per shard: sixty-four batches of
// sixteen bodies over four shards cost about as many requests as over one
// queue, not four times as many (each batch split by shard).
func TestRouterMergesPerShard(t *testing.T) {
	ctx := context.Background()
	const shards, batches, per = 4, 64, 16
	qs := make([]*slowQueue, shards)
	drvs := make([]driver.Queue, shards)
	for i := range qs {
		qs[i] = &slowQueue{Queue: memqueue.New(nil)}
		drvs[i] = qs[i]
	}
	r, err := newRouter(drvs, 16)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for b := range batches {
		wg.Go(func() {
			bodies := make([][]byte, per)
			for i := range bodies {
				bodies[i] = body(fmt.Sprintf("g%d", (b*per+i)%200), uint64(b*per+i+1))
			}
			require.NoError(t, r.SendBatch(ctx, bodies))
		})
	}
	wg.Wait()
	requests, sent := 0, 0
	for _, q := range qs {
		requests += q.requests
		sent += q.bodies
	}
	require.Equal(t, batches*per, sent)
	minimum := batches * per / r.limits.MaxBatch
	t.Logf("%d bodies in %d requests over %d shards (%d over one queue, %d split by shard)", sent, requests, shards, minimum, batches*shards)
	// Merged: about minimum (64 here, 64-141 seen, the more under load);
	// each batch split by shard: batches*shards (256). The bound is halfway.
	require.Less(t, requests, (minimum+batches*shards)/2, "the shards' requests are merged")
}
