package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// The lease section: the seqstore.Leaser capability (membership, shard
// leases, tokens, the topology record) and the fence that seqstore.Claim
// builds on every store's cursor compare-and-set.

// DefaultLeaseTTL is LeaseHarness.TTL's default.
const DefaultLeaseTTL = 300 * time.Millisecond

// longTTL keeps a lease or a heartbeat live for the whole of a test, however
// slow the machine.
const longTTL = time.Minute

// LeaseHarness tells RunLeaser how to open stores that implement
// seqstore.Leaser.
type LeaseHarness struct {
	// Open prepares one fresh, isolated storage, as Harness.Open does, and
	// returns a function that opens a Store over it (the suite closes every
	// store it opens) and the clock by which that storage expires leases
	// and heartbeats. A nil Clock is the real one: the suite sleeps.
	Open func(t *testing.T) (open func(t *testing.T) seqstore.Store, clock Clock)
	// Persistent and Shared mean what they mean in Harness.
	Persistent bool
	Shared     bool
	// Watches means the store implements seqstore.LeaseWatcher and its
	// wake-ups work (the Watch/* tests need Shared); when false, the store
	// must lack WatchLeases or return ErrNotSupported from it.
	Watches bool
	// TTL is the lease and heartbeat TTL of the tests that wait for an
	// expiry: short enough to wait for, long enough that a lease taken
	// with it is still live on the next call. Default DefaultLeaseTTL.
	TTL time.Duration
}

// Clock passes d on a storage's clock: a fake clock's advance, miniredis's
// FastForward. The suite passes more than a TTL to expire what was taken
// with it.
type Clock func(t *testing.T, d time.Duration)

// RunLeaser runs the lease section against the stores h opens.
func RunLeaser(t *testing.T, h LeaseHarness) {
	t.Helper()
	require.NotNil(t, h.Open, "storetest: LeaseHarness.Open is nil")
	if h.TTL == 0 {
		h.TTL = DefaultLeaseTTL
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, h LeaseHarness)
	}{
		{"Lease/InvalidArguments", testLeaseInvalid},
		{"Lease/Topology", testLeaseTopology},
		{"Lease/TopologyRace", testLeaseTopologyRace},
		{"Lease/Heartbeat", testLeaseHeartbeat},
		{"Lease/HeartbeatExpiry", testLeaseHeartbeatExpiry},
		{"Lease/AcquireExclusive", testLeaseAcquireExclusive},
		{"Lease/Expiry", testLeaseExpiry},
		{"Lease/Tokens", testLeaseTokens},
		{"Lease/Renew", testLeaseRenew},
		{"Lease/Release", testLeaseRelease},
		{"Lease/Leave", testLeaseLeave},
		{"Lease/LiveOnly", testLeaseLiveOnly},
		{"Lease/Namespaces", testLeaseNamespaces},
		{"Lease/Reopen", testLeaseReopen},
		{"Lease/Cancelled", testLeaseCancelled},
		{"Lease/Closed", testLeaseClosed},
		{"Fence/Claim", testFenceClaim},
		{"Fence/AdvanceBeforeClaim", testFenceBeforeClaim},
		{"Fence/ClaimRace", testFenceClaimRace},
	}
	tests = append(tests, watchTests()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, h)
		})
	}
}

// leaseEnv is one test's storage: its first store, an opener of more, and
// its clock.
type leaseEnv struct {
	h     LeaseHarness
	st    seqstore.Store
	l     seqstore.Leaser
	open  func(t *testing.T) seqstore.Store
	clock Clock
}

func openLeaser(t *testing.T, h LeaseHarness) *leaseEnv {
	t.Helper()
	fn, clock := h.Open(t)
	require.NotNil(t, fn, "LeaseHarness.Open returned a nil opener")
	if clock == nil {
		clock = func(_ *testing.T, d time.Duration) { time.Sleep(d) }
	}
	e := &leaseEnv{h: h, clock: clock}
	e.open = func(t *testing.T) seqstore.Store {
		t.Helper()
		st := fn(t)
		require.NotNil(t, st, "the LeaseHarness opener returned a nil Store")
		t.Cleanup(func() { assert.NoError(t, st.Close(), "Close at the end of the test") })
		return st
	}
	e.st = e.open(t)
	e.l = asLeaser(t, e.st)
	return e
}

func asLeaser(t *testing.T, st seqstore.Store) seqstore.Leaser {
	t.Helper()
	l, ok := st.(seqstore.Leaser)
	require.True(t, ok, "%T does not implement seqstore.Leaser", st)
	return l
}

// expire passes enough time on the storage's clock for everything taken
// with the harness TTL to expire.
func (e *leaseEnv) expire(t *testing.T) {
	t.Helper()
	e.clock(t, 2*e.h.TTL+50*time.Millisecond)
}

