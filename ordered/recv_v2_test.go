package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
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

// A write applied by the store but reported failed, answered to a SyncAck:
// the receiver re-reads the cursor, finds its own write, and the Ack
// succeeds; nothing is reported as a second receiver.
func TestReceiveAmbiguousCommitIsNotAConflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drv := memqueue.New(&memqueue.Options{Shards: 1})
		st := &ambStore{Store: memstore.New()}
		st.fail.Store(1)
		var conflicts int
		q := rxQueue(t, drv, st, &ordered.Options{
			Hooks:   ordered.Hooks{OnConflict: func(ordered.Event) { conflicts++ }},
			Receive: ordered.ReceiveOptions{SyncAck: true, Wait: time.Second},
		})
		rxSend(t, drv, rxBodies("g", 1, 1, 3, nil))
		ctx := context.Background()
		for want := uint64(1); want <= 3; want++ {
			m, err := q.Receive(ctx)
			require.NoError(t, err)
			require.Equal(t, want, m.Seq)
			require.NoError(t, m.Ack(ctx), "SyncAck of seq %d: the ambiguous write was this receiver's own", want)
		}
		s := q.Stats().Receive
		rxClose(t, q)
		assert.Zero(t, conflicts, "no OnConflict for a write of one's own")
		assert.Zero(t, s.Conflicts)
		assert.Positive(t, s.CommitFailures, "the store did report a failure")
		vis, inflight := drv.Len()
		assert.Zero(t, vis+inflight, "everything deleted")
	})
}

// AtMostOnce: an untagged message that the handler rejects is not retried,
// and it is deleted all the same (it was deleted before it was handed out).
func TestReceiveAtMostOnceUntaggedNackDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, &memqueue.Options{Shards: 1, Visibility: 5 * time.Second}, &ordered.Options{Receive: ordered.ReceiveOptions{Mode: ordered.AtMostOnce}})
		b.receiveInto()
		require.NoError(t, b.drv.SendBatch(context.Background(), [][]byte{[]byte("no header")}))
		time.Sleep(time.Millisecond)
		m := b.next()
		require.True(t, m.Unordered)
		require.NoError(t, m.Nack(context.Background(), errors.New("rejected")))
		time.Sleep(time.Minute) // several visibility timeouts
		b.none("a rejected AtMostOnce message never comes again")
		vis, inflight := b.drv.Len()
		b.close()
		assert.Zero(t, vis+inflight, "the untagged message is deleted")
	})
}

// Unordered copies are handed out once per receiver's life: two queue
// messages of one late seq (a skipped seq sent twice) and a redelivery of
// an untagged body give one hand-out each, and with a dead-letter queue
// one dead letter each.
func TestReceiveUnorderedCopiesOnce(t *testing.T) {
	for _, dead := range []bool{false, true} {
		t.Run(map[bool]string{false: "deliver", true: "dead-letter"}[dead], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dlq := memqueue.New(nil)
				ro := ordered.ReceiveOptions{GapPolicy: ordered.GapSkip, GapTimeout: time.Second}
				if dead {
					ro.DeadLetter = dlq
				}
				b := newBubble(t, &memqueue.Options{Shards: 1, Visibility: 3 * time.Second}, &ordered.Options{Receive: ro})
				b.receiveInto()
				rxSend(t, b.drv, [][]byte{rxBody("g", 1, 2)})
				time.Sleep(2 * time.Second) // seq 1 skipped
				ack(t, b.next())
				// Seq 1 arrives late, sent twice (two queue messages).
				rxSend(t, b.drv, [][]byte{rxBody("g", 1, 1), rxBody("g", 1, 1)})
				time.Sleep(10 * time.Second)
				var unordered int
				for {
					synctest.Wait()
					select {
					case m := <-b.msgs:
						require.True(t, m.Unordered)
						unordered++
						ack(t, m)
						continue
					default:
					}
					break
				}
				time.Sleep(30 * time.Second) // any released copy comes back and is deleted
				b.none("no copy of the late seq is handed out again")
				b.close()
				dvis, _ := dlq.Len()
				if dead {
					assert.Zero(t, unordered, "dead-lettered, not handed out")
					assert.Equal(t, 1, dvis, "one dead letter for the two copies")
				} else {
					assert.Equal(t, 1, unordered, "one hand-out for the two copies")
					assert.Zero(t, dvis)
				}
				vis, inflight := b.drv.Len()
				assert.Zero(t, vis+inflight, "both copies deleted")
				assert.NotEmpty(t, b.evs("late"), "the late seq is reported")
			})
		})
	}
}

