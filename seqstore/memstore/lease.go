package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.Leaser = (*Store)(nil)

// space is the lease state of one namespace.
type space struct {
	topology *seqstore.Topology
	token    uint64 // the last token handed out
	version  uint64
	leases   map[int]heldLease     // by shard; expired ones may linger
	members  map[string]liveMember // by incarnation; expired ones may linger
}

type heldLease struct {
	token   uint64
	owner   string
	expires time.Time
}

type liveMember struct {
	name    string
	weight  int
	expires time.Time
}

// space returns ns's state, created empty on first use. The mutex is held.
func (st *Store) space(ns string) *space {
	sp := st.spaces[ns]
	if sp == nil {
		sp = &space{leases: make(map[int]heldLease), members: make(map[string]liveMember)}
		if st.spaces == nil {
			st.spaces = make(map[string]*space)
		}
		st.spaces[ns] = sp
	}
	return sp
}

// live returns shard's lease if it has not expired at now.
func (sp *space) live(shard int, now time.Time) (heldLease, bool) {
	l, ok := sp.leases[shard]
	return l, ok && now.Before(l.expires)
}

// Topology implements seqstore.Leaser.
func (st *Store) Topology(ctx context.Context, ns string, t seqstore.Topology) error {
	if err := seqstore.CheckNamespace(ns); err != nil {
		return fmt.Errorf("memstore: topology: %w", err)
	}
	if err := t.Check(); err != nil {
		return fmt.Errorf("memstore: topology: %w", err)
	}
	if err := st.lock(ctx, "topology"); err != nil {
		return err
	}
	defer st.mu.Unlock()
	sp := st.space(ns)
	if sp.topology == nil {
		c := t
		c.Queues = slices.Clone(t.Queues)
		sp.topology = &c
		return nil
	}
	if !sp.topology.Equal(t) {
		return fmt.Errorf("memstore: topology of %q: %w: stored %+v, given %+v", ns, seqstore.ErrTopology, *sp.topology, t)
	}
	return nil
}

// Heartbeat implements seqstore.Leaser.
func (st *Store) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	if err := seqstore.CheckLease(ns, seqstore.CheckMember(m), seqstore.CheckTTL(ttl)); err != nil {
		return seqstore.View{}, fmt.Errorf("memstore: heartbeat: %w", err)
	}
	if err := st.lock(ctx, "heartbeat"); err != nil {
		return seqstore.View{}, err
	}
	defer st.mu.Unlock()
	now := st.now()
	sp := st.space(ns)
	version := sp.version
	swept := false
	for inc, lm := range sp.members {
		if !now.Before(lm.expires) {
			delete(sp.members, inc)
			swept = true
		}
	}
	if swept {
		sp.version++
	}
	if old, ok := sp.members[m.Incarnation]; !ok || old.name != m.Name || old.weight != m.Weight {
		sp.version++
	}
	sp.members[m.Incarnation] = liveMember{name: m.Name, weight: m.Weight, expires: now.Add(ttl)}
	if sp.version != version {
		st.wake(ns)
	}
	v := seqstore.View{Version: sp.version, Members: make([]seqstore.Member, 0, len(sp.members))}
	for inc, lm := range sp.members {
		v.Members = append(v.Members, seqstore.Member{Name: lm.name, Incarnation: inc, Weight: lm.weight})
	}
	seqstore.SortMembers(v.Members)
	return v, nil
}

// Acquire implements seqstore.Leaser.
func (st *Store) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := seqstore.CheckLease(ns, seqstore.CheckShards(shards), seqstore.CheckOwner(owner), seqstore.CheckTTL(ttl)); err != nil {
		return nil, fmt.Errorf("memstore: acquire: %w", err)
	}
	if err := st.lock(ctx, "acquire"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	now := st.now()
	sp := st.space(ns)
	var out []seqstore.Lease
	for _, shard := range slices.Sorted(slices.Values(shards)) {
		if _, ok := sp.live(shard, now); ok {
			continue
		}
		sp.token++
		sp.leases[shard] = heldLease{token: sp.token, owner: owner, expires: now.Add(ttl)}
		out = append(out, seqstore.Lease{Shard: shard, Token: sp.token, Owner: owner})
	}
	return out, nil
}

// Renew implements seqstore.Leaser.
func (st *Store) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := seqstore.CheckLease(ns, seqstore.CheckLeases(held), seqstore.CheckTTL(ttl)); err != nil {
		return nil, fmt.Errorf("memstore: renew: %w", err)
	}
	if err := st.lock(ctx, "renew"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	now := st.now()
	sp := st.space(ns)
	var lost []seqstore.Lease
	for _, h := range held {
		l, ok := sp.live(h.Shard, now)
		if !ok || l.token != h.Token || l.owner != h.Owner {
			lost = append(lost, h)
			continue
		}
		l.expires = now.Add(ttl)
		sp.leases[h.Shard] = l
	}
	return lost, nil
}

// Release implements seqstore.Leaser.
func (st *Store) Release(ctx context.Context, ns string, held []seqstore.Lease) error {
	if err := seqstore.CheckLease(ns, seqstore.CheckLeases(held)); err != nil {
		return fmt.Errorf("memstore: release: %w", err)
	}
	if err := st.lock(ctx, "release"); err != nil {
		return err
	}
	defer st.mu.Unlock()
	sp := st.space(ns)
	released := false
	for _, h := range held {
		if l, ok := sp.leases[h.Shard]; ok && l.token == h.Token && l.owner == h.Owner {
			delete(sp.leases, h.Shard)
			released = true
		}
	}
	if released {
		st.wake(ns)
	}
	return nil
}

// Leave implements seqstore.Leaser.
func (st *Store) Leave(ctx context.Context, ns string, incarnation string) error {
	if err := seqstore.CheckLease(ns, seqstore.CheckOwner(incarnation)); err != nil {
		return fmt.Errorf("memstore: leave: %w", err)
	}
	if err := st.lock(ctx, "leave"); err != nil {
		return err
	}
	defer st.mu.Unlock()
	sp := st.space(ns)
	if _, ok := sp.members[incarnation]; ok {
		delete(sp.members, incarnation)
		sp.version++
		st.wake(ns)
	}
	return nil
}

// Leases implements seqstore.Leaser.
func (st *Store) Leases(ctx context.Context, ns string) ([]seqstore.Lease, error) {
	if err := seqstore.CheckLease(ns); err != nil {
		return nil, fmt.Errorf("memstore: leases: %w", err)
	}
	if err := st.lock(ctx, "leases"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	now := st.now()
	sp := st.space(ns)
	var out []seqstore.Lease
	for shard := range sp.leases {
		if l, ok := sp.live(shard, now); ok {
			out = append(out, seqstore.Lease{Shard: shard, Token: l.token, Owner: l.owner})
		}
	}
	slices.SortFunc(out, func(a, b seqstore.Lease) int { return cmp.Compare(a.Shard, b.Shard) })
	return out, nil
}
