package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

func TestOptionsValidate(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer func() { _ = c.Close() }()
	for _, p := range []string{"a{b}:", "has space", "new\nline", "semi;colon", "*", string(make([]byte, 65))} {
		_, err := New(c, &Options{Prefix: p})
		assert.Error(t, err, "prefix %q must be rejected", p)
	}
	_, err := New(c, &Options{Flushers: -1})
	assert.Error(t, err, "negative Flushers must be rejected")
	_, err = New(nil, nil)
	assert.Error(t, err, "nil client must be rejected")
	s, err := New(c, nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultPrefix, s.prefix)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close must be idempotent")
	_, err = storetest.ReserveOne(context.Background(), s, seqstore.Stream{Queue: "q"}, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrClosed)
	_, err = s.Pending(context.Background(), "q")
	assert.ErrorIs(t, err, seqstore.ErrClosed)
	assert.NoError(t, c.Ping(context.Background()).Err(), "Close must leave the caller's client open")
}

func TestReserveJournalSentPending(t *testing.T) {
	forEach(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		for _, sharded := range []bool{false, true} {
			t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
				if shardedClient(c) && !sharded {
					t.Skip("a cluster or ring client always uses the sharded rules")
				}
				ctx := context.Background()
				s := newStore(t, c, prefix+fmt.Sprint(sharded)+":")
				s.sharded = sharded
				a := seqstore.Stream{Queue: "q", Group: "a"}
				b := seqstore.Stream{Queue: "q", Group: "{b}\x01 é"}
				other := seqstore.Stream{Queue: "other"}

				r1, err := storetest.ReserveOne(ctx, s, a, 2, [][]byte{[]byte("a1"), {}})
				require.NoError(t, err)
				assert.Equal(t, uint64(1), r1.First, "first reservation of a stream starts at 1")
				assert.NotZero(t, r1.Epoch)
				r2, err := storetest.ReserveOne(ctx, s, a, 3, nil)
				require.NoError(t, err)
				assert.Equal(t, seqstore.Reservation{Epoch: r1.Epoch, First: 3}, r2, "fast reservation continues the counter")
				r3, err := storetest.ReserveOne(ctx, s, a, 1, [][]byte{[]byte("a6")})
				require.NoError(t, err)
				assert.Equal(t, uint64(6), r3.First)
				rb, err := storetest.ReserveOne(ctx, s, b, 1, [][]byte{[]byte("\x00bin\xff")})
				require.NoError(t, err)
				_, err = storetest.ReserveOne(ctx, s, other, 1, [][]byte{[]byte("x")})
				require.NoError(t, err)

				got, err := s.Pending(ctx, "q")
				require.NoError(t, err)
				want := []seqstore.Entry{
					{Stream: b, Epoch: rb.Epoch, Seq: 1, Body: []byte("\x00bin\xff")},
					{Stream: a, Epoch: r1.Epoch, Seq: 1, Body: []byte("a1")},
					{Stream: a, Epoch: r1.Epoch, Seq: 2, Body: []byte{}},
					{Stream: a, Epoch: r1.Epoch, Seq: 6, Body: []byte("a6")},
				}
				sort.SliceStable(want, func(i, j int) bool { return want[i].Stream.Key() < want[j].Stream.Key() })
				assert.Equal(t, want, got, "pending entries, ordered by stream key then seq")

				require.NoError(t, sentOne(ctx, s, a, []uint64{1, 2, 99}))
				require.NoError(t, sentOne(ctx, s, b, []uint64{1}))
				got, err = s.Pending(ctx, "q")
				require.NoError(t, err)
				assert.Equal(t, []seqstore.Entry{{Stream: a, Epoch: r1.Epoch, Seq: 6, Body: []byte("a6")}}, got)

				require.NoError(t, sentOne(ctx, s, a, []uint64{6}))
				got, err = s.Pending(ctx, "q")
				require.NoError(t, err)
				assert.Empty(t, got)
				n, err := c.SCard(ctx, s.indexKey("q")).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "the pending index must be pruned once every journal is empty")
				got, err = s.Pending(ctx, "other")
				require.NoError(t, err)
				assert.Len(t, got, 1, "queue 'other' keeps its entry")
			})
		}
	})
}

