package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// forEachMode runs f on every backend and, on a single node, also with the
// sharded rules (the park index updated in a second step and pruned on
// read), each with its own prefix.
func forEachMode(t *testing.T, f func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool)) {
	forEach(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		for _, sharded := range []bool{false, true} {
			t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
				if shardedClient(c) && !sharded {
					t.Skip("a cluster or ring client always uses the sharded rules")
				}
				f(t, c, prefix+fmt.Sprint(sharded)+":", sharded)
			})
		}
	})
}

func newModeStore(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) *Store {
	s := newStore(t, c, prefix)
	s.sharded = sharded
	return s
}

func park(st seqstore.Stream, epoch, seq uint64, body string) seqstore.Parked {
	return seqstore.Parked{Stream: st, Epoch: epoch, Seq: seq, Body: []byte(body)}
}

// parkedSeqs returns "epoch/seq=body" of every parked entry of st with
// epoch, read with Max 1 at a time so that From and Max are exercised too.
func parkedSeqs(t *testing.T, s *Store, st seqstore.Stream, epoch uint64) []string {
	t.Helper()
	var out []string
	from := uint64(0)
	for {
		got, err := s.Unpark(context.Background(), []seqstore.ParkQuery{{Stream: st, Epoch: epoch, From: from, Max: 1}})
		require.NoError(t, err, "unpark %s epoch %d from %d", st, epoch, from)
		require.Len(t, got, 1)
		if len(got[0]) == 0 {
			return out
		}
		require.Len(t, got[0], 1, "Max 1")
		p := got[0][0]
		out = append(out, fmt.Sprintf("%d/%d=%s", p.Epoch, p.Seq, p.Body))
		from = p.Seq + 1
	}
}

func parkedStreams(t *testing.T, s *Store, queue string) []seqstore.Stream {
	t.Helper()
	got, err := s.ParkedStreams(context.Background(), queue)
	require.NoError(t, err, "parked streams of %q", queue)
	return got
}

func advance(t *testing.T, s *Store, st seqstore.Stream, from, to seqstore.Cursor) {
	t.Helper()
	require.NoError(t, s.Advance(context.Background(), []seqstore.Advance{{Stream: st, From: from, To: to}}), "advance %s to %+v", st, to)
}

func TestParkUnpark(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		b := seqstore.Stream{Queue: "q", Group: "b{x}"}
		other := seqstore.Stream{Queue: "q2", Group: "a"}
		big := uint64(seqstore.MaxSeq)
		in := []seqstore.Parked{
			park(a, 5, 10, "a10"), park(a, 5, 2, "a2"), park(a, 5, 9, ""), park(a, 4, 100, "old"),
			park(a, 6, 1, "new"), park(b, big, big, "top"), park(a, 5, 100, "a100"), park(other, 1, 1, "o"),
		}
		require.NoError(t, s.Park(ctx, in))
		in[0].Body[0] = 'X' // the store keeps its own copy

		got, err := s.Unpark(ctx, []seqstore.ParkQuery{
			{Stream: a, Epoch: 5, From: 0, Max: 10},
			{Stream: a, Epoch: 5, From: 9, Max: 2},
			{Stream: b, Epoch: big, From: big, Max: 1},
			{Stream: a, Epoch: 7, Max: 5},
			{Stream: seqstore.Stream{Queue: "q", Group: "none"}, Epoch: 5, Max: 5},
		})
		require.NoError(t, err)
		require.Len(t, got, 5)
		var seqs []uint64
		for _, p := range got[0] {
			seqs = append(seqs, p.Seq)
			assert.Equal(t, a, p.Stream)
			assert.Equal(t, uint64(5), p.Epoch)
		}
		assert.Equal(t, []uint64{2, 9, 10, 100}, seqs, "epoch 5 of a in seq order (numeric, not lexical)")
		assert.Equal(t, "a10", string(got[0][2].Body), "the body as parked")
		assert.Empty(t, got[0][1].Body, "an empty body")
		require.Len(t, got[1], 2)
		assert.Equal(t, []uint64{9, 10}, []uint64{got[1][0].Seq, got[1][1].Seq}, "From 9, Max 2")
		require.Len(t, got[2], 1)
		assert.Equal(t, park(b, big, big, "top"), got[2][0], "MaxSeq epoch and seq")
		assert.Empty(t, got[3], "no parks of epoch 7")
		assert.Empty(t, got[4], "no parks of an unknown stream")

		got[0][0].Body[0] = 'X' // the caller's copy
		assert.Equal(t, []string{"5/2=a2", "5/9=", "5/10=a10", "5/100=a100"}, parkedSeqs(t, s, a, 5))
		assert.Equal(t, []string{"4/100=old"}, parkedSeqs(t, s, a, 4))
		assert.Equal(t, []seqstore.Stream{a, b}, parkedStreams(t, s, "q"), "ordered by stream key, only queue q")
		assert.Equal(t, []seqstore.Stream{other}, parkedStreams(t, s, "q2"))
		assert.Empty(t, parkedStreams(t, s, "q3"))

		require.NoError(t, s.Park(ctx, nil), "an empty call")
	})
}

