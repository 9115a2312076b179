package scaleout_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// timings scaled down for tests (the defaults' ratios).
var timings = scaleout.LeaseOptions{
	TTL: 1500 * time.Millisecond, RenewEvery: 500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
	RenewDeadline: time.Second, RebalanceDelay: 300 * time.Millisecond, CloseDrain: 5 * time.Second,
}

// history records deliveries and checks exclusion as they happen: no
// group has two open deliveries at once.
type history struct {
	t    *testing.T
	mu   sync.Mutex
	open map[string]string   // group -> member handling it
	got  map[string][]uint64 // group -> seqs in delivery order
	by   map[string][]string // group -> member of each delivery
	n    int                 // distinct (group, seq) delivered
	seen map[string]map[uint64]bool
	dups int
	work time.Duration // each handler's time
	// cancelled counts handlers whose ctx ended while they worked.
	cancelled int
}

func newHistory(t *testing.T, work time.Duration) *history {
	return &history{t: t, work: work, open: map[string]string{}, got: map[string][]uint64{}, by: map[string][]string{}, seen: map[string]map[uint64]bool{}}
}

func (h *history) handler(member string) ordered.Handler {
	return func(ctx context.Context, m *ordered.Message) error {
		if _, ok := scaleout.Token(ctx); !ok {
			h.t.Errorf("%s: the handler's ctx has no token", member)
		}
		h.mu.Lock()
		if other, busy := h.open[m.Group]; busy {
			h.t.Errorf("exclusion: %s hands out %s/%d while %s handles the group", member, m.Group, m.Seq, other)
		}
		h.open[m.Group] = member
		h.got[m.Group] = append(h.got[m.Group], m.Seq)
		h.by[m.Group] = append(h.by[m.Group], member)
		if h.seen[m.Group] == nil {
			h.seen[m.Group] = map[uint64]bool{}
		}
		if h.seen[m.Group][m.Seq] {
			h.dups++
		} else {
			h.seen[m.Group][m.Seq] = true
			h.n++
		}
		h.mu.Unlock()
		work := h.work
		if m.Seq%10 == 0 {
			work = 30 * h.work // now and then a slow one, so that handovers find handlers busy
		}
		// A handler that honours its ctx: a shard lost while it works
		// cancels it, within the lease's margin (TTL - RenewDeadline).
		var err error
		select {
		case <-time.After(work):
		case <-ctx.Done():
			err = ctx.Err()
		}
		h.mu.Lock()
		if err != nil {
			h.cancelled++
		}
		delete(h.open, m.Group)
		h.mu.Unlock()
		return err
	}
}

func (h *history) delivered() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// checkOrder: each group's first deliveries are 1..n in order, and a seq
// comes again only as a repeat of the ones before it (at-least-once after a
// lost lease), never ahead of its turn.
func (h *history) checkOrder(groups []string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range groups {
		next := uint64(1)
		for i, s := range h.got[g] {
			switch {
			case s == next:
				next++
			case s < next:
			default:
				h.t.Errorf("order: group %s got seq %d (by %s) while waiting for %d: %v", g, s, h.by[g][i], next, h.got[g])
			}
		}
		if next != uint64(n)+1 {
			h.t.Errorf("loss: group %s got up to %d of %d", g, next-1, n)
		}
	}
}

type world struct {
	t      *testing.T
	store  *memstore.Store
	shards []scaleout.Shard
	hist   *history
	groups []string
	per    int
}

func newWorld(t *testing.T, nShards, nGroups, per int, work time.Duration) *world {
	w := &world{t: t, store: memstore.New(), hist: newHistory(t, work), per: per}
	for i := range nShards {
		w.shards = append(w.shards, scaleout.Shard{Name: fmt.Sprintf("orders-%d", i), Queue: memqueue.New(&memqueue.Options{Shards: 2, Seed: int64(i + 1)})})
	}
	for i := range nGroups {
		w.groups = append(w.groups, fmt.Sprintf("acct-%d", i))
	}
	return w
}

func (w *world) send(ctx context.Context) {
	snd, err := scaleout.NewSender(ctx, w.shards, w.store, &ordered.Options{Name: "orders"})
	require.NoError(w.t, err)
	for s := range w.per {
		for _, g := range w.groups {
			_, err := snd.SendAsync(ctx, g, fmt.Appendf(nil, "%s/%d", g, s+1))
			require.NoError(w.t, err)
		}
	}
	require.NoError(w.t, snd.Close(ctx))
}

