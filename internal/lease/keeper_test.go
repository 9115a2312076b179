package lease_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/lease"
	"github.com/inorder/inorder/seqstore"
)

// fakeStore is an in-memory seqstore.Leaser on the bubble's clock: the
// store's time is time.Now() when a call arrives.
type fakeStore struct {
	mu      sync.Mutex
	token   uint64
	leases  map[int]fakeLease
	members map[string]fakeMember // by incarnation
	version uint64
	calls   map[string]int
	// watchers get a wake-up after each Release that ended a lease, Leave
	// that removed a member and Heartbeat that changed the view, as
	// seqstore.LeaseWatcher says; only watchGate subscribes.
	watchers map[chan struct{}]struct{}
}

type fakeLease struct {
	seqstore.Lease
	expiry time.Time
}

type fakeMember struct {
	seqstore.Member
	expiry time.Time
}

func newFakeStore() *fakeStore {
	return &fakeStore{leases: map[int]fakeLease{}, members: map[string]fakeMember{}, calls: map[string]int{}, watchers: map[chan struct{}]struct{}{}}
}

// wakeAll wakes every watcher. The mutex is held.
func (f *fakeStore) wakeAll() {
	for ch := range f.watchers {
		seqstore.Wake(ch)
	}
}

// watchLeases implements seqstore.LeaseWatcher for watchGate.
func (f *fakeStore) watchLeases(ctx context.Context) (<-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["watch"]++
	ch := make(chan struct{}, 1)
	f.watchers[ch] = struct{}{}
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.watchers[ch]; ok { // else ended by the test
			delete(f.watchers, ch)
			close(ch)
		}
	})
	return ch, nil
}

func (f *fakeStore) live(s int, now time.Time) (fakeLease, bool) {
	l, ok := f.leases[s]
	return l, ok && now.Before(l.expiry)
}

func (f *fakeStore) Topology(context.Context, string, seqstore.Topology) error { return nil }

func (f *fakeStore) Heartbeat(_ context.Context, _ string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["heartbeat"]++
	now := time.Now()
	version := f.version
	for inc, x := range f.members {
		if !now.Before(x.expiry) {
			delete(f.members, inc)
			f.version++
		}
	}
	if old, ok := f.members[m.Incarnation]; !ok || old.Member != m {
		f.version++
	}
	if f.version != version {
		f.wakeAll()
	}
	f.members[m.Incarnation] = fakeMember{m, now.Add(ttl)}
	v := seqstore.View{Version: f.version}
	for _, x := range f.members {
		v.Members = append(v.Members, x.Member)
	}
	sort.Slice(v.Members, func(i, j int) bool {
		a, b := v.Members[i], v.Members[j]
		return a.Name < b.Name || a.Name == b.Name && a.Incarnation < b.Incarnation
	})
	return v, nil
}

func (f *fakeStore) Acquire(_ context.Context, _ string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["acquire"]++
	now := time.Now()
	var got []seqstore.Lease
	for _, s := range shards {
		if _, ok := f.live(s, now); ok {
			continue
		}
		f.token++
		l := seqstore.Lease{Shard: s, Token: f.token, Owner: owner}
		f.leases[s] = fakeLease{l, now.Add(ttl)}
		got = append(got, l)
	}
	return got, nil
}

func (f *fakeStore) Renew(_ context.Context, _ string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["renew"]++
	now := time.Now()
	var lost []seqstore.Lease
	for _, h := range held {
		if l, ok := f.live(h.Shard, now); ok && l.Lease == h {
			l.expiry = now.Add(ttl)
			f.leases[h.Shard] = l
			continue
		}
		lost = append(lost, h)
	}
	return lost, nil
}

func (f *fakeStore) Release(_ context.Context, _ string, held []seqstore.Lease) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["release"]++
	now := time.Now()
	for _, h := range held {
		if l, ok := f.live(h.Shard, now); ok && l.Lease == h {
			delete(f.leases, h.Shard)
			f.wakeAll()
		}
	}
	return nil
}

func (f *fakeStore) Leave(_ context.Context, _ string, incarnation string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["leave"]++
	if _, ok := f.members[incarnation]; ok {
		delete(f.members, incarnation)
		f.version++
		f.wakeAll()
	}
	return nil
}

func (f *fakeStore) Leases(context.Context, string) ([]seqstore.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	var out []seqstore.Lease
	for s := range seqstore.MaxShards {
		if l, ok := f.live(s, now); ok {
			out = append(out, l.Lease)
		}
	}
	return out, nil
}

func (f *fakeStore) count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[call]
}

func (f *fakeStore) memberCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.members)
}

// gate is one keeper's line to the store, which a test can make fail or
// hang.
type gate struct {
	*fakeStore
	mu         sync.Mutex
	fail, hang bool
}

