package ordered_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// AtMostOnce: Receives that give up at every offset around the commit
// (before it goes out, while it is written, as it completes), then a
// patient Receive, then Close and a second receiver: nothing is handed out
// twice, and what a clean run loses is counted.
func TestReview15_AMOAbandonAroundCommit(t *testing.T) {
	for off := time.Duration(0); off <= 36*time.Millisecond; off += time.Millisecond {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			drv := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
			store := memstore.New()
			rxSend(t, drv, rxBodies("g", 1, 1, 5, nil))
			o := func() *ordered.Options {
				return &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Mode: ordered.AtMostOnce, CommitInterval: 20 * time.Millisecond, Wait: 100 * time.Millisecond}}
			}
			q := rxQueue(t, drv, slowAdvance{store}, o())
			got := map[uint64]int{}
			gaveUp := 0
			{
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				m, err := q.Receive(rctx)
				cancel()
				require.NoError(t, err)
				got[m.Seq]++
				require.NoError(t, m.Ack(ctx))
			}
			for i := 0; i < 2; i++ {
				rctx, cancel := context.WithTimeout(ctx, off)
				m, err := q.Receive(rctx)
				cancel()
				if err == nil {
					got[m.Seq]++
					require.NoError(t, m.Ack(ctx))
				} else {
					gaveUp++
				}
				rctx, cancel = context.WithTimeout(ctx, 5*time.Second)
				m, err = q.Receive(rctx)
				cancel()
				if err == nil {
					got[m.Seq]++
					require.NoError(t, m.Ack(ctx))
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			require.NoError(t, q.Close(cctx))
			cancel()
			q2 := rxQueue(t, drv, slowAdvance{store}, o())
			for {
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				m, err := q2.Receive(rctx)
				cancel()
				if err != nil {
					break
				}
				got[m.Seq]++
				require.NoError(t, m.Ack(ctx))
			}
			cctx, cancel = context.WithTimeout(ctx, 10*time.Second)
			require.NoError(t, q2.Close(cctx))
			cancel()
			lost := 0
			for s := uint64(1); s <= 5; s++ {
				require.LessOrEqual(t, got[s], 1, "offset %v: seq %d handed out %d times", off, s, got[s])
				if got[s] == 0 {
					lost++
				}
			}
			t.Logf("offset %v: %d Receives gave up; delivered %v, lost %d", off, gaveUp, got, lost)
		})
	}
}

// slowAdvance: each commit takes 10 ms.
type slowAdvance struct{ *memstore.Store }

func (s slowAdvance) Advance(ctx context.Context, batch []seqstore.Advance) error {
	time.Sleep(10 * time.Millisecond)
	return s.Store.Advance(ctx, batch)
}
