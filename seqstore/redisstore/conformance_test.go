package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// TestConformance runs storetest on miniredis and, when configured, on the
// real Redis; each subtest gets its own key prefix.
func TestConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, storetest.Harness{Persistent: true, Open: func(t *testing.T) func(t *testing.T) seqstore.Store {
				c, prefix := b.open(t)
				return func(t *testing.T) seqstore.Store {
					return openOrFail(t, c, prefix)
				}
			}})
		})
	}
}

func openOrFail(t *testing.T, c redis.UniversalClient, prefix string) seqstore.Store {
	t.Helper()
	s, err := New(c, &Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}
