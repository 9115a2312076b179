package ordered_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// Signed runs of more than one message (SendBatch, or SendAsync calls
// merged into one run) are encoded one header at a time: the header
// counter, which reuses an unsigned header, must not be used for them
// (a blind plant that did made every signed SendBatch of 2 or more panic
// in the sender, and no test sent one).
func TestSignedSendBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := []byte("a 32-byte key for this test only")
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	tx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "q", Key: key})
	require.NoError(t, err)
	var payloads [][]byte
	for i := range 8 {
		payloads = append(payloads, []byte(fmt.Sprint(i+1)))
	}
	require.NoError(t, tx.SendBatch(ctx, "g", payloads))
	var rs []*ordered.SendResult
	for i := range 8 {
		r, err := tx.SendAsync(ctx, "g", []byte(fmt.Sprint(9+i)))
		require.NoError(t, err)
		rs = append(rs, r)
	}
	for _, r := range rs {
		require.NoError(t, r.Wait(ctx))
	}
	rx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "q", Key: key})
	require.NoError(t, err)
	for want := 1; want <= 16; want++ {
		m, err := rx.Receive(ctx)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(want), string(m.Body), "signed, verified and in order")
		require.False(t, m.Unordered)
		require.NoError(t, m.Ack(ctx))
	}
	require.NoError(t, rx.Close(ctx))
	require.NoError(t, tx.Close(ctx))
}