func (g *gate) set(fail, hang bool) {
	g.mu.Lock()
	g.fail, g.hang = fail, hang
	g.mu.Unlock()
}

func (g *gate) pass(ctx context.Context) error {
	g.mu.Lock()
	fail, hang := g.fail, g.hang
	g.mu.Unlock()
	switch {
	case fail:
		return errDown
	case hang:
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (g *gate) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	if err := g.pass(ctx); err != nil {
		return seqstore.View{}, err
	}
	return g.fakeStore.Heartbeat(ctx, ns, m, ttl)
}

func (g *gate) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := g.pass(ctx); err != nil {
		return nil, err
	}
	return g.fakeStore.Acquire(ctx, ns, shards, owner, ttl)
}

func (g *gate) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := g.pass(ctx); err != nil {
		return nil, err
	}
	return g.fakeStore.Renew(ctx, ns, held, ttl)
}

func (g *gate) Release(ctx context.Context, ns string, held []seqstore.Lease) error {
	if err := g.pass(ctx); err != nil {
		return err
	}
	return g.fakeStore.Release(ctx, ns, held)
}

func (g *gate) Leave(ctx context.Context, ns string, incarnation string) error {
	if err := g.pass(ctx); err != nil {
		return err
	}
	return g.fakeStore.Leave(ctx, ns, incarnation)
}

func (g *gate) Leases(ctx context.Context, ns string) ([]seqstore.Lease, error) {
	if err := g.pass(ctx); err != nil {
		return nil, err
	}
	return g.fakeStore.Leases(ctx, ns)
}

// watchGate is a gate whose keeper subscribes to the store's wake-ups.
type watchGate struct{ *gate }

func (g watchGate) WatchLeases(ctx context.Context, _ string) (<-chan struct{}, error) {
	if err := g.pass(ctx); err != nil {
		return nil, err
	}
	return g.watchLeases(ctx)
}

// world checks exclusion: a shard is worked on by at most one receiver,
// from its Start to its Fence or Drained, at every step.
type world struct {
	t     *testing.T
	start time.Time
	mu    sync.Mutex
	owner map[int]string
}

func newWorld(t *testing.T) *world {
	return &world{t: t, start: time.Now(), owner: map[int]string{}}
}

func (w *world) claim(name string, s int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if o, ok := w.owner[s]; ok {
		w.t.Errorf("at %v: %s starts shard %d, which %s still works on", time.Since(w.start), name, s, o)
	}
	w.owner[s] = name
}

func (w *world) free(name string, s int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owner[s] == name {
		delete(w.owner, s)
	}
}

func (w *world) of(name string) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int
	for s, o := range w.owner {
		if o == name {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// recv is a test Receiver. drain is how long a revoke takes: 0 reports
// Drained from within Revoke, a negative value never.
type recv struct {
	name  string
	w     *world
	drain time.Duration

	mu      sync.Mutex
	k       *lease.Keeper
	log     []string // "start 3#7 at 0s", "revoke 3 at 8s", "fence 3 at 30s"
	drains  sync.WaitGroup
	started int
}

func newRecv(name string, w *world, drain time.Duration) *recv {
	return &recv{name: name, w: w, drain: drain}
}

func (r *recv) note(format string, args ...any) {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf(format, args...)+fmt.Sprintf(" at %v", time.Since(r.w.start)))
	r.mu.Unlock()
}

func (r *recv) Start(l seqstore.Lease) {
	r.w.claim(r.name, l.Shard)
	r.note("start %d#%d", l.Shard, l.Token)
	r.mu.Lock()
	r.started++
	r.mu.Unlock()
}

func (r *recv) Revoke(s int) {
	r.note("revoke %d", s)
	r.mu.Lock()
	k := r.k
	r.mu.Unlock()
	switch {
	case r.drain == 0:
		r.w.free(r.name, s)
		k.Drained(s)
	case r.drain > 0:
		r.drains.Add(1)
		go func() {
			defer r.drains.Done()
			time.Sleep(r.drain)
			r.w.free(r.name, s)
			k.Drained(s)
		}()
	}
}

func (r *recv) Fence(s int) {
	r.note("fence %d", s)
	r.w.free(r.name, s)
}

func (r *recv) entries(word string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.log {
		if len(l) >= len(word) && l[:len(word)] == word {
			out = append(out, l)
		}
	}
	return out
}

func startKeeper(t *testing.T, g seqstore.Leaser, m seqstore.Member, shards int, r *recv) *lease.Keeper {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock() // the keeper's first Revoke waits for r.k
	k, err := lease.New(g, "ns", m, shards, r, nil)
	require.NoError(t, err)
	r.k = k
	return k
}

func closeKeeper(t *testing.T, k *lease.Keeper, r *recv) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	assert.NoError(t, k.Close(ctx), "%s's Close", r.name)
	r.drains.Wait()
}

