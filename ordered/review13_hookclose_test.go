package ordered_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// Review13: a hook that calls Close ("alert and shut down", which the Hooks
// doc allows) while another goroutine's Close is under way (a SIGTERM
// handler, a deferred Close). The other Close is the first: it waits in
// reporter.stop for the reporter goroutine, which runs the hook; the hook's
// Close is a later call: it waits on q.done, closed only when the first
// Close returns. Each waits for the other: with context.Background() in
// both, forever; with deadlines, both fail at the hook's deadline. Before
// 0ee9c28 the first Close did not wait for a running hook and both
// returned nil at once.
func TestReview13_HookCloseWhileAnotherCloseWaits(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 30 * time.Second})
	var q *ordered.Queue
	entered := make(chan struct{})
	mainClosing := make(chan struct{})
	hookClose := make(chan error, 1)
	hookTook := make(chan time.Duration, 1)
	var once sync.Once
	q = rxQueue(t, drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Wait: 10 * time.Millisecond, GapTimeout: 50 * time.Millisecond},
		Hooks: ordered.Hooks{OnGap: func(ordered.Event) {
			once.Do(func() {
				close(entered)
				<-mainClosing
				time.Sleep(200 * time.Millisecond) // the other Close is now in rcv.close
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				start := time.Now()
				hookClose <- q.Close(ctx)
				hookTook <- time.Since(start)
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
	mainClose := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mainClose <- q.Close(ctx)
	}()
	close(mainClosing)
	var herr, merr error
	select {
	case herr = <-hookClose:
	case <-time.After(8 * time.Second):
		t.Fatal("the hook's Close has not returned after 8 s")
	}
	took := <-hookTook
	select {
	case merr = <-mainClose:
	case <-time.After(8 * time.Second):
		t.Fatal("the other Close has not returned after 8 s")
	}
	if herr != nil || merr != nil || took > time.Second {
		t.Fatalf("hook's Close: %v after %v; the other Close: %v (want both nil at once: Close is idempotent and a hook may call it)", herr, took, merr)
	}
}

// Review13: OnCommit runs on the store call's goroutine, which
// receiver.close's r.wg.Wait() waits for with no deadline. A Close from
// OnCommit ("the store failed: shut down") never returns, whatever its ctx
// (Close's doc: when ctx ends first it returns an error wrapping
// ctx.Err()), and the receive side's goroutines stay. Older than 0ee9c28.
func TestReview13_CloseFromOnCommitHangs(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 30 * time.Second})
	var q *ordered.Queue
	var once sync.Once
	returned := make(chan error, 1)
	q = rxQueue(t, drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Wait: 10 * time.Millisecond},
		Hooks: ordered.Hooks{OnCommit: func(ordered.Event) {
			once.Do(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				returned <- q.Close(ctx)
			})
		}},
	})
	rxSend(t, drv, [][]byte{rxBody("g", 1, 1), rxBody("g", 1, 2)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := q.Receive(ctx)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if err := m.Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Close(ctx with a 1 s deadline) called from OnCommit has not returned after 5 s")
	}
}
