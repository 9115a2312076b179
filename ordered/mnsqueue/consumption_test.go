package mnsqueue_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestOrderedUnderConsumptionThrottle runs a receiver over a one-group
// backlog of 3,000 messages in shuffled order, with the emulator's
// abnormal-consumption throttle on and its thresholds scaled to a tenth
// (500 received and not deleted, 100 receipts per second ending without a
// delete, 3 minutes held). The receiver of the first plan (a window of
// 8,192 held in memory, no cap on what is received and not deleted, no
// parking) trips it within seconds; today's, with MaxUndeleted and its
// rate scaled the same way and a store that parks, drains the backlog in
// order without tripping it.
func TestOrderedUnderConsumptionThrottle(t *testing.T) {
	const n, scale = 3000, 0.1
	run := func(t *testing.T, store seqstore.Store, ro ordered.ReceiveOptions, d time.Duration) (*mnstest.Server, *groupRecorder, error) {
		srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{Consumption: true, ConsumptionScale: scale}})
		name := uniqueName("consumption")
		ctx := context.Background()
		require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), serverCred(srv), name, &mnsqueue.QueueAttributes{Visibility: 30 * time.Second}))
		drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, drv.Close()) })
		var bodies [][]byte
		for s := uint64(1); s <= n; s++ {
			bodies = append(bodies, envelope.Append(nil, envelope.Header{Group: "g", Epoch: 1, Seq: s}, []byte(strconv.FormatUint(s, 10))))
		}
		rand.New(rand.NewPCG(3, 4)).Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
		for i := 0; i < len(bodies); i += 16 {
			require.NoError(t, drv.SendBatch(ctx, bodies[i:min(i+16, len(bodies))]))
		}
		q, err := ordered.New(ctx, drv, store, &ordered.Options{Receive: ro})
		require.NoError(t, err)
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			assert.NoError(t, q.Close(cctx))
		})
		rec := newGroupRecorder(n)
		err = runUntil(q, rec, d)
		t.Logf("receive %+v", q.Stats().Receive)
		return srv, rec, err
	}

	t.Run("first-plan receiver trips it", func(t *testing.T) {
		srv, _, _ := run(t, memstore.New(), ordered.ReceiveOptions{
			Wait: time.Second, Window: 8192, MaxUndeleted: 8192, MaxUndeletedRate: 1e6, NoPark: true,
		}, 5*time.Second)
		st := srv.Stats()
		t.Logf("consumption trips %v, %d receives refused", st.ConsumptionTrips, st.ConsumptionThrottled)
		assert.NotEmpty(t, st.ConsumptionTrips, "holding the whole backlog undeleted trips the throttle")
	})
	t.Run("capped and parking receiver does not", func(t *testing.T) {
		srv, rec, err := run(t, memstore.New(), ordered.ReceiveOptions{
			Wait: time.Second, MaxUndeleted: 4000 * scale, MaxUndeletedRate: 900 * scale,
		}, time.Minute)
		require.NoError(t, err, "the backlog drains")
		rec.mu.Lock()
		defer rec.mu.Unlock()
		assert.Empty(t, rec.bad, "in order, once")
		st := srv.Stats()
		t.Logf("consumption trips %v, %d receives refused; received %d for %d sent", st.ConsumptionTrips, st.ConsumptionThrottled, st.Received, st.Sent)
		assert.Empty(t, st.ConsumptionTrips, "never abnormal")
		assert.Zero(t, st.ConsumptionThrottled, "no receive refused")
		assert.LessOrEqual(t, float64(st.Received)/n, 1.3, "each message received about once")
	})
}
