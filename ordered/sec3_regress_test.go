package ordered_test

// Review 2 (security): findings of the first round, kept as regressions.

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/memstore"
)

func sec3HeapNow() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// 10,000 groups, one 35-byte body each at seq 8192 (a hole at 1..8191 under
// GapWait): the heap held stays within MaxMemory plus slack. (The first
// round measured +1,883 MiB.)
func TestSec3RingMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 groups")
	}
	const groups = 10_000
	for _, tc := range []struct {
		name  string
		wait  time.Duration // for every group to be held, parked or given back
		store func(t *testing.T) seqstore.Store
	}{
		// Without parking, what is given back comes back at the undeleted
		// rate: the heap is measured after a while, not at the end.
		{"nopark-memstore", 5 * time.Second, func(t *testing.T) seqstore.Store { return memstore.New() }},
		{"filestore", 20 * time.Second, func(t *testing.T) seqstore.Store {
			s, err := filestore.Open(filepath.Join(t.TempDir(), "fs"), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{Shards: 1})
			var bs [][]byte
			for g := range groups {
				bs = append(bs, rxBody(fmt.Sprintf("g%05d", g), 1, 8192))
			}
			store := tc.store(t)
			before := sec3HeapNow()
			q := rxQueue(t, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{Wait: 100 * time.Millisecond, NoPark: tc.name == "nopark-memstore"}})
			rxSend(t, drv, bs)
			bs = nil
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, err := q.Receive(ctx)
			cancel()
			require.Error(t, err)
			deadline := time.Now().Add(tc.wait)
			for time.Now().Before(deadline) {
				st := q.Stats().Receive
				if int(st.Parked)+st.Buffered+int(st.NotKept) >= groups {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			grown := sec3HeapNow() - before
			st := q.Stats().Receive
			t.Logf("%s: groups=%d Buffered=%d Memory=%d Parked=%d NotKept=%d heap +%.1f MiB",
				tc.name, st.Groups, st.Buffered, st.Memory, st.Parked, st.NotKept, float64(grown)/(1<<20))
			rxClose(t, q)
			assert.Less(t, grown, int64(64<<20+16<<20), "heap held for hostile far-ahead bodies exceeds MaxMemory (64 MiB) + slack")
		})
	}
}
