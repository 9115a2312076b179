package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// countingStore counts the Advance calls made through it and keeps the
// cursor each stream was last moved to.
type countingStore struct {
	seqstore.Store
	mu    sync.Mutex
	calls int
	last  map[seqstore.Stream]seqstore.Cursor
}

func (s *countingStore) Advance(ctx context.Context, batch []seqstore.Advance) error {
	err := s.Store.Advance(ctx, batch)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if err == nil {
		for _, a := range batch {
			s.last[a.Stream] = a.To
		}
	}
	return err
}

// TestFloorDoesTheWork runs floor rows over memqueue and checks that every
// message was delivered (the checker saw each one, its header decoded to its
// group and seq), that each received batch wrote cursors with a
// compare-and-set the store accepted, and that the cursors stored are the
// highest seq of each group plus one.
func TestFloorDoesTheWork(t *testing.T) {
	for _, groups := range []int{1, 7} {
		t.Run(fmt.Sprintf("g%d", groups), func(t *testing.T) {
			const n = 2000
			inner := memstore.New()
			defer inner.Close()
			cs := &countingStore{Store: inner, last: make(map[seqstore.Stream]seqstore.Cursor)}
			sk := storeKind{name: "counting", open: func(context.Context, *environment) (*openStore, error) {
				return &openStore{s: cs, close: func() {}}, nil
			}}
			c := &config{count: 1, messages: n, producers: 3, consumers: 2, size: 64, backlog: 1000, timeout: 30 * time.Second}
			e := newEnvironment()
			r, err := runFloor(t.Context(), c, e, floorRun{driver: drivers(e)[0], store: sk, groups: groups, n: n})
			require.NoError(t, err, "the floor delivers every message and every write succeeds")
			assert.Equal(t, n, r.Messages)

			assert.GreaterOrEqual(t, cs.calls, (n+15)/16, "one Advance per received batch of at most 16")
			assert.InDelta(t, float64(cs.calls)/n, r.StoreOpsPerMsg, 1e-9, "store/msg counts the Advance calls")
			assert.Contains(t, r.Notes, "one Advance per received batch")

			streams := make([]seqstore.Stream, 0, len(cs.last))
			for s := range cs.last {
				streams = append(streams, s)
			}
			stored, err := inner.Cursors(t.Context(), streams)
			require.NoError(t, err)
			next := make(map[string]uint64) // per group: the highest Next of its consumers
			for i, s := range streams {
				assert.True(t, stored[i].Same(cs.last[s]), "%v: the store holds the cursor written last", s)
				next[s.Group] = max(next[s.Group], stored[i].Next)
			}
			require.Len(t, next, groups, "every group's cursor was written")
			for g := range groups {
				seqs := uint64((n - g + groups - 1) / groups) // ids g, g+groups, ... below n
				assert.Equal(t, seqs+1, next[groupName(g)], "group %d: past its highest seq", g)
			}
		})
	}
}

// A body whose header does not name the message's group and seq, or that
// has none, fails the run.
func TestFloorDecodeChecks(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	w := newFloorWork(st, "q", 10, 2, minPayload)
	fc := w.consumer(0)
	payload := make([]byte, minPayload)
	stamp{id: 3, group: 1, count: 2}.put(payload)

	got, err := fc.decode(w.encode(3, 1, payload))
	require.NoError(t, err, "message 3 is group 1's seq 2")
	assert.Equal(t, payload, got)

	for name, body := range map[string][]byte{
		"no header":   payload,
		"wrong seq":   envelope.Append(nil, envelope.Header{Group: "g0001", Epoch: 1, Seq: 3}, payload),
		"wrong group": envelope.Append(nil, envelope.Header{Group: "g0000", Epoch: 1, Seq: 2}, payload),
		"wrong epoch": envelope.Append(nil, envelope.Header{Group: "g0001", Epoch: 2, Seq: 2}, payload),
	} {
		_, err := fc.decode(body)
		assert.ErrorIs(t, err, errFloorHeader, name)
	}

	require.NoError(t, fc.commit(t.Context()))
	cur, err := st.Cursors(t.Context(), []seqstore.Stream{{Queue: "q-c0", Group: "g0001"}})
	require.NoError(t, err)
	assert.Equal(t, seqstore.Cursor{Epoch: 1, Next: 3}, cur[0], "the batch's cursor: past seq 2")
	require.NoError(t, fc.commit(t.Context()), "nothing received since: no write")
}

// An ordered row is compared with its floor of the same round, and
// selecting it runs the floor (and their base) first.
func TestFloorRatios(t *testing.T) {
	all := []scenario{
		{name: "raw/q/g1"},
		{name: "floor/q/memstore/g1", base: "raw/q/g1"},
		{name: "ordered/q/memstore/durable/g1", base: "raw/q/g1", floor: "floor/q/memstore/g1"},
		{name: "ordered/q/filestore/durable/g1", base: "raw/q/g1"},
	}
	selected := selectScenarios(all, regexp.MustCompile(`^ordered/q/memstore`), nil)
	require.Len(t, selected, 3, "the ordered row, its floor and its base")
	round := []*result{
		{Name: "raw/q/g1", Rate: 100, CPUPerMsg: 1},
		{Name: "floor/q/memstore/g1", Rate: 80, CPUPerMsg: 1.25},
		{Name: "ordered/q/memstore/durable/g1", Rate: 20, CPUPerMsg: 5},
	}
	withRatios(selected, round)
	ord := round[2]
	assert.InDelta(t, 0.25, ord.FloorRatio, 1e-9, "20 of the floor's 80 msgs/s")
	assert.InDelta(t, 0.25, ord.FloorCPURatio, 1e-9, "the floor's 1.25 µs over 5")
	assert.InDelta(t, 0.8, ord.floorRaw, 1e-9, "the floor's own ratio, of the same round")
	assert.InDelta(t, 0.8, ord.floorRawCPU, 1e-9)
	assert.InDelta(t, 0.8, round[1].CPURatio, 1e-9, "the floor's CPU ratio to raw")
	var out strings.Builder
	printFloors(&out, round)
	assert.Contains(t, out.String(), "ordered/q/memstore/durable/g1  0.25 of the floor's msgs/s, cpu 0.25  (floor/raw 0.80, cpu 0.80)")
}
