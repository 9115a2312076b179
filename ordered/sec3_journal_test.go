package ordered_test

// The send journal is no signing oracle (issue 21, item 5): with a key,
// journal entries are sealed, and recovery sends only what the key sealed
// for that stream, at an epoch not far ahead of the clock.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
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

// tamperStore changes what Pending returns, as a store writer would.
type tamperStore struct {
	seqstore.Store
	mu     sync.Mutex
	tamper func([]seqstore.Entry) []seqstore.Entry
}

func (s *tamperStore) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	es, err := s.Store.Pending(ctx, queue)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.tamper != nil {
		es = s.tamper(es)
	}
	return es, err
}

// Without Redis: sends that failed stay journaled, sealed; a store writer
// swaps one payload, moves one entry to another group, plants an unsealed
// entry and one far ahead of the clock. Recovery sends the untouched entries
// only, and counts the four others.
func TestSec3JournalTamper(t *testing.T) {
	ctx := context.Background()
	store := &tamperStore{Store: memstore.New()}
	broken := newSendDriver()
	broken.fail = func(int, [][]byte) error { return errPermanent }
	q1, err := ordered.New(ctx, broken, store, &ordered.Options{Key: sec3Key, Send: ordered.SendOptions{NoRecover: true}})
	require.NoError(t, err)
	for i := 1; i <= 6; i++ {
		require.Error(t, q1.Send(ctx, "g", []byte("pay "+strconv.Itoa(i))))
	}
	rxClose(t, q1)
	es, err := store.Pending(ctx, "default")
	require.NoError(t, err)
	require.Len(t, es, 6)
	for _, e := range es {
		require.Len(t, e.Body, 4+16+len("pay 1"), "sealed: magic and tag before the payload")
		assert.Equal(t, "pay "+strconv.FormatUint(e.Seq, 10), string(e.Body[20:]))
	}

	store.tamper = func(es []seqstore.Entry) []seqstore.Entry {
		for i := range es {
			switch es[i].Seq {
			case 2: // swap the payload, keep the seal
				es[i].Body = append(es[i].Body[:20:20], "pay 9999"...)
			case 3: // move to another group
				es[i].Stream.Group = "other"
			case 4: // an unsealed entry, as an earlier release journaled
				es[i].Body = []byte("pay 4")
			case 5: // far ahead of the clock
				es[i].Epoch = envelope.MaxNumber
			}
		}
		return es
	}
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	q2, err := ordered.New(ctx, drv, store, &ordered.Options{Key: sec3Key, Send: ordered.SendOptions{NoRecover: true}})
	require.NoError(t, err)
	n, err := q2.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "seqs 1 and 6 sent")
	st := q2.Stats().Send
	assert.Equal(t, int64(4), st.Tampered, "four entries refused")
	assert.Equal(t, int64(2), st.Recovered)
	rxClose(t, q2)

	ms, err := drv.ReceiveBatch(ctx, 16, 10*time.Millisecond)
	require.NoError(t, err)
	var got []string
	for _, m := range ms {
		h, p, ok := envelope.Parse(m.Body)
		require.True(t, ok)
		require.True(t, envelope.Verify(h, p, envelope.ContextKey(sec3Key, "default")), "signed for the queue's context")
		got = append(got, fmt.Sprintf("%s/%d:%s", h.Group, h.Seq, p))
	}
	assert.ElementsMatch(t, []string{"g/1:pay 1", "g/6:pay 6"}, got)
	left, err := store.Store.Pending(ctx, "default")
	require.NoError(t, err)
	assert.Len(t, left, 4, "refused entries stay in the journal")
}

// futureStore hands the sender an epoch far ahead of the clock.
type futureStore struct{ seqstore.Store }

func (s futureStore) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	rs, err := s.Store.Reserve(ctx, reqs)
	for i := range rs {
		rs[i].Epoch = envelope.MaxNumber
	}
	return rs, err
}

// A sender whose store hands it an epoch far ahead of the clock (written by
// someone else) does not sign and send with it: receivers would untag it
// without a key, and with one it would take the group over for good.
func TestSec3SenderRefusesFutureEpoch(t *testing.T) {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	q, err := ordered.New(ctx, drv, futureStore{memstore.New()}, &ordered.Options{Key: sec3Key})
	require.NoError(t, err)
	err = q.Send(ctx, "g", []byte("x"))
	require.ErrorIs(t, err, ordered.ErrEpochAhead)
	rxClose(t, q)
	vis, inflight := drv.Len()
	assert.Zero(t, vis+inflight, "nothing sent")
}
