package lease_test

import (
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// startTimes returns when r started each of shards, by the recv's log
// ("start 3#7 at 57s" -> "57s").
func startTimes(r *recv, shards []int) map[int]string {
	out := map[int]string{}
	for _, e := range r.entries("start") {
		for _, sh := range shards {
			if strings.HasPrefix(e, "start "+strconv.Itoa(sh)+"#") {
				_, out[sh], _ = strings.Cut(e, " at ")
			}
		}
	}
	return out
}

// leaser returns the keeper's line to st: watching wake-ups, or polling.
func leaser(st *fakeStore, watch bool) seqstore.Leaser {
	g := &gate{fakeStore: st}
	if watch {
		return watchGate{g}
	}
	return g
}

// TestKeeperWakeOnCleanStop: a and b share 8 shards; a stops cleanly at
// 57 s (release, then leave). Woken by the store, b starts a's shards at
// 57 s, or one WakeGap (1.25 s) later when its first two wake-ups both came
// between a's release and its leave (the order of goroutines within one
// instant: under -race, 5 runs in 20); polling, at its next heartbeat, 61 s
// (b's heartbeats fall at 1 s + 5 s x n).
func TestKeeperWakeOnCleanStop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		watch    bool
		want, or string
	}{{"watch", true, "57s", "58.25s"}, {"poll", false, "1m1s", "1m1s"}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const shards = 8
				st := newFakeStore()
				w := newWorld(t)
				ra, rb := newRecv("a", w, 0), newRecv("b", w, 0)
				ka := startKeeper(t, leaser(st, tc.watch), memberA, shards, ra)
				time.Sleep(time.Second)
				kb := startKeeper(t, leaser(st, tc.watch), memberB, shards, rb)
				time.Sleep(56 * time.Second)
				synctest.Wait()
				mine := w.of("a")
				require.NotEmpty(t, mine)
				require.Len(t, append(mine, w.of("b")...), shards, "every shard served before a stops")
				closeKeeper(t, ka, ra) // at 57 s
				time.Sleep(10 * time.Second)
				synctest.Wait()
				assert.Len(t, w.of("b"), shards, "b serves every shard")
				got := startTimes(rb, mine)
				for _, s := range mine {
					assert.Contains(t, []string{tc.want, tc.or}, got[s], "when b started a's shard %d (b's log: %v)", s, rb.log)
				}
				closeKeeper(t, kb, rb)
			})
		})
	}
}

// TestKeeperWakeOnJoin: b joins a, which holds every shard, at 21 s. Woken
// by b's join, a sees b at once and revokes after RebalanceDelay (3 s);
// woken by a's release, b starts its shards at 24 s. Polling, a sees b at
// its heartbeat of 25 s and releases at 28 s, and b starts at its heartbeat
// of 31 s.
func TestKeeperWakeOnJoin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool
		want  string
	}{{"watch", true, "24s"}, {"poll", false, "31s"}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const shards = 8
				st := newFakeStore()
				w := newWorld(t)
				ra, rb := newRecv("a", w, 0), newRecv("b", w, 0)
				ka := startKeeper(t, leaser(st, tc.watch), memberA, shards, ra)
				time.Sleep(21 * time.Second)
				synctest.Wait()
				require.Len(t, w.of("a"), shards)
				kb := startKeeper(t, leaser(st, tc.watch), memberB, shards, rb)
				time.Sleep(20 * time.Second)
				synctest.Wait()
				theirs := w.of("b")
				require.NotEmpty(t, theirs)
				got := startTimes(rb, theirs)
				for _, s := range theirs {
					assert.Equal(t, tc.want, got[s], "when b started shard %d (a's log: %v)", s, ra.log)
				}
				assert.Empty(t, ra.entries("fence"), "a handover fences nothing")
				closeKeeper(t, ka, ra)
				closeKeeper(t, kb, rb)
			})
		})
	}
}

// TestKeeperWakeStorm: a wake-up every 10 ms for 10 s costs two heartbeats
// at once and then one per WakeGap (1.25 s): at most 10, not 1,000.
func TestKeeperWakeStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		w := newWorld(t)
		r := newRecv("a", w, 0)
		k := startKeeper(t, leaser(st, true), memberA, 2, r)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		before := st.count("heartbeat")
		for range 1000 {
			st.mu.Lock()
			st.wakeAll()
			st.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		n := st.count("heartbeat") - before
		assert.LessOrEqual(t, n, 10, "heartbeats during a storm of 1,000 wake-ups in 10 s")
		assert.GreaterOrEqual(t, n, 8, "the storm's wake-ups are answered, one per WakeGap")
		closeKeeper(t, k, r)
	})
}

// TestKeeperWatchResubscribes: a subscription that ends (the store closed
// its channel) is made again RenewEvery later, and wakes the keeper.
func TestKeeperWatchResubscribes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		w := newWorld(t)
		r := newRecv("a", w, 0)
		k := startKeeper(t, leaser(st, true), memberA, 2, r)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, 1, st.count("watch"))
		st.mu.Lock()
		for ch := range st.watchers {
			delete(st.watchers, ch)
			close(ch)
		}
		st.mu.Unlock()
		before := st.count("heartbeat")
		time.Sleep(5*time.Second + time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 2, st.count("watch"), "subscribed again RenewEvery after the end")
		assert.Equal(t, before+2, st.count("heartbeat"), "the regular heartbeat at 5 s, and the new subscription's wake-up at 6 s")
		closeKeeper(t, k, r)
	})
}
