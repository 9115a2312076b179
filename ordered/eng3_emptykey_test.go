package ordered_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// An empty key in OldKeys (an unset environment variable during a rotation:
// OldKeys: [][]byte{[]byte(os.Getenv("INORDER_OLD_KEY"))}) used to be
// accepted, and a header signed with it, which anyone can compute, was
// handed out in order. New refuses it now; and should such a key reach the
// receive core anyway, envelope.Verify ignores it, so the forged header is
// untagged.
func TestEng3_EmptyOldKeyAcceptsForgedHeaders(t *testing.T) {
	_, err := ordered.New(context.Background(), memqueue.New(nil), memstore.New(), &ordered.Options{
		Key:     []byte("the real 32-byte secret .........."),
		OldKeys: [][]byte{[]byte("")},
	})
	require.ErrorIs(t, err, envelope.ErrWeakKey, "an empty old key must be refused")

	drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 30 * time.Second})
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{
		Key:     []byte("the real 32-byte secret .........."),
		Receive: ordered.ReceiveOptions{Wait: 10 * time.Millisecond, Untagged: ordered.UntaggedDeliver},
	})
	require.NoError(t, err)
	h := envelope.Header{Group: "account-42", Epoch: 1, Seq: 1}
	payload := []byte("pay 1,000,000 to mallory")
	h.Signed, h.MAC = true, envelope.Sign(nil, h, payload) // the attacker signs with the empty key
	require.NoError(t, drv.SendBatch(context.Background(), [][]byte{envelope.Append(nil, h, payload)}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	m, err := q.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, m.Ack(ctx))
	rxClose(t, q)
	assert.True(t, m.Unordered, "a header signed with the empty key must not authenticate")
}
