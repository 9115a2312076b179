package scaleout_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// The plan gives tag i to queue i mod S, and the checks find each way a
// subscription can be missing or mis-set.
func TestTopicSubscriptionsPlanAndChecks(t *testing.T) {
	queues := []string{"billing-0", "billing-1", "billing-2", "billing-3"}
	plan, err := scaleout.TopicSubscriptions("billing", queues, 8)
	require.NoError(t, err)
	require.Len(t, plan, 8)
	for i, s := range plan {
		assert.Equal(t, scaleout.TopicSubscription{Name: fmt.Sprintf("billing-%d", i), Queue: queues[i%4], FilterTag: fmt.Sprintf("shard-%d", i)}, s)
		assert.LessOrEqual(t, len(s.FilterTag), 16, "MNS takes tags of at most 16 characters")
	}
	require.NoError(t, scaleout.CheckTopicSubscriptions(plan, queues, 8))
	require.NoError(t, scaleout.CheckTopicTags(plan, 8))
	assert.Equal(t, "shard-1023", scaleout.TopicTag(seqstore.MaxShards-1))

	for _, bad := range []struct {
		queues []string
		tags   int
	}{{queues[:3], 8}, {nil, 8}, {queues, 0}, {queues, seqstore.MaxShards + 1}, {[]string{"a", "a"}, 8}, {queues, 104}} {
		_, err := scaleout.TopicSubscriptions("billing", bad.queues, bad.tags)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "%d queues over %d tags", len(bad.queues), bad.tags)
	}

	other := scaleout.TopicSubscription{Name: "audit", Queue: "audit", FilterTag: ""} // an unsharded subscriber: not the check's concern
	for _, c := range []struct {
		name string
		edit func([]scaleout.TopicSubscription) []scaleout.TopicSubscription
		want string
	}{
		{"swapped tags", func(s []scaleout.TopicSubscription) []scaleout.TopicSubscription {
			s[1].FilterTag, s[2].FilterTag = s[2].FilterTag, s[1].FilterTag
			return s
		}, "subscription billing-1 pushes the groups tagged shard-2 (shard 2 of 4) into billing-1, the queue of shard 1"},
		{"missing", func(s []scaleout.TopicSubscription) []scaleout.TopicSubscription { return append(s[:5], s[6:]...) },
			"no subscription pushes the groups tagged shard-5 into billing-1 (shard 1): they would never arrive"},
		{"unfiltered", func(s []scaleout.TopicSubscription) []scaleout.TopicSubscription {
			return append(s, scaleout.TopicSubscription{Name: "x", Queue: "billing-3"})
		}, "subscription x has no FilterTag: it pushes every group into billing-3 (shard 3)"},
		{"a user's tag", func(s []scaleout.TopicSubscription) []scaleout.TopicSubscription {
			s[3].FilterTag = "red"
			return s
		}, `subscription billing-3 has FilterTag "red", not a shard tag`},
		{"planned for 16 tags", func([]scaleout.TopicSubscription) []scaleout.TopicSubscription {
			p, err := scaleout.TopicSubscriptions("billing", queues, 16)
			require.NoError(t, err)
			return p
		}, "subscription billing-8 has FilterTag shard-8, beyond the topic's 8 tags"},
	} {
		t.Run(c.name, func(t *testing.T) {
			have := c.edit(append([]scaleout.TopicSubscription{other}, plan...)[1:])
			have = append(have, other)
			err := scaleout.CheckTopicSubscriptions(have, queues, 8)
			require.ErrorIs(t, err, seqstore.ErrTopology)
			assert.Contains(t, err.Error(), c.want)
			err = scaleout.CheckTopicTags(have, 8)
			require.ErrorIs(t, err, seqstore.ErrTopology, "the publisher's check sees the subscriber billing does not fit")
			assert.Contains(t, err.Error(), "subscriber billing (")
		})
	}

	// The publisher's check: a subscriber planned for fewer tags than the
	// publisher tags with misses the groups of the tags it lacks.
	small, err := scaleout.TopicSubscriptions("small", []string{"s-0", "s-1"}, 4)
	require.NoError(t, err)
	require.NoError(t, scaleout.CheckTopicTags(small, 4))
	err = scaleout.CheckTopicTags(append(plan, small...), 8)
	require.ErrorIs(t, err, seqstore.ErrTopology)
	assert.Contains(t, err.Error(), "no subscription pushes the groups tagged shard-4 into s-0")
	assert.NotContains(t, err.Error(), "subscriber billing", "billing fits 8 tags")
}

