package ordered_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
)

// TestCommitIntervalBatches: acks of many groups, one per millisecond of
// virtual time, share their cursor writes under the default CommitInterval
// (5 ms in AtLeastOnce mode: about one write per 5 acks); with -1 each ack
// is written on its own, the store being instant here. SyncAck keeps the
// default at 0: an Ack waits for its write.
func TestCommitIntervalBatches(t *testing.T) {
	const groups = 200
	writes := func(t *testing.T, ro ordered.ReceiveOptions) (advances int64, took time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{Receive: ro})
			b.receiveInto()
			bodies := make([][]byte, groups)
			for g := range groups {
				bodies[g] = rxBody(fmt.Sprintf("g%03d", g), 1, 1)
			}
			rxSend(t, b.drv, bodies)
			time.Sleep(time.Millisecond)
			start := time.Now()
			for range groups {
				m := b.next()
				require.NoError(t, m.Ack(t.Context()))
				time.Sleep(time.Millisecond)
			}
			took = time.Since(start)
			time.Sleep(time.Second) // the last writes
			advances = b.q.Stats().Requests.Advance
			for g := range groups {
				require.Equal(t, uint64(2), b.cursor(fmt.Sprintf("g%03d", g)).Next, "every ack written")
			}
			b.close()
		})
		return advances, took
	}
	def, took := writes(t, ordered.ReceiveOptions{})
	none, _ := writes(t, ordered.ReceiveOptions{CommitInterval: -1})
	sync, _ := writes(t, ordered.ReceiveOptions{SyncAck: true})
	t.Logf("%d acks over %v: %d cursor writes by default, %d with CommitInterval -1, %d with SyncAck", groups, took, def, none, sync)
	assert.LessOrEqual(t, def, int64(groups/4), "the default interval batches acks")
	assert.GreaterOrEqual(t, none, int64(groups*3/4), "-1: a write per ack")
	assert.GreaterOrEqual(t, sync, int64(groups*3/4), "SyncAck: no interval by default")
}