func TestParkReplaces(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 1, 3, "first"), park(a, 1, 4, "four")}))
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 1, 3, "second, longer")}))
		assert.Equal(t, []string{"1/3=second, longer", "1/4=four"}, parkedSeqs(t, s, a, 1), "parking again replaces the body")
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 1, 3, "s")}))
		assert.Equal(t, []string{"1/3=s", "1/4=four"}, parkedSeqs(t, s, a, 1), "and a shorter one")
	})
}

func TestParkBelowCursor(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		b := seqstore.Stream{Queue: "q", Group: "b"}
		cur := seqstore.Cursor{Epoch: 5, Next: 10, Owner: 3}
		advance(t, s, a, seqstore.Cursor{}, cur)

		cases := []struct {
			name    string
			entries []seqstore.Parked
			bad     []int
		}{
			{"seq below next", []seqstore.Parked{park(a, 5, 9, "x"), park(a, 5, 10, "ok"), park(b, 1, 1, "ok")}, []int{0}},
			{"older epoch", []seqstore.Parked{park(b, 1, 1, "ok"), park(a, 4, 1000, "x"), park(a, 6, 1, "ok")}, []int{1}},
			{"both", []seqstore.Parked{park(a, 5, 1, "x"), park(a, 4, 11, "x")}, []int{0, 1}},
			{"long epoch compared as a number", []seqstore.Parked{park(a, 10, 1, "ok"), park(a, 0, 99, "x")}, []int{1}},
		}
		for _, tc := range cases {
			err := s.Park(ctx, tc.entries)
			require.Error(t, err, tc.name)
			for i := range tc.entries {
				want := seqstore.ErrAborted
				for _, j := range tc.bad {
					if i == j {
						want = seqstore.ErrConflict
					}
				}
				assert.ErrorIs(t, seqstore.Failed(err, i, len(tc.entries)), want, "%s: entry %d", tc.name, i)
			}
			assert.Empty(t, parkedSeqs(t, s, a, 5), "%s: a refused call parks nothing", tc.name)
			assert.Empty(t, parkedSeqs(t, s, a, 6), tc.name)
			assert.Empty(t, parkedSeqs(t, s, a, 10), tc.name)
			assert.Empty(t, parkedSeqs(t, s, b, 1), "%s: nor on another stream of the call", tc.name)
			assert.Empty(t, parkedStreams(t, s, "q"), "%s: nor lists a stream", tc.name)
		}
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 5, 10, "at next"), park(a, 6, 1, "newer")}), "at the cursor and beyond")
		assert.Equal(t, []string{"5/10=at next"}, parkedSeqs(t, s, a, 5))
	})
}

