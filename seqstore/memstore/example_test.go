package memstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

func Example() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()

	orders := seqstore.Stream{Queue: "orders", Group: "customer-42"}

	// The sender reserves seqs and journals the bodies until they are sent.
	r, _ := st.Reserve(ctx, orders, 2, [][]byte{[]byte("created"), []byte("paid")})
	fmt.Println("first seq:", r.First)
	_ = st.Sent(ctx, orders, []uint64{r.First})
	pending, _ := st.Pending(ctx, "orders")
	for _, e := range pending {
		fmt.Printf("pending: seq %d %q\n", e.Seq, e.Body)
	}

	// The receiver moves its cursor with compare-and-set.
	from := seqstore.Cursor{}
	to := seqstore.Cursor{Epoch: r.Epoch, Next: 3}
	err := st.Advance(ctx, []seqstore.Advance{{Stream: orders, From: from, To: to}})
	fmt.Println("advance:", err)
	err = st.Advance(ctx, []seqstore.Advance{{Stream: orders, From: from, To: to}})
	fmt.Println("stale advance conflicts:", errors.Is(err, seqstore.ErrConflict))
	c, _ := st.Cursor(ctx, orders)
	fmt.Println("next expected:", c.Next)
	// Output:
	// first seq: 1
	// pending: seq 2 "paid"
	// advance: <nil>
	// stale advance conflicts: true
	// next expected: 3
}