func TestReserveArguments(t *testing.T) {
	forEach(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		s := newStore(t, c, prefix)
		st := seqstore.Stream{Queue: "q"}
		_, err := storetest.ReserveOne(ctx, s, st, 0, nil)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument)
		_, err = storetest.ReserveOne(ctx, s, st, 2, [][]byte{[]byte("x")})
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument)
		_, err = storetest.ReserveOne(ctx, s, seqstore.Stream{}, 1, nil)
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream)
		_, err = storetest.ReserveOne(ctx, s, seqstore.Stream{Queue: "a\x00b"}, 1, nil)
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream)

		r, err := storetest.ReserveOne(ctx, s, st, math.MaxInt64-1, nil)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), r.First)
		r, err = storetest.ReserveOne(ctx, s, st, 1, [][]byte{[]byte("last")})
		require.NoError(t, err)
		assert.Equal(t, uint64(seqstore.MaxSeq), r.First, "the last seq MaxSeq can be reserved")
		_, err = storetest.ReserveOne(ctx, s, st, 1, nil)
		assert.ErrorIs(t, err, seqstore.ErrOverflow)
		p, err := s.Pending(ctx, "q")
		require.NoError(t, err)
		require.Len(t, p, 1)
		assert.Equal(t, uint64(seqstore.MaxSeq), p[0].Seq, "journal seq computed without float rounding")
	})
}

func TestAdvance(t *testing.T) {
	forEach(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		for _, sharded := range []bool{false, true} {
			t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
				if shardedClient(c) && !sharded {
					t.Skip("a cluster or ring client always uses the sharded rules")
				}
				testAdvance(t, c, prefix+fmt.Sprint(sharded)+":", sharded)
			})
		}
	})
}

func testAdvance(t *testing.T, c redis.UniversalClient, prefix string, sharded bool) {
	ctx := context.Background()
	s := newStore(t, c, prefix)
	s.sharded = sharded
	a := seqstore.Stream{Queue: "q", Group: "a"}
	b := seqstore.Stream{Queue: "q", Group: "b"}
	cur, err := storetest.CursorOne(ctx, s, a)
	require.NoError(t, err)
	assert.Equal(t, seqstore.Cursor{}, cur, "a stream never advanced has the zero cursor")

	big := uint64(seqstore.MaxSeq - 1)
	toA := seqstore.Cursor{Epoch: big, Next: 5, Owner: 7, Skipped: []seqstore.Range{{Epoch: big, First: 2, Last: 3}, {Epoch: 1, First: 9, Last: 9}}}
	toB := seqstore.Cursor{Epoch: 3, Next: 1}
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, To: toA}, {Stream: b, To: toB}}))
	cur, err = storetest.CursorOne(ctx, s, a)
	require.NoError(t, err)
	assert.Equal(t, toA, cur)

	// One stale From: nothing in the batch applies.
	err = s.Advance(ctx, []seqstore.Advance{
		{Stream: a, From: toA, To: seqstore.Cursor{Epoch: big, Next: 6, Owner: 7}},
		{Stream: b, From: seqstore.Cursor{Epoch: 3, Next: 0}, To: seqstore.Cursor{Epoch: 3, Next: 2}},
	})
	assert.ErrorIs(t, err, seqstore.ErrConflict)
	assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrConflict, "stream b conflicts")
	assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrAborted, "stream a is aborted")
	cur, err = storetest.CursorOne(ctx, s, a)
	require.NoError(t, err)
	assert.Equal(t, toA, cur, "a conflicting batch must not move any cursor (on a cluster: thanks to the check before the writes)")

	// Owner differs: conflict.
	err = s.Advance(ctx, []seqstore.Advance{{Stream: a, From: seqstore.Cursor{Epoch: big, Next: 5}, To: seqstore.Cursor{Epoch: big, Next: 6}}})
	assert.ErrorIs(t, err, seqstore.ErrConflict)

	err = s.Advance(ctx, []seqstore.Advance{{Stream: a, From: toA, To: seqstore.Cursor{Epoch: big, Next: 4}}})
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "moving backwards")
	err = s.Advance(ctx, []seqstore.Advance{{Stream: a, From: toA, To: toA}, {Stream: a, From: toA, To: toA}})
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "a stream twice in one batch")
}

