package scaleout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/lease"
	"github.com/inorder/inorder/internal/shard"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// groupOn returns a group name that the topology places on shard s of n.
func groupOn(t *testing.T, s, n int) string {
	for i := range 1000 {
		g := "g" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if shard.Of(g, n) == s {
			return g
		}
	}
	t.Fatalf("no group on shard %d of %d", s, n)
	return ""
}

// An owner's fenced view claims each stream before its Queue sees it; once
// a newer owner claimed a stream, the older owner's advance is refused, its
// re-read reports ErrFenced, and the whole shard is fenced, once.
func TestFencedStoreClaimsAndFences(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	g := groupOn(t, 1, 4)
	s := seqstore.Stream{Queue: "orders", Group: g}
	var fencedA []error
	a := &fencedStore{Store: st, shard: 1, shards: 4, token: 5, onFence: func(err error) { fencedA = append(fencedA, err) }}
	b := &fencedStore{Store: st, shard: 1, shards: 4, token: 6, onFence: func(error) { t.Error("the newer owner was fenced") }}

	curs, err := a.Cursors(ctx, []seqstore.Stream{s})
	require.NoError(t, err)
	require.Equal(t, uint64(5), curs[0].Owner, "read through the fence: claimed for token 5")
	// A advances from what it read, as the receive core does (Owner 0 in
	// To: the fence sets it).
	require.NoError(t, a.Advance(ctx, []seqstore.Advance{{Stream: s, From: curs[0], To: seqstore.Cursor{Epoch: 1, Next: 4}}}))
	// The advance kept the claim: an owner older than A cannot claim it.
	older := &fencedStore{Store: st, shard: 1, shards: 4, token: 4, onFence: func(error) {}}
	_, err = older.Cursors(ctx, []seqstore.Stream{s})
	require.ErrorIs(t, err, seqstore.ErrFenced, "an advance un-claimed the stream")

	// B takes over: its read claims the stream, and shows A's advance.
	cb, err := b.Cursors(ctx, []seqstore.Stream{s})
	require.NoError(t, err)
	require.Equal(t, seqstore.Cursor{Epoch: 1, Next: 4, Owner: 6}, cb[0])

	// A, not knowing, advances again from its own view: refused.
	err = a.Advance(ctx, []seqstore.Advance{{Stream: s, From: seqstore.Cursor{Epoch: 1, Next: 4, Owner: 5}, To: seqstore.Cursor{Epoch: 1, Next: 9}}})
	require.ErrorIs(t, err, seqstore.ErrConflict)
	// Its re-read reports the fence and fences the shard, once.
	_, err = a.Cursors(ctx, []seqstore.Stream{s})
	require.ErrorIs(t, err, seqstore.ErrFenced)
	_, err = a.Cursors(ctx, []seqstore.Stream{s})
	require.ErrorIs(t, err, seqstore.ErrFenced)
	require.Len(t, fencedA, 1)

	got, err := st.Cursors(ctx, []seqstore.Stream{s})
	require.NoError(t, err)
	require.Equal(t, seqstore.Cursor{Epoch: 1, Next: 4, Owner: 6}, got[0], "the stale owner never moved the cursor")
	require.NoError(t, b.Advance(ctx, []seqstore.Advance{{Stream: s, From: cb[0], To: seqstore.Cursor{Epoch: 1, Next: 5}}}))
}

// A group the topology places on another shard is refused (its messages
// came from a sender with another topology), alone; another shard's parks
// are not listed.
func TestFencedStoreForeignGroups(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	mine, theirs := groupOn(t, 2, 4), groupOn(t, 3, 4)
	f := &fencedStore{Store: st, shard: 2, shards: 4, token: 1, onFence: func(error) { t.Error("fenced") }}
	streams := []seqstore.Stream{{Queue: "q", Group: mine}, {Queue: "q", Group: theirs}}
	curs, err := f.Cursors(ctx, streams)
	require.Error(t, err)
	require.NoError(t, seqstore.Failed(err, 0, 2))
	require.True(t, errors.Is(seqstore.Failed(err, 1, 2), errForeign), "%v", err)
	require.Equal(t, uint64(1), curs[0].Owner)

	for _, g := range []string{mine, theirs} {
		s := seqstore.Stream{Queue: "q", Group: g}
		require.NoError(t, st.Park(ctx, []seqstore.Parked{{Stream: s, Epoch: 1, Seq: 3, Body: []byte("x")}}))
	}
	parked, err := f.ParkedStreams(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, []seqstore.Stream{{Queue: "q", Group: mine}}, parked)
}

// Lease timings that break their rules are refused by NewReceiver, not
// found later by Run.
func TestNewReceiverChecksLeaseTimings(t *testing.T) {
	ctx := context.Background()
	shards := []Shard{{Name: "orders-0", Queue: memqueue.New(nil)}}
	_, err := NewReceiver(ctx, shards, memstore.New(), &Options{
		Queue:  ordered.Options{Name: "orders"},
		Member: "a",
		Lease:  LeaseOptions{TTL: time.Second, RenewDeadline: 2 * time.Second}, // deadline past the TTL
	})
	require.ErrorIs(t, err, lease.ErrOptions)
}
