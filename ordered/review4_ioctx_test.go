package ordered_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// r4deadlineStore records, for each Cursors call, how long its context
// had left as the call began.
type r4deadlineStore struct {
	seqstore.Store
	mu   sync.Mutex
	left []time.Duration
}

func (s *r4deadlineStore) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	if d, ok := ctx.Deadline(); ok {
		s.mu.Lock()
		s.left = append(s.left, time.Until(d))
		s.mu.Unlock()
	}
	return s.Store.Cursors(ctx, streams)
}

// TestReview4IOCallGetsItsReapTimeout: ReceiveOptions.ReapTimeout bounds
// each store or queue call of the receive side (ioTimeout). Two cursor
// reads 60 ms apart (two new groups) with ReapTimeout 1 s: the second
// shares the first one's context (ioCtx, a share lasts a tenth of the
// timeout) and is given about 940 ms, not the 1 s the option promises.
// A store call that needs 95% of ReapTimeout fails when it starts late in
// a share.
func TestReview4IOCallGetsItsReapTimeout(t *testing.T) {
	const reap = time.Second
	drv := memqueue.New(&memqueue.Options{Seed: 2})
	st := &r4deadlineStore{Store: memstore.New()}
	q, err := ordered.New(context.Background(), drv, st, &ordered.Options{
		Receive: ordered.ReceiveOptions{ReapTimeout: reap},
	})
	require.NoError(t, err)
	defer rxClose(t, q)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rxSend(t, drv, [][]byte{rxBody("a", 1, 1)})
	m, err := q.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, m.Ack(ctx))
	time.Sleep(60 * time.Millisecond)
	rxSend(t, drv, [][]byte{rxBody("b", 1, 1)})
	m, err = q.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, m.Ack(ctx))
	st.mu.Lock()
	defer st.mu.Unlock()
	require.GreaterOrEqual(t, len(st.left), 2)
	for i, l := range st.left {
		require.GreaterOrEqual(t, l, reap*97/100, "cursor read %d began with %v of its ReapTimeout (%v) left", i, l, reap)
	}
}
