package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestAttack2WatchSmallPool: the keeper's watch on a client with a pool of
// one connection leaves the lease calls their connection (go-redis's
// Pub/Sub connection is outside the pool). Kept as a regression test: the
// sqlstore counterpart fails (TestAttack2WatchStarvesSmallPool).
func TestAttack2WatchSmallPool(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: 1, PoolTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c, uniquePrefix(t))
	wctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := s.WatchLeases(wctx, "ns")
	require.NoError(t, err)
	ctx, cancel2 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel2()
	_, err = s.Heartbeat(ctx, "ns", seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}, time.Minute)
	require.NoError(t, err, "a heartbeat while the watch runs on a pool of one connection")
}
