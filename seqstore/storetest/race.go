package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// Cross-instance races: several Stores over the same storage, as several
// processes on one database. Calls of one Store may be serialized in
// process (one writer goroutine, one mutex), so only a race between
// instances proves that the storage itself enforces compare-and-set and
// counter increments (SQL row locks, Lua scripts).

const (
	raceInstances = 8
	raceRounds    = 40
)

// testCrossInstanceRace opens raceInstances Stores on one storage. In each
// round every instance, released at once, moves the hot cursor from the
// same From to its own To (together with a private stream in the same
// batch) while it reserves seqs of one shared counter stream. Exactly one
// Advance wins each round; a loser's batch applies nothing (or, with
// PerStreamAtomic, exactly what its BatchError says); and no seq of the
// shared counter is handed out twice or skipped.
func testCrossInstanceRace(t *testing.T, h Harness) {
	if !h.Shared {
		t.Skip("Harness.Shared is false: this store admits one instance per storage")
	}
	_, reopen := open(t, h)
	stores := make([]seqstore.Store, raceInstances)
	for i := range stores {
		stores[i] = reopen(t)
	}
	ctx := t.Context()
	hot := seqstore.Stream{Queue: "q", Group: "hot"}
	counter := seqstore.Stream{Queue: "q", Group: "counter"}
	own := func(i int) seqstore.Stream { return seqstore.Stream{Queue: "q", Group: fmt.Sprintf("own-%d", i)} }
	owns := make([]seqstore.Stream, raceInstances)
	for i := range owns {
		owns[i] = own(i)
	}

	type grant struct {
		epoch, first uint64
		n            int
	}
	var grants []grant
	var from seqstore.Cursor
	ownCur := make([]seqstore.Cursor, raceInstances)
	multiWinner := 0
	for round := range raceRounds {
		start := make(chan struct{})
		advErrs := make([]error, raceInstances)
		resErrs := make([]error, raceInstances)
		res := make([][]seqstore.Reservation, raceInstances)
		tos := make([]seqstore.Cursor, raceInstances)
		ownTos := make([]seqstore.Cursor, raceInstances)
		var wg sync.WaitGroup
		for i, st := range stores {
			tos[i] = seqstore.Cursor{Epoch: 9, Next: uint64(round + 1), Owner: uint64(i + 1)}
			ownTos[i] = seqstore.Cursor{Epoch: 1, Next: ownCur[i].Next + 1}
			batch := []seqstore.Advance{{Stream: own(i), From: ownCur[i], To: ownTos[i]}, {Stream: hot, From: from, To: tos[i]}}
			reqs := []seqstore.ReserveRequest{{Stream: counter, N: 1 + i%3}, {Stream: own(i), N: 1}}
			wg.Go(func() {
				<-start
				advErrs[i] = st.Advance(ctx, batch)
			})
			wg.Go(func() {
				<-start
				res[i], resErrs[i] = st.Reserve(ctx, reqs)
			})
		}
		close(start)
		wg.Wait()

		var winners []int
		ownWant := slices.Clone(ownCur)
		for i, err := range advErrs {
			if err == nil {
				winners = append(winners, i)
				ownWant[i] = ownTos[i]
				continue
			}
			errs := outcomes(t, err, 2, fmt.Sprintf("round %d: a losing racer's Advance", round))
			assert.ErrorIs(t, errs[1], seqstore.ErrConflict, "round %d: racer %d lost the hot cursor: want ErrConflict", round, i)
			switch {
			case errs[0] == nil && h.PerStreamAtomic:
				ownWant[i] = ownTos[i] // reported as applied
			case errs[0] == nil:
				t.Errorf("round %d: racer %d: an atomic Advance that conflicted reports its other request as applied", round, i)
			default:
				assert.ErrorIs(t, errs[0], seqstore.ErrAborted, "round %d: racer %d's private stream did not conflict", round, i)
			}
		}
		if len(winners) > 1 {
			multiWinner++
			t.Errorf("round %d: racers %v all won the same compare-and-set of %s from %+v", round, winners, hot, from)
		}
		require.NotEmpty(t, winners, "round %d: no racer won the compare-and-set", round)
		reader := stores[round%raceInstances]
		stored := cursor(t, reader, hot)
		assert.True(t, slices.ContainsFunc(winners, func(w int) bool { return stored.Same(tos[w]) }),
			"round %d: the stored cursor %+v must be a winner's (racers %v)", round, stored, winners)
		got := cursors(t, reader, owns...)
		for i := range owns {
			assertCursor(t, ownWant[i], got[i], "round %d: racer %d's private stream must be as its Advance reported", round, i)
		}
		// Go on from what is stored, so that every round races again.
		from, ownCur = stored, got

		for i, err := range resErrs {
			require.NoError(t, err, "round %d: racer %d: Reserve must not fail because another instance reserved", round, i)
			require.Len(t, res[i], 2)
			grants = append(grants, grant{res[i][0].Epoch, res[i][0].First, 1 + i%3})
			assert.Equal(t, uint64(round+1), res[i][1].First, "round %d: racer %d's private counter", round, i)
		}
	}
	if multiWinner > 0 {
		t.Errorf("%d of %d rounds had more than one winner: the store does not enforce compare-and-set across instances", multiWinner, raceRounds)
	}

	slices.SortFunc(grants, func(a, b grant) int { return cmp.Compare(a.first, b.first) })
	next := uint64(1)
	var dup []string
	for _, g := range grants {
		assert.Equal(t, grants[0].epoch, g.epoch, "the shared counter has one epoch, whichever instance created it")
		if g.first != next {
			dup = append(dup, fmt.Sprintf("%d..%d where %d was next", g.first, g.first+uint64(g.n)-1, next))
		}
		next = max(next, g.first+uint64(g.n))
	}
	assert.Empty(t, dup, "seqs of %s must be handed out once each without gaps across %d instances", counter, raceInstances)
	assert.Equal(t, next, reserve(t, stores[0], counter, 1, nil).First, "next seq of the shared counter")
}
