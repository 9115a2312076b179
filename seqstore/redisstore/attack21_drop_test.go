package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestAttack21DropRace: see attack21DropRace (miniredis, and a real Redis
// with INORDER_TEST_REDIS_ADDR).
func TestAttack21DropRace(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c, prefix := b.open(t)
			s := newStore(t, c, prefix)
			st := seqstore.Stream{Queue: "q", Group: "race"}
			attack21DropRace(t, s, func() int {
				n, err := c.ZCard(context.Background(), s.key(st, "park")).Result()
				require.NoError(t, err)
				h, err := c.HLen(context.Background(), s.key(st, "parkbody")).Result()
				require.NoError(t, err)
				require.Equal(t, n, h, "park set and bodies agree")
				return int(n)
			})
		})
	}
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

// TestAttack21UnparkWithoutCursor: Unpark and ParkedStreams of a stream
// parked before any cursor was written (the scripts now read the cursor
// to filter passed entries) and with odd From values (0, far above, the
// cursor's own seq) return exactly the entries at or above max(From,
// cursor).
func TestAttack21UnparkWithoutCursor(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c, prefix := b.open(t)
			s := newStore(t, c, prefix)
			st := seqstore.Stream{Queue: "q", Group: "nocursor"}
			var es []seqstore.Parked
			for q := uint64(1); q <= 10; q++ {
				es = append(es, seqstore.Parked{Stream: st, Epoch: 7, Seq: q, Body: []byte{byte(q)}})
			}
			require.NoError(t, s.Park(ctx, es))
			count := func(epoch, from uint64) int {
				got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: epoch, From: from, Max: 100}})
				require.NoError(t, err)
				return len(got[0])
			}
			require.Equal(t, 10, count(7, 0))
			require.Equal(t, 6, count(7, 5))
			require.Equal(t, 0, count(7, 11))
			require.Equal(t, 0, count(6, 0))
			require.Equal(t, 0, count(8, 0))
			ps, err := s.ParkedStreams(ctx, "q")
			require.NoError(t, err)
			require.Equal(t, []seqstore.Stream{st}, ps)
			require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 7, Next: 4}}}))
			require.Equal(t, 7, count(7, 0))
			require.Equal(t, 7, count(7, 4))
			require.Equal(t, 3, count(7, 8))
			require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, From: seqstore.Cursor{Epoch: 7, Next: 4}, To: seqstore.Cursor{Epoch: 8, Next: 1}}}))
			require.Equal(t, 0, count(7, 0))
			ps, err = s.ParkedStreams(ctx, "q")
			require.NoError(t, err)
			require.Empty(t, ps)
		})
	}
}