func TestAdvanceDropsParks(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		b := seqstore.Stream{Queue: "q", Group: "b"}
		var in []seqstore.Parked
		for q := uint64(1); q <= 12; q++ {
			in = append(in, park(a, 5, q, fmt.Sprint(q)))
		}
		in = append(in, park(a, 4, 50, "old"), park(a, 6, 1, "new"), park(b, 5, 3, "b3"))
		require.NoError(t, s.Park(ctx, in))

		c1 := seqstore.Cursor{Epoch: 5, Next: 10}
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, To: c1}, {Stream: b, To: seqstore.Cursor{Epoch: 5, Next: 3}}}))
		assert.Equal(t, []string{"5/10=10", "5/11=11", "5/12=12"}, parkedSeqs(t, s, a, 5), "below next dropped (10 above 9: numeric)")
		assert.Empty(t, parkedSeqs(t, s, a, 4), "an older epoch dropped")
		assert.Equal(t, []string{"6/1=new"}, parkedSeqs(t, s, a, 6), "a newer epoch kept")
		assert.Equal(t, []string{"5/3=b3"}, parkedSeqs(t, s, b, 5), "b's cursor at its park: kept")

		// A conflicting batch drops nothing, on any of its streams.
		err := s.Advance(ctx, []seqstore.Advance{
			{Stream: a, From: c1, To: seqstore.Cursor{Epoch: 7, Next: 1}},
			{Stream: b, From: seqstore.Cursor{Epoch: 9}, To: seqstore.Cursor{Epoch: 9, Next: 9}},
		})
		require.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrConflict)
		assert.Equal(t, []string{"5/10=10", "5/11=11", "5/12=12"}, parkedSeqs(t, s, a, 5), "a failed Advance drops nothing")
		assert.Equal(t, []string{"6/1=new"}, parkedSeqs(t, s, a, 6))
		assert.Equal(t, []string{"5/3=b3"}, parkedSeqs(t, s, b, 5))

		c2 := seqstore.Cursor{Epoch: 6, Next: 1}
		advance(t, s, a, c1, c2)
		assert.Empty(t, parkedSeqs(t, s, a, 5), "a new epoch drops the older epoch's parks")
		assert.Equal(t, []string{"6/1=new"}, parkedSeqs(t, s, a, 6))
		assert.Equal(t, []seqstore.Stream{a, b}, parkedStreams(t, s, "q"))

		advance(t, s, a, c2, seqstore.Cursor{Epoch: 6, Next: 2})
		assert.Empty(t, parkedSeqs(t, s, a, 6), "the last park handed out")
		assert.Equal(t, []seqstore.Stream{b}, parkedStreams(t, s, "q"), "a stream whose park emptied is no longer listed")
		for _, kind := range []string{"park", "parkbody"} {
			n, err := c.Exists(ctx, s.key(a, kind)).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "%s of an emptied park is gone", kind)
		}
		members, err := c.SMembers(ctx, s.parkIndexKey("q")).Result()
		require.NoError(t, err)
		assert.Equal(t, []string{b.Key()}, members, "the index itself no longer lists a (on a single node by Advance, else by ParkedStreams)")
	})
}

// TestAdvanceUnlistsAtOnce: on a single node the Advance that empties a
// park unlists the stream in the same script, before any ParkedStreams.
func TestAdvanceUnlistsAtOnce(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		if sharded {
			t.Skip("the sharded rules leave the index to ParkedStreams")
		}
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		b := seqstore.Stream{Queue: "q", Group: "b"}
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 1, 2, "x"), park(b, 1, 2, "y")}))
		members, err := c.SMembers(ctx, s.parkIndexKey("q")).Result()
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{a.Key(), b.Key()}, members, "Park lists its streams in the same script")
		advance(t, s, a, seqstore.Cursor{}, seqstore.Cursor{Epoch: 1, Next: 3})
		advance(t, s, b, seqstore.Cursor{}, seqstore.Cursor{Epoch: 1, Next: 2})
		members, err = c.SMembers(ctx, s.parkIndexKey("q")).Result()
		require.NoError(t, err)
		assert.Equal(t, []string{b.Key()}, members, "the Advance that emptied a's park unlisted it")
	})
}

