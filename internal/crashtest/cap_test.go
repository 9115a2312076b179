package crashtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestFaultCapAtThreshold holds a receiver against the service's own
// count: the emulator's abnormal-consumption threshold is set one above the
// receiver's MaxUndeleted, so a single message received past the cap
// trips the throttle and fails the run. Groups whose seq 1 is sent last
// make the receiver hold what arrives early, for several visibility
// timeouts, then everything must be delivered in order, once.
//
//   - hold: the cap is above the backlog; everything early is held and
//     kept invisible by extensions until the heads come (the queue's
//     visibility is 2 s, each extension 3 s, the wait 6 s, so each held
//     message is extended two or three times). Nothing may lapse:
//     a held message whose visibility is not kept alive, or kept alive
//     with a receipt the queue has replaced, comes back.
//   - give-back: a backlog of three times the cap behind the holes, a
//     window of 4 without parking: the receiver holds 4 of each group and
//     gives back the rest as it receives it, with four fetchers; what it
//     gave back stays invisible until its visibility ends, and the service
//     counts it until then. After 6 s of that, the receiver closes, the
//     heads are sent, and a receiver that parks (the default) drains the
//     queue. (Without parking, a receiver that gives back more than it
//     can hold starves the heads sent last: what it gave back comes back
//     before them. Parking is the way out of that.)
func TestFaultCapAtThreshold(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for _, tc := range []struct {
		name                string
		cap, window, groups int
		perGroup            uint64
		fetchers            int
		redeliveriesAllowed bool
	}{
		{name: "hold", cap: 200, window: 1000, groups: 4, perGroup: 10, fetchers: 2},
		{name: "give-back", cap: 48, window: 4, groups: 8, perGroup: 20, fetchers: 4, redeliveriesAllowed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, &mnstest.Options{Shards: 1, Throttle: mnstest.Throttle{Consumption: true, MaxUndeleted: tc.cap + 1}}, nil)
			drv := e.driver("")
			ctx := t.Context()
			const epoch = 42
			body := func(g int, seq uint64) []byte {
				group := fmt.Sprintf("g%d", g)
				return envelope.Append(nil, envelope.Header{Group: group, Epoch: epoch, Seq: seq}, fmt.Appendf(nil, "%s-%d", group, seq))
			}
			var batch [][]byte
			for g := range tc.groups {
				for seq := uint64(2); seq <= tc.perGroup; seq++ {
					batch = append(batch, body(g, seq))
					if len(batch) == 16 {
						require.NoError(t, drv.SendBatch(ctx, batch))
						batch = batch[:0]
					}
				}
			}
			if len(batch) > 0 {
				require.NoError(t, drv.SendBatch(ctx, batch))
			}
			rx := e.open(memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{
				MaxUndeleted: tc.cap, Window: tc.window, NoPark: true, Fetchers: tc.fetchers, VisibilityExtend: 3 * time.Second}})
			var mu sync.Mutex
			next := map[string]uint64{}
			var bad []string
			handle := func(_ context.Context, m *ordered.Message) error {
				mu.Lock()
				defer mu.Unlock()
				if want := next[m.Group] + 1; m.Seq != want || m.Unordered {
					bad = append(bad, fmt.Sprintf("%s/%d (want %d, unordered %v)", m.Group, m.Seq, want, m.Unordered))
				}
				next[m.Group] = max(next[m.Group], m.Seq)
				return nil
			}
			stop := run(t, rx, handle)
			if !tc.redeliveriesAllowed {
				held := tc.groups * int(tc.perGroup-1)
				waitFor(t, 20*time.Second, fmt.Sprintf("the receiver holding %d", held), func() bool {
					return rx.Stats().Receive.Undeleted >= held
				})
			}
			time.Sleep(6 * time.Second) // three of the queue's visibility timeouts
			churn, churnTrips := rx.Stats().Receive, e.srv.Stats().ConsumptionTrips[mnstest.AbnormalUndeleted]
			if tc.redeliveriesAllowed {
				stop()
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				require.NoError(t, rx.Close(cctx))
				cancel()
				// What it gave back counts at the service until its
				// visibility ends: the next receiver cannot know of it.
				waitFor(t, 10*time.Second, "the closed receiver's messages visible again", func() bool {
					qi, err := e.srv.Queue(e.queue)
					require.NoError(t, err)
					return qi.Inactive == 0
				})
				rx = e.open(memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{MaxUndeleted: tc.cap, Fetchers: tc.fetchers}})
				stop = run(t, rx, handle)
			}
			batch = batch[:0]
			for g := range tc.groups {
				batch = append(batch, body(g, 1))
			}
			require.NoError(t, drv.SendBatch(ctx, batch))
			total := tc.groups * int(tc.perGroup)
			delivered := func() int {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, s := range next {
					n += int(s)
				}
				return n
			}
			end := time.Now().Add(60 * time.Second)
			for delivered() < total {
				if time.Now().After(end) {
					t.Fatalf("%d of %d messages delivered in 60 s; receiver %+v; server %+v", delivered(), total, rx.Stats().Receive, e.srv.Stats())
				}
				time.Sleep(20 * time.Millisecond)
			}
			assert.Zero(t, e.waitEmpty(10*time.Second), "messages left in the queue")
			stop()
			st, srv := rx.Stats().Receive, e.srv.Stats()
			t.Logf("while the holes lasted: received %d, not kept %d, peak undeleted %d, trips %d", churn.Received, churn.NotKept, churn.MaxUndeleted, churnTrips)
			t.Logf("receiver: received %d, redelivered %d, extended %d, shortened %d, not kept %d, stale receipts %d, peak undeleted %d; server: received %d, lapsed %d, trips %v",
				st.Received, st.Redelivered, st.Extended, st.Shortened, st.NotKept, st.StaleReceipts, st.MaxUndeleted, srv.Received, srv.Lapsed, srv.ConsumptionTrips)
			mu.Lock()
			assert.Empty(t, bad, "deliveries out of order or flagged")
			mu.Unlock()
			assert.Zero(t, srv.ConsumptionTrips[mnstest.AbnormalUndeleted], "the receiver held more than its cap of %d by the service's count", tc.cap)
			assert.LessOrEqual(t, st.MaxUndeleted, tc.cap, "the receiver's own peak")
			if !tc.redeliveriesAllowed {
				assert.Positive(t, st.Extended, "held messages were kept invisible")
				assert.Zero(t, srv.Lapsed, "held messages came back: their visibility lapsed")
				assert.Zero(t, st.StaleReceipts, "deletes refused for stale receipts")
			}
		})
	}
}