type member struct {
	r       *scaleout.Receiver
	stop    context.CancelFunc
	done    chan error
	changes []scaleout.Change
	mu      sync.Mutex
}

func (w *world) start(ctx context.Context, name string) *member {
	m := &member{done: make(chan error, 1)}
	r, err := scaleout.NewReceiver(ctx, w.shards, w.store, &scaleout.Options{
		Queue:  ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{Wait: 100 * time.Millisecond, GapTimeout: 2 * time.Second, MaxUndeleted: 40}},
		Member: name, Lease: timings, DrainTimeout: 2 * time.Second,
		OnChange: func(c scaleout.Change) {
			m.r.Owned() // OnChange may look at the Receiver (it is not called under its lock)
			m.mu.Lock()
			m.changes = append(m.changes, c)
			m.mu.Unlock()
		},
	})
	require.NoError(w.t, err)
	m.r = r
	runCtx, stop := context.WithCancel(ctx)
	m.stop = stop
	go func() { m.done <- r.Run(runCtx, w.hist.handler(name)) }()
	return m
}

// owners returns which member runs each shard, failing on a shard run by
// two members at once.
func owners(t *testing.T, ms map[string]*member) map[int]string {
	out := map[int]string{}
	for name, m := range ms {
		for s := range m.r.Owned() {
			if other, dup := out[s]; dup {
				t.Errorf("shard %d run by %s and %s at once", s, other, name)
			}
			out[s] = name
		}
	}
	return out
}

func (w *world) waitAll(ms map[string]*member, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for w.hist.delivered() < len(w.groups)*w.per {
		if time.Now().After(deadline) {
			w.t.Fatalf("delivered %d of %d within %v; owners %v", w.hist.delivered(), len(w.groups)*w.per, limit, owners(w.t, ms))
		}
		owners(w.t, ms)
		time.Sleep(50 * time.Millisecond)
	}
}

// Three receivers share eight shards; one leaves on purpose, another
// joins: every group is delivered in order, once, never by two receivers
// at a time, and the shards spread over the members.
func TestReceiversShareShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := newWorld(t, 8, 24, 100, 50*time.Millisecond) // 5 s of work per group
		w.send(ctx)
		ms := map[string]*member{}
		for _, n := range []string{"a", "b", "c"} {
			ms[n] = w.start(ctx, n)
		}
		time.Sleep(3 * time.Second)
		own := owners(t, ms)
		require.Len(t, own, 8, "every shard owned: %v", own)
		busy := map[string]bool{}
		for _, n := range own {
			busy[n] = true
		}
		require.GreaterOrEqual(t, len(busy), 2, "the shards spread over the members: %v", own)

		// a leaves: its shards are drained, released and taken over.
		require.Less(t, w.hist.delivered(), len(w.groups)*w.per*3/4, "the handover happens mid-stream")
		ms["a"].stop()
		require.NoError(t, <-ms["a"].done)
		delete(ms, "a")
		ms["d"] = w.start(ctx, "d")
		w.waitAll(ms, 2*time.Minute)
		for _, m := range ms {
			m.stop()
			require.NoError(t, <-m.done)
		}
		w.hist.checkOrder(w.groups, w.per)
		t.Logf("owners after the start: %v; %d deliveries, %d repeats", own, w.hist.n+w.hist.dups, w.hist.dups)
		require.Zero(t, w.hist.dups, "a handover on purpose drains: nothing is delivered twice")
		require.Zero(t, w.hist.cancelled, "a handover on purpose lets the handlers finish: no handler's ctx ends")
	})
}