func TestParkAtomicAcrossStreams(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		b := seqstore.Stream{Queue: "r", Group: "b"}
		require.NoError(t, c.Set(ctx, s.key(b, "parkbody"), "foreign", 0).Err())
		err := s.Park(ctx, []seqstore.Parked{park(a, 1, 1, "x"), park(a, 1, 2, "y"), park(b, 1, 1, "z")})
		assert.ErrorIs(t, seqstore.Failed(err, 2, 3), seqstore.ErrCorrupt, "b's park bodies hold a foreign value")
		assert.ErrorIs(t, seqstore.Failed(err, 0, 3), seqstore.ErrAborted)
		assert.ErrorIs(t, seqstore.Failed(err, 1, 3), seqstore.ErrAborted)
		assert.Empty(t, parkedSeqs(t, s, a, 1), "nothing of a refused call is parked")
		assert.Empty(t, parkedStreams(t, s, "q"))
	})
}

func TestParkReopen(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 1, 2, "two"), park(a, 1, 3, "three")}))
		require.NoError(t, s.Close())

		_, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: a, Epoch: 1, Max: 1}})
		assert.ErrorIs(t, err, seqstore.ErrClosed)
		assert.ErrorIs(t, s.Park(ctx, []seqstore.Parked{park(a, 1, 4, "x")}), seqstore.ErrClosed)
		_, err = s.ParkedStreams(ctx, "q")
		assert.ErrorIs(t, err, seqstore.ErrClosed)

		s2 := newModeStore(t, c, prefix, sharded)
		assert.Equal(t, []string{"1/2=two", "1/3=three"}, parkedSeqs(t, s2, a, 1), "parks survive Close")
		assert.Equal(t, []seqstore.Stream{a}, parkedStreams(t, s2, "q"))
		advance(t, s2, a, seqstore.Cursor{}, seqstore.Cursor{Epoch: 1, Next: 3})
		assert.Equal(t, []string{"1/3=three"}, parkedSeqs(t, s2, a, 1))
	})
}

func TestParkArguments(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		bad := seqstore.Stream{Queue: "", Group: "a"}
		err := s.Park(ctx, []seqstore.Parked{park(a, 1, 1, "x"), park(bad, 1, 1, "x")})
		assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrInvalidStream)
		assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrAborted)
		err = s.Park(ctx, []seqstore.Parked{park(a, 1, 1, "x"), park(a, 1, 1, "y")})
		assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrInvalidArgument, "twice in one call")
		err = s.Park(ctx, []seqstore.Parked{{Stream: a, Epoch: 1, Seq: 1, Body: make([]byte, seqstore.MaxParkBody+1)}})
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "a body beyond MaxParkBody")
		_, err = s.Unpark(ctx, []seqstore.ParkQuery{{Stream: a, Epoch: 1, Max: 1}, {Stream: bad, Max: 1}, {Stream: a, Max: 0}})
		assert.ErrorIs(t, seqstore.Failed(err, 1, 3), seqstore.ErrInvalidStream)
		assert.ErrorIs(t, seqstore.Failed(err, 2, 3), seqstore.ErrInvalidArgument)
		_, err = s.ParkedStreams(ctx, "")
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream)
		got, err := s.Unpark(ctx, nil)
		assert.NoError(t, err)
		assert.Empty(t, got)

		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		assert.ErrorIs(t, s.Park(cancelled, []seqstore.Parked{park(a, 1, 1, "x")}), context.Canceled)
		_, err = s.Unpark(cancelled, []seqstore.ParkQuery{{Stream: a, Epoch: 1, Max: 1}})
		assert.ErrorIs(t, err, context.Canceled)
		_, err = s.ParkedStreams(cancelled, "q")
		assert.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, parkedSeqs(t, s, a, 1), "nothing applied")
		assert.Empty(t, parkedStreams(t, s, "q"))

		big := park(a, 1, 1, string(make([]byte, seqstore.MaxParkBody)))
		require.NoError(t, s.Park(ctx, []seqstore.Parked{big}), "a body of MaxParkBody")
		got, err = s.Unpark(ctx, []seqstore.ParkQuery{{Stream: a, Epoch: 1, Max: 1}})
		require.NoError(t, err)
		require.Len(t, got[0], 1)
		assert.Len(t, got[0][0].Body, seqstore.MaxParkBody)
	})
}