func needShared(t *testing.T, shared bool) {
	t.Helper()
	if !shared {
		t.Skip("LeaseHarness.Shared is false: this store admits one instance per storage")
	}
}

func acquire(t *testing.T, l seqstore.Leaser, ns string, owner string, ttl time.Duration, shards ...int) []seqstore.Lease {
	t.Helper()
	got, err := l.Acquire(t.Context(), ns, shards, owner, ttl)
	require.NoError(t, err, "Acquire(%q, %v, %q)", ns, shards, owner)
	return got
}

func leases(t *testing.T, l seqstore.Leaser, ns string) []seqstore.Lease {
	t.Helper()
	got, err := l.Leases(t.Context(), ns)
	require.NoError(t, err, "Leases(%q)", ns)
	return got
}

func renew(t *testing.T, l seqstore.Leaser, ns string, ttl time.Duration, held ...seqstore.Lease) []seqstore.Lease {
	t.Helper()
	lost, err := l.Renew(t.Context(), ns, held, ttl)
	require.NoError(t, err, "Renew(%q, %v)", ns, held)
	return lost
}

func heartbeat(t *testing.T, l seqstore.Leaser, ns string, m seqstore.Member, ttl time.Duration) seqstore.View {
	t.Helper()
	v, err := l.Heartbeat(t.Context(), ns, m, ttl)
	require.NoError(t, err, "Heartbeat(%q, %+v)", ns, m)
	return v
}

func topology(shards int) seqstore.Topology {
	t := seqstore.Topology{Shards: shards, Hash: "rendezvous-fnv1a"}
	for i := range shards {
		t.Queues = append(t.Queues, fmt.Sprintf("orders-%d", i))
	}
	return t
}

func testLeaseInvalid(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	ctx, l := t.Context(), e.l
	const ns = "ns"
	good := seqstore.Member{Name: "host-a", Incarnation: "a-1", Weight: 1}
	held := seqstore.Lease{Shard: 0, Token: 1, Owner: "a-1"}
	badNS := []string{"", "\xff", "a\x00b"}
	for _, bad := range badNS {
		assert.ErrorIs(t, l.Topology(ctx, bad, topology(2)), seqstore.ErrInvalidArgument, "Topology with namespace %q", bad)
		_, err := l.Heartbeat(ctx, bad, good, longTTL)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Heartbeat with namespace %q", bad)
		_, err = l.Acquire(ctx, bad, []int{0}, "a-1", longTTL)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Acquire with namespace %q", bad)
		_, err = l.Renew(ctx, bad, []seqstore.Lease{held}, longTTL)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Renew with namespace %q", bad)
		assert.ErrorIs(t, l.Release(ctx, bad, []seqstore.Lease{held}), seqstore.ErrInvalidArgument, "Release with namespace %q", bad)
		assert.ErrorIs(t, l.Leave(ctx, bad, "a-1"), seqstore.ErrInvalidArgument, "Leave with namespace %q", bad)
		_, err = l.Leases(ctx, bad)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Leases with namespace %q", bad)
	}
	for _, tp := range []seqstore.Topology{
		{}, {Shards: 2, Hash: "h", Queues: []string{"a"}}, {Shards: 2, Hash: "h", Queues: []string{"a", "a"}},
		{Shards: 1, Queues: []string{"a"}}, {Shards: seqstore.MaxShards + 1, Hash: "h"},
	} {
		assert.ErrorIs(t, l.Topology(ctx, ns, tp), seqstore.ErrInvalidArgument, "Topology %+v", tp)
	}
	for _, m := range []seqstore.Member{
		{Incarnation: "x"}, {Name: "x"}, {Name: "x", Incarnation: "y", Weight: -1},
		{Name: "x", Incarnation: "y", Weight: seqstore.MaxWeight + 1}, {Name: "x\x00", Incarnation: "y"},
		{Name: "x", Incarnation: string(make([]byte, seqstore.MaxNameLen+1))},
	} {
		_, err := l.Heartbeat(ctx, ns, m, longTTL)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Heartbeat of member %+v", m)
	}
	for _, ttl := range []time.Duration{0, -time.Second, seqstore.MinLeaseTTL - 1} {
		_, err := l.Heartbeat(ctx, ns, good, ttl)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Heartbeat with ttl %v", ttl)
		_, err = l.Acquire(ctx, ns, []int{0}, "a-1", ttl)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Acquire with ttl %v", ttl)
		_, err = l.Renew(ctx, ns, []seqstore.Lease{held}, ttl)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Renew with ttl %v", ttl)
	}
	for _, shards := range [][]int{{-1}, {seqstore.MaxShards}, {1, 2, 1}} {
		_, err := l.Acquire(ctx, ns, shards, "a-1", longTTL)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Acquire of shards %v", shards)
	}
	_, err := l.Acquire(ctx, ns, []int{0}, "", longTTL)
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Acquire for an empty owner")
	assert.ErrorIs(t, l.Leave(ctx, ns, ""), seqstore.ErrInvalidArgument, "Leave of an empty incarnation")
	for _, bad := range [][]seqstore.Lease{
		{{Shard: 0, Token: 0, Owner: "a-1"}}, {{Shard: 0, Token: 1}}, {held, {Shard: 0, Token: 2, Owner: "a-1"}},
		{{Shard: -1, Token: 1, Owner: "a-1"}},
	} {
		_, err := l.Renew(ctx, ns, bad, longTTL)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Renew of %+v", bad)
		assert.ErrorIs(t, l.Release(ctx, ns, bad), seqstore.ErrInvalidArgument, "Release of %+v", bad)
	}

	// Nothing of the refused calls was written.
	assert.Empty(t, leases(t, l, ns), "a refused Acquire must take no lease")
	v := heartbeat(t, l, ns, good, longTTL)
	assert.Equal(t, []seqstore.Member{good}, v.Members, "a refused Heartbeat must register no member")
	require.NoError(t, l.Topology(ctx, ns, topology(3)), "a refused Topology must store none")
	got := acquire(t, l, ns, "a-1", longTTL, 0)
	require.Len(t, got, 1)
	assert.Equal(t, uint64(1), got[0].Token, "refused calls must not take tokens: the first token of a namespace is 1")
}

