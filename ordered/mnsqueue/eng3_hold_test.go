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

// The service's third abnormal-consumption rule: a message received and not
// deleted for 30 minutes (visibility changes included) throttles the
// queue's receives. The receiver kept the visibility of what it holds alive
// with no bound on how long: a group waiting on a hole under GapWait (the
// default), or a poison message under PoisonBlock (the default), held its
// messages forever, and after 30 minutes the whole queue was throttled and
// every healthy group crawled. Fixed by ReceiveOptions.MaxHold (default 20
// minutes). Emulator thresholds scaled by 0.01 (18 s of hold; the cap, the
// rate and MaxHold scaled the same way on the receiver).
func TestEng3_HeldForeverTripsHoldThrottle(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	t.Run("baseline without the stuck group", func(t *testing.T) { t.Parallel(); holdRun(t, false) })
	t.Run("with a group stuck on a hole", func(t *testing.T) { t.Parallel(); holdRun(t, true) })
}

func holdRun(t *testing.T, stuck bool) {
	const scale = 0.01
	srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{Consumption: true, ConsumptionScale: scale}})
	name := uniqueName("hold")
	ctx := context.Background()
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), serverCred(srv), name, &mnsqueue.QueueAttributes{Visibility: 5 * time.Second}))
	drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, drv.Close()) })
	body := func(g string, s uint64) []byte {
		return envelope.Append(nil, envelope.Header{Group: g, Epoch: 1, Seq: s}, []byte("x"))
	}
	// Group "stuck": seq 1 is lost, seqs 2-4 wait behind the hole.
	if stuck {
		require.NoError(t, drv.SendBatch(ctx, [][]byte{body("stuck", 2), body("stuck", 3), body("stuck", 4)}))
	}
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
	time.Sleep(22 * time.Second) // 30 minutes, scaled
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
	t.Logf("healthy group: %d of %d delivered in %v; consumption trips %v, receives refused %d; receiver extended %d",
		healthy.Load(), n, took.Round(time.Millisecond), st.ConsumptionTrips, st.ConsumptionThrottled, q.Stats().Receive.Extended)
	assert.Empty(t, st.ConsumptionTrips, "the receiver trips the service's 30-minute hold rule")
}