// TestParkCorrupt: stored parks that are malformed or fail their CRC are
// reported as seqstore.ErrCorrupt and left as they are; a foreign value at
// a park key fails Park and Advance of its stream before anything is
// written.
func TestParkCorrupt(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		st := seqstore.Stream{Queue: "q", Group: "g"}
		other := seqstore.Stream{Queue: "q", Group: "h"}
		set, bodies, index := s.key(st, "park"), s.key(st, "parkbody"), s.parkIndexKey("q")
		m := parkMember(1, 5)
		good := func() error {
			return s.Park(ctx, []seqstore.Parked{park(st, 1, 5, "body"), park(st, 1, 6, "six")})
		}
		unpark := func() error {
			got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 5}, {Stream: other, Epoch: 1, Max: 5}})
			if err == nil {
				return nil
			}
			assert.NoError(t, seqstore.Failed(err, 1, 2), "the other query does not fail")
			assert.Equal(t, []string{"1/1=h"}, []string{fmt.Sprintf("%d/%d=%s", got[1][0].Epoch, got[1][0].Seq, got[1][0].Body)}, "and has its result")
			return err
		}
		parkMore := func() error { return s.Park(ctx, []seqstore.Parked{park(st, 1, 9, "x")}) }
		advanceIt := func() error {
			return s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 7}}})
		}
		parked := func() error { _, err := s.ParkedStreams(ctx, "q"); return err }
		cases := []struct {
			name  string
			setup func() error
			check func() error
			keys  []string
		}{
			{"body bit flipped", func() error {
				v, err := c.HGet(ctx, bodies, m).Result()
				if err != nil {
					return err
				}
				b := []byte(v)
				b[5] ^= 1
				return c.HSet(ctx, bodies, m, b).Err()
			}, unpark, []string{set, bodies}},
			{"crc flipped", func() error {
				v, err := c.HGet(ctx, bodies, m).Result()
				if err != nil {
					return err
				}
				b := []byte(v)
				b[0] ^= 0x80
				return c.HSet(ctx, bodies, m, b).Err()
			}, unpark, []string{set, bodies}},
			{"body moved to another seq", func() error {
				v, err := c.HGet(ctx, bodies, m).Result()
				if err != nil {
					return err
				}
				return c.HSet(ctx, bodies, parkMember(1, 6), v).Err()
			}, unpark, []string{set, bodies}},
			{"body of another stream", func() error {
				v, err := c.HGet(ctx, s.key(other, "parkbody"), parkMember(1, 1)).Result()
				if err != nil {
					return err
				}
				if err := c.ZAdd(ctx, set, redis.Z{Member: parkMember(1, 1)}).Err(); err != nil {
					return err
				}
				return c.HSet(ctx, bodies, parkMember(1, 1), v).Err()
			}, unpark, []string{set, bodies}},
			{"short value", func() error { return c.HSet(ctx, bodies, m, "abc").Err() }, unpark, []string{set, bodies}},
			{"body missing", func() error { return c.HDel(ctx, bodies, m).Err() }, unpark, []string{set, bodies}},
			{"member malformed", func() error {
				return c.ZAdd(ctx, set, redis.Z{Member: "0000000000000000001:00000000000000000x5"}).Err()
			}, unpark, []string{set, bodies}},
			{"member short", func() error { return c.ZAdd(ctx, set, redis.Z{Member: "0000000000000000001:7"}).Err() }, unpark, []string{set, bodies}},
			{"park wrong type", func() error { return c.Set(ctx, set, "x", 0).Err() }, unpark, []string{set}},
			{"park wrong type: park", func() error { return c.Set(ctx, set, "x", 0).Err() }, parkMore, []string{set, bodies}},
			{"park wrong type: advance", func() error { return c.Set(ctx, set, "x", 0).Err() }, advanceIt, []string{set, bodies, s.key(st, "cursor")}},
			{"bodies wrong type: advance", func() error {
				if err := c.Del(ctx, bodies).Err(); err != nil {
					return err
				}
				return c.SAdd(ctx, bodies, "x").Err()
			}, advanceIt, []string{set, bodies, s.key(st, "cursor")}},
			{"bodies wrong type: unpark", func() error {
				if err := c.Del(ctx, bodies).Err(); err != nil {
					return err
				}
				return c.SAdd(ctx, bodies, "x").Err()
			}, unpark, []string{set, bodies}},
			{"cursor malformed: park", func() error { return c.HSet(ctx, s.key(st, "cursor"), "epoch", "01", "next", "1", "owner", "0").Err() },
				parkMore, []string{set, bodies, s.key(st, "cursor")}},
			{"index wrong type", func() error {
				if err := c.Del(ctx, index).Err(); err != nil {
					return err
				}
				return c.Set(ctx, index, "x", 0).Err()
			}, parked, []string{index}},
			{"index foreign member", func() error { return c.SAdd(ctx, index, "other/g").Err() }, parked, []string{index}},
			{"index unparsable member", func() error { return c.SAdd(ctx, index, "no slash").Err() }, parked, []string{index}},
			{"listed park wrong type", func() error {
				if err := c.SAdd(ctx, index, st.Key()).Err(); err != nil {
					return err
				}
				return c.Set(ctx, set, "x", 0).Err()
			}, parked, []string{index, set}},
		}
		for _, tc := range cases {
			for _, k := range []string{set, bodies, index, s.key(st, "cursor"), s.key(other, "park"), s.key(other, "parkbody")} {
				require.NoError(t, c.Del(ctx, k).Err())
			}
			require.NoError(t, good(), tc.name)
			require.NoError(t, s.Park(ctx, []seqstore.Parked{park(other, 1, 1, "h")}), tc.name)
			require.NoError(t, tc.setup(), tc.name)
			var before []string
			for _, k := range tc.keys {
				before = append(before, snapshot(t, c, k))
			}
			err := tc.check()
			assert.ErrorIs(t, err, seqstore.ErrCorrupt, "%s: want ErrCorrupt, got %v", tc.name, err)
			for i, k := range tc.keys {
				assert.Equal(t, before[i], snapshot(t, c, k), "%s: corrupt state must be left as it was", tc.name)
			}
		}
	})
}