func testLeaseTopology(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	ctx, l := t.Context(), e.l
	tp := topology(4)
	require.NoError(t, l.Topology(ctx, "ns", tp), "the first Topology stores it")
	assert.NoError(t, l.Topology(ctx, "ns", topology(4)), "an equal topology is accepted")
	for _, other := range []seqstore.Topology{
		topology(3),
		{Shards: 4, Hash: "other", Queues: tp.Queues},
		{Shards: 4, Hash: tp.Hash, Queues: []string{"orders-0", "orders-1", "orders-3", "orders-2"}},
	} {
		err := l.Topology(ctx, "ns", other)
		assert.ErrorIs(t, err, seqstore.ErrTopology, "a different topology %+v", other)
	}
	assert.NoError(t, l.Topology(ctx, "ns", tp), "the stored topology is still the first")
	assert.NoError(t, l.Topology(ctx, "ns2", topology(2)), "another namespace has its own topology")
	// A namespace used for leases first still takes its topology.
	acquire(t, l, "ns3", "a-1", longTTL, 0)
	assert.NoError(t, l.Topology(ctx, "ns3", topology(1)), "Topology after Acquire in a namespace")
	assert.ErrorIs(t, l.Topology(ctx, "ns3", topology(2)), seqstore.ErrTopology)
}

func testLeaseTopologyRace(t *testing.T, h LeaseHarness) {
	needShared(t, h.Shared)
	e := openLeaser(t, h)
	const racers = 8
	ls := make([]seqstore.Leaser, racers)
	for i := range ls {
		ls[i] = asLeaser(t, e.open(t))
	}
	for round := range 3 {
		ns := fmt.Sprintf("ns-%d", round)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				errs[i] = ls[i].Topology(t.Context(), ns, topology(i+1))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				assert.Equal(t, -1, winner, "round %d: racers %d and %d both stored a topology", round, winner, i)
				winner = i
				continue
			}
			assert.ErrorIs(t, err, seqstore.ErrTopology, "round %d: racer %d", round, i)
		}
		require.NotEqual(t, -1, winner, "round %d: no racer stored a topology: %v", round, errs)
		for i := range racers {
			err := ls[i].Topology(t.Context(), ns, topology(winner+1))
			assert.NoError(t, err, "round %d: instance %d sees the winner's topology", round, i)
		}
	}
}

