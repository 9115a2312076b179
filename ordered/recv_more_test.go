package ordered_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

func TestReceiveOptionsValidate(t *testing.T) {
	dlq := memqueue.New(nil)
	for _, tc := range []struct {
		name string
		o    ordered.ReceiveOptions
		ok   bool
	}{
		{"defaults", ordered.ReceiveOptions{}, true},
		{"negative concurrency", ordered.ReceiveOptions{Concurrency: -1}, false},
		{"negative window", ordered.ReceiveOptions{Window: -5}, false},
		{"wait beyond MaxWait", ordered.ReceiveOptions{Wait: time.Hour}, false},
		{"unknown mode", ordered.ReceiveOptions{Mode: 9}, false},
		{"unknown gap policy", ordered.ReceiveOptions{GapPolicy: 9}, false},
		{"negative gap timeout", ordered.ReceiveOptions{GapTimeout: -time.Second}, false},
		{"poison dead letter without DLQ", ordered.ReceiveOptions{Poison: ordered.PoisonDeadLetter}, false},
		{"untagged dead letter without DLQ", ordered.ReceiveOptions{Untagged: ordered.UntaggedDeadLetter}, false},
		{"poison dead letter with DLQ", ordered.ReceiveOptions{Poison: ordered.PoisonDeadLetter, DeadLetter: dlq}, true},
		{"visibility off", ordered.ReceiveOptions{VisibilityMargin: -1}, true},
		{"visibility margin bad", ordered.ReceiveOptions{VisibilityMargin: -2}, false},
		{"eviction off", ordered.ReceiveOptions{IdleEvict: -1}, true},
		{"negative rate", ordered.ReceiveOptions{MaxVisibilityRate: -1}, false},
		{"MaxHold at the service's 30 minutes", ordered.ReceiveOptions{MaxHold: 30 * time.Minute}, false},
		{"MaxHold under the service's 30 minutes", ordered.ReceiveOptions{MaxHold: 30*time.Minute - time.Second}, true},
		// review13: a late extension (ReapTimeout bounds its call) ends
		// past 30m: 29m59s less 1m of slack, plus 66 s.
		{"MaxHold near 30m with a long ReapTimeout", ordered.ReceiveOptions{MaxHold: 30*time.Minute - time.Second, ReapTimeout: time.Minute}, false},
		{"MaxHold near 30m with the default ReapTimeout", ordered.ReceiveOptions{MaxHold: 29 * time.Minute, ReapTimeout: 10 * time.Second}, true},
		{"the default MaxHold with a long ReapTimeout", ordered.ReceiveOptions{ReapTimeout: 5 * time.Minute}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := ordered.New(context.Background(), memqueue.New(nil), memstore.New(), &ordered.Options{Receive: tc.o})
			if tc.ok {
				require.NoError(t, err)
				rxClose(t, q)
				return
			}
			require.Error(t, err, "options %+v must be rejected", tc.o)
			assert.Contains(t, err.Error(), "ordered: receive options")
		})
	}
}

func TestSynctestAtMostOnceNack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{Receive: ordered.ReceiveOptions{Mode: ordered.AtMostOnce}})
		b.receiveInto()
		rxSend(t, b.drv, rxBodies("g", 1, 1, 2, nil))
		time.Sleep(time.Millisecond)
		m := b.next()
		require.Equal(t, uint64(1), m.Seq)
		assert.Equal(t, uint64(2), b.cursor("g").Next, "at most once: durable before it is handed out")
		require.NoError(t, m.Nack(context.Background(), errors.New("failed")))
		m = b.next()
		assert.Equal(t, uint64(2), m.Seq, "a Nack does not retry in AtMostOnce")
		ack(t, m)
		time.Sleep(time.Minute)
		b.none("nothing is ever repeated")
		b.close()
	})
}

