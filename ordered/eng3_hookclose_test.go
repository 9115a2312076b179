package ordered_test

import (
	"context"
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
		t.Logf("Close returned %v", err)
	case <-time.After(5 * time.Second):
		t.Fatalf("Close called from a hook with a 1 s deadline has not returned after 5 s")
	}
}