func testLeaseHeartbeat(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	a := seqstore.Member{Name: "host-b", Incarnation: "b-1", Weight: 1}
	b := seqstore.Member{Name: "host-a", Incarnation: "a-2", Weight: 0}
	c := seqstore.Member{Name: "host-a", Incarnation: "a-1", Weight: 5}

	v1 := heartbeat(t, l, "ns", a, longTTL)
	assert.Equal(t, []seqstore.Member{a}, v1.Members, "the view holds the member that joined")
	assert.NotZero(t, v1.Version, "a join is a change: the version moves from 0")
	v2 := heartbeat(t, l, "ns", b, longTTL)
	assert.Greater(t, v2.Version, v1.Version, "a join grows the version")
	v3 := heartbeat(t, l, "ns", c, longTTL)
	assert.Greater(t, v3.Version, v2.Version, "a join grows the version")
	assert.Equal(t, []seqstore.Member{c, b, a}, v3.Members, "members are ordered by Name, then Incarnation")

	v4 := heartbeat(t, l, "ns", a, longTTL)
	assert.Equal(t, v3.Version, v4.Version, "a mere renewal is no change")
	assert.Equal(t, v3.Members, v4.Members)

	a.Weight = 7
	v5 := heartbeat(t, l, "ns", a, longTTL)
	assert.Greater(t, v5.Version, v4.Version, "a new weight is a change")
	assert.Equal(t, []seqstore.Member{c, b, a}, v5.Members, "the new weight shows")
	a.Name = "host-0"
	v6 := heartbeat(t, l, "ns", a, longTTL)
	assert.Greater(t, v6.Version, v5.Version, "a new name is a change")
	assert.Equal(t, []seqstore.Member{a, c, b}, v6.Members, "the new name shows, and orders the view")

	other := heartbeat(t, l, "other", b, longTTL)
	assert.Equal(t, []seqstore.Member{b}, other.Members, "namespaces have their own views")
}

func testLeaseHeartbeatExpiry(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	stay := seqstore.Member{Name: "stay", Incarnation: "s-1", Weight: 1}
	gone := seqstore.Member{Name: "gone", Incarnation: "g-1", Weight: 1}
	heartbeat(t, l, "ns", stay, longTTL)
	v1 := heartbeat(t, l, "ns", gone, e.h.TTL)
	require.Equal(t, []seqstore.Member{gone, stay}, v1.Members)
	e.expire(t)
	v2 := heartbeat(t, l, "ns", stay, longTTL)
	assert.Equal(t, []seqstore.Member{stay}, v2.Members, "an expired member vanishes from the view")
	assert.Greater(t, v2.Version, v1.Version, "an expiry swept grows the version")
	v3 := heartbeat(t, l, "ns", stay, longTTL)
	assert.Equal(t, v2.Version, v3.Version, "nothing changed since the sweep")
	v4 := heartbeat(t, l, "ns", gone, longTTL)
	assert.Greater(t, v4.Version, v3.Version, "a member back after its expiry joins again")
	assert.Equal(t, []seqstore.Member{gone, stay}, v4.Members)
}

func testLeaseAcquireExclusive(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	ls := []seqstore.Leaser{e.l}
	if h.Shared {
		for range 3 {
			ls = append(ls, asLeaser(t, e.open(t)))
		}
	}
	const racers, shards = 64, 4
	all := []int{0, 1, 2, 3}
	got := make([][]seqstore.Lease, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Go(func() {
			<-start
			want := slices.Clone(all)
			if i%2 == 1 {
				want = []int{i % shards}
			}
			got[i], errs[i] = ls[i%len(ls)].Acquire(t.Context(), "ns", want, fmt.Sprintf("owner-%d", i), longTTL)
		})
	}
	close(start)
	wg.Wait()
	byShard := map[int]seqstore.Lease{}
	tokens := map[uint64]bool{}
	for i := range racers {
		require.NoError(t, errs[i], "racer %d", i)
		for _, ls := range got[i] {
			assert.Equal(t, fmt.Sprintf("owner-%d", i), ls.Owner, "racer %d got a lease of another owner", i)
			prev, dup := byShard[ls.Shard]
			assert.False(t, dup, "shard %d was granted twice: %+v and %+v", ls.Shard, prev, ls)
			byShard[ls.Shard] = ls
			assert.False(t, tokens[ls.Token], "token %d was handed out twice", ls.Token)
			tokens[ls.Token] = true
			assert.NotZero(t, ls.Token)
		}
	}
	require.Len(t, byShard, shards, "every shard was free, so every shard must be granted once")
	want := make([]seqstore.Lease, 0, shards)
	for s := range shards {
		want = append(want, byShard[s])
	}
	assert.Equal(t, want, leases(t, e.l, "ns"), "Leases lists the granted leases by shard")
	assert.Empty(t, acquire(t, e.l, "ns", "late", longTTL, all...), "no shard is free")
	assert.Empty(t, acquire(t, e.l, "ns", "late", longTTL), "Acquire of no shards")
	assert.Empty(t, acquire(t, e.l, "ns", want[0].Owner, longTTL, want[0].Shard), "a live lease is not granted again, to its own owner neither")
}

