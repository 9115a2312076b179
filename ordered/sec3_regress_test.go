package ordered_test

// Review 2 (security): findings of the first round, kept as regressions.

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/redisstore"
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

// A corrupt stored cursor (a Redis field overwritten) stops its group and
// reports it stuck; it is never read as "no cursor".
func TestSec3CorruptCursorRedis(t *testing.T) {
	ctx := context.Background()
	c, prefix := sec3Redis(t)
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	newStore := func() seqstore.Store {
		s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		return s
	}
	sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "q"})
	require.NoError(t, err)
	defer rxClose(t, sender)
	for i := 1; i <= 3; i++ {
		require.NoError(t, sender.Send(ctx, "g", []byte("m"+strconv.Itoa(i))))
		require.NoError(t, sender.Send(ctx, "h", []byte("m"+strconv.Itoa(i))))
	}
	rx, err := ordered.New(ctx, drv, newStore(), &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, SyncAck: true}})
	require.NoError(t, err)
	var g1 sec3Got
	ctx1, cancel1 := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = rx.Run(ctx1, g1.handler) }()
	require.Len(t, g1.wait(t, 6, 5*time.Second), 6)
	cancel1()
	<-done
	rxClose(t, rx)
	require.NoError(t, c.HSet(ctx, prefix+"{q/g}:cursor", "next", "garbage").Err())
	for i := 4; i <= 5; i++ {
		require.NoError(t, sender.Send(ctx, "g", []byte("m"+strconv.Itoa(i))))
		require.NoError(t, sender.Send(ctx, "h", []byte("m"+strconv.Itoa(i))))
	}
	var mu sync.Mutex
	var stuck []ordered.Event
	rx2, err := ordered.New(ctx, drv, newStore(), &ordered.Options{Name: "q",
		Hooks:   ordered.Hooks{OnStuck: func(e ordered.Event) { mu.Lock(); stuck = append(stuck, e); mu.Unlock() }},
		Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}})
	require.NoError(t, err)
	var g2 sec3Got
	sec3Run(t, rx2, &g2)
	g2.wait(t, 2, 5*time.Second)
	time.Sleep(200 * time.Millisecond) // anything of g would show now
	out := g2.wait(t, 3, 0)
	require.Len(t, out, 2, "h's two new messages only:%s", sec3Dump(out))
	for _, m := range out {
		assert.Equal(t, "h", m.Group, "a group with a corrupt cursor must not deliver")
	}
	assert.NotEmpty(t, rx2.Stats().Receive.Stuck, "the group is reported stuck")
	mu.Lock()
	assert.NotEmpty(t, stuck, "OnStuck")
	mu.Unlock()
}