func TestConcurrentCoalesces(t *testing.T) {
	forEach(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		s := newStore(t, c, prefix)
		const workers, per = 16, 15
		var mu sync.Mutex
		seen := map[seqstore.Stream][]uint64{}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(w % 4)}
				cur := seqstore.Cursor{}
				own := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("own%d", w)}
				for i := range per {
					r, err := storetest.ReserveOne(ctx, s, st, 2, [][]byte{[]byte("x"), []byte("y")})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					seen[st] = append(seen[st], r.First, r.First+1)
					mu.Unlock()
					to := seqstore.Cursor{Epoch: 1, Next: uint64(i + 1)}
					if err := s.Advance(ctx, []seqstore.Advance{{Stream: own, From: cur, To: to}}); err != nil {
						errs <- err
						return
					}
					cur = to
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for st, seqs := range seen {
			sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
			for i, q := range seqs {
				require.Equal(t, uint64(i+1), q, "stream %s: seqs must be 1..N without holes or repeats", st)
			}
		}
		p, err := s.Pending(ctx, "q")
		require.NoError(t, err)
		assert.Len(t, p, workers*per*2)
		st := s.Stats()
		t.Logf("%d calls in %d round trips", st.Calls, st.RoundTrips)
		assert.Less(t, st.RoundTrips, st.Calls, "concurrent calls must share round trips")
	})
}

func TestCorruptValues(t *testing.T) {
	forEach(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		s := newStore(t, c, prefix)
		st := seqstore.Stream{Queue: "q", Group: "g"}
		cases := []struct {
			name  string
			setup func() error
			check func() error
			key   string
		}{
			{"send wrong type", func() error { return c.Set(ctx, s.key(st, "send"), "x", 0).Err() },
				func() error { _, err := storetest.ReserveOne(ctx, s, st, 1, nil); return err }, s.key(st, "send")},
			{"journal wrong type", func() error {
				if err := c.HSet(ctx, s.key(st, "send"), "epoch", "5", "last", "3").Err(); err != nil {
					return err
				}
				return c.Set(ctx, s.key(st, "journal"), "x", 0).Err()
			}, func() error { _, err := storetest.ReserveOne(ctx, s, st, 1, [][]byte{[]byte("b")}); return err }, s.key(st, "send")},
			{"send negative last", func() error { return c.HSet(ctx, s.key(st, "send"), "epoch", "5", "last", "-3").Err() },
				func() error { _, err := storetest.ReserveOne(ctx, s, st, 1, nil); return err }, s.key(st, "send")},
			{"send foreign hash", func() error { return c.HSet(ctx, s.key(st, "send"), "foo", "bar").Err() },
				func() error { _, err := storetest.ReserveOne(ctx, s, st, 1, nil); return err }, s.key(st, "send")},
			{"send zero epoch", func() error { return c.HSet(ctx, s.key(st, "send"), "epoch", "0", "last", "3").Err() },
				func() error { _, err := storetest.ReserveOne(ctx, s, st, 1, nil); return err }, s.key(st, "send")},
			{"cursor bad skipped", func() error {
				return c.HSet(ctx, s.key(st, "cursor"), "epoch", "1", "next", "2", "owner", "0", "skipped", "1:2").Err()
			}, func() error { _, err := storetest.CursorOne(ctx, s, st); return err }, s.key(st, "cursor")},
			{"cursor leading zero", func() error {
				return c.HSet(ctx, s.key(st, "cursor"), "epoch", "01", "next", "2", "owner", "0", "skipped", "").Err()
			}, func() error {
				return s.Advance(ctx, []seqstore.Advance{{Stream: st, From: seqstore.Cursor{Epoch: 1, Next: 2}, To: seqstore.Cursor{Epoch: 1, Next: 3}}})
			}, s.key(st, "cursor")},
			{"cursor partial", func() error { return c.HSet(ctx, s.key(st, "cursor"), "next", "2").Err() },
				func() error { _, err := storetest.CursorOne(ctx, s, st); return err }, s.key(st, "cursor")},
			{"cursor too big", func() error {
				return c.HSet(ctx, s.key(st, "cursor"), "epoch", "9223372036854775808", "next", "2", "owner", "0", "skipped", "").Err()
			}, func() error { return s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1}}}) }, s.key(st, "cursor")},
			{"journal bad seq", func() error {
				if err := c.HSet(ctx, s.key(st, "send"), "epoch", "5", "last", "3").Err(); err != nil {
					return err
				}
				if err := c.SAdd(ctx, s.indexKey("q"), st.Key()).Err(); err != nil {
					return err
				}
				return c.HSet(ctx, s.key(st, "journal"), "7", "body").Err()
			}, func() error { _, err := s.Pending(ctx, "q"); return err }, s.key(st, "journal")},
			{"index foreign member", func() error { return c.SAdd(ctx, s.indexKey("q"), "other/g").Err() },
				func() error { _, err := s.Pending(ctx, "q"); return err }, s.indexKey("q")},
			{"index unparsable member", func() error { return c.SAdd(ctx, s.indexKey("q"), "no slash").Err() },
				func() error { _, err := s.Pending(ctx, "q"); return err }, s.indexKey("q")},
		}
		for _, tc := range cases {
			for _, k := range []string{s.key(st, "send"), s.key(st, "cursor"), s.key(st, "journal"), s.indexKey("q")} {
				require.NoError(t, c.Del(ctx, k).Err())
			}
			require.NoError(t, tc.setup(), tc.name)
			before := snapshot(t, c, tc.key)
			err := tc.check()
			assert.ErrorIs(t, err, seqstore.ErrCorrupt, "%s: want ErrCorrupt, got %v", tc.name, err)
			assert.Equal(t, before, snapshot(t, c, tc.key), "%s: corrupt state must be left as it was", tc.name)
		}
	})
}