func testLeaseExpiry(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	old := acquire(t, l, "ns", "a", e.h.TTL, 0, 1)
	require.Len(t, old, 2)
	keep := acquire(t, l, "ns", "a", longTTL, 2)
	assert.Empty(t, acquire(t, l, "ns", "b", longTTL, 0, 1), "live leases are not granted to another")
	e.expire(t)
	assert.Equal(t, keep, leases(t, l, "ns"), "expired leases are not listed")
	got := acquire(t, l, "ns", "b", longTTL, 0, 1, 2)
	require.Len(t, got, 2, "expired shards 0 and 1 are granted, live shard 2 is not: %+v", got)
	for i, ls := range got {
		assert.Equal(t, old[i].Shard, ls.Shard)
		assert.Equal(t, "b", ls.Owner)
		assert.Greater(t, ls.Token, keep[0].Token, "a takeover takes a higher token than every earlier one")
	}
	assert.Equal(t, append(got, keep...), leases(t, l, "ns"))
}

func testLeaseTokens(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	var last uint64
	check := func(got []seqstore.Lease, what string) {
		t.Helper()
		for _, ls := range got {
			assert.Greater(t, ls.Token, last, "%s: tokens only grow, across shards and takeovers", what)
			last = max(last, ls.Token)
		}
	}
	first := acquire(t, l, "ns", "a", e.h.TTL, 0, 1, 2)
	require.Len(t, first, 3)
	assert.Equal(t, []int{0, 1, 2}, shardsOf(first), "leases are returned by shard")
	check(first, "first acquire")
	check(acquire(t, l, "ns", "a", longTTL, 5), "another shard")
	check(acquire(t, l, "ns", "b", longTTL, 3, 4), "another owner")
	e.expire(t)
	check(acquire(t, l, "ns", "c", longTTL, 2, 0), "takeover after expiry")
	held := acquire(t, l, "ns", "c", e.h.TTL, 1)
	check(held, "takeover of the last expired shard")
	require.NoError(t, l.Release(t.Context(), "ns", held))
	check(acquire(t, l, "ns", "d", longTTL, 1), "acquire after release")
}

func shardsOf(ls []seqstore.Lease) []int {
	out := make([]int, len(ls))
	for i, l := range ls {
		out[i] = l.Shard
	}
	return out
}

func testLeaseRenew(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	// Shard 0 is renewed for long, shard 1 not: only shard 1 expires.
	held := acquire(t, l, "ns", "a", e.h.TTL, 0, 1)
	require.Len(t, held, 2)
	assert.Empty(t, renew(t, l, "ns", longTTL, held[0]), "a live lease renews")
	e.expire(t)
	assert.Equal(t, held[:1], leases(t, l, "ns"), "the renewed lease outlived its first TTL, the other did not")
	assert.Equal(t, held[1:], renew(t, l, "ns", longTTL, held...), "an expired lease is lost")
	assert.Equal(t, held[:1], leases(t, l, "ns"), "Renew must not revive an expired lease")

	// Taken over: lost, and the new owner's lease is left alone.
	taken := acquire(t, l, "ns", "b", longTTL, 1)
	require.Len(t, taken, 1)
	assert.Equal(t, held[1:], renew(t, l, "ns", longTTL, held[1]), "a lease taken over is lost")
	assert.Equal(t, append(held[:1:1], taken...), leases(t, l, "ns"), "Renew of a lost lease must not touch the new owner's")

	// Another token or owner for a live shard is not the live lease.
	forged := []seqstore.Lease{
		{Shard: 0, Token: held[0].Token, Owner: "b"},
		{Shard: 1, Token: taken[0].Token + 1, Owner: "b"},
		{Shard: 7, Token: 1, Owner: "a"},
	}
	assert.Equal(t, forged, renew(t, l, "ns", longTTL, forged...), "leases that are not the live ones are lost")
	assert.Equal(t, append(held[:1:1], taken...), leases(t, l, "ns"), "Renew of forged leases changes nothing")

	// Released: lost.
	require.NoError(t, l.Release(t.Context(), "ns", taken))
	assert.Equal(t, taken, renew(t, l, "ns", longTTL, taken...), "a released lease is lost")
	assert.Equal(t, held[:1], leases(t, l, "ns"), "Renew must not revive a released lease")
	assert.Empty(t, renew(t, l, "ns", longTTL), "Renew of nothing")
}