// A receiver cut from the lease store (its renewals hang) fences its
// shards before the store lets another receiver take them, hands nothing of
// them out afterwards, and the others finish every group in order.
func TestCutReceiverFencesItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := newWorld(t, 4, 12, 100, 50*time.Millisecond)
		w.send(ctx)
		cut := &cutLeaser{Store: w.store}
		ms := map[string]*member{}
		ms["b"] = w.start(ctx, "b")
		// a's view of the store: cursors and parks work, lease calls hang
		// once cut.
		ma := &member{done: make(chan error, 1)}
		r, err := scaleout.NewReceiver(ctx, w.shards, cut, &scaleout.Options{
			Queue:  ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{Wait: 100 * time.Millisecond, GapTimeout: 2 * time.Second, MaxUndeleted: 40}},
			Member: "a", Lease: timings, DrainTimeout: 2 * time.Second,
			OnChange: func(c scaleout.Change) {
				ma.mu.Lock()
				ma.changes = append(ma.changes, c)
				ma.mu.Unlock()
			},
		})
		require.NoError(t, err)
		ma.r = r
		runCtx, stop := context.WithCancel(ctx)
		ma.stop = stop
		go func() { ma.done <- r.Run(runCtx, w.hist.handler("a")) }()
		ms["a"] = ma
		time.Sleep(3 * time.Second)
		require.NotEmpty(t, ma.r.Owned(), "a owns shards before the cut")

		cut.cut()
		cutAt := time.Now()
		time.Sleep(timings.RenewDeadline + 100*time.Millisecond)
		require.Empty(t, ma.r.Owned(), "a fenced every shard within RenewDeadline of its last renewal")
		w.hist.mu.Lock()
		before := countBy(w.hist.by, "a")
		w.hist.mu.Unlock()
		require.NotZero(t, before, "a delivered before the cut")
		require.Less(t, w.hist.delivered(), len(w.groups)*w.per, "the cut happens mid-stream")
		delete(ms, "a")
		w.waitAll(ms, 2*time.Minute)
		w.hist.mu.Lock()
		after := countBy(w.hist.by, "a")
		w.hist.mu.Unlock()
		require.Equal(t, before, after, "a handed out %d messages after it fenced", after-before)
		ma.mu.Lock()
		fences := 0
		for _, c := range ma.changes {
			if c.Kind == "fence" {
				fences++
			}
		}
		ma.mu.Unlock()
		require.NotZero(t, fences)
		t.Logf("cut at %v; a delivered %d, then fenced %d shards; b finished the rest (%d deliveries, %d repeats)",
			cutAt.Format(time.TimeOnly), before, fences, w.hist.n+w.hist.dups, w.hist.dups)
		ms["b"].stop()
		require.NoError(t, <-ms["b"].done)
		cut.heal()
		ma.stop()
		<-ma.done
		w.hist.checkOrder(w.groups, w.per)
	})
}

func countBy(by map[string][]string, name string) int {
	n := 0
	for _, ms := range by {
		for _, m := range ms {
			if m == name {
				n++
			}
		}
	}
	return n
}

// cutLeaser is a store whose lease calls hang while cut (a partition
// between one receiver and the lease store, cursors still reachable).
type cutLeaser struct {
	*memstore.Store
	mu     sync.Mutex
	isCut  bool
	healed chan struct{}
}

func (c *cutLeaser) cut() {
	c.mu.Lock()
	c.isCut, c.healed = true, make(chan struct{})
	c.mu.Unlock()
}

func (c *cutLeaser) heal() {
	c.mu.Lock()
	if c.isCut {
		c.isCut = false
		close(c.healed)
	}
	c.mu.Unlock()
}

func (c *cutLeaser) wait(ctx context.Context) error {
	c.mu.Lock()
	cut, healed := c.isCut, c.healed
	c.mu.Unlock()
	if !cut {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-healed:
		return nil
	}
}

func (c *cutLeaser) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	if err := c.wait(ctx); err != nil {
		return seqstore.View{}, err
	}
	return c.Store.Heartbeat(ctx, ns, m, ttl)
}

func (c *cutLeaser) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Store.Renew(ctx, ns, held, ttl)
}

func (c *cutLeaser) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Store.Acquire(ctx, ns, shards, owner, ttl)
}