// A subscriber of S queues with S dividing the topic's T tags gets each
// group in the queue of its own shard: ShardOf(g, T) mod S = ShardOf(g, S),
// whatever the group. (A hash that is not reduced modulo the shard count
// breaks it, and with it every sharded subscriber with S < T.)
func TestTopicTagShardDivides(t *testing.T) {
	for _, tags := range []int{1, 2, 4, 6, 8, 12, 16, 64} {
		for s := 1; s <= tags; s++ {
			if tags%s != 0 {
				continue
			}
			for g := range 2000 {
				group := fmt.Sprintf("acct-%d", g)
				require.Equal(t, scaleout.ShardOf(group, s), scaleout.ShardOf(group, tags)%s, "group %s, %d queues over %d tags", group, s, tags)
			}
		}
	}
}

// topicSubs turns the topic's subscriptions, as the service lists them,
// into what the checks read.
func topicSubs(t *testing.T, ctx context.Context, srv *mnstest.Server, cred mnsqueue.Credentials, topic string) []scaleout.TopicSubscription {
	t.Helper()
	infos, err := mnsqueue.ListSubscriptions(ctx, srv.Endpoint(), cred, topic)
	require.NoError(t, err)
	out := make([]scaleout.TopicSubscription, len(infos))
	for i, s := range infos {
		out[i] = scaleout.TopicSubscription{Name: s.Name, Queue: s.Queue, FilterTag: s.FilterTag}
	}
	return out
}

// topicWorld is a topic on the emulator with a sharded publisher.
type topicWorld struct {
	t     *testing.T
	srv   *mnstest.Server
	cred  mnsqueue.Credentials
	topic string
	tags  int
}

func newTopicWorld(t *testing.T, tags int, faults mnstest.Faults) *topicWorld {
	srv, err := mnstest.NewServer(&mnstest.Options{Seed: 3, Faults: faults})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	w := &topicWorld{t: t, srv: srv, cred: mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}, topic: "orders", tags: tags}
	require.NoError(t, mnsqueue.CreateTopic(t.Context(), srv.Endpoint(), w.cred, w.topic, 0))
	return w
}

// subscribe creates a sharded subscriber's queues and subscriptions,
// then checks them as listed, and returns its queues' names.
func (w *topicWorld) subscribe(ctx context.Context, name string, s int) []string {
	queues := make([]string, s)
	for j := range queues {
		queues[j] = fmt.Sprintf("%s-q%d", name, j)
		require.NoError(w.t, mnsqueue.CreateQueue(ctx, w.srv.Endpoint(), w.cred, queues[j], &mnsqueue.QueueAttributes{Visibility: 5 * time.Second}))
	}
	plan, err := scaleout.TopicSubscriptions(name, queues, w.tags)
	require.NoError(w.t, err)
	for _, p := range plan {
		require.NoError(w.t, mnsqueue.Subscribe(ctx, w.srv.Endpoint(), w.cred, w.topic, p.Name, p.Queue, &mnsqueue.Subscription{FilterTag: p.FilterTag}))
	}
	require.NoError(w.t, scaleout.CheckTopicSubscriptions(topicSubs(w.t, ctx, w.srv, w.cred, w.topic), queues, w.tags))
	return queues
}

// shards opens a driver over each queue, for one receiver.
func (w *topicWorld) shards(ctx context.Context, queues []string) []scaleout.Shard {
	out := make([]scaleout.Shard, len(queues))
	for j, q := range queues {
		drv, err := mnsqueue.New(ctx, w.srv.Endpoint(), q, w.cred, nil)
		require.NoError(w.t, err)
		w.t.Cleanup(func() { _ = drv.Close() })
		out[j] = scaleout.Shard{Name: q, Queue: drv}
	}
	return out
}

// publisher returns a sender over the topic's tags: shard i publishes
// with MessageTag TopicTag(i). It checks the topic's sharded subscribers
// first.
func (w *topicWorld) publisher(ctx context.Context, store seqstore.Store) *ordered.Queue {
	require.NoError(w.t, scaleout.CheckTopicTags(topicSubs(w.t, ctx, w.srv, w.cred, w.topic), w.tags))
	shards := make([]scaleout.Shard, w.tags)
	for i := range shards {
		tp, err := mnsqueue.NewTopic(ctx, w.srv.Endpoint(), w.topic, w.cred, &mnsqueue.Options{MessageTag: scaleout.TopicTag(i)})
		require.NoError(w.t, err)
		w.t.Cleanup(func() { _ = tp.Close() })
		shards[i] = scaleout.Shard{Name: w.topic + "-" + scaleout.TopicTag(i), Queue: tp}
	}
	snd, err := scaleout.NewSender(ctx, shards, store, &ordered.Options{Name: w.topic, Send: ordered.SendOptions{Concurrency: 32}})
	require.NoError(w.t, err)
	return snd
}

// plainRecorder checks an unsharded subscriber: each group 1..n in order.
type plainRecorder struct {
	mu   sync.Mutex
	next map[string]uint64
	n    int
	bad  []string
}

