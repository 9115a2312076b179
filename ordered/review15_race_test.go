package ordered_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// Run's slab Messages escape their handler (kept, read later on another
// goroutine) while Receive callers take from the same Queue: each Message
// must keep its own fields (no slot reused or shared), with no data race.
// Run with -race.
func TestReview15_RunSlabMessagesEscapeAndReceiveAlongside(t *testing.T) {
	for _, mode := range []ordered.Mode{ordered.AtLeastOnce, ordered.AtMostOnce} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) { review15SlabEscape(t, mode) })
	}
}

func review15SlabEscape(t *testing.T, mode ordered.Mode) {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Visibility: 30 * time.Second})
	store := memstore.New()
	const groups, per = 20, 30
	for g := range groups {
		rxSend(t, drv, rxBodies(fmt.Sprintf("g%d", g), 1, 1, per, nil))
	}
	q := rxQueue(t, drv, store, &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Mode: mode, Concurrency: 4, Wait: 100 * time.Millisecond}})
	kept := make(chan *ordered.Message, groups*per*2)
	var total atomic.Int32
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = q.Run(rctx, func(_ context.Context, m *ordered.Message) error {
			kept <- m
			if total.Add(1) >= groups*per {
				cancel()
			}
			return nil
		})
	})
	for range 2 {
		wg.Go(func() {
			for {
				m, err := q.Receive(rctx)
				if err != nil {
					return
				}
				kept <- m
				if total.Add(1) >= groups*per {
					cancel()
				}
				_ = m.Ack(rctx)
			}
		})
	}
	var bad []string
	seen := map[string]bool{}
	checkDone := make(chan struct{})
	go func() {
		defer close(checkDone)
		for m := range kept {
			time.Sleep(10 * time.Microsecond) // read later, while the worker goes on
			want := fmt.Sprintf("%s/%d/%d", m.Group, m.Epoch, m.Seq)
			if string(m.Body) != want {
				bad = append(bad, fmt.Sprintf("Message %p: fields %s, body %q", m, want, m.Body))
			}
			if m.Attempt == 1 {
				if seen[want] {
					bad = append(bad, "twice: "+want)
				}
				seen[want] = true
			}
		}
	}()
	select {
	case <-rctx.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("delivered %d", total.Load())
	}
	wg.Wait()
	close(kept)
	<-checkDone
	rxClose(t, q)
	require.Empty(t, bad)
	require.Len(t, seen, groups*per)
}
