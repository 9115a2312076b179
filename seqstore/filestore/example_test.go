package filestore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
)

func Example() {
	dir, err := os.MkdirTemp("", "filestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := filestore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	orders := seqstore.Stream{Queue: "orders", Group: "customer-42"}
	refunds := seqstore.Stream{Queue: "refunds", Group: "customer-42"}

	// The sender reserves seqs and journals the bodies in one fsync.
	// One call, one fsync, may reserve for many streams.
	res, err := s.Reserve(ctx, []seqstore.ReserveRequest{
		{Stream: orders, N: 2, Journal: [][]byte{[]byte("created"), []byte("paid")}},
		{Stream: refunds, N: 1}, // fast mode: no journal
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first seqs:", res[0].First, res[1].First)
	// Once the queue accepted seq 1, it leaves the journal.
	if err := s.Sent(ctx, []seqstore.SentMark{{Stream: orders, Seqs: []uint64{res[0].First}}}); err != nil {
		log.Fatal(err)
	}
	// The receiver moves its cursor past seq 1 with a compare-and-set.
	err = s.Advance(ctx, []seqstore.Advance{{
		Stream: orders,
		To:     seqstore.Cursor{Epoch: res[0].Epoch, Next: 2},
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	// Everything is there after reopening.
	s, err = filestore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	pending, _ := s.Pending(ctx, "orders")
	for _, e := range pending {
		fmt.Printf("pending: seq %d %q\n", e.Seq, e.Body)
	}
	c, _ := s.Cursors(ctx, []seqstore.Stream{orders})
	fmt.Println("cursor next:", c[0].Next)
	// Output:
	// first seqs: 1 1
	// pending: seq 2 "paid"
	// cursor next: 2
}
