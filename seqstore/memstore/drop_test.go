package memstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// TestConformancePlanted runs the suite on plain stores whose storage the
// Park/PassedLeftovers test can plant (the external conformance tests
// cannot reach it).
func TestConformancePlanted(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(*testing.T) func(*testing.T) seqstore.Store {
			return func(*testing.T) seqstore.Store { return New() }
		},
		PlantParked: func(t *testing.T, s seqstore.Store, entries []seqstore.Parked) {
			st := s.(*Store)
			st.mu.Lock()
			defer st.mu.Unlock()
			for _, p := range entries {
				l := st.parks[p.Stream]
				if l == nil {
					l = &parkList{m: make(map[pos]*parked)}
					st.parks[p.Stream] = l
				}
				k := pos{p.Epoch, p.Seq}
				l.m[k] = &parked{epoch: p.Epoch, seq: p.Seq, body: p.Body, sum: parkSum(p.Stream, p.Epoch, p.Seq, p.Body)}
				l.keys, l.dirty = append(l.keys, k), true
			}
		},
	})
}

func parkRange(t *testing.T, st *Store, s seqstore.Stream, epoch, from, to uint64) {
	t.Helper()
	var es []seqstore.Parked
	for q := from; q <= to; q++ {
		es = append(es, seqstore.Parked{Stream: s, Epoch: epoch, Seq: q, Body: []byte{byte(q)}})
	}
	require.NoError(t, st.Park(context.Background(), es))
}

func seqsOf(ps []seqstore.Parked) []uint64 {
	var out []uint64
	for _, p := range ps {
		out = append(out, p.Seq)
	}
	return out
}

// TestAdvanceDropsInChunks checks that Advance drops a large passed park
// at most dropChunk entries per mutex hold, and all of it before it
// returns.
func TestAdvanceDropsInChunks(t *testing.T) {
	ctx := context.Background()
	st := New()
	s := seqstore.Stream{Queue: "q", Group: "g"}
	parkRange(t, st, s, 1, 1, 2500)
	var holds []int
	st.onDrop = func(n int) { holds = append(holds, n) }
	require.NoError(t, st.Advance(ctx, []seqstore.Advance{{Stream: s, To: seqstore.Cursor{Epoch: 1, Next: 2301}}}))
	total := 0
	for _, n := range holds {
		assert.LessOrEqual(t, n, dropChunk, "one mutex hold dropped %d entries (holds: %v)", n, holds)
		total += n
	}
	assert.Equal(t, 2300, total, "entries dropped over the holds %v", holds)
	assert.Len(t, st.parks[s].keys, 200, "entries left in the park")
	got, err := st.Unpark(ctx, []seqstore.ParkQuery{{Stream: s, Epoch: 1, Max: 10_000}})
	require.NoError(t, err)
	require.Len(t, got[0], 200)
	assert.EqualValues(t, 2301, got[0][0].Seq, "the first entry left")
}

// TestPassedEntriesInvisible covers the moment between two drop chunks:
// entries the cursor passed are still stored. Unpark never returns them,
// and ParkedStreams does not list a stream that has only such entries.
func TestPassedEntriesInvisible(t *testing.T) {
	ctx := context.Background()
	st := New()
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	parkRange(t, st, a, 1, 1, 1500)
	parkRange(t, st, a, 1, 2000, 2000)
	parkRange(t, st, b, 1, 1, 10)
	// The first chunk only, as Advance's own hold does.
	more, err := st.advance(ctx, []seqstore.Advance{{Stream: a, To: seqstore.Cursor{Epoch: 1, Next: 1501}}})
	require.NoError(t, err)
	assert.Equal(t, []seqstore.Stream{a}, more, "a has passed entries left after the first chunk")
	// b's cursor passed all its entries without a drop yet.
	st.cursors[b] = seqstore.Cursor{Epoch: 2, Next: 1}

	got, err := st.Unpark(ctx, []seqstore.ParkQuery{
		{Stream: a, Epoch: 1, Max: 10_000}, {Stream: a, Epoch: 1, From: 1400, Max: 10_000}, {Stream: b, Epoch: 1, Max: 10_000}})
	require.NoError(t, err)
	assert.Equal(t, []uint64{2000}, seqsOf(got[0]), "a epoch 1 from 0: only what the cursor has not passed")
	assert.Equal(t, []uint64{2000}, seqsOf(got[1]), "a epoch 1 from 1400")
	assert.Empty(t, got[2], "b epoch 1: every entry passed")
	ss, err := st.ParkedStreams(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, []seqstore.Stream{a}, ss, "a stream with only passed entries is not listed")

	st.dropPassed(a)
	assert.Len(t, st.parks[a].keys, 1, "dropPassed leaves only a's live entry")
}
