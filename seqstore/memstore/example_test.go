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
	rs, _ := st.Reserve(ctx, []seqstore.ReserveRequest{{Stream: orders, N: 2, Journal: [][]byte{[]byte("created"), []byte("paid")}}})
	r := rs[0]
	fmt.Println("first seq:", r.First)
	_ = st.Sent(ctx, []seqstore.SentMark{{Stream: orders, Seqs: []uint64{r.First}}})
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
	cs, _ := st.Cursors(ctx, []seqstore.Stream{orders})
	fmt.Println("next expected:", cs[0].Next)
	// Output:
	// first seq: 1
	// pending: seq 2 "paid"
	// advance: <nil>
	// stale advance conflicts: true
	// next expected: 3
}
