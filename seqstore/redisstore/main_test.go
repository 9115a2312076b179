package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/inorder/inorder/seqstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backend is one Redis a test can run against.
type backend struct {
	name    string
	sharded bool // a cluster or ring: the store uses the sharded rules
	// open returns a client and a fresh unique prefix; the keys under the
	// prefix are deleted when the test ends.
	open func(t testing.TB) (redis.UniversalClient, string)
}

func uniquePrefix(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "inordertest:" + hex.EncodeToString(b[:]) + ":"
}

// backends returns miniredis always and the real Redis at
// INORDER_TEST_REDIS_ADDR when set. With CI=true a missing variable or an
// unreachable server fails the test.
func backends(t testing.TB) []backend {
	t.Helper()
	bs := []backend{{name: "miniredis", open: func(t testing.TB) (redis.UniversalClient, string) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return c, uniquePrefix(t)
	}}}
	addr := os.Getenv("INORDER_TEST_REDIS_ADDR")
	switch {
	case addr != "":
		bs = append(bs, backend{name: "redis", open: func(t testing.TB) (redis.UniversalClient, string) {
			return realRedis(t, redis.NewClient(&redis.Options{Addr: addr}), addr)
		}})
	case os.Getenv("CI") == "true":
		t.Fatal("CI=true but INORDER_TEST_REDIS_ADDR is not set: the real Redis tests are required in CI")
	default:
		t.Log("INORDER_TEST_REDIS_ADDR not set: real Redis tests skipped, miniredis only")
	}
	return bs
}

// clusterBackend returns a Redis Cluster backend when
// INORDER_TEST_REDIS_CLUSTER_ADDRS lists its nodes (comma-separated). It is
// optional, also in CI (the CI machine runs a single Redis).
func clusterBackend(t testing.TB) (backend, bool) {
	addrs := os.Getenv("INORDER_TEST_REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		t.Log("INORDER_TEST_REDIS_CLUSTER_ADDRS not set: Redis Cluster tests skipped")
		return backend{}, false
	}
	return backend{name: "cluster", sharded: true, open: func(t testing.TB) (redis.UniversalClient, string) {
		return realRedis(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")}), addrs)
	}}, true
}

func realRedis(t testing.TB, c redis.UniversalClient, addr string) (redis.UniversalClient, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("Redis at %s is configured but unreachable: %v", addr, err)
	}
	prefix := uniquePrefix(t)
	t.Cleanup(func() {
		defer func() { _ = c.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		clean := func(ctx context.Context, node redis.UniversalClient) error {
			iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			var keys []string
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			if err := iter.Err(); err != nil {
				return err
			}
			for _, k := range keys { // one by one: keys of a node span many slots
				if err := node.Del(ctx, k).Err(); err != nil {
					return err
				}
			}
			return nil
		}
		var err error
		if cc, ok := c.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return clean(ctx, node) })
		} else {
			err = clean(ctx, c)
		}
		if err != nil {
			t.Errorf("cleanup of %s*: %v", prefix, err)
		}
	})
	return c, prefix
}

// ringBackend is a client-sharded *redis.Ring over two miniredis servers:
// the sharded rules without a cluster.
var ringBackend = backend{name: "ring", sharded: true, open: func(t testing.TB) (redis.UniversalClient, string) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = c.Close() })
	return c, uniquePrefix(t)
}}

// shardedClient reports whether c makes the store use the sharded rules.
func shardedClient(c redis.UniversalClient) bool {
	switch c.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

// forEach runs f as a subtest on every backend, the ring and (when
// configured) the cluster included, in parallel.
func forEach(t *testing.T, f func(t *testing.T, c redis.UniversalClient, prefix string)) {
	bs := append(backends(t), ringBackend)
	if cb, ok := clusterBackend(t); ok {
		bs = append(bs, cb)
	}
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c, p := b.open(t)
			f(t, c, p)
		})
	}
}

func newStore(t testing.TB, c redis.UniversalClient, prefix string) *Store {
	t.Helper()
	s, err := New(c, &Options{Prefix: prefix, Flushers: benchFlushers()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// benchFlushers lets a benchmark run compare Options.Flushers
// (BENCH_FLUSHERS=n); 0 means the default.
func benchFlushers() int {
	n, _ := strconv.Atoi(os.Getenv("BENCH_FLUSHERS"))
	return n
}

func sentOne(ctx context.Context, s seqstore.Store, st seqstore.Stream, seqs []uint64) error {
	return s.Sent(ctx, []seqstore.SentMark{{Stream: st, Seqs: seqs}})
}