// GapWait: a newer sender epoch never makes the group pass over a seq of
// the old epoch that is missing: the hole waits (reported), and the switch
// happens once the old epoch has nothing left, GapTimeout after the newer
// epoch showed up.
func TestReceiveEpochSwitchWaitsForTheHole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, &memqueue.Options{Shards: 1}, &ordered.Options{Receive: ordered.ReceiveOptions{GapTimeout: 10 * time.Second}})
		b.receiveInto()
		rxSend(t, b.drv, [][]byte{rxBody("g", 1, 1), rxBody("g", 1, 3)})
		time.Sleep(time.Millisecond)
		ack(t, b.next())
		rxSend(t, b.drv, rxBodies("g", 2, 1, 2, nil)) // the sender lost its state
		time.Sleep(5 * time.Minute)
		b.none("seq 2 of epoch 1 is missing: the group never passes over it")
		require.NotEmpty(t, b.evs("gap"), "the hole is reported")
		assert.Empty(t, b.evs("epoch"), "no switch while the old epoch holds a hole")
		rxSend(t, b.drv, [][]byte{rxBody("g", 1, 2)})
		time.Sleep(time.Millisecond)
		for _, want := range []uint64{2, 3} {
			m := b.next()
			require.Equal(t, uint64(1), m.Epoch)
			require.Equal(t, want, m.Seq)
			ack(t, m)
		}
		for _, want := range []uint64{1, 2} {
			time.Sleep(10 * time.Second) // the switch waited GapTimeout since the newer epoch appeared: done already
			m := b.next()
			require.Equal(t, uint64(2), m.Epoch, "the newer epoch follows the old one")
			require.Equal(t, want, m.Seq)
			ack(t, m)
		}
		assert.Len(t, b.evs("epoch"), 1)
		b.close()
	})
}

// TestReceiveMemoryBudget: groups whose bodies sit far ahead of their next
// seq (each group blocked on a hole, with 10 KB bodies), under a budget of
// 8 MiB: spread over 10,000 groups of one body each (most of the budget
// goes to per-group state), and deep, 20 groups of 500 (most of it goes to
// bodies). The heap the receiver holds stays within the budget plus a
// constant, and the budget is what Stats reports.
func TestReceiveMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~100 MB of bodies per case")
	}
	for _, tc := range []struct {
		name             string
		groups, perGroup int
	}{
		{"spread", 10_000, 1},
		{"deep", 20, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The heap is the process's: in a run of the whole package
			// under -race, what earlier tests left running once made it
			// 14.5 and 16.9 MiB where this case alone measures 9.6-10.8.
			// An excess that comes back on a second try is the receiver's.
			for try := 1; ; try++ {
				grown := testMemoryBudget(t, tc.groups, tc.perGroup)
				if grown < memBudget+memConstant || try == 2 {
					assert.Less(t, grown, int64(memBudget+memConstant), "heap within the budget plus a constant")
					break
				}
				t.Logf("heap grew %.1f MiB: over; once more", float64(grown)/(1<<20))
			}
		})
	}
}

const (
	memBudget = 8 << 20
	// What the budget does not count: one receive batch per fetcher
	// beyond it, the driver's and the test's own slack.
	memConstant = 6 << 20
)