// TestParkRoundTrips: on a single node a Park is one script in one round
// trip, whatever its number of streams; with the sharded rules a Park of
// one stream adds the index update, one of several streams the check.
func TestParkRoundTrips(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		b := seqstore.Stream{Queue: "q", Group: "b"}
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 1, 1, "warm")})) // loads the script
		for _, tc := range []struct {
			name    string
			entries []seqstore.Parked
			single  uint64
			shard   uint64
		}{
			{"one stream", []seqstore.Parked{park(a, 1, 2, "x"), park(a, 1, 3, "y")}, 1, 2},
			{"two streams", []seqstore.Parked{park(a, 1, 4, "x"), park(b, 1, 3, "y")}, 1, 3},
		} {
			before := s.Stats()
			require.NoError(t, s.Park(ctx, tc.entries))
			want := tc.single
			if sharded {
				want = tc.shard
			}
			assert.Equal(t, want, s.Stats().RoundTrips-before.RoundTrips, tc.name)
		}
	})
}

// TestParkConcurrent parks, unparks and advances from several goroutines
// on their own streams and checks each stream's park at the end.
func TestParkConcurrent(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		const workers, rounds = 8, 20
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(w)}
				var cur seqstore.Cursor
				for r := range rounds {
					base := uint64(2*r + 1)
					if !assert.NoError(t, s.Park(ctx, []seqstore.Parked{park(st, 1, base+1, "a"), park(st, 1, base+4, "b")})) {
						return
					}
					got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, From: base + 1, Max: 1}})
					if !assert.NoError(t, err) || !assert.Len(t, got[0], 1) {
						return
					}
					assert.Equal(t, base+1, got[0][0].Seq)
					to := seqstore.Cursor{Epoch: 1, Next: base + 2}
					if !assert.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, From: cur, To: to}})) {
						return
					}
					cur = to
				}
			})
		}
		wg.Wait()
		for w := range workers {
			st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(w)}
			got := parkedSeqs(t, s, st, 1)
			// Next is 2*rounds+1; left: the "b" parks at or above it.
			var want []string
			for r := range rounds {
				if q := uint64(2*r + 5); q >= 2*rounds+1 {
					want = append(want, fmt.Sprintf("1/%d=b", q))
				}
			}
			assert.Equal(t, want, got, "stream %s", st)
		}
		assert.Len(t, parkedStreams(t, s, "q"), workers)
	})
}