func testLeaseRelease(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	held := acquire(t, l, "ns", "a", longTTL, 0, 1)
	require.Len(t, held, 2)
	require.NoError(t, l.Release(t.Context(), "ns", held[:1]))
	assert.Equal(t, held[1:], leases(t, l, "ns"), "a released lease is gone at once")
	got := acquire(t, l, "ns", "b", longTTL, 0)
	require.Len(t, got, 1, "a released shard is free at once")
	assert.Greater(t, got[0].Token, held[1].Token, "Release keeps the token counter")

	// A stale release (old token, or another owner) leaves the live lease.
	require.NoError(t, l.Release(t.Context(), "ns", []seqstore.Lease{held[0], {Shard: 1, Token: held[1].Token, Owner: "b"}}))
	assert.Equal(t, append(got, held[1]), leases(t, l, "ns"), "Release of leases that are not the live ones changes nothing")

	// Expired and taken over: the old owner's release leaves the new lease.
	short := acquire(t, l, "ns", "a", e.h.TTL, 2)
	require.Len(t, short, 1)
	e.expire(t)
	over := acquire(t, l, "ns", "c", longTTL, 2)
	require.Len(t, over, 1)
	require.NoError(t, l.Release(t.Context(), "ns", short))
	assert.Equal(t, append(append(got, held[1]), over...), leases(t, l, "ns"), "Release of a lease taken over leaves the new owner's")
	require.NoError(t, l.Release(t.Context(), "ns", nil), "Release of nothing")
}

func testLeaseLeave(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	a := seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}
	b := seqstore.Member{Name: "b", Incarnation: "b-1", Weight: 1}
	heartbeat(t, l, "ns", a, longTTL)
	v1 := heartbeat(t, l, "ns", b, longTTL)
	require.NoError(t, l.Leave(t.Context(), "ns", "a-1"))
	v2 := heartbeat(t, l, "ns", b, longTTL)
	assert.Equal(t, []seqstore.Member{b}, v2.Members, "a member that left is gone at once")
	assert.Greater(t, v2.Version, v1.Version, "a leave grows the version")
	require.NoError(t, l.Leave(t.Context(), "ns", "never-joined"), "Leave of an unknown incarnation is a no-op")
	require.NoError(t, l.Leave(t.Context(), "empty-ns", "a-1"), "Leave in an unknown namespace is a no-op")
	v3 := heartbeat(t, l, "ns", b, longTTL)
	assert.Equal(t, v2.Version, v3.Version, "a Leave that removed nothing is no change")
}

func testLeaseLiveOnly(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	assert.Empty(t, leases(t, l, "ns"), "a new namespace has no leases")
	short := acquire(t, l, "ns", "a", e.h.TTL, 3, 1)
	long := acquire(t, l, "ns", "b", longTTL, 2, 0)
	require.Len(t, short, 2)
	require.Len(t, long, 2)
	assert.Equal(t, []seqstore.Lease{long[0], short[0], long[1], short[1]}, leases(t, l, "ns"), "Leases by shard")
	e.expire(t)
	assert.Equal(t, long, leases(t, l, "ns"), "Leases lists the live leases only")
}

func testLeaseNamespaces(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	a := acquire(t, l, "a", "x", longTTL, 0)
	b := acquire(t, l, "b", "x", longTTL, 0)
	require.Len(t, a, 1, "namespace a")
	require.Len(t, b, 1, "shard 0 of namespace b is free whatever a holds")
	assert.Equal(t, uint64(1), b[0].Token, "each namespace has its own token counter")
	assert.Equal(t, a, leases(t, l, "a"))
	assert.Equal(t, b, leases(t, l, "b"))
	// Names that a naive key or row layout would mix up.
	for _, ns := range []string{"a/b", "a b", "a:b", "{a}", "a'b", "ünï"} {
		got := acquire(t, l, ns, "x", longTTL, 0)
		assert.Len(t, got, 1, "namespace %q", ns)
		assert.Equal(t, got, leases(t, l, ns), "namespace %q", ns)
	}
}

func testLeaseReopen(t *testing.T, h LeaseHarness) {
	if !h.Persistent {
		t.Skip("store is not persistent (LeaseHarness.Persistent is false): nothing survives reopening")
	}
	e := openLeaser(t, h)
	l := e.l
	ctx := t.Context()
	m := seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 2}
	require.NoError(t, l.Topology(ctx, "ns", topology(2)))
	v := heartbeat(t, l, "ns", m, longTTL)
	require.NoError(t, l.Release(ctx, "ns", acquire(t, l, "ns", "a-1", longTTL, 5)))
	held := acquire(t, l, "ns", "a-1", longTTL, 0, 1)
	require.NoError(t, l.Release(ctx, "ns", held[1:]))
	s := seqstore.Stream{Queue: "orders-0", Group: "g"}
	claimed, err := seqstore.Claim(ctx, e.st, s, held[0].Token)
	require.NoError(t, err)
	require.NoError(t, e.st.Close())

	st2 := e.open(t)
	l2 := asLeaser(t, st2)
	assert.NoError(t, l2.Topology(ctx, "ns", topology(2)), "the topology survives reopening")
	assert.ErrorIs(t, l2.Topology(ctx, "ns", topology(3)), seqstore.ErrTopology, "the topology survives reopening")
	v2 := heartbeat(t, l2, "ns", m, longTTL)
	assert.Equal(t, v, v2, "the membership survives reopening")
	assert.Equal(t, held[:1], leases(t, l2, "ns"), "live leases survive reopening")
	assert.Empty(t, renew(t, l2, "ns", longTTL, held[0]), "a lease renews after reopening")
	got := acquire(t, l2, "ns", "b-1", longTTL, 1)
	require.Len(t, got, 1)
	assert.Greater(t, got[0].Token, held[1].Token, "the token counter survives reopening")
	assertCursor(t, claimed, cursor(t, st2, s), "a claimed cursor survives reopening")
	_, err = seqstore.Claim(ctx, st2, s, held[0].Token-1)
	assert.ErrorIs(t, err, seqstore.ErrFenced, "the fence survives reopening")
}