// testMemoryBudget runs a receiver over groups x perGroup bodies that
// cannot be delivered and returns how much its heap grew.
func testMemoryBudget(t *testing.T, groups, perGroup int) int64 {
	const (
		budget   = memBudget
		constant = memConstant
	)
	drv := memqueue.New(&memqueue.Options{Shards: 4, Visibility: time.Minute})
	// A store that cannot park: memstore's park lives in this process's
	// heap, and this test measures the receiver's share of it.
	q := rxQueue(t, drv, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{NoPark: true,
		Wait: 10 * time.Millisecond, MaxMemory: budget, MaxUndeleted: 100_000,
	}})
	pad := make([]byte, 10_000)
	var bs [][]byte
	for g := range groups {
		for i := range perGroup {
			seq := uint64(2 + i) // seq 1 never comes: the hole
			if perGroup == 1 {
				seq = uint64(2 + g%5000) // spread: one body, at any distance
			}
			bs = append(bs, append(rxBody(fmt.Sprintf("g%05d", g), 1, seq), pad...))
		}
	}
	rxSend(t, drv, bs)
	bs = nil
	queued := liveHeap()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := q.Receive(ctx) // starts the receiver; nothing is deliverable
	cancel()
	require.Error(t, err)
	var peak uint64
	var peakMem int
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		peak = max(peak, liveHeap())
		peakMem = max(peakMem, q.Stats().Receive.Memory)
	}
	st := q.Stats().Receive
	grown := int64(peak) - int64(queued)
	t.Logf("groups in memory %d, received %d, buffered %d, memory charged %d (peak %d, budget %d), heap grew %.1f MiB (budget %.1f MiB + %.1f MiB)",
		st.Groups, st.Received, st.Buffered, st.Memory, peakMem, budget, float64(grown)/(1<<20), float64(budget)/(1<<20), float64(constant)/(1<<20))
	rxClose(t, q)
	assert.Positive(t, st.Received, "the receiver fetched")
	assert.LessOrEqual(t, peakMem, budget+16*(10_000+1024), "charged memory stays within the budget, give or take one receive batch")
	return grown
}

// corruptStore reports the stored cursor of one group as corrupt (a Redis
// key overwritten with a string, a SQL row with garbage).
type corruptStore struct {
	*memstore.Store
	bad string
}

func (s *corruptStore) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	curs, err := s.Store.Cursors(ctx, streams)
	if err != nil {
		return curs, err
	}
	errs := make([]error, len(streams))
	failed := false
	for i, st := range streams {
		if st.Group == s.bad {
			errs[i], failed = fmt.Errorf("cursor of %s: %w", st, seqstore.ErrCorrupt), true
		}
	}
	if failed {
		return curs, &seqstore.BatchError{Errs: errs}
	}
	return curs, nil
}

// A corrupt stored cursor stops its own group, reported as stuck with the
// store's error (Hooks.OnStuck, Stats), and only that group: the others go
// on; nothing of the stuck group is deleted.
func TestReceiveCorruptCursorStopsOneGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drv := memqueue.New(&memqueue.Options{Shards: 1})
		var stuck []ordered.Event
		q := rxQueue(t, drv, &corruptStore{Store: memstore.New(), bad: "bad"}, &ordered.Options{
			Hooks:   ordered.Hooks{OnStuck: func(e ordered.Event) { stuck = append(stuck, e) }},
			Receive: ordered.ReceiveOptions{Wait: time.Second},
		})
		rxSend(t, drv, append(rxBodies("bad", 1, 1, 3, nil), rxBodies("good", 1, 1, 3, nil)...))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for want := uint64(1); want <= 3; want++ {
			m, err := q.Receive(ctx)
			require.NoError(t, err)
			require.Equal(t, "good", m.Group, "only the group whose cursor reads fine is delivered")
			require.Equal(t, want, m.Seq)
			require.NoError(t, m.Ack(ctx))
		}
		time.Sleep(2 * time.Second)
		st := q.Stats().Receive
		rxClose(t, q)
		require.NotEmpty(t, stuck, "OnStuck reports the group")
		assert.Equal(t, "bad", stuck[0].Group)
		assert.ErrorIs(t, stuck[0].Err, seqstore.ErrCorrupt)
		require.Len(t, st.Stuck, 1, "Stats names the stuck group")
		assert.Equal(t, "store", st.Stuck[0].Reason)
		assert.ErrorIs(t, st.Stuck[0].Err, seqstore.ErrCorrupt)
		vis, inflight := drv.Len()
		assert.Equal(t, 3, vis+inflight, "the stuck group's messages stay in the queue")
	})
}

// liveHeap runs a garbage collection and returns the heap it found live.
// HeapAlloc read after runtime.GC would also count what the receiver's
// goroutines allocated since (bodies fetched and given back), more of it
// the longer a loaded machine keeps this goroutine waiting.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
