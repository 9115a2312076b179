package ordered_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// A group stuck on a hole under GapWait (the default gap policy) waits
// until its missing seq comes; when it never will, SkipHole moves the group
// on now. The skipped seq is recorded in the group's cursor: should it turn
// up after all, it is a late arrival, reported and handed out flagged
// Unordered (or dead-lettered), never dropped.
func ExampleQueue_SkipHole() {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	gaps := make(chan ordered.Event, 1)
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{GapTimeout: 100 * time.Millisecond, Wait: 10 * time.Millisecond},
		Hooks: ordered.Hooks{OnGap: func(e ordered.Event) {
			select { // hooks must not block
			case gaps <- e:
			default:
			}
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	// A sender wrote seqs 1, 3 and 4 of group acct-7 (epoch 7); seq 2 was
	// lost (say, its send failed in fast mode and the sender's host died).
	send := func(bodies ...string) {
		var bs [][]byte
		for _, b := range bodies {
			bs = append(bs, []byte(b))
		}
		if err := drv.SendBatch(ctx, bs); err != nil {
			log.Fatal(err)
		}
	}
	send("#v1;7;1;acct-7#debit 10", "#v1;7;3;acct-7#debit 30", "#v1;7;4;acct-7#debit 40")
	receive := func() {
		m, err := q.Receive(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (seq %d, unordered %v)\n", m.Body, m.Seq, m.Unordered)
		if err := m.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	receive()
	gap := <-gaps
	fmt.Printf("group %s waits for seq %d\n", gap.Group, gap.Seq)
	for _, g := range q.Stats().Receive.Stuck {
		fmt.Printf("stuck: %s, on a %s\n", g.Group, g.Reason)
	}

	if err := q.SkipHole(ctx, "acct-7"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("skipped; stuck groups:", len(q.Stats().Receive.Stuck))
	receive()
	receive()

	send("#v1;7;2;acct-7#debit 20") // seq 2 turns up after all
	receive()
	if err := q.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// debit 10 (seq 1, unordered false)
	// group acct-7 waits for seq 2
	// stuck: acct-7, on a gap
	// skipped; stuck groups: 0
	// debit 30 (seq 3, unordered false)
	// debit 40 (seq 4, unordered false)
	// debit 20 (seq 2, unordered true)
}

// Hooks report what the receiver does on its own, here a copy of a message
// already handled: the queue delivered seq 1 again, and the receiver drops
// it (deleted once the cursor past it is durable, never handed out again).
// Hooks run one at a time on a goroutine of their own: they may log, count
// or call Stats, and should not block for long.
func ExampleHooks() {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	events := make(chan string, 16)
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Wait: 10 * time.Millisecond},
		Hooks: ordered.Hooks{OnDuplicate: func(e ordered.Event) {
			events <- fmt.Sprintf("duplicate: group %s seq %d", e.Group, e.Seq)
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	send := func(body string) {
		if err := drv.SendBatch(ctx, [][]byte{[]byte(body)}); err != nil {
			log.Fatal(err)
		}
	}
	receive := func() {
		m, err := q.Receive(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (seq %d)\n", m.Body, m.Seq)
		if err := m.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	send("#v1;7;1;acct-7#debit 10")
	send("#v1;7;2;acct-7#debit 20")
	receive()
	receive()
	send("#v1;7;1;acct-7#debit 10") // the queue hands seq 1 out again
	fmt.Println(<-events)
	fmt.Println("duplicates:", q.Stats().Receive.Duplicates)
	if err := q.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// debit 10 (seq 1)
	// debit 20 (seq 2)
	// duplicate: group acct-7 seq 1
	// duplicates: 1
}