func TestOutage(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer func() { _ = c.Close() }()
	s := newStore(t, c, "out:")
	st := seqstore.Stream{Queue: "q"}
	r, err := storetest.ReserveOne(ctx, s, st, 3, [][]byte{[]byte("1"), []byte("2"), []byte("3")})
	require.NoError(t, err)
	require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: r.Epoch, Next: 2}}}))

	mr.Close()
	_, err = storetest.ReserveOne(ctx, s, st, 1, [][]byte{[]byte("4")})
	require.Error(t, err, "reserve while Redis is down")
	assert.Contains(t, err.Error(), "redisstore: reserve q/", "error names the package and the operation")
	err = s.Advance(ctx, []seqstore.Advance{{Stream: st, From: seqstore.Cursor{Epoch: r.Epoch, Next: 2}, To: seqstore.Cursor{Epoch: r.Epoch, Next: 3}}})
	require.Error(t, err)
	_, err = s.Pending(ctx, "q")
	require.Error(t, err)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = storetest.CursorOne(tctx, s, st)
	cancel()
	require.Error(t, err)

	require.NoError(t, mr.Restart())
	cur, err := storetest.CursorOne(ctx, s, st)
	require.NoError(t, err)
	assert.Equal(t, seqstore.Cursor{Epoch: r.Epoch, Next: 2}, cur, "the acknowledged advance survives the outage")
	p, err := s.Pending(ctx, "q")
	require.NoError(t, err)
	assert.Len(t, p, 3, "the acknowledged journal survives the outage")
	r2, err := storetest.ReserveOne(ctx, s, st, 1, nil)
	require.NoError(t, err)
	assert.Equal(t, r.Epoch, r2.Epoch)
	assert.Equal(t, uint64(4), r2.First, "the counter continues after the outage (the failed reserve did not run)")
}

func TestClosedPort(t *testing.T) {
	mr := miniredis.RunT(t)
	addr := mr.Addr()
	mr.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	s := newStore(t, c, "x:")
	_, err := storetest.ReserveOne(context.Background(), s, seqstore.Stream{Queue: "q"}, 1, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connect", "a refused connection reads as such: %v", err)
	assert.False(t, errors.Is(err, seqstore.ErrCorrupt))
}

func TestNoScriptFallback(t *testing.T) {
	forEach(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		s := newStore(t, c, prefix)
		st := seqstore.Stream{Queue: "q"}
		_, err := storetest.ReserveOne(ctx, s, st, 1, nil)
		require.NoError(t, err)
		require.NoError(t, c.ScriptFlush(ctx).Err())
		r, err := storetest.ReserveOne(ctx, s, st, 1, nil)
		require.NoError(t, err, "after SCRIPT FLUSH the store reloads its scripts")
		assert.Equal(t, uint64(2), r.First)
	})
}

