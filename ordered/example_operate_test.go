package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// A message its handler fails MaxAttempts times is a poison message. With
// PoisonDeadLetter it goes to the dead-letter queue (its body as received,
// header included, so it can be sent back later), and only then is it
// deleted and its group moves on; the default, PoisonBlock, stops the group
// and reports it stuck (see Queue.DeadLetterHead).
func ExampleReceiveOptions_deadLetter() {
	ctx := context.Background()
	dlq := memqueue.New(nil)
	q, err := ordered.New(ctx, memqueue.New(nil), memstore.New(), &ordered.Options{
		Retry: ordered.RetryOptions{Initial: time.Millisecond, Max: 10 * time.Millisecond},
		Receive: ordered.ReceiveOptions{
			MaxAttempts: 2, Poison: ordered.PoisonDeadLetter, DeadLetter: dlq,
		},
		Hooks: ordered.Hooks{OnDeadLetter: func(e ordered.Event) {
			fmt.Printf("dead-lettered: group %s seq %d\n", e.Group, e.Seq)
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, body := range []string{"debit 10", "debit ten", "debit 30"} {
		if err := q.Send(ctx, "acct-7", []byte(body)); err != nil {
			log.Fatal(err)
		}
	}
	var mu sync.Mutex
	var handled []string
	runCtx, stop := context.WithCancel(ctx)
	err = q.Run(runCtx, func(ctx context.Context, m *ordered.Message) error {
		if string(m.Body) == "debit ten" {
			return errors.New("not a number") // fails every time
		}
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, string(m.Body))
		if len(handled) == 2 {
			stop()
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Close(ctx); err != nil {
		log.Fatal(err)
	}
	visible, _ := dlq.Len()
	fmt.Println("handled:", handled)
	fmt.Println("in the dead-letter queue:", visible)
	// Output:
	// dead-lettered: group acct-7 seq 2
	// handled: [debit 10 debit 30]
	// in the dead-letter queue: 1
}

// Shutting down on a signal: Run returns when its context ends (after the
// handlers in progress returned), and Close then makes every acknowledged
// advance durable and deletes its messages, within its own deadline. A
// message whose handler was cut short is not acknowledged: it is delivered
// again by the next receiver.
func ExampleQueue_Close() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	q, err := ordered.New(ctx, memqueue.New(nil), memstore.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	err = q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
		// ctx ends with the signal: pass it to what the handler calls.
		return nil
	})
	if err != nil && !errors.Is(err, ordered.ErrClosed) {
		log.Print("run: ", err)
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.Close(closeCtx); err != nil {
		log.Print("close: ", err) // what was not made durable comes back: nothing acknowledged is lost
	}
}
