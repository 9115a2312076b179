package scaleout

import (
	"context"
	"errors"
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
	r := newRouter(drvs)
	groups := []string{groupOn(t, 0, 3), groupOn(t, 1, 3), groupOn(t, 2, 3), groupOn(t, 0, 3)}
	bodies := make([][]byte, len(groups))
	for i, g := range groups {
		bodies[i] = body(g, uint64(i+1))
	}
	err := r.SendBatch(ctx, bodies)
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