// snapshot returns a printable copy of key's value (miniredis has no DUMP
// for hashes and sets).
func snapshot(t *testing.T, c redis.UniversalClient, key string) string {
	t.Helper()
	ctx := context.Background()
	typ, err := c.Type(ctx, key).Result()
	require.NoError(t, err)
	var v any
	switch typ {
	case "string":
		v, err = c.Get(ctx, key).Result()
	case "hash":
		v, err = c.HGetAll(ctx, key).Result()
	case "set":
		var m []string
		m, err = c.SMembers(ctx, key).Result()
		sort.Strings(m)
		v = m
	case "zset":
		v, err = c.ZRangeWithScores(ctx, key, 0, -1).Result()
	}
	require.NoError(t, err)
	return fmt.Sprintf("%s %v", typ, v)
}

// TestOutageUnderLoad stops the server while 8 callers reserve and advance,
// then brings it back: calls fail with errors while it is down, and every
// call that returned nil is found afterwards.
func TestOutageUnderLoad(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer func() { _ = c.Close() }()
	s := newStore(t, c, "load:")
	const workers = 8
	type acked struct {
		seqs []uint64
		cur  seqstore.Cursor
	}
	results := make([]acked, workers)
	var failed, succeeded atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(w)}
			r := &results[w]
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := storetest.ReserveOne(ctx, s, st, 1, [][]byte{[]byte("m")})
				if err != nil {
					failed.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				r.seqs = append(r.seqs, res.First)
				to := seqstore.Cursor{Epoch: res.Epoch, Next: r.cur.Next + 1}
				if err := s.Advance(ctx, []seqstore.Advance{{Stream: st, From: r.cur, To: to}}); err != nil {
					failed.Add(1)
					// The outcome is unknown: re-read the cursor, as a
					// receiver would, once the server answers again.
					for {
						c, err := storetest.CursorOne(ctx, s, st)
						if err == nil {
							r.cur = c
							break
						}
						time.Sleep(5 * time.Millisecond)
					}
					continue
				}
				r.cur = to
				succeeded.Add(1)
			}
		})
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("some successes", func() bool { return succeeded.Load() > 20 })
	mr.Close()
	waitFor("failures while the server is down", func() bool { return failed.Load() > 0 })
	require.NoError(t, mr.Restart())
	after := succeeded.Load()
	waitFor("successes after the restart", func() bool { return succeeded.Load() > after+20 })
	close(stop)
	wg.Wait()
	p, err := s.Pending(ctx, "q")
	require.NoError(t, err)
	journaled := map[string]bool{}
	for _, e := range p {
		journaled[fmt.Sprintf("%s#%d", e.Stream.Group, e.Seq)] = true
	}
	total := 0
	for w, r := range results {
		for _, q := range r.seqs {
			assert.True(t, journaled[fmt.Sprintf("%d#%d", w, q)], "acknowledged reservation %d of group %d must be journaled", q, w)
		}
		total += len(r.seqs)
		c, err := storetest.CursorOne(ctx, s, seqstore.Stream{Queue: "q", Group: fmt.Sprint(w)})
		require.NoError(t, err)
		assert.Equal(t, r.cur, c, "group %d: the stored cursor is the last acknowledged one", w)
	}
	t.Logf("%d acknowledged reservations, %d failed calls", total, failed.Load())
}

// TestCancelRace cancels contexts at random moments while calls are queued
// or in flight: a call returns a context error or a real result, never a nil
// error with an empty result, and never panics.
func TestCancelRace(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer func() { _ = c.Close() }()
	// One flusher, kept busy by 16 callers, so that calls wait in the
	// queue while their contexts end.
	s, err := New(c, &Options{Prefix: "cancel:", Flushers: 1})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(w)}
			for i := range 60 {
				ctx, cancel := context.WithCancel(context.Background())
				go func() {
					time.Sleep(time.Duration(i%7) * 100 * time.Microsecond)
					cancel()
				}()
				r, err := storetest.ReserveOne(ctx, s, st, 1, nil)
				if err == nil {
					assert.NotZero(t, r.First, "a nil error comes with a reservation")
				} else {
					assert.ErrorIs(t, err, context.Canceled)
				}
				err = s.Advance(ctx, []seqstore.Advance{{Stream: st, From: seqstore.Cursor{Epoch: 1, Next: 99}, To: seqstore.Cursor{Epoch: 1, Next: 100}}})
				if !errors.Is(err, seqstore.ErrConflict) {
					assert.ErrorIs(t, err, context.Canceled, "the stale advance either conflicts or was cancelled")
				}
				cancel()
			}
		})
	}
	wg.Wait()
}

