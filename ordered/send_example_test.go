package ordered_test

import (
	"context"
	"fmt"
	"log"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// A single goroutine keeps many requests in flight with SendAsync: each call
// returns once the message is admitted, and admission order is seq order.
func ExampleQueue_SendAsync() {
	ctx := context.Background()
	drv := memqueue.New(nil)
	defer drv.Close()
	q, err := ordered.New(ctx, drv, memstore.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close(ctx)

	var results []*ordered.SendResult
	for _, p := range []string{"created", "paid", "shipped"} {
		r, err := q.SendAsync(ctx, "order-42", []byte(p))
		if err != nil {
			log.Fatal(err)
		}
		results = append(results, r)
	}
	for _, r := range results {
		if err := r.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Println("seq", r.Seq())
	}
	// Output:
	// seq 1
	// seq 2
	// seq 3
}

// SendBatch reserves consecutive seqs for all its payloads at once.
func ExampleQueue_SendBatch() {
	ctx := context.Background()
	drv := memqueue.New(nil)
	defer drv.Close()
	q, err := ordered.New(ctx, drv, memstore.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close(ctx)

	entries := [][]byte{[]byte("debit 10"), []byte("credit 4"), []byte("debit 1")}
	if err := q.SendBatch(ctx, "account-7", entries); err != nil {
		log.Fatal(err)
	}
	for range entries {
		m, err := q.Receive(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s #%d: %s\n", m.Group, m.Seq, m.Body)
		if err := m.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// account-7 #1: debit 10
	// account-7 #2: credit 4
	// account-7 #3: debit 1
}

// FormatLegacy writes the MNS ordered-queue sample's `#<seq>#` header, for
// peers that still run the sample.
func ExampleFormatLegacy() {
	ctx := context.Background()
	drv := memqueue.New(nil)
	defer drv.Close()
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Send: ordered.SendOptions{Format: ordered.FormatLegacy}})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close(ctx)
	if err := q.Send(ctx, "", []byte("hello")); err != nil {
		log.Fatal(err)
	}
	msgs, err := drv.ReceiveBatch(ctx, 1, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", msgs[0].Body)
	// Output:
	// #1#hello
}
