package mnsqueue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestRev3_HoldRuleTripsWithLongQueueVisibility: the same run as
// TestEng3_HeldForeverTripsHoldThrottle (emulator thresholds x0.01: the
// 30-minute hold rule is 18 s; MaxHold 20 min scaled to 12 s), over a queue
// whose visibility timeout (40 s, scaled from a 67-minute one) is longer
// than MaxHold. The receiver looks at a held message's hold only within
// VisibilityMargin (a third of it) of the end of its visibility, so the
// messages of a group stuck on a hole are parked 27 s after they were
// received: 9 s past the service's limit. README: "no message stays
// received and not deleted longer than ReceiveOptions.MaxHold ... A stuck
// group never gets the queue throttled." Expected: no consumption trip.
// Happened: the hold rule trips (see the log for the figures).
func TestRev3_HoldRuleTripsWithLongQueueVisibility(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	const scale = 0.01
	srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{Consumption: true, ConsumptionScale: scale}})
	name := uniqueName("rev3hold")
	ctx := context.Background()
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), serverCred(srv), name, &mnsqueue.QueueAttributes{Visibility: 40 * time.Second}))
	drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, drv.Close()) })
	body := func(g string, s uint64) []byte {
		return envelope.Append(nil, envelope.Header{Group: g, Epoch: 1, Seq: s}, []byte("x"))
	}
	// Group "stuck": seq 1 is lost, seqs 2-4 wait behind the hole.
	require.NoError(t, drv.SendBatch(ctx, [][]byte{body("stuck", 2), body("stuck", 3), body("stuck", 4)}))
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{
		Wait: time.Second, MaxUndeleted: 4000 * scale, MaxUndeletedRate: 900 * scale,
		MaxHold: time.Duration(float64(20*time.Minute) * scale),
	}})
	require.NoError(t, err)
	var healthy atomic.Int64
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- q.Run(rctx, func(_ context.Context, m *ordered.Message) error {
			if m.Group == "healthy" {
				healthy.Add(1)
			}
			return nil
		})
	}()
	time.Sleep(30 * time.Second)
	const n = 160
	start := time.Now()
	for s := uint64(1); s <= n; s += 16 {
		var bs [][]byte
		for i := s; i < s+16 && i <= n; i++ {
			bs = append(bs, body("healthy", i))
		}
		require.NoError(t, drv.SendBatch(ctx, bs))
	}
	for healthy.Load() < n && time.Since(start) < 30*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	require.NoError(t, <-errc)
	cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
	defer ccancel()
	require.NoError(t, q.Close(cctx))
	st := srv.Stats()
	rs := q.Stats().Receive
	t.Logf("healthy group: %d of %d delivered in %v; consumption trips %v, receives refused %d; receiver parked %d extended %d",
		healthy.Load(), n, took.Round(time.Millisecond), st.ConsumptionTrips, st.ConsumptionThrottled, rs.Parked, rs.Extended)
	assert.Empty(t, st.ConsumptionTrips, "the receiver trips the service's 30-minute hold rule (queue visibility above MaxHold)")
}
