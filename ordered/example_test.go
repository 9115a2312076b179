package ordered_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// The queue below reorders and redelivers; Receive still hands the messages
// out in the order they were sent, each once.
func ExampleQueue_Receive() {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 4, Seed: 7, Redeliver: 0.2})
	q, err := ordered.New(ctx, drv, memstore.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if err := q.Send(ctx, "order-42", fmt.Appendf(nil, "%d", i)); err != nil {
			log.Fatal(err)
		}
	}
	for range 5 {
		m, err := q.Receive(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("receive message body is %s (group %s, seq %d)\n", m.Body, m.Group, m.Seq)
		if err := m.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if err := q.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// receive message body is 1 (group order-42, seq 1)
	// receive message body is 2 (group order-42, seq 2)
	// receive message body is 3 (group order-42, seq 3)
	// receive message body is 4 (group order-42, seq 4)
	// receive message body is 5 (group order-42, seq 5)
}

// Run processes groups in parallel and each group in order; a handler error
// retries the message in place.
func ExampleQueue_Run() {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 4, Seed: 3})
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{
		Retry: ordered.RetryOptions{Initial: time.Millisecond, Max: 10 * time.Millisecond},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		for _, account := range []string{"alice", "bob"} {
			if err := q.Send(ctx, account, fmt.Appendf(nil, "entry %d", i)); err != nil {
				log.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	ledger := map[string][]string{}
	failedOnce := false
	runCtx, stop := context.WithCancel(ctx)
	err = q.Run(runCtx, func(ctx context.Context, m *ordered.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Group == "bob" && m.Seq == 2 && !failedOnce {
			failedOnce = true
			return fmt.Errorf("database busy") // retried after a backoff, order kept
		}
		ledger[m.Group] = append(ledger[m.Group], string(m.Body))
		if len(ledger["alice"])+len(ledger["bob"]) == 6 {
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
	fmt.Println("alice:", ledger["alice"])
	fmt.Println("bob:", ledger["bob"])
	// Output:
	// alice: [entry 1 entry 2 entry 3]
	// bob: [entry 1 entry 2 entry 3]
}