// TestParkManyQueues parks and advances one call over streams of 12 queues
// (two streams each): every queue's index is found (more queues than the
// small list indexPositions starts with) and emptied.
func TestParkManyQueues(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		var in []seqstore.Parked
		var batch []seqstore.Advance
		for q := range 12 {
			for g := range 2 {
				st := seqstore.Stream{Queue: fmt.Sprintf("q%02d", q), Group: fmt.Sprint(g)}
				in = append(in, park(st, 1, 2, "x"))
				batch = append(batch, seqstore.Advance{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 3}})
			}
		}
		require.NoError(t, s.Park(ctx, in))
		for q := range 12 {
			queue := fmt.Sprintf("q%02d", q)
			assert.Equal(t, []seqstore.Stream{{Queue: queue, Group: "0"}, {Queue: queue, Group: "1"}}, parkedStreams(t, s, queue))
		}
		require.NoError(t, s.Advance(ctx, batch))
		for q := range 12 {
			queue := fmt.Sprintf("q%02d", q)
			assert.Empty(t, parkedStreams(t, s, queue), queue)
			if !sharded {
				n, err := c.Exists(ctx, s.parkIndexKey(queue)).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "the Advance emptied %s's park index", queue)
			}
		}
	})
}

// TestParkLarge crosses the scripts' chunk sizes (1000 members per
// command, within Lua's unpack limit): a Park of 2,500 entries of one
// stream and 1,100 streams, an Unpark of all of them and the Advance that
// drops them.
func TestParkLarge(t *testing.T) {
	forEachMode(t, func(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
		ctx := context.Background()
		s := newModeStore(t, c, prefix, sharded)
		hot := seqstore.Stream{Queue: "q", Group: "hot"}
		var in []seqstore.Parked
		for q := uint64(1); q <= 2500; q++ {
			in = append(in, park(hot, 1, q, fmt.Sprint(q)))
		}
		require.NoError(t, s.Park(ctx, in))
		got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: hot, Epoch: 1, From: 2, Max: 5000}})
		require.NoError(t, err)
		require.Len(t, got[0], 2499)
		for i, p := range got[0] {
			require.Equal(t, fmt.Sprint(i+2), string(p.Body), "entry %d", i)
		}
		advance(t, s, hot, seqstore.Cursor{}, seqstore.Cursor{Epoch: 1, Next: 2501})
		assert.Empty(t, parkedSeqs(t, s, hot, 1))
		assert.Empty(t, parkedStreams(t, s, "q"))

		if sharded {
			return // 1,100 scripts and index updates: the single node covers the chunked SADD
		}
		in = in[:0]
		var batch []seqstore.Advance
		for g := range 1100 {
			st := seqstore.Stream{Queue: "many", Group: fmt.Sprint(g)}
			in = append(in, park(st, 1, 1, "x"))
			batch = append(batch, seqstore.Advance{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 2}})
		}
		require.NoError(t, s.Park(ctx, in))
		assert.Len(t, parkedStreams(t, s, "many"), 1100)
		require.NoError(t, s.Advance(ctx, batch))
		assert.Empty(t, parkedStreams(t, s, "many"))
	})
}
