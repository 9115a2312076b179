package ordered_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// review15Retained runs n messages of size bytes through Run (one worker)
// and keeps 1 in 8 of them, as *Message (keepMsg) or as its Body only; it
// returns the heap in use after GC, with the kept values alive.
func review15Retained(t *testing.T, n, size int, keepMsg, viaReceive bool) uint64 {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
	store := memstore.New()
	var bodies [][]byte
	for i := 1; i <= n; i++ {
		payload := make([]byte, size)
		bodies = append(bodies, envelope.Append(nil, envelope.Header{Group: fmt.Sprintf("g%d", i), Epoch: 1, Seq: 1}, payload))
	}
	rxSend(t, drv, bodies)
	bodies = nil
	q := rxQueue(t, drv, store, &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Concurrency: 1, Wait: 100 * time.Millisecond}})
	var mu sync.Mutex
	var keptMsgs []*ordered.Message
	var keptBodies [][]byte
	count := 0
	done := make(chan struct{})
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	handle := func(_ context.Context, m *ordered.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if count%8 == 0 {
			if keepMsg {
				keptMsgs = append(keptMsgs, m)
			} else {
				keptBodies = append(keptBodies, m.Body)
			}
		}
		count++
		if count == n {
			close(done)
		}
		return nil
	}
	go func() {
		if !viaReceive {
			errc <- q.Run(rctx, handle)
			return
		}
		for {
			m, err := q.Receive(rctx)
			if err != nil {
				errc <- nil
				return
			}
			_ = handle(rctx, m)
			if err := m.Ack(rctx); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("delivered %d of %d", count, n)
	}
	cancel()
	require.NoError(t, <-errc)
	rxClose(t, q)
	require.Eventually(t, func() bool { v, f := drv.Len(); return v+f == 0 }, 10*time.Second, 10*time.Millisecond)
	q, drv, store = nil, nil, nil
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(keptMsgs)
	runtime.KeepAlive(keptBodies)
	return ms.HeapAlloc
}

// A handler that keeps 1 Message in 8 (a dedupe cache, a "last seen"
// debug pointer, a batch collected for later) keeps all 8 bodies of the
// slab alive, not "about 3 KB" (receive.go, PERFORMANCE.md): with 32 KB
// bodies, 50 kept Messages held about 400 bodies. Fixed: only Messages of
// bodies up to 1 KiB come from slabs.
func TestReview15_KeptMessageRetainsSlabSiblingsBodies(t *testing.T) {
	const n, size = 400, 32 << 10
	base := review15Retained(t, n, size, false, false)
	viaReceive := review15Retained(t, n, size, true, true)
	withMsg := review15Retained(t, n, size, true, false)
	t.Logf("keeping %d *Message from Receive (no slab): %.1f MiB", n/8, float64(viaReceive)/(1<<20))
	kept := uint64(n/8) * size
	t.Logf("heap after GC: keeping %d bodies %.1f MiB, keeping %d *Message %.1f MiB (the kept bodies themselves: %.1f MiB)",
		n/8, float64(base)/(1<<20), n/8, float64(withMsg)/(1<<20), float64(kept)/(1<<20))
	require.Less(t, withMsg, viaReceive+kept, "keeping 1 Run Message in 8 retains %0.1f MiB more than keeping as many Receive Messages", float64(withMsg-viaReceive)/(1<<20))
}
