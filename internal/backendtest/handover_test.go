package backendtest_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"maps"
	mrand "math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/lease"
	"github.com/inorder/inorder/internal/shard"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/redisstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

// handoverOpts are the lease timings of TestHandoverFigures: the defaults
// scaled down 10x, so that the figures with and without wake-ups compare
// at the same timings.
var handoverOpts = lease.Options{
	TTL:            1500 * time.Millisecond,
	RenewEvery:     500 * time.Millisecond,
	RetryPeriod:    200 * time.Millisecond,
	RenewDeadline:  time.Second,
	RebalanceDelay: 300 * time.Millisecond,
	CloseDrain:     time.Second,
}

// handoverRuns is how many handovers each figure is the median of.
const handoverRuns = 9

// handoverShards is the shards a and b share: rendezvous gives a 7 of 8.
const handoverShards = 8

// TestHandoverFigures measures the handover after a clean stop: members a
// and b share 8 shards; a closes (revoke, drain at once, Release, Leave);
// the handover is the time from a's Close to b's Start of the last of a's
// shards. With wake-ups (the store's LeaseWatcher) b hears of the release
// in a round trip or two; polling (the same store with WatchLeases hidden),
// at its next heartbeat, uniform over RenewEvery. It needs
// INORDER_TEST_REDIS_ADDR and INORDER_TEST_POSTGRES_DSN (each store skips
// without its variable, and fails with CI=true), and prints the median,
// min and max of handoverRuns handovers per store and mode.
func TestHandoverFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the figures take about a minute")
	}
	for _, b := range []struct {
		name, env string
		open      func(t *testing.T, v string) func(t *testing.T) seqstore.Leaser
	}{
		{"redis", "INORDER_TEST_REDIS_ADDR", openRedisLeaser},
		{"postgres", "INORDER_TEST_POSTGRES_DSN", openPostgresLeaser},
	} {
		t.Run(b.name, func(t *testing.T) {
			v := os.Getenv(b.env)
			if v == "" {
				if os.Getenv("CI") == "true" {
					t.Fatalf("CI=true but %s is not set", b.env)
				}
				t.Skipf("%s not set", b.env)
			}
			open := b.open(t, v)
			var medians [2]time.Duration
			for i, watch := range []bool{true, false} {
				var got []time.Duration
				for run := range handoverRuns {
					d := handover(t, open, watch)
					t.Logf("%s watch=%v run %d: %v", b.name, watch, run, d)
					got = append(got, d)
				}
				slices.Sort(got)
				medians[i] = got[len(got)/2]
				t.Logf("FIGURE %s, %s: handover after a clean stop, median %v, min %v, max %v (%d runs; RenewEvery %v)",
					b.name, map[bool]string{true: "with wake-ups", false: "polling"}[watch],
					medians[i].Round(time.Millisecond), got[0].Round(time.Millisecond), got[len(got)-1].Round(time.Millisecond),
					handoverRuns, handoverOpts.RenewEvery)
			}
			assert.Less(t, medians[0], handoverOpts.RenewEvery/4, "with wake-ups the handover takes round trips, not a heartbeat period")
			assert.Less(t, medians[0], medians[1], "wake-ups shorten the handover")
		})
	}
}

// pollOnly hides a store's LeaseWatcher: its keeper polls.
type pollOnly struct{ seqstore.Leaser }

// starts records a receiver's Starts; it drains a revoked shard at once.
type starts struct {
	mu      sync.Mutex
	k       *lease.Keeper
	serving map[int]time.Time // shard -> when started
}

func (s *starts) Start(l seqstore.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serving[l.Shard] = time.Now()
}

func (s *starts) Revoke(shard int) {
	s.mu.Lock()
	delete(s.serving, shard)
	k := s.k
	s.mu.Unlock()
	k.Drained(shard)
}

func (s *starts) Fence(shard int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.serving, shard)
}

func (s *starts) snapshot() map[int]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]time.Time, len(s.serving))
	for sh, at := range s.serving {
		out[sh] = at
	}
	return out
}

func startKeeper(t *testing.T, l seqstore.Leaser, ns string, m seqstore.Member, r *starts) *lease.Keeper {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock() // a Revoke before r.k is set waits
	k, err := lease.New(l, ns, m, handoverShards, r, &handoverOpts)
	require.NoError(t, err)
	r.k = k
	return k
}

// handover runs one clean stop in a fresh namespace and returns its
// handover time.
func handover(t *testing.T, open func(t *testing.T) seqstore.Leaser, watch bool) time.Duration {
	t.Helper()
	la, lb := open(t), open(t)
	if !watch {
		la, lb = pollOnly{la}, pollOnly{lb}
	}
	ns := "ho-" + randomHex(4)
	ra, rb := &starts{serving: map[int]time.Time{}}, &starts{serving: map[int]time.Time{}}
	a := seqstore.Member{Name: "a", Incarnation: "a-" + randomHex(4), Weight: 1}
	b := seqstore.Member{Name: "b", Incarnation: "b-" + randomHex(4), Weight: 1}
	desired := shard.Assign([]seqstore.Member{a, b}, handoverShards)
	mine := desired.Shards("a")
	require.NotEmpty(t, mine, "rendezvous gives a nothing")
	ka := startKeeper(t, la, ns, a, ra)
	kb := startKeeper(t, lb, ns, b, rb)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, kb.Close(ctx))
	}()
	served := func() bool {
		return len(ra.snapshot()) == len(mine) && len(rb.snapshot()) == handoverShards-len(mine)
	}
	if !assert.Eventually(t, served, 20*time.Second, 10*time.Millisecond) {
		require.FailNow(t, "a and b never served their shards", "desired %v: a serves %v, b %v", desired, slices.Sorted(maps.Keys(ra.snapshot())), slices.Sorted(maps.Keys(rb.snapshot())))
	}
	time.Sleep(mrand.N(handoverOpts.RenewEvery)) // any phase of b's heartbeats
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop := time.Now()
	require.NoError(t, ka.Close(ctx))
	var last time.Time
	require.Eventually(t, func() bool {
		b := rb.snapshot()
		last = time.Time{}
		for _, sh := range mine {
			at, ok := b[sh]
			if !ok {
				return false
			}
			if at.After(last) {
				last = at
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "b never took a's shards %v", mine)
	return last.Sub(stop)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func openRedisLeaser(t *testing.T, addr string) func(t *testing.T) seqstore.Leaser {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Ping(t.Context()).Err(), "Redis at %s", addr)
	prefix := "inordertest:" + randomHex(6) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			_ = c.Del(ctx, iter.Val()).Err()
		}
	})
	return func(t *testing.T) seqstore.Leaser {
		s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func openPostgresLeaser(t *testing.T, dsn string) func(t *testing.T) seqstore.Leaser {
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	db.SetMaxOpenConns(16)
	prefix := "ho_" + randomHex(6) + "_"
	t.Cleanup(func() {
		defer func() { _ = db.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, tb := range []string{"send", "journal", "cursor", "parked", "lease_ns", "lease", "member", "schema_version"} {
			_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+prefix+tb)
		}
	})
	s, err := sqlstore.Open(db, sqlstore.Postgres, &sqlstore.Options{TablePrefix: prefix})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	require.NoError(t, s.Close())
	return func(t *testing.T) seqstore.Leaser {
		s, err := sqlstore.Open(db, sqlstore.Postgres, &sqlstore.Options{TablePrefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}
