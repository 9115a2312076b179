package ordered_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestReceiveShedsGroupsWithParks: 2,000 groups each deliver seq 1 (their
// cursor is stored) and park seq 5 (beyond a window of 2) while seqs 2-4
// are missing, under a memory budget their state does not fit. The
// receiver sheds such groups (their next messages are in the queue or the
// park, their epoch in their cursor) and stays within the budget; once
// seqs 2-4 arrive, every group is loaded again and delivers 2..5 in order,
// seq 5 from the park. Before groups with a stored cursor could be shed
// with parks, such groups stayed in memory for good.
func TestReceiveShedsGroupsWithParks(t *testing.T) {
	const (
		groups = 2000
		budget = 256 << 10
	)
	drv := memqueue.New(&memqueue.Options{Shards: 4, Visibility: 30 * time.Second})
	q := rxQueue(t, drv, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{
		Wait: 10 * time.Millisecond, Window: 2, MaxMemory: budget, ReapInterval: 10 * time.Millisecond,
		CommitInterval: time.Millisecond,
	}})
	var first [][]byte
	for g := range groups {
		name := fmt.Sprintf("g%04d", g)
		first = append(first, rxBody(name, 1, 1), rxBody(name, 1, 5))
	}
	rxSend(t, drv, first)
	rc := newRxRecorder(groups * 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
			defer rc.record(m)()
			return nil
		})
	}()
	peak := 0
	require.Eventually(t, func() bool {
		st := q.Stats().Receive
		peak = max(peak, st.Memory)
		return st.Delivered >= groups && st.Parked >= groups && st.Committed >= groups
	}, 30*time.Second, 5*time.Millisecond, "every group delivers seq 1 and parks seq 5")
	// Settled: groups were shed and memory is back within the budget. A
	// condition, not a fixed time: on a loaded machine shedding 2,000
	// groups can take longer than the second this once waited.
	var st ordered.ReceiveStats
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st = q.Stats().Receive
		peak = max(peak, st.Memory)
		if st.Evicted > 0 && st.Memory <= budget+64<<10 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not settled after 30s: evicted %d, memory %d (budget %d + 64 KiB), groups in memory %d, parked %d",
			st.Evicted, st.Memory, budget, st.Groups, st.Parked)
	}
	t.Logf("after phase 1: groups in memory %d, memory %d (peak %d, budget %d), parked %d, evicted %d", st.Groups, st.Memory, peak, budget, st.Parked, st.Evicted)
	assert.Positive(t, st.Evicted, "groups waiting on their park were shed")
	// Once settled the receiver is back within its budget. (While the
	// 2,000 groups first load, memory peaks far above it, about 1.2 MB of
	// 256 KB: their arrivals are kept while their cursors load. A known
	// weakness, logged, not asserted.)
	assert.LessOrEqual(t, st.Memory, budget+64<<10, "memory within the budget once settled")

	var rest [][]byte
	for g := range groups {
		rest = append(rest, rxBodies(fmt.Sprintf("g%04d", g), 1, 2, 4, nil)...)
	}
	rxSend(t, drv, rest)
	rxWait(t, rc, 60*time.Second)
	cancel()
	require.NoError(t, <-errc)
	rxClose(t, q)
	want := map[string]uint64{}
	for g := range groups {
		want[fmt.Sprintf("g%04d", g)] = 5
	}
	rc.check(t, want)
	st = q.Stats().Receive
	t.Logf("after phase 2: delivered %d, unparked %d, evicted %d, peak memory %d", st.Delivered, st.Unparked, st.Evicted, peak)
}
