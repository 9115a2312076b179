package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/redisstore"
)

// A sender reserves journaled seqs, a receiver advances its cursor with
// compare-and-set. miniredis stands in for a Redis server here; pass any
// redis.UniversalClient (single node, sentinel, cluster) in production.
func ExampleNew() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = client.Close() }() // the client stays ours

	ctx := context.Background()
	store, err := redisstore.New(client, &redisstore.Options{Prefix: "example:"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = store.Close() }()

	stream := seqstore.Stream{Queue: "orders", Group: "customer-42"}
	rs, err := store.Reserve(ctx, []seqstore.ReserveRequest{{Stream: stream, N: 2, Journal: [][]byte{[]byte("created"), []byte("paid")}}})
	if err != nil {
		log.Fatal(err)
	}
	res := rs[0]
	fmt.Println("first seq:", res.First)

	pending, err := store.Pending(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range pending {
		fmt.Printf("pending %s #%d %s\n", e.Stream, e.Seq, e.Body)
	}
	if err := store.Sent(ctx, []seqstore.SentMark{{Stream: stream, Seqs: []uint64{1, 2}}}); err != nil {
		log.Fatal(err)
	}

	to := seqstore.Cursor{Epoch: res.Epoch, Next: 3}
	if err := store.Advance(ctx, []seqstore.Advance{{Stream: stream, To: to}}); err != nil {
		log.Fatal(err)
	}
	// The same move again starts from a stale cursor: refused.
	err = store.Advance(ctx, []seqstore.Advance{{Stream: stream, To: to}})
	fmt.Println("stale advance conflicts:", errors.Is(err, seqstore.ErrConflict))
	// Output:
	// first seq: 1
	// pending orders/customer-42 #1 created
	// pending orders/customer-42 #2 paid
	// stale advance conflicts: true
}
