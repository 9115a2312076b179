package ordered_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// A hook that stops the consumer (OnGap here: "alert and shut down") calls
// Queue.Close with a 1 s deadline. The hook runs on the keeper goroutine,
// which Close's final r.wg.Wait() waits for, with no deadline: Close never
// returns, whatever its ctx says ("Close ... honours the deadline"), and the
// receive side's goroutines stay. The same holds for hooks fired from a
// store call's completion (OnStuck, OnConflict) or a fetcher (OnDuplicate,
// OnUntagged, OnLate, ...).
func TestEng3_CloseFromHookHangs(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 30 * time.Second})
	var q *ordered.Queue
	returned := make(chan error, 1)
	fired := make(chan struct{}, 1)
	q = rxQueue(t, drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Wait: 10 * time.Millisecond, GapTimeout: 100 * time.Millisecond},
		Hooks: ordered.Hooks{OnGap: func(ordered.Event) {
			select {
			case fired <- struct{}{}:
			default:
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			returned <- q.Close(ctx)
		}},
	})
	rxSend(t, drv, [][]byte{rxBody("g", 1, 2)}) // seq 1 missing: a gap
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = q.Receive(ctx)
	}()
	<-fired
	select {
	case err := <-returned:
		if err != nil { // it waited for itself until its deadline
			t.Fatalf("Close called from a hook: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Close called from a hook with a 1 s deadline has not returned after 5 s")
	}
}

// Close from another goroutine while a hook runs waits for that hook: once
// Close returned, no hook runs (an Example whose hook prints lost its line
// when Close returned first, and a hook writing to what the caller closes
// after Close would race it). Only a Close called from the hook itself does
// not wait (TestEng3_CloseFromHookHangs).
func TestCloseWaitsForTheHookThatRuns(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 30 * time.Second})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var finished atomic.Bool
	q := rxQueue(t, drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Wait: 10 * time.Millisecond, GapTimeout: 50 * time.Millisecond},
		Hooks: ordered.Hooks{OnGap: func(ordered.Event) {
			once.Do(func() {
				close(entered)
				<-release
				finished.Store(true)
			})
		}},
	})
	rxSend(t, drv, [][]byte{rxBody("g", 1, 2)}) // seq 1 missing: a gap
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	go func() { _, _ = q.Receive(rctx) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no OnGap in 10 s")
	}
	rcancel()
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- q.Close(ctx)
	}()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a hook ran", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !finished.Load() {
		t.Fatal("Close returned before the hook did")
	}
}
