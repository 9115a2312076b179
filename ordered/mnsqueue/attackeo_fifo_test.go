package mnsqueue_test

// Attack on 843e11d (ExactlyOnce over MNS FIFO queues: the receiver pins a
// fresh group's first cursor so that an early arrival can park).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// End to end of TestAttackEOEpochZeroPinStalls (internal/recvcore): a
// producer that writes epoch-0 headers (the "#<seq>#" form of the MNS
// ordered-queue sample, which ordered accepts as the legacy format, or a
// tagged header with epoch 0) sends to an MNS FIFO queue (MessageGroupId
// "m"): 1, 2, then 4 before 3. ExactlyOnce receives 1 and 2; 4 arrives
// first (the service holds 3 behind it), parks, and pin, which takes the
// stored cursor 0/3 for "none" (g.dur.Epoch == 0), forces a commit with
// nothing to write: the group hands out nothing more, 3 never comes. A
// control with epoch 7 receives all four. Before 843e11d New refused
// ExactlyOnce on a FIFO queue.
func TestAttackEOFIFOEpochZeroStalls(t *testing.T) {
	for _, kind := range []string{"epoch7", "legacy", "epoch0"} {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t, nil)
			name := newFIFO(t, srv, 5)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
			require.NoError(t, err)
			defer drv.Close()
			body := func(seq uint64) []byte {
				switch kind {
				case "legacy":
					return []byte(fmt.Sprintf("#%d#payload %d", seq, seq))
				case "epoch0":
					return envelope.Append(nil, envelope.Header{Group: "m", Epoch: 0, Seq: seq}, []byte(fmt.Sprint(seq)))
				}
				return envelope.Append(nil, envelope.Header{Group: "m", Epoch: 7, Seq: seq}, []byte(fmt.Sprint(seq)))
			}
			for _, s := range []uint64{1, 2, 4, 3} {
				require.NoError(t, drv.SendGroups(ctx, [][]byte{body(s)}, []string{"m"}))
			}
			store := memstore.New()
			rx, err := ordered.New(ctx, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{Mode: ordered.ExactlyOnce, Wait: time.Second}})
			require.NoError(t, err)
			defer func() {
				cctx, c := context.WithTimeout(context.Background(), 10*time.Second)
				defer c()
				_ = rx.Close(cctx)
			}()
			var got []uint64
			for len(got) < 4 {
				rctx, c := context.WithTimeout(ctx, 15*time.Second)
				m, err := rx.Receive(rctx)
				c()
				if err != nil {
					gs, _ := srv.Groups(name)
					t.Fatalf("%s: received seqs %v, then nothing for 15s (%v); service groups: %+v", kind, got, err, gs)
				}
				got = append(got, m.Seq)
				require.NoError(t, store.Advance(ctx, []seqstore.Advance{m.CursorAdvance()}))
				require.NoError(t, m.Ack(ctx))
			}
			require.Equal(t, []uint64{1, 2, 3, 4}, got)
		})
	}
}