// TestKeeperRenews: a keeper over a healthy store acquires every shard
// once, renews it every RenewEvery, and releases it and leaves on Close.
func TestKeeperRenews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		w := newWorld(t)
		r := newRecv("a", w, 0)
		k := startKeeper(t, &gate{fakeStore: st}, memberA, 4, r)
		time.Sleep(time.Minute)
		synctest.Wait() // the renewal due at 60 s answered
		assert.Equal(t, []string{"start 0#1 at 0s", "start 1#2 at 0s", "start 2#3 at 0s", "start 3#4 at 0s"}, r.entries("start"))
		assert.Empty(t, r.entries("fence"))
		assert.Equal(t, 12, st.count("renew"), "one renewal every 5 s, from 5 s to 60 s")
		assert.Equal(t, 1, st.count("acquire"))
		closeKeeper(t, k, r)
		assert.Equal(t, []string{"revoke 0 at 1m0s", "revoke 1 at 1m0s", "revoke 2 at 1m0s", "revoke 3 at 1m0s"}, r.entries("revoke"))
		live, _ := st.Leases(context.Background(), "ns")
		assert.Empty(t, live, "released on Close")
		assert.Zero(t, st.memberCount(), "left on Close")
		assert.ErrorIs(t, k.Close(context.Background()), lease.ErrClosed)
	})
}

// TestKeeperRetries: renewals that fail are retried after RetryPeriod; a
// store back before the local deadline costs nothing.
func TestKeeperRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		w := newWorld(t)
		r := newRecv("a", w, 0)
		g := &gate{fakeStore: st}
		k := startKeeper(t, g, memberA, 4, r)
		time.Sleep(9 * time.Second)
		g.set(true, false) // the renewal at 10 s fails, and the one at 12 s
		time.Sleep(4 * time.Second)
		g.set(false, false) // the one at 14 s passes
		renews := st.count("renew")
		time.Sleep(2 * time.Second)
		assert.Equal(t, renews+1, st.count("renew"), "the renewal retried 2 s after the last failure passed")
		time.Sleep(time.Minute)
		assert.Empty(t, r.entries("fence"), "no fence: the store came back before the local deadline")
		assert.Len(t, r.entries("start"), 4, "the leases were kept, not taken again")
		closeKeeper(t, k, r)
	})
}

// TestKeeperFencesWhenStoreHangs: when the store stops answering, the
// keeper fences every shard at the last good renewal's send time +
// RenewDeadline, before the lease expires at the store; Close then ends
// within its call timeouts.
func TestKeeperFencesWhenStoreHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		w := newWorld(t)
		r := newRecv("a", w, 0)
		g := &gate{fakeStore: st}
		k := startKeeper(t, g, memberA, 4, r)
		time.Sleep(21 * time.Second) // the last good renewal was sent at 20 s
		g.set(false, true)
		time.Sleep(20 * time.Second)
		assert.Equal(t, []string{"fence 0 at 30s", "fence 1 at 30s", "fence 2 at 30s", "fence 3 at 30s"}, r.entries("fence"),
			"fenced at 20 s + RenewDeadline, before the store's expiry at 35 s")
		assert.Empty(t, w.of("a"))
		closeKeeper(t, k, r)
		assert.Empty(t, r.entries("revoke"), "nothing left to revoke")
	})
}

// TestKeeperCloseAbort: when Close's context ends before the receiver
// drained, the keeper fences what is left, releases nothing, and returns.
func TestKeeperCloseAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		w := newWorld(t)
		r := newRecv("a", w, -1)
		k := startKeeper(t, &gate{fakeStore: st}, memberA, 2, r)
		time.Sleep(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := k.Close(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, []string{"fence 0 at 3s", "fence 1 at 3s"}, r.entries("fence"))
		live, _ := st.Leases(context.Background(), "ns")
		assert.Len(t, live, 2, "nothing released: the leases expire at the store")
	})
}

