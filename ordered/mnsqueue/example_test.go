package mnsqueue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// A driver over the MNS emulator: the same calls work against real MNS with
// its endpoint and an access key.
func Example() {
	ctx := context.Background()
	srv, err := mnstest.NewServer(&mnstest.Options{Shards: 1})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	cred := mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}

	if err := mnsqueue.CreateQueue(ctx, srv.Endpoint(), cred, "orders", &mnsqueue.QueueAttributes{Visibility: 30 * time.Second}); err != nil {
		panic(err)
	}
	q, err := mnsqueue.New(ctx, srv.Endpoint(), "orders", cred, nil)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	l := q.Limits()
	fmt.Printf("batch %d, body %d bytes, visibility %v\n", l.MaxBatch, l.MaxBody, l.Visibility)

	if err := q.SendBatch(ctx, [][]byte{[]byte("binary \x00 is fine"), []byte("second")}); err != nil {
		panic(err)
	}
	msgs, err := q.ReceiveBatch(ctx, l.MaxBatch, time.Second)
	if err != nil {
		panic(err)
	}
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		fmt.Printf("%q (delivery %d)\n", m.Body, m.DequeueCount)
		receipts[i] = m.Receipt
	}
	if err := q.DeleteBatch(ctx, receipts); err != nil {
		panic(err)
	}
	// Output:
	// batch 16, body 49120 bytes, visibility 30s
	// "binary \x00 is fine" (delivery 1)
	// "second" (delivery 1)
}