// A receiver whose keeper stalls (here its OnChange blocks the keeper's
// goroutine, as a long pause of it would) renews nothing and is never told
// to fence: it still hands out nothing past its leases' local deadline,
// and the shards' messages reach the next owner in order.
func TestStalledKeeperHandsOutNothingPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := newWorld(t, 2, 6, 100, 50*time.Millisecond)
		w.send(ctx)
		stall := make(chan struct{})
		var starts int
		var startedAt time.Time
		ma := &member{done: make(chan error, 1)}
		r, err := scaleout.NewReceiver(ctx, w.shards, w.store, &scaleout.Options{
			Queue:  ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{Wait: 100 * time.Millisecond, GapTimeout: 2 * time.Second, MaxUndeleted: 40}},
			Member: "a", Lease: timings, DrainTimeout: 2 * time.Second,
			OnChange: func(c scaleout.Change) {
				if c.Kind != "start" {
					return
				}
				if starts++; starts == 1 {
					startedAt = time.Now()
				} else {
					<-stall // the second start's report: the keeper stops here
				}
			},
		})
		require.NoError(t, err)
		ma.r = r
		var mu sync.Mutex
		var last time.Time // a's last hand-out
		h := w.hist.handler("a")
		runCtx, stop := context.WithCancel(ctx)
		go func() {
			ma.done <- r.Run(runCtx, func(ctx context.Context, m *ordered.Message) error {
				mu.Lock()
				last = time.Now()
				mu.Unlock()
				return h(ctx, m)
			})
		}()
		time.Sleep(timings.TTL + 100*time.Millisecond) // a's leases expired at the store
		mb := w.start(ctx, "b")
		w.waitAll(map[string]*member{"b": mb}, 2*time.Minute)
		mu.Lock()
		require.False(t, startedAt.IsZero())
		deadline := startedAt.Add(timings.RenewDeadline)
		require.False(t, last.IsZero(), "a handed out before its deadline")
		require.True(t, last.Before(deadline), "a handed out at %v, past its leases' local deadline %v", last.Sub(startedAt), timings.RenewDeadline)
		mu.Unlock()
		mb.stop()
		require.NoError(t, <-mb.done)
		close(stall)
		stop()
		<-ma.done
		w.hist.checkOrder(w.groups, w.per)
	})
}

// A receiver whose keeper stalls from its first start on (a slow OnChange)
// renews nothing: at its lease's local deadline, before the store lets
// another member take the shard over, the handler still at work has its
// ctx cancelled and the shard's Queue gives back what it holds, though
// nobody closes the receiver. The next owner then gets every message.
func TestStalledKeeperStopsItsShardAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := newWorld(t, 1, 4, 20, 10*time.Millisecond)
		w.send(ctx)
		stall := make(chan struct{})
		var mu sync.Mutex
		var startedAt, cancelledAt time.Time
		ma := &member{done: make(chan error, 1)}
		r, err := scaleout.NewReceiver(ctx, w.shards, w.store, &scaleout.Options{
			Queue:  ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{Wait: 100 * time.Millisecond, GapTimeout: 2 * time.Second, MaxUndeleted: 40}},
			Member: "a", Lease: timings, DrainTimeout: 2 * time.Second,
			OnChange: func(c scaleout.Change) {
				if c.Kind == "start" {
					mu.Lock()
					startedAt = time.Now()
					mu.Unlock()
					<-stall // the keeper stops here, and renews nothing more
				}
			},
		})
		require.NoError(t, err)
		ma.r = r
		h := w.hist.handler("a")
		var first sync.Once
		runCtx, stop := context.WithCancel(ctx)
		go func() {
			ma.done <- r.Run(runCtx, func(ctx context.Context, m *ordered.Message) error {
				held := false
				first.Do(func() { held = true })
				if !held {
					return h(ctx, m)
				}
				// The first message is kept until its ctx ends: open in
				// the history, so that the next owner's hand-out of its
				// group while it runs is an exclusion failure.
				w.hist.mu.Lock()
				w.hist.open[m.Group] = "a"
				w.hist.mu.Unlock()
				select {
				case <-ctx.Done():
					mu.Lock()
					cancelledAt = time.Now()
					mu.Unlock()
				case <-time.After(20 * time.Second):
				}
				w.hist.mu.Lock()
				delete(w.hist.open, m.Group)
				w.hist.mu.Unlock()
				return errors.New("not handled")
			})
		}()
		time.Sleep(timings.TTL + 100*time.Millisecond) // a's lease expired at the store
		mu.Lock()
		started, cancelled := startedAt, cancelledAt
		mu.Unlock()
		require.False(t, started.IsZero())
		require.False(t, cancelled.IsZero(), "the held handler's ctx is not cancelled %v after the start (deadline %v)", time.Since(started), timings.RenewDeadline)
		require.LessOrEqual(t, cancelled.Sub(started), timings.RenewDeadline+50*time.Millisecond, "cancelled past the lease's local deadline")
		mb := w.start(ctx, "b")
		w.waitAll(map[string]*member{"b": mb}, 10*time.Second) // not a visibility timeout (30 s): what a had out is given back
		mb.stop()
		require.NoError(t, <-mb.done)
		close(stall)
		stop()
		<-ma.done
		w.hist.checkOrder(w.groups, w.per)
	})
}