func (p *plainRecorder) handle(_ context.Context, m *ordered.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next[m.Group] == 0 {
		p.next[m.Group] = 1
	}
	if m.Seq != p.next[m.Group] || m.Unordered {
		p.bad = append(p.bad, fmt.Sprintf("%s/%d while waiting for %d", m.Group, m.Seq, p.next[m.Group]))
		return nil
	}
	p.next[m.Group]++
	p.n++
	return nil
}

func (p *plainRecorder) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// One topic, tagged over 8 shards, three subscribers: billing shards 8
// queues over 3 receivers, audit 4 queues (tags 2 per queue) over 2
// receivers, and ledger is one unfiltered queue under a plain
// ordered.Queue. Pushes are late and now and then doubled. Each subscriber
// gets every group in order, nothing lost, nothing twice, no group at two
// receivers at once, and every message in the queue of its group's shard
// (a receiver refuses another shard's group).
func TestShardedTopicSubscribers(t *testing.T) {
	const groups, per = 24, 15
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	w := newTopicWorld(t, 8, mnstest.Faults{PushDelay: 100 * time.Millisecond, PushDuplicate: 0.05})
	billing := w.subscribe(ctx, "billing", 8)
	audit := w.subscribe(ctx, "audit", 4)
	require.NoError(t, mnsqueue.CreateQueue(ctx, w.srv.Endpoint(), w.cred, "ledger", nil))
	require.NoError(t, mnsqueue.Subscribe(ctx, w.srv.Endpoint(), w.cred, w.topic, "ledger", "ledger", nil))

	store := memstore.New() // the subscribers' store: leases and cursors, one namespace each
	defer store.Close()
	type sub struct {
		name    string
		queues  []string
		members []string
		hist    *history
	}
	subs := []*sub{{name: "billing", queues: billing, members: []string{"b1", "b2", "b3"}}, {name: "audit", queues: audit, members: []string{"a1", "a2"}}}
	var runs []chan error
	var stops []context.CancelFunc
	var rs []*scaleout.Receiver
	var stopOnce sync.Once
	stopAll := func() {
		stopOnce.Do(func() {
			for _, stop := range stops {
				stop()
			}
			for _, done := range runs {
				assert.NoError(t, <-done)
			}
		})
	}
	defer stopAll() // before the store closes
	for _, s := range subs {
		s.hist = newHistory(t, time.Millisecond)
		for _, m := range s.members {
			r, err := scaleout.NewReceiver(ctx, w.shards(ctx, s.queues), store, &scaleout.Options{
				Queue:  ordered.Options{Name: s.name, Receive: ordered.ReceiveOptions{Wait: time.Second}},
				Member: m, Lease: timings, DrainTimeout: 2 * time.Second,
				OnChange: func(c scaleout.Change) {
					if c.Kind == "fence" || c.Kind == "error" {
						t.Errorf("%s/%s: shard %d %s: %v", s.name, m, c.Shard, c.Kind, c.Err)
					}
				},
			})
			require.NoError(t, err)
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- r.Run(rctx, s.hist.handler(m)) }()
			runs, stops, rs = append(runs, done), append(stops, stop), append(rs, r)
		}
	}
	ledgerDrv, err := mnsqueue.New(ctx, w.srv.Endpoint(), "ledger", w.cred, nil)
	require.NoError(t, err)
	defer ledgerDrv.Close()
	ledger, err := ordered.New(ctx, ledgerDrv, memstore.New(), &ordered.Options{Name: "ledger", Receive: ordered.ReceiveOptions{Wait: time.Second}})
	require.NoError(t, err)
	plain := &plainRecorder{next: map[string]uint64{}}
	lctx, lstop := context.WithCancel(ctx)
	ldone := make(chan error, 1)
	go func() { ldone <- ledger.Run(lctx, plain.handle) }()

	pubStore := memstore.New()
	defer pubStore.Close()
	snd := w.publisher(ctx, pubStore)
	names := make([]string, groups)
	for g := range names {
		names[g] = fmt.Sprintf("acct-%d", g)
	}
	for k := 1; k <= per; k++ {
		for _, g := range names {
			_, err := snd.SendAsync(ctx, g, fmt.Appendf(nil, "%s/%d", g, k))
			require.NoError(t, err)
		}
	}
	require.NoError(t, snd.Close(ctx))

	total := groups * per
	for {
		if subs[0].hist.delivered() == total && subs[1].hist.delivered() == total && plain.count() == total {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("delivered billing %d, audit %d, ledger %d of %d", subs[0].hist.delivered(), subs[1].hist.delivered(), plain.count(), total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Each publish made one push per subscriber (two copies when doubled),
	// and the receivers leave nothing behind in their queues: a message of
	// another shard's group, which the queue's receiver refuses, would stay.
	st := w.srv.Stats()
	assert.Equal(t, int64(3*total), st.Pushed-st.PushDuplicated, "one push per publish and subscriber (published %d)", st.Published)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var left []string
		for _, q := range append(append([]string{"ledger"}, billing...), audit...) {
			info, err := w.srv.Queue(q)
			require.NoError(t, err)
			if n := info.Active + info.Inactive + info.Delayed; n > 0 {
				left = append(left, fmt.Sprintf("%s: %d", q, n))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("messages left in the subscribers' queues, which no receiver takes: %v", left)
			break
		}
	}
	owned := map[string]int{}
	for i, r := range rs {
		owned[fmt.Sprint(i)] = len(r.Owned())
	}
	stopAll()
	lstop()
	require.NoError(t, <-ldone)
	require.NoError(t, ledger.Close(ctx))
	for _, s := range subs {
		s.hist.checkOrder(names, per)
		assert.Zero(t, s.hist.dups, "%s: nothing delivered twice", s.name)
		byMember := map[string]int{}
		for _, ms := range s.hist.by {
			for _, m := range ms {
				byMember[m]++
			}
		}
		t.Logf("%s: %d shards, deliveries by member %v", s.name, len(s.queues), byMember)
	}
	plain.mu.Lock()
	assert.Empty(t, plain.bad, "ledger: out of order or repeated")
	plain.mu.Unlock()
	st = w.srv.Stats()
	t.Logf("emulator: %d sent (pushes), %d received, %d deleted; shards owned at the end %v", st.Sent, st.Received, st.Deleted, owned)
}

// A sharded subscriber whose subscriptions were set up wrong (one filter
// tag swapped into another shard's queue, one queue subscribed without a
// filter) is refused by the topology check, which names both; the
// publisher's check refuses to publish to a topic with that subscriber.
func TestShardedTopicMisSetFilterTag(t *testing.T) {
	ctx := t.Context()
	w := newTopicWorld(t, 4, mnstest.Faults{})
	queues := []string{"billing-q0", "billing-q1", "billing-q2", "billing-q3"}
	for _, q := range queues {
		require.NoError(t, mnsqueue.CreateQueue(ctx, w.srv.Endpoint(), w.cred, q, nil))
	}
	plan, err := scaleout.TopicSubscriptions("billing", queues, 4)
	require.NoError(t, err)
	plan[1].FilterTag, plan[2].FilterTag = plan[2].FilterTag, plan[1].FilterTag
	for _, p := range plan {
		require.NoError(t, mnsqueue.Subscribe(ctx, w.srv.Endpoint(), w.cred, w.topic, p.Name, p.Queue, &mnsqueue.Subscription{FilterTag: p.FilterTag}))
	}
	require.NoError(t, mnsqueue.Subscribe(ctx, w.srv.Endpoint(), w.cred, w.topic, "billing-all", "billing-q3", nil))

	have := topicSubs(t, ctx, w.srv, w.cred, w.topic)
	err = scaleout.CheckTopicSubscriptions(have, queues, 4)
	require.ErrorIs(t, err, seqstore.ErrTopology)
	for _, want := range []string{
		"subscription billing-1 pushes the groups tagged shard-2 (shard 2 of 4) into billing-q1, the queue of shard 1",
		"subscription billing-2 pushes the groups tagged shard-1 (shard 1 of 4) into billing-q2, the queue of shard 2",
		"subscription billing-all has no FilterTag: it pushes every group into billing-q3 (shard 3)",
		"no subscription pushes the groups tagged shard-1 into billing-q1",
	} {
		assert.Contains(t, err.Error(), want)
	}
	t.Logf("the subscriber's check: %v", err)
	err = scaleout.CheckTopicTags(have, 4)
	require.ErrorIs(t, err, seqstore.ErrTopology)
	assert.Contains(t, err.Error(), "subscriber billing (")

	// With the subscriptions put right, both checks pass.
	require.NoError(t, mnsqueue.Unsubscribe(ctx, w.srv.Endpoint(), w.cred, w.topic, "billing-all"))
	for _, i := range []int{1, 2} {
		require.NoError(t, mnsqueue.Unsubscribe(ctx, w.srv.Endpoint(), w.cred, w.topic, plan[i].Name))
		require.NoError(t, mnsqueue.Subscribe(ctx, w.srv.Endpoint(), w.cred, w.topic, plan[i].Name, queues[i], &mnsqueue.Subscription{FilterTag: scaleout.TopicTag(i)}))
	}
	have = topicSubs(t, ctx, w.srv, w.cred, w.topic)
	require.NoError(t, scaleout.CheckTopicSubscriptions(have, queues, 4))
	require.NoError(t, scaleout.CheckTopicTags(have, 4))
	require.False(t, strings.Contains(fmt.Sprint(have), "billing-all"))
}