// TestKeepersNeverBothHold: two keepers over one store. b joins and takes
// its shards through a's revoke and release; a is cut from the store, and
// b takes everything once a's leases expired; a comes back and gets its
// shards again. At no step do both receivers work on one shard (world
// checks every Start). b drains a revoked shard in 6 s, longer than
// RenewEvery, so that a release before Drained would show.
func TestKeepersNeverBothHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 16
		st := newFakeStore()
		w := newWorld(t)
		ra, rb := newRecv("a", w, 0), newRecv("b", w, 6*time.Second)
		ga, gb := &gate{fakeStore: st}, &gate{fakeStore: st}
		ka := startKeeper(t, ga, memberA, shards, ra)
		time.Sleep(20 * time.Second)
		require.Len(t, w.of("a"), shards)

		kb := startKeeper(t, gb, memberB, shards, rb)
		time.Sleep(40 * time.Second)
		a, b := w.of("a"), w.of("b")
		assert.NotEmpty(t, a)
		assert.NotEmpty(t, b)
		assert.Len(t, append(a, b...), shards, "every shard served after the handover: a %v, b %v", a, b)
		assert.Empty(t, ra.entries("fence"), "a handover fences nothing")

		ga.set(false, true) // a is cut from the store at 60 s
		time.Sleep(time.Minute)
		assert.Empty(t, w.of("a"), "a fenced everything")
		assert.Len(t, w.of("b"), shards, "b took a's shards after they expired")

		ga.set(false, false) // a comes back at 120 s
		time.Sleep(time.Minute)
		assert.Equal(t, a, w.of("a"), "a got its shards back")
		assert.Equal(t, b, w.of("b"))

		closeKeeper(t, ka, ra)
		closeKeeper(t, kb, rb)
		t.Logf("a: %v", ra.log)
		t.Logf("b: %v", rb.log)
		live, _ := st.Leases(context.Background(), "ns")
		assert.Empty(t, live)
	})
}

// TestKeeperReportsStoreErrors: every store call that fails is reported to
// Options.OnError, which the keeper's user logs (the keeper itself only
// retries).
func TestKeeperReportsStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		w := newWorld(t)
		r := newRecv("a", w, 0)
		g := &gate{fakeStore: st}
		var mu sync.Mutex
		kinds := map[lease.Kind]int{}
		r.mu.Lock()
		k, err := lease.New(g, "ns", memberA, 2, r, &lease.Options{OnError: func(kind lease.Kind, err error) {
			assert.ErrorIs(t, err, errDown)
			mu.Lock()
			kinds[kind]++
			mu.Unlock()
		}})
		require.NoError(t, err)
		r.k = k
		r.mu.Unlock()
		time.Sleep(6 * time.Second)
		mu.Lock()
		require.Empty(t, kinds, "no error while the store answers")
		mu.Unlock()
		g.set(true, false)
		time.Sleep(6 * time.Second)
		mu.Lock()
		assert.NotZero(t, kinds[lease.Heartbeat], "failed heartbeats reported: %v", kinds)
		assert.NotZero(t, kinds[lease.Renew], "failed renewals reported: %v", kinds)
		mu.Unlock()
		g.set(false, false)
		closeKeeper(t, k, r)
	})
}

// deadlineRecv records, at each Start, the deadline the keeper already
// publishes for the new lease.
type deadlineRecv struct {
	*recv
	atStart map[int]time.Time
}

func (d *deadlineRecv) Start(l seqstore.Lease) {
	d.recv.Start(l)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.atStart[l.Shard] = d.k.Deadline(l.Shard, l.Token)
}

// TestKeeperDeadline: Deadline is published before Start, moves with
// each good renewal (its send time + RenewDeadline), is zero for another
// token, and becomes zero once the lease is fenced; it stays readable
// whatever the keeper's goroutine does.
func TestKeeperDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		w := newWorld(t)
		r := &deadlineRecv{recv: newRecv("a", w, 0), atStart: map[int]time.Time{}}
		g := &gate{fakeStore: st}
		r.mu.Lock()
		k, err := lease.New(g, "ns", memberA, 2, r, nil)
		require.NoError(t, err)
		r.k = k
		r.mu.Unlock()
		t0 := w.start
		synctest.Wait()
		r.mu.Lock()
		assert.Equal(t, map[int]time.Time{0: t0.Add(10 * time.Second), 1: t0.Add(10 * time.Second)}, r.atStart,
			"published before Start: the acquisition's send time + RenewDeadline")
		r.mu.Unlock()
		assert.True(t, k.Deadline(0, 99).IsZero(), "another token's lease is not held")
		assert.True(t, k.Deadline(7, 1).IsZero(), "no such shard")
		time.Sleep(21 * time.Second) // the renewal sent at 20 s passed
		assert.Equal(t, t0.Add(30*time.Second), k.Deadline(0, 1), "moved by the renewal sent at 20 s")
		g.set(false, true)
		time.Sleep(8 * time.Second)
		assert.Equal(t, t0.Add(30*time.Second), k.Deadline(0, 1), "no good renewal since 20 s")
		time.Sleep(3 * time.Second)
		synctest.Wait()
		assert.True(t, k.Deadline(0, 1).IsZero(), "fenced at 30 s: no longer held")
		closeKeeper(t, k, r.recv)
	})
}
