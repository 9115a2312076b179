package mnsqueue_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore/memstore"
)

// exclusion records deliveries across receivers: no group open at two at
// once, and each group's first deliveries in order.
type exclusion struct {
	t      *testing.T
	mu     sync.Mutex
	open   map[string]string // group -> receiver handling it
	next   map[string]int    // group -> highest body handled
	by     map[string]int    // receiver -> deliveries
	repeat int
	n      int
	done   chan struct{}
	want   int
}

func (e *exclusion) handler(name string, work time.Duration) ordered.Handler {
	return func(ctx context.Context, m *ordered.Message) error {
		k, err := strconv.Atoi(string(m.Body))
		require.NoError(e.t, err)
		e.mu.Lock()
		if other, busy := e.open[m.Group]; busy {
			e.t.Errorf("exclusion: %s handles %s #%d (seq %d, highest handled %d) while %s handles the group", name, m.Group, k, m.Seq, e.next[m.Group], other)
		}
		e.open[m.Group] = name
		switch {
		case k == e.next[m.Group]+1:
			e.next[m.Group] = k
			e.n++
			if e.n == e.want {
				close(e.done)
			}
		case k <= e.next[m.Group]:
			e.repeat++ // at-least-once: a redelivery after a crash-free run is none, see below
		default:
			e.t.Errorf("order: %s got %s #%d while #%d was due", name, m.Group, k, e.next[m.Group]+1)
		}
		if m.Unordered {
			e.t.Errorf("%s: %s #%d handed out flagged Unordered", name, m.Group, k)
		}
		e.by[name]++
		e.mu.Unlock()
		time.Sleep(work)
		e.mu.Lock()
		delete(e.open, m.Group)
		e.mu.Unlock()
		return nil
	}
}

// Scale-out on a FIFO queue without shards or leases, as the service's
// own group lock suggests: the service hands out a group's next message
// only once the previous one is deleted, so several plain ordered.Queue
// receivers on one FIFO queue (and one store) should share its groups,
// each in order and never at two receivers at once. Three receivers, 24
// groups x 20 sent one by one (they arrive in order), no faults, handlers
// of 5ms.
//
// It FAILS today (run it with INORDER_FIFO_SCALE=1): in four runs, 60 to
// 80 hand-outs started while another receiver still handled the group,
// most of them repeats of the very message the other receiver handled; 200
// to 460 of the 480 messages were handled twice; one run handed 3 out of
// order. With faults on (redeliveries, 5xx) and pipelined sends it is the
// same; SyncAck changes nothing. An ordered.Queue assumes it is
// its streams' only receiver: its cursors, buffers and parks are
// per-process state, which the service's group lock does not cover.
func TestFIFOSeveralReceivers(t *testing.T) {
	if os.Getenv("INORDER_FIFO_SCALE") == "" {
		t.Skip("known to fail: several ordered.Queue receivers on one FIFO queue overlap on a group (INORDER_FIFO_SCALE=1 runs it)")
	}
	const groups, n, receivers = 24, 20, 3
	srv := newServer(t, &mnstest.Options{Seed: 5})
	name := newFIFO(t, srv, 5)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	open := func(o *ordered.Options, store *memstore.Store) *ordered.Queue {
		drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), &mnsqueue.Options{QueueType: mnsqueue.QueueTypeFIFO})
		require.NoError(t, err)
		q, err := ordered.New(ctx, drv, store, o)
		require.NoError(t, err)
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			assert.NoError(t, q.Close(cctx))
			assert.NoError(t, drv.Close())
		})
		return q
	}
	ex := &exclusion{t: t, open: map[string]string{}, next: map[string]int{}, by: map[string]int{}, done: make(chan struct{}), want: groups * n}
	rxStore := memstore.New()
	var wg sync.WaitGroup
	rctx, stop := context.WithCancel(ctx)
	for i := range receivers {
		rx := open(&ordered.Options{Receive: ordered.ReceiveOptions{Wait: time.Second, Concurrency: 8}}, rxStore)
		name := fmt.Sprintf("r%d", i+1)
		wg.Go(func() {
			if err := rx.Run(rctx, ex.handler(name, 5*time.Millisecond)); err != nil && rctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	tx := open(nil, memstore.New())
	for g := range groups {
		for i := 1; i <= n; i++ {
			require.NoError(t, tx.Send(ctx, "g"+strconv.Itoa(g), []byte(strconv.Itoa(i))))
		}
	}
	select {
	case <-ex.done:
	case <-ctx.Done():
	}
	stop()
	wg.Wait()
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for g := range groups {
		assert.Equal(t, n, ex.next[fmt.Sprintf("g%d", g)], "group g%d handled up to", g)
	}
	for i := range receivers {
		assert.Positive(t, ex.by[fmt.Sprintf("r%d", i+1)], "r%d took part: %v", i+1, ex.by)
	}
	st := srv.Stats()
	t.Logf("deliveries by receiver %v, repeats %d; server: %d redelivered early, %d answers 500", ex.by, ex.repeat, st.Redelivered, st.Errors5xx)
}