func TestSynctestLateArrivalDeadLettered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dlq := memqueue.New(nil)
		ro := ordered.ReceiveOptions{GapTimeout: time.Second, GapPolicy: ordered.GapSkip, DeadLetter: dlq}
		b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{Receive: ro})
		b.receiveInto()
		rxSend(t, b.drv, [][]byte{rxBody("g", 1, 2)})
		time.Sleep(2 * time.Second)
		m := b.next()
		require.Equal(t, uint64(2), m.Seq, "seq 1 skipped")
		ack(t, m)
		rxSend(t, b.drv, [][]byte{rxBody("g", 1, 1)})
		time.Sleep(2 * time.Second)
		b.none("a late arrival goes to the dead-letter queue when there is one")
		require.Len(t, b.evs("late"), 1)
		require.Len(t, b.evs("dead"), 1)
		got, err := dlq.ReceiveBatch(context.Background(), 16, 0)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, rxBody("g", 1, 1), got[0].Body)
		b.close()
		vis, inflight := b.drv.Len()
		assert.Equal(t, 0, vis+inflight, "deleted once dead-lettered")
	})
}

func TestSynctestExactlyOncePoison(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dlq := memqueue.New(nil)
		ro := ordered.ReceiveOptions{Mode: ordered.ExactlyOnce, MaxAttempts: 1, Poison: ordered.PoisonDeadLetter, DeadLetter: dlq}
		b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{Receive: ro})
		b.receiveInto()
		rxSend(t, b.drv, rxBodies("g", 1, 1, 2, nil))
		time.Sleep(time.Millisecond)
		m := b.next()
		require.NoError(t, m.Nack(context.Background(), errors.New("poison")))
		m = b.next()
		require.Equal(t, uint64(2), m.Seq)
		assert.Equal(t, uint64(2), b.cursor("g").Next, "the Queue moved the cursor past the dead-lettered message itself")
		require.NoError(t, b.store.Advance(context.Background(), []seqstore.Advance{m.CursorAdvance()}))
		ack(t, m)
		b.close()
		assert.Equal(t, uint64(3), b.cursor("g").Next)
		dvis, _ := dlq.Len()
		assert.Equal(t, 1, dvis)
	})
}

func TestSynctestUnorderedRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := &ordered.Options{Retry: ordered.RetryOptions{Initial: 2 * time.Second, Max: 2 * time.Second}}
		b := newBubble(t, &memqueue.Options{Shards: 1}, opts)
		b.receiveInto()
		rxSend(t, b.drv, [][]byte{[]byte("untagged")})
		time.Sleep(time.Millisecond)
		m := b.next()
		require.True(t, m.Unordered)
		require.NoError(t, m.Nack(context.Background(), errors.New("later")))
		time.Sleep(time.Second - time.Millisecond)
		b.none("backoff")
		time.Sleep(time.Second + time.Millisecond)
		m = b.next()
		assert.Equal(t, 2, m.Attempt)
		assert.Equal(t, "untagged", string(m.Body))
		ack(t, m)
		b.close()
		vis, inflight := b.drv.Len()
		assert.Equal(t, 0, vis+inflight)
	})
}

// TestSynctestFreshOlderEpochFirst: a fresh receiver that first sees a newer
// epoch, then an older one before handing anything out, delivers the older
// epoch first, in order, then switches.
func TestSynctestFreshOlderEpochFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{Receive: ordered.ReceiveOptions{GapTimeout: 5 * time.Second}})
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := b.q.Receive(done) // starts the receive side, takes nothing
		require.ErrorIs(t, err, context.Canceled)
		rxSend(t, b.drv, rxBodies("g", 20, 1, 2, nil))
		time.Sleep(time.Second)
		rxSend(t, b.drv, rxBodies("g", 10, 1, 2, nil))
		time.Sleep(time.Second)
		b.receiveInto()
		for _, want := range [][2]uint64{{10, 1}, {10, 2}} {
			m := b.next()
			assert.Equal(t, want, [2]uint64{m.Epoch, m.Seq})
			assert.False(t, m.Unordered)
			ack(t, m)
		}
		b.none("epoch 20 waits GapTimeout after epoch 10 ends")
		time.Sleep(5 * time.Second)
		for _, want := range [][2]uint64{{20, 1}, {20, 2}} {
			m := b.next()
			assert.Equal(t, want, [2]uint64{m.Epoch, m.Seq})
			assert.False(t, m.Unordered)
			ack(t, m)
		}
		b.close()
		assert.Equal(t, uint64(20), b.cursor("g").Epoch)
	})
}