// TestCorruptFailsAlone: a stream whose keys hold foreign values fails
// alone: Cursors reads the others, an Advance or Reserve naming it applies
// nothing and aborts the others, and Sent skips only its mark.
func TestCorruptFailsAlone(t *testing.T) {
	forEach(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		s := newStore(t, c, prefix)
		good := seqstore.Stream{Queue: "q", Group: "good"}
		bad := seqstore.Stream{Queue: "q", Group: "bad"}
		absent := seqstore.Stream{Queue: "q", Group: "absent"}
		cg := seqstore.Cursor{Epoch: 2, Next: 3, Owner: 1}
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: good, To: cg}}))
		rg, err := storetest.ReserveOne(ctx, s, good, 2, [][]byte{[]byte("g1"), []byte("g2")})
		require.NoError(t, err)

		for _, tc := range []struct {
			name    string
			corrupt func() error
		}{
			{"cursor key overwritten with a string", func() error { return c.Set(ctx, s.key(bad, "cursor"), "garbage", 0).Err() }},
			{"cursor hash with a malformed number", func() error {
				return c.HSet(ctx, s.key(bad, "cursor"), "epoch", "x1", "next", "2", "owner", "0", "skipped", "").Err()
			}},
			{"cursor hash with a bad skipped list", func() error {
				return c.HSet(ctx, s.key(bad, "cursor"), "epoch", "1", "next", "2", "owner", "0", "skipped", "1:2").Err()
			}},
		} {
			require.NoError(t, c.Del(ctx, s.key(bad, "cursor")).Err())
			require.NoError(t, tc.corrupt(), tc.name)
			cs, err := s.Cursors(ctx, []seqstore.Stream{good, bad, absent})
			var be *seqstore.BatchError
			require.ErrorAs(t, err, &be, "%s: Cursors", tc.name)
			assert.NoError(t, be.Errs[0], "%s: the good stream is read", tc.name)
			assert.ErrorIs(t, be.Errs[1], seqstore.ErrCorrupt, "%s: the corrupt stream fails", tc.name)
			assert.NoError(t, be.Errs[2], "%s: the absent stream is read", tc.name)
			require.Len(t, cs, 3)
			assert.Equal(t, cg, cs[0], "%s: the good cursor", tc.name)
			assert.Equal(t, seqstore.Cursor{}, cs[2], "%s: the absent cursor", tc.name)
		}
		// The cursor hash with the bad skipped list has valid numbers, so a
		// compare-and-set can still judge it; a foreign value cannot.
		require.NoError(t, c.Set(ctx, s.key(bad, "cursor"), "garbage", 0).Err())
		err = s.Advance(ctx, []seqstore.Advance{{Stream: good, From: cg, To: seqstore.Cursor{Epoch: 2, Next: 9}}, {Stream: bad, To: seqstore.Cursor{Epoch: 1, Next: 2}}})
		assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrCorrupt, "Advance of the corrupt stream")
		assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrAborted, "the good stream of that Advance is aborted")
		cur, err := storetest.CursorOne(ctx, s, good)
		require.NoError(t, err)
		assert.Equal(t, cg, cur, "the aborted stream did not move")

		require.NoError(t, c.Set(ctx, s.key(bad, "send"), "garbage", 0).Err())
		_, err = s.Reserve(ctx, []seqstore.ReserveRequest{{Stream: good, N: 1}, {Stream: bad, N: 1}})
		assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrCorrupt, "Reserve of the corrupt stream")
		assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrAborted, "the good stream of that Reserve is aborted")
		r, err := storetest.ReserveOne(ctx, s, good, 1, nil)
		require.NoError(t, err)
		assert.Equal(t, rg.First+2, r.First, "the aborted Reserve consumed nothing")

		require.NoError(t, c.Set(ctx, s.key(bad, "journal"), "garbage", 0).Err())
		err = s.Sent(ctx, []seqstore.SentMark{{Stream: bad, Seqs: []uint64{1}}, {Stream: good, Seqs: []uint64{1}}})
		assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrCorrupt, "Sent names the corrupt journal")
		assert.NoError(t, seqstore.Failed(err, 1, 2), "the good mark took effect")
		p, err := s.Pending(ctx, "q")
		require.NoError(t, err)
		require.Len(t, p, 1, "only seq 2 of the good stream is left: %v", p)
		assert.Equal(t, uint64(2), p[0].Seq)
	})
}
