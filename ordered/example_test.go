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

// Signing headers with Options.Key, rolled out senders first: a receiver
// without a key ignores MACs, so the senders can sign before any receiver
// checks. Then the receivers get the key, and from then on a body that is
// not signed for this queue does not reach the handler (it stays in the
// queue, or goes to ReceiveOptions.DeadLetter when one is set), reported
// through Hooks.OnUntagged.
//
// In a program, read the key from the environment or a secret store, never
// from a flag (flags show in ps), and give it at least 16 random bytes, for
// example from openssl rand -base64 32:
//
//	key := []byte(os.Getenv("INORDER_KEY"))
//
// New refuses an empty or shorter key rather than run without one.
func ExampleOptions_signing() {
	ctx := context.Background()
	key := []byte("example key: use 32 random bytes")
	drv := memqueue.New(&memqueue.Options{Shards: 4, Seed: 5})

	// Step 1: the senders sign.
	sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "payments", Key: key})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range []string{"debit 10", "debit 20"} {
		if err := sender.Send(ctx, "acct-7", []byte(p)); err != nil {
			log.Fatal(err)
		}
	}
	// Someone without the key writes to the queue.
	if err := drv.SendBatch(ctx, [][]byte{[]byte("#v1;1;3;acct-7#debit 9999")}); err != nil {
		log.Fatal(err)
	}

	// Step 2, once every sender signs: the receivers check.
	rejected := make(chan ordered.Event, 1)
	receiver, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{
		Name: "payments",
		Key:  key,
		Hooks: ordered.Hooks{OnUntagged: func(e ordered.Event) {
			select { // hooks must not block
			case rejected <- e:
			default:
			}
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		m, err := receiver.Receive(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (seq %d)\n", m.Body, m.Seq)
		if err := m.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	<-rejected
	fmt.Println("the unsigned body was not handed out")
	for _, q := range []*ordered.Queue{sender, receiver} {
		if err := q.Close(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// debit 10 (seq 1)
	// debit 20 (seq 2)
	// the unsigned body was not handed out
}
