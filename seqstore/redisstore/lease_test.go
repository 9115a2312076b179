package redisstore

import (
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// TestLeaser runs the lease section on miniredis, whose clock the suite
// drives (FastForward expires keys, SetTime moves TIME), and on the real
// Redis at INORDER_TEST_REDIS_ADDR, on its own clock.
func TestLeaser(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		storetest.RunLeaser(t, storetest.LeaseHarness{Persistent: true, Shared: true, Watches: true,
			Open: func(t *testing.T) (func(t *testing.T) seqstore.Store, storetest.Clock) {
				mr := miniredis.RunT(t)
				now := time.Now()
				mr.SetTime(now)
				c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
				t.Cleanup(func() { _ = c.Close() })
				prefix := uniquePrefix(t)
				return func(t *testing.T) seqstore.Store { return openOrFail(t, c, prefix) },
					func(_ *testing.T, d time.Duration) {
						now = now.Add(d)
						mr.SetTime(now)
						mr.FastForward(d)
					}
			}})
	})
	for _, b := range backends(t) {
		if b.name == "miniredis" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.RunLeaser(t, storetest.LeaseHarness{Persistent: true, Shared: true, Watches: true,
				Open: func(t *testing.T) (func(t *testing.T) seqstore.Store, storetest.Clock) {
					c, prefix := b.open(t)
					return func(t *testing.T) seqstore.Store { return openOrFail(t, c, prefix) }, nil
				}})
		})
	}
	if os.Getenv("INORDER_TEST_REDIS_ADDR") == "" {
		t.Log("INORDER_TEST_REDIS_ADDR not set: the lease section ran on miniredis only")
	}
}
