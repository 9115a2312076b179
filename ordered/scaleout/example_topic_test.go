package scaleout_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore/memstore"
)

// A topic's subscriber scaled out: the publisher tags each message with its
// shard among the topic's 4 tags; the subscriber "billing" is 2 queues, each
// subscribed to the tags of its shards (tag i into queue i mod 2), and its 2
// receivers share the queues through leases, as over any sharded queue.
// Each group's messages reach exactly one of billing's queues, in order.
// Here on the emulator; on real MNS only the endpoint and keys change.
func Example_topicSubscriber() {
	ctx := context.Background()
	srv, err := mnstest.NewServer(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ep, cred := srv.Endpoint(), mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}
	const tags = 4 // the topic's tag count: fixed for its life, as S is for a queue

	// Setup: the topic, billing's queues and its subscriptions, checked.
	must(mnsqueue.CreateTopic(ctx, ep, cred, "orders", 0))
	queues := []string{"billing-0", "billing-1"}
	for _, q := range queues {
		must(mnsqueue.CreateQueue(ctx, ep, cred, q, nil))
	}
	plan, err := scaleout.TopicSubscriptions("billing", queues, tags)
	must(err)
	for _, s := range plan {
		fmt.Printf("subscription %s: FilterTag %s into %s\n", s.Name, s.FilterTag, s.Queue)
		must(mnsqueue.Subscribe(ctx, ep, cred, "orders", s.Name, s.Queue, &mnsqueue.Subscription{FilterTag: s.FilterTag}))
	}
	must(scaleout.CheckTopicSubscriptions(listed(ctx, ep, cred), queues, tags))

	// The receivers: ordinary scale-out receivers over billing's queues.
	store := memstore.New() // shared by the receivers: Redis or SQL across machines
	defer store.Close()
	var mu sync.Mutex
	got := map[string][]string{}
	handle := func(_ context.Context, m *ordered.Message) error {
		mu.Lock()
		defer mu.Unlock()
		got[m.Group] = append(got[m.Group], string(m.Body))
		return nil
	}
	var wg sync.WaitGroup
	rctx, stop := context.WithCancel(ctx)
	for _, member := range []string{"r1", "r2"} {
		shards := open(ctx, ep, cred, queues)
		defer closeAll(shards)
		r, err := scaleout.NewReceiver(ctx, shards, store, &scaleout.Options{
			Queue: ordered.Options{Name: "billing"}, Member: member})
		must(err)
		wg.Go(func() { must(r.Run(rctx, handle)) })
	}

	// The publisher: a sender over the topic's tags, after its own check.
	must(scaleout.CheckTopicTags(listed(ctx, ep, cred), tags))
	shards := make([]scaleout.Shard, tags)
	for i := range shards {
		tp, err := mnsqueue.NewTopic(ctx, ep, "orders", cred, &mnsqueue.Options{MessageTag: scaleout.TopicTag(i)})
		must(err)
		defer tp.Close()
		shards[i] = scaleout.Shard{Name: "orders-" + scaleout.TopicTag(i), Queue: tp}
	}
	pub, err := scaleout.NewSender(ctx, shards, memstore.New(), &ordered.Options{Name: "orders"})
	must(err)
	for _, g := range []string{"acct-1", "acct-2", "acct-3"} {
		for k := 1; k <= 3; k++ {
			must(pub.Send(ctx, g, fmt.Appendf(nil, "%s #%d", g, k)))
		}
	}
	must(pub.Close(ctx))

	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got["acct-1"]) + len(got["acct-2"]) + len(got["acct-3"])
		mu.Unlock()
		if n == 9 {
			break
		}
	}
	stop()
	wg.Wait()
	for _, g := range slices.Sorted(maps.Keys(got)) {
		fmt.Printf("%s (billing queue %d): %s\n", g, scaleout.ShardOf(g, len(queues)), strings.Join(got[g], ", "))
	}
	// Output:
	// subscription billing-0: FilterTag shard-0 into billing-0
	// subscription billing-1: FilterTag shard-1 into billing-1
	// subscription billing-2: FilterTag shard-2 into billing-0
	// subscription billing-3: FilterTag shard-3 into billing-1
	// acct-1 (billing queue 0): acct-1 #1, acct-1 #2, acct-1 #3
	// acct-2 (billing queue 1): acct-2 #1, acct-2 #2, acct-2 #3
	// acct-3 (billing queue 0): acct-3 #1, acct-3 #2, acct-3 #3
}

// listed returns the topic's subscriptions as the checks read them.
func listed(ctx context.Context, ep string, cred mnsqueue.Credentials) []scaleout.TopicSubscription {
	infos, err := mnsqueue.ListSubscriptions(ctx, ep, cred, "orders")
	must(err)
	out := make([]scaleout.TopicSubscription, len(infos))
	for i, s := range infos {
		out[i] = scaleout.TopicSubscription{Name: s.Name, Queue: s.Queue, FilterTag: s.FilterTag}
	}
	return out
}

// open returns a receiver's drivers over the queues (each receiver its own,
// as separate processes have).
func open(ctx context.Context, ep string, cred mnsqueue.Credentials, queues []string) []scaleout.Shard {
	out := make([]scaleout.Shard, len(queues))
	for j, q := range queues {
		drv, err := mnsqueue.New(ctx, ep, q, cred, nil)
		must(err)
		out[j] = scaleout.Shard{Name: q, Queue: drv}
	}
	return out
}

func closeAll(shards []scaleout.Shard) {
	for _, s := range shards {
		must(s.Queue.Close())
	}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
