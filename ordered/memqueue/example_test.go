package memqueue_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	"github.com/inorder/inorder/ordered/memqueue"
)

// A queue with four shards receives messages out of order; every message
// still arrives once.
func Example() {
	ctx := context.Background()
	q := memqueue.New(&memqueue.Options{Seed: 1})
	defer q.Close()

	var bodies [][]byte
	for i := 1; i <= 8; i++ {
		bodies = append(bodies, fmt.Appendf(nil, "m%d", i))
	}
	if err := q.SendBatch(ctx, bodies); err != nil {
		log.Fatal(err)
	}
	msgs, err := q.ReceiveBatch(ctx, 16, 0)
	if err != nil {
		log.Fatal(err)
	}
	var got, receipts []string
	for _, m := range msgs {
		got = append(got, string(m.Body))
		receipts = append(receipts, m.Receipt)
	}
	fmt.Println("received:", got)
	slices.Sort(got)
	fmt.Println("sorted:  ", got)
	if err := q.DeleteBatch(ctx, receipts); err != nil {
		log.Fatal(err)
	}
	st := q.Stats()
	fmt.Printf("sent %d, delivered %d, deleted %d\n", st.Sent, st.Delivered, st.Deleted)
	// Output:
	// received: [m3 m4 m6 m7 m1 m2 m5 m8]
	// sorted:   [m1 m2 m3 m4 m5 m6 m7 m8]
	// sent 8, delivered 8, deleted 8
}

// Chaos knobs make the queue redeliver and drop messages at a seeded rate.
func Example_chaos() {
	ctx := context.Background()
	q := memqueue.New(&memqueue.Options{Seed: 5, Redeliver: 0.25, Loss: 0.1})
	defer q.Close()
	for i := range 100 {
		if err := q.SendBatch(ctx, [][]byte{fmt.Appendf(nil, "%d", i)}); err != nil {
			log.Fatal(err)
		}
	}
	for {
		msgs, err := q.ReceiveBatch(ctx, 16, 0)
		if err != nil {
			log.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		receipts := make([]string, len(msgs))
		for i, m := range msgs {
			receipts[i] = m.Receipt
		}
		_ = q.DeleteBatch(ctx, receipts) // stale receipts fail: their message came back
	}
	st := q.Stats()
	fmt.Printf("sent %d, lost %d, deleted %d, redelivered %d\n", st.Sent, st.Lost, st.Deleted, st.Redelivered)
	// Output:
	// sent 100, lost 7, deleted 93, redelivered 31
}