func testLeaseCancelled(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	m := seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}
	held := []seqstore.Lease{{Shard: 0, Token: 1, Owner: "a-1"}}
	assert.ErrorIs(t, l.Topology(ctx, "ns", topology(1)), context.Canceled, "Topology")
	_, err := l.Heartbeat(ctx, "ns", m, longTTL)
	assert.ErrorIs(t, err, context.Canceled, "Heartbeat")
	_, err = l.Acquire(ctx, "ns", []int{0}, "a-1", longTTL)
	assert.ErrorIs(t, err, context.Canceled, "Acquire")
	_, err = l.Renew(ctx, "ns", held, longTTL)
	assert.ErrorIs(t, err, context.Canceled, "Renew")
	assert.ErrorIs(t, l.Release(ctx, "ns", held), context.Canceled, "Release")
	assert.ErrorIs(t, l.Leave(ctx, "ns", "a-1"), context.Canceled, "Leave")
	_, err = l.Leases(ctx, "ns")
	assert.ErrorIs(t, err, context.Canceled, "Leases")

	assert.Empty(t, leases(t, l, "ns"), "a cancelled Acquire takes nothing")
	got := acquire(t, l, "ns", "a-1", longTTL, 0)
	require.Len(t, got, 1)
	assert.Equal(t, uint64(1), got[0].Token, "a cancelled Acquire takes no token")
	assert.Equal(t, []seqstore.Member{m}, heartbeat(t, l, "ns", m, longTTL).Members)
	require.NoError(t, l.Topology(t.Context(), "ns", topology(2)), "a cancelled Topology stores nothing")
}

func testLeaseClosed(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	l := e.l
	require.NoError(t, e.st.Close())
	ctx := t.Context()
	m := seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}
	held := []seqstore.Lease{{Shard: 0, Token: 1, Owner: "a-1"}}
	assert.ErrorIs(t, l.Topology(ctx, "ns", topology(1)), seqstore.ErrClosed, "Topology")
	_, err := l.Heartbeat(ctx, "ns", m, longTTL)
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Heartbeat")
	_, err = l.Acquire(ctx, "ns", []int{0}, "a-1", longTTL)
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Acquire")
	_, err = l.Renew(ctx, "ns", held, longTTL)
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Renew")
	assert.ErrorIs(t, l.Release(ctx, "ns", held), seqstore.ErrClosed, "Release")
	assert.ErrorIs(t, l.Leave(ctx, "ns", "a-1"), seqstore.ErrClosed, "Leave")
	_, err = l.Leases(ctx, "ns")
	assert.ErrorIs(t, err, seqstore.ErrClosed, "Leases")
}

func testFenceClaim(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	st, ctx := e.st, t.Context()
	s := seqstore.Stream{Queue: "q", Group: "g"}
	old, err := seqstore.Claim(ctx, st, s, 3)
	require.NoError(t, err, "claim of a new stream")
	assertCursor(t, seqstore.Cursor{Owner: 3}, old, "a new stream's claimed cursor")
	to := seqstore.Cursor{Epoch: 9, Next: 4, Owner: 3}
	advance(t, st, seqstore.Advance{Stream: s, From: old, To: to})

	claimed, err := seqstore.Claim(ctx, st, s, 5)
	require.NoError(t, err, "claim with a higher token")
	assertCursor(t, seqstore.Cursor{Epoch: 9, Next: 4, Owner: 5}, claimed, "the claim keeps the position")

	stale := seqstore.Cursor{Epoch: 9, Next: 6, Owner: 3}
	err = st.Advance(ctx, []seqstore.Advance{{Stream: s, From: to, To: stale}})
	require.ErrorIs(t, err, seqstore.ErrConflict, "the old owner's advance after the claim")
	stored := cursor(t, st, s)
	assert.True(t, seqstore.Fenced(stored, 3), "Fenced tells the takeover: stored %+v", stored)
	assert.False(t, seqstore.Fenced(stored, 5), "the new owner is not fenced")
	assertCursor(t, claimed, stored, "a fenced advance writes nothing")

	_, err = seqstore.Claim(ctx, st, s, 4)
	assert.ErrorIs(t, err, seqstore.ErrFenced, "a claim with a lower token than stored")
	again, err := seqstore.Claim(ctx, st, s, 5)
	require.NoError(t, err, "a claim of one's own stream")
	assertCursor(t, claimed, again)
	next := seqstore.Cursor{Epoch: 9, Next: 5, Owner: 5}
	advance(t, st, seqstore.Advance{Stream: s, From: claimed, To: next})
	assertCursor(t, next, cursor(t, st, s), "the new owner advances")
	_, err = seqstore.Claim(ctx, st, s, 0)
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "a claim with token 0")
}

