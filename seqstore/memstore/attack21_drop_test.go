package memstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestAttack21DropRace: see attack21DropRace.
func TestAttack21DropRace(t *testing.T) {
	s := New()
	defer s.Close()
	st := seqstore.Stream{Queue: "q", Group: "race"}
	attack21DropRace(t, s, func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		if l := s.parks[st]; l != nil {
			return len(l.m)
		}
		return 0
	})
}

// attack21Store is what the race below needs of a store.
type attack21Store interface {
	seqstore.Store
	seqstore.Parker
}

// attack21DropRace: an Advance that passes more parks than a drop chunk
// (its follow-up drops run after the cursor write) races with Parks of new
// seqs above the cursor and with a second Advance of the same stream; then
// an epoch switch that passes them all races with Parks of the new epoch.
// After every call returned: Unpark returns exactly the entries at or
// above the cursor (none lost, none passed), ParkedStreams lists the
// stream while it has some, and raw() (the entries the backend still
// holds, passed or not, -1 if unknown) holds no passed leftovers.
func attack21DropRace(t *testing.T, s attack21Store, raw func() int) {
	ctx := context.Background()
	st := seqstore.Stream{Queue: "q", Group: "race"}
	park := func(epoch, from, to uint64) error {
		var es []seqstore.Parked
		for q := from; q <= to; q++ {
			es = append(es, seqstore.Parked{Stream: st, Epoch: epoch, Seq: q, Body: []byte(fmt.Sprintf("%d/%d", epoch, q))})
			if len(es) == 100 || q == to {
				if err := s.Park(ctx, es); err != nil {
					return err
				}
				es = es[:0]
			}
		}
		return nil
	}
	advance := func(from, to seqstore.Cursor) {
		for {
			err := s.Advance(ctx, []seqstore.Advance{{Stream: st, From: from, To: to}})
			if err == nil {
				return
			}
			require.ErrorIs(t, err, seqstore.ErrConflict)
			time.Sleep(time.Millisecond)
		}
	}
	c1 := seqstore.Cursor{Epoch: 1, Next: 1}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: c1}}))
	require.NoError(t, park(1, 2, 3001))
	c2, c3 := seqstore.Cursor{Epoch: 1, Next: 2600}, seqstore.Cursor{Epoch: 1, Next: 2800}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Add(3)
	go func() { defer wg.Done(); advance(c1, c2) }()
	go func() { defer wg.Done(); advance(c2, c3) }()
	go func() { defer wg.Done(); errs <- park(1, 4000, 4999) }()
	wg.Wait()
	require.NoError(t, <-errs)
	want := func(epoch uint64, seqs ...[2]uint64) {
		t.Helper()
		got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: epoch, From: 0, Max: 100000}})
		require.NoError(t, err)
		var exp []uint64
		for _, r := range seqs {
			for q := r[0]; q <= r[1]; q++ {
				exp = append(exp, q)
			}
		}
		var have []uint64
		for _, p := range got[0] {
			have = append(have, p.Seq)
			require.Equal(t, fmt.Sprintf("%d/%d", epoch, p.Seq), string(p.Body))
		}
		require.Equal(t, len(exp), len(have), "epoch %d: parks left", epoch)
		require.Equal(t, exp, have, "epoch %d", epoch)
		if raw != nil {
			if n := raw(); n >= 0 {
				t.Logf("backend holds %d entries", n)
			}
		}
	}
	want(1, [2]uint64{2800, 3001}, [2]uint64{4000, 4999})
	ps, err := s.ParkedStreams(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, []seqstore.Stream{st}, ps)
	if raw != nil {
		if n := raw(); n >= 0 {
			require.Equal(t, 202+1000, n, "no passed entry left once the Advances returned")
		}
	}

	// An epoch switch passing everything, racing with the new epoch's parks.
	c4 := seqstore.Cursor{Epoch: 2, Next: 1}
	wg.Add(2)
	go func() { defer wg.Done(); advance(c3, c4) }()
	go func() { defer wg.Done(); errs <- park(2, 5, 1504) }()
	wg.Wait()
	require.NoError(t, <-errs)
	want(1)
	want(2, [2]uint64{5, 1504})
	if raw != nil {
		if n := raw(); n >= 0 {
			require.Equal(t, 1500, n, "no passed entry left once the Advances returned")
		}
	}
	// Pass them all: nothing listed.
	advance(c4, seqstore.Cursor{Epoch: 2, Next: 2000})
	want(2)
	ps, err = s.ParkedStreams(ctx, "q")
	require.NoError(t, err)
	require.Empty(t, ps)
	if raw != nil {
		if n := raw(); n >= 0 {
			require.Equal(t, 0, n, "no passed entry left")
		}
	}
}
