package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// TestConformance runs storetest on miniredis, a Ring of two miniredis and,
// when configured, on the real Redis and a Redis Cluster; each subtest gets
// its own key prefix. On a cluster or ring (PerStreamAtomic) the calls of
// several streams are atomic at rest thanks to the check made before
// writing, and the cross-instance race checks that a call that loses a race
// after that check reports exactly which requests took effect.
func TestConformance(t *testing.T) {
	bs := append(backends(t), ringBackend)
	if cb, ok := clusterBackend(t); ok {
		bs = append(bs, cb)
	}
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, storetest.Harness{Persistent: true, Shared: true, PerStreamAtomic: b.sharded, Open: func(t *testing.T) func(t *testing.T) seqstore.Store {
				c, prefix := b.open(t)
				return func(t *testing.T) seqstore.Store {
					return openOrFail(t, c, prefix)
				}
			}, PlantParked: func(t *testing.T, st seqstore.Store, entries []seqstore.Parked) {
				s := st.(*Store)
				plantPassed(t, s.client, s, entries...)
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
