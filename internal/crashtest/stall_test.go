package crashtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestFaultHeldStall: a receiver whose store cannot park holds more than
// half its window (Window 1024, so the fetchers pause at 512 messages; the
// test sends 599) of a group whose seq 1 is missing, while another group's
// message is out with the application. The fetchers pause ("much held and
// something moving"); when the application acks, nothing moves any more,
// and the fetchers must look again, because the missing seq 1 that
// unblocks everything may be in the queue. It is sent then, and every
// message must be delivered.
//
// It reproduces the stall the crash harness found under load (the final
// receiver held 517..3880 messages behind holes and made no receive request
// for 30s and more while the missing messages sat in the queue): ordered's
// waitRoom (recv_route.go) is woken only when handOutLocked pops the ready
// ring (recv_deliver.go), which happens while the popped message becomes
// "out" (so the fetcher re-checks, still sees movement, and sleeps again);
// the Ack that empties r.out and ends all movement woke nobody. Fixed in
// ordered by e8dae95 (the keeper re-checks the fetch conditions every tick);
// this test guards it. The window is set, not the default: with the default
// (8192) 599 held messages never reach the pause threshold, and the test
// would pass with the fetchers' wake-ups removed.
//
// The same runs with a store that parks (subtests park/...): the fetchers
// do not pause then, and every message must be delivered all the same.
func TestFaultHeldStall(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for _, noPark := range []bool{true, false} {
		t.Run(map[bool]string{true: "no-park", false: "park"}[noPark], func(t *testing.T) {
			for _, mode := range []ordered.Mode{ordered.AtLeastOnce, ordered.AtMostOnce} {
				t.Run(mode.String(), func(t *testing.T) {
					t.Parallel()
					heldStall(t, memstore.New(), mode, noPark)
				})
			}
		})
	}
}

func heldStall(t *testing.T, store seqstore.Store, mode ordered.Mode, noPark bool) {
	e := newEnv(t, &mnstest.Options{Shards: 1}, &mnstest.QueueAttributes{VisibilityTimeout: 30})
	drv := e.driver("")
	ctx := t.Context()
	const n = 600 // a/2..a/600 held: more than heldStallWindow/2
	const epoch = 42
	body := func(group string, seq uint64) []byte {
		return envelope.Append(nil, envelope.Header{Group: group, Epoch: epoch, Seq: seq}, fmt.Appendf(nil, "%s-%d", group, seq))
	}
	var batch [][]byte
	flush := func() {
		if len(batch) > 0 {
			require.NoError(t, drv.SendBatch(ctx, batch))
			batch = batch[:0]
		}
	}
	for seq := uint64(2); seq <= n; seq++ {
		batch = append(batch, body("a", seq))
		if len(batch) == 16 {
			flush()
		}
	}
	batch = append(batch, body("b", 1))
	flush()

	rx := e.open(store, &ordered.Options{Receive: ordered.ReceiveOptions{Mode: mode, Window: heldStallWindow, NoPark: noPark}})
	var got atomic.Int64
	acked := make(chan struct{})
	stop := run(t, rx, func(_ context.Context, m *ordered.Message) error {
		if m.Group == "b" {
			time.Sleep(3 * time.Second) // out while the fetchers end their polls and pause
			defer close(acked)
		}
		got.Add(1)
		return nil
	})
	select {
	case <-acked:
	case <-time.After(20 * time.Second):
		t.Fatal("b/1 not handed out within 20s")
	}
	time.Sleep(500 * time.Millisecond)
	r0 := rx.Stats().Requests.Receive
	time.Sleep(2 * time.Second)
	t.Logf("receive requests in 2s after the ack: %d; %+v", rx.Stats().Requests.Receive-r0, rx.Stats().Receive)
	require.NoError(t, drv.SendBatch(ctx, [][]byte{body("a", 1)}))
	waitFor(t, 20*time.Second, fmt.Sprintf("all %d messages (got %d; receiver %+v)", n+1, got.Load(), rx.Stats().Receive), func() bool {
		return got.Load() >= n+1
	})
	assert.Zero(t, e.waitEmpty(10*time.Second), "messages left in the queue")
	stop()
	assert.Equal(t, int64(n+1), got.Load(), "deliveries")
}

// heldStallWindow is the receive window of TestFaultHeldStall: the fetchers
// pause at heldStallWindow/2 held messages.
const heldStallWindow = 1024

// (The no-park runs turn parking off: the fetchers pause on "much held and
// something moving" only without parking (recvcore's Core.Room); with it
// they never run out of room in TestFaultHeldStall, which then cannot see
// fetchers that are never woken: the mutant fetch-wakeups survived it while
// its only store parked.)
