package ordered_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// tamperPark is a store whose parked payloads a store writer swapped: it
// keeps each header (and its MAC) and replaces the payload of seqs 2 on.
type tamperPark struct {
	seqstore.Store
	p seqstore.Parker
}

func (s tamperPark) Park(ctx context.Context, es []seqstore.Parked) error {
	return s.p.Park(ctx, es)
}

func (s tamperPark) Unpark(ctx context.Context, qs []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	res, err := s.p.Unpark(ctx, qs)
	for _, r := range res {
		for i := range r {
			h, _, ok := envelope.Parse(r[i].Body)
			if ok && h.Seq >= 2 {
				r[i].Body = envelope.Append(nil, h, []byte("TAMPERED AT REST"))
			}
		}
	}
	return res, err
}

func (s tamperPark) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	return s.p.ParkedStreams(ctx, queue)
}

// Parked bodies are verified when read back, with the key: a store writer
// who swaps a parked payload (keeping its header and MAC) does not get it
// handed out as the group's seq. Seqs 2-5 arrive first and, beyond a window
// of 1, are parked; the store swaps their payloads; seq 1 comes.
func TestSec3ParkedBodyNotReverified(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	ms := memstore.New()
	store := tamperPark{Store: ms, p: ms}
	sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: sec3Key})
	require.NoError(t, err)
	for i := 1; i <= 5; i++ {
		require.NoError(t, sender.Send(ctx, "g", []byte("real-"+strconv.Itoa(i))))
	}
	rxClose(t, sender)
	var first []byte
	var rest [][]byte
	for len(rest)+len(first)/max(len(first), 1) < 5 {
		got, err := drv.ReceiveBatch(ctx, 16, 50*time.Millisecond)
		require.NoError(t, err)
		for _, x := range got {
			if h, _, _ := envelope.Parse(x.Body); h.Seq == 1 {
				first = x.Body
			} else {
				rest = append(rest, x.Body)
			}
			require.NoError(t, drv.DeleteBatch(ctx, []string{x.Receipt}))
		}
	}
	require.NoError(t, drv.SendBatch(ctx, rest))
	q, err := ordered.New(ctx, drv, store, &ordered.Options{Key: sec3Key, Receive: ordered.ReceiveOptions{
		Wait: 50 * time.Millisecond, Window: 1, MaxUndeleted: 2, Untagged: ordered.UntaggedDeliver}})
	require.NoError(t, err)
	var g sec3Got
	sec3Run(t, q, &g)
	require.Eventually(t, func() bool { return q.Stats().Receive.Parked >= 3 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, drv.SendBatch(ctx, [][]byte{first}))
	out := g.wait(t, 5, 5*time.Second)
	t.Logf("handed out:%s", sec3Dump(out))
	require.NotEmpty(t, out)
	for _, m := range out {
		if string(m.Body) == "TAMPERED AT REST" && !m.Unordered {
			t.Errorf("tampered parked body handed out as ordered seq %d although Key is set (MAC not verified on unpark)", m.Seq)
		}
	}
}