func testFenceBeforeClaim(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	st, l, ctx := e.st, e.l, t.Context()
	s := seqstore.Stream{Queue: "q", Group: "g"}
	first := acquire(t, l, "ns", "a", e.h.TTL, 0)
	require.Len(t, first, 1)
	c, err := seqstore.Claim(ctx, st, s, first[0].Token)
	require.NoError(t, err)
	for i := range 3 {
		to := seqstore.Cursor{Epoch: 7, Next: uint64(i + 2), Owner: first[0].Token, Skipped: []seqstore.Range{{Epoch: 7, First: 1, Last: 1}}}
		advance(t, st, seqstore.Advance{Stream: s, From: c, To: to})
		c = to
	}
	e.expire(t)
	second := acquire(t, l, "ns", "b", longTTL, 0)
	require.Len(t, second, 1)
	claimed, err := seqstore.Claim(ctx, st, s, second[0].Token)
	require.NoError(t, err)
	want := c
	want.Owner = second[0].Token
	assertCursor(t, want, claimed, "the claimed cursor holds every advance the old owner made before the claim")
	_, err = seqstore.Claim(ctx, st, s, first[0].Token)
	assert.ErrorIs(t, err, seqstore.ErrFenced, "the old owner cannot claim back")
}

func testFenceClaimRace(t *testing.T, h LeaseHarness) {
	e := openLeaser(t, h)
	stores := []seqstore.Store{e.st}
	if h.Shared {
		for range 3 {
			stores = append(stores, e.open(t))
		}
	}
	ctx := t.Context()
	const streams = 4
	stream := func(i int) seqstore.Stream { return seqstore.Stream{Queue: "q", Group: fmt.Sprintf("g%d", i)} }
	for i := range streams {
		_, err := seqstore.Claim(ctx, e.st, stream(i), 3)
		require.NoError(t, err)
	}
	// The old owner (token 3) advances every stream from every instance,
	// one step at a time, while the new owner (token 5) claims them.
	var mu sync.Mutex
	done := make([][]seqstore.Cursor, streams) // the old owner's successful advances
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for k, st := range stores {
		for i := range streams {
			wg.Go(func() {
				s := stream(i)
				for {
					select {
					case <-stop:
						return
					default:
					}
					c, err := CursorOne(ctx, st, s)
					if !assert.NoError(t, err) {
						return
					}
					if seqstore.Fenced(c, 3) {
						return
					}
					to := seqstore.Cursor{Epoch: 1, Next: c.Next + 1, Owner: 3}
					err = st.Advance(ctx, []seqstore.Advance{{Stream: s, From: c, To: to}})
					if err == nil {
						mu.Lock()
						done[i] = append(done[i], to)
						mu.Unlock()
						continue
					}
					if !assert.ErrorIs(t, err, seqstore.ErrConflict, "instance %d, stream %s", k, s) {
						return
					}
				}
			})
		}
	}
	time.Sleep(20 * time.Millisecond)
	claimed := make([]seqstore.Cursor, streams)
	var cwg sync.WaitGroup
	for i := range streams {
		cwg.Go(func() {
			var err error
			for {
				claimed[i], err = seqstore.Claim(ctx, stores[i%len(stores)], stream(i), 5)
				if !errors.Is(err, seqstore.ErrConflict) { // the old owner kept moving it 16 times
					break
				}
			}
			assert.NoError(t, err, "claim of %s", stream(i))
		})
	}
	cwg.Wait()
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	for i := range streams {
		s := stream(i)
		final := cursor(t, e.st, s)
		assertCursor(t, claimed[i], final, "%s: no advance of the old owner lands after the claim", s)
		assert.Equal(t, uint64(5), final.Owner, "%s", s)
		var last uint64
		for _, to := range done[i] {
			last = max(last, to.Next)
		}
		assert.Equal(t, last, claimed[i].Next, "%s: the claim holds the old owner's last advance (%d advances) and none lands after it", s, len(done[i]))
	}
}
