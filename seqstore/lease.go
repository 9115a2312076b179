package seqstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Scale-out: several receivers share the streams of one logical queue, split
// into shards (one MNS queue each). Every shard has at most one owner at a
// time, through a lease kept by the store; every acquisition takes a token
// from a counter of the namespace that only grows.
//
// The fence needs no new cursor field: Cursor.Owner already takes part in
// every compare-and-set (Advance and sqlstore's AdvanceTx compare the stored
// Epoch, Next and Owner with From). An owner claims a stream by setting its
// token as the cursor's Owner (Claim), and advances it from a From that
// carries that token: once a newer owner claimed the stream, the older
// one's advances find another Owner and fail with ErrConflict, which Fenced
// tells apart from a plain conflict. A claim never lowers Owner, so
// whichever of two owners claims last, the higher token wins.

var (
	// ErrFenced means a newer owner holds a stream or a shard: a cursor
	// stores a higher token than the caller's, or the caller's lease was
	// taken over.
	ErrFenced = errors.New("seqstore: fenced: a newer owner holds the stream")
	// ErrNotSupported is returned by a store that cannot hold leases
	// (filestore: its directory belongs to one host).
	ErrNotSupported = errors.New("seqstore: not supported by this store")
	// ErrTopology means a namespace's stored Topology differs from the one
	// a sender or receiver was configured with.
	ErrTopology = errors.New("seqstore: topology mismatch")
)

// Limits of the lease capability's arguments.
const (
	// MaxShards bounds Topology.Shards; shards are numbered 0..Shards-1.
	MaxShards = 1024
	// MaxNameLen bounds a Member's Name and Incarnation and a Lease's Owner,
	// in bytes.
	MaxNameLen = 200
	// MaxWeight bounds Member.Weight.
	MaxWeight = 1000
	// MinLeaseTTL is the shortest lease or heartbeat TTL a store accepts
	// (Redis expires keys to the millisecond).
	MinLeaseTTL = time.Millisecond
)

// Member is a receiver process in a namespace's membership.
type Member struct {
	// Name is stable across restarts (a host name, a pod name): shards are
	// assigned by it, so a restarted member gets its shards back.
	Name string
	// Incarnation is unique to one life of the process: leases are held by
	// it, so a restart takes a new token for every shard.
	Incarnation string
	// Weight scales the member's share of shards: 0 makes a standby, which
	// is assigned nothing while another member has a weight.
	Weight int
}

// View is the live membership of a namespace.
type View struct {
	// Version grows with every change the store sees: a join, a leave, an
	// expiry swept.
	Version uint64
	// Members lists the members whose heartbeat has not expired, ordered by
	// Name and then Incarnation.
	Members []Member
}

// Lease is a shard's ownership.
type Lease struct {
	Shard int
	// Token is taken from the namespace's counter at acquisition: it only
	// grows, across shards and takeovers, and is never 0.
	Token uint64
	// Owner is the holder's Member.Incarnation.
	Owner string
}

// Topology is how a logical queue is split: S shard queues and the hash
// that places a group on one of them. Senders and receivers check it at
// start.
type Topology struct {
	// Shards is S, 1..MaxShards.
	Shards int
	// Hash names the function that maps a group to a shard.
	Hash string
	// Queues names the shard queues, Shards of them, in shard order.
	Queues []string
}

// Equal reports whether t and u are the same topology.
func (t Topology) Equal(u Topology) bool {
	if t.Shards != u.Shards || t.Hash != u.Hash || len(t.Queues) != len(u.Queues) {
		return false
	}
	for i := range t.Queues {
		if t.Queues[i] != u.Queues[i] {
			return false
		}
	}
	return true
}

// Check validates t: 1..MaxShards shards, a hash name, and one valid queue
// name per shard, no two alike.
func (t Topology) Check() error {
	if t.Shards < 1 || t.Shards > MaxShards {
		return fmt.Errorf("%w: topology of %d shards, want 1..%d", ErrInvalidArgument, t.Shards, MaxShards)
	}
	if err := checkName("hash name", t.Hash); err != nil {
		return err
	}
	if len(t.Queues) != t.Shards {
		return fmt.Errorf("%w: topology of %d shards names %d queues", ErrInvalidArgument, t.Shards, len(t.Queues))
	}
	seen := make(map[string]struct{}, len(t.Queues))
	for _, q := range t.Queues {
		if err := (Stream{Queue: q}).Validate(); err != nil {
			return fmt.Errorf("%w: topology queue: %w", ErrInvalidArgument, err)
		}
		if _, dup := seen[q]; dup {
			return fmt.Errorf("%w: topology names queue %q twice", ErrInvalidArgument, q)
		}
		seen[q] = struct{}{}
	}
	return nil
}

// Leaser is an optional capability of a Store, found by a type assertion
// (database/sql style): membership, shard leases and the topology record of
// namespaces, for receivers that scale out. memstore, redisstore and
// sqlstore implement it; filestore's methods return ErrNotSupported.
//
// A namespace (ns) is a logical queue's name (CheckNamespace). Time is the
// store's: expiries are computed by the store's clock (the database's, the
// Redis server's), so the members' clocks need not agree, only run at about
// the same rate. A lease or heartbeat whose TTL passed is expired at once
// for every method, whether or not the store removed it yet.
type Leaser interface {
	// Topology stores t as ns's topology when none is stored, and returns
	// nil when the stored one equals t; otherwise an error wrapping
	// ErrTopology that says both.
	Topology(ctx context.Context, ns string, t Topology) error

	// Heartbeat registers m, or renews its registration, for ttl, removes
	// the members whose heartbeat expired, and returns the view after it.
	// A member registered again with another Name or Weight is updated.
	Heartbeat(ctx context.Context, ns string, m Member, ttl time.Duration) (View, error)

	// Acquire takes, for owner, each of shards that has no live lease,
	// each with a new token, for ttl. It returns the leases it took, by
	// shard; a shard with a live lease (owner's own included) is left out.
	Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]Lease, error)

	// Renew extends each held lease whose shard, token and owner are still
	// the live lease's by ttl, and returns the others (expired, released or
	// taken over), in the order of held, which it does not touch.
	Renew(ctx context.Context, ns string, held []Lease, ttl time.Duration) (lost []Lease, err error)

	// Release ends each held lease that is still live, so that the shard
	// can be acquired at once; a lease taken over meanwhile is left alone.
	// The token counter keeps its value.
	Release(ctx context.Context, ns string, held []Lease) error

	// Leave removes the member of incarnation from the view at once; an
	// incarnation that is not a member is no error.
	Leave(ctx context.Context, ns string, incarnation string) error

	// Leases returns the live leases of ns, by shard.
	Leases(ctx context.Context, ns string) ([]Lease, error)
}

// LeaseWatcher is an optional capability of a Leaser, found by a type
// assertion like Leaser itself: it wakes the members of a namespace when
// a shard may have become free or the membership changed, so that a
// handover waits for a round trip instead of the next heartbeat. Wake-ups
// only shorten waits: a member that misses one (or whose store has no
// LeaseWatcher) learns the same at its next heartbeat.
//
// A wake-up of namespace ns is sent, once the change is visible to every
// reader, after a call of any instance over the same storage that
//
//   - released at least one lease (Release),
//   - removed a member (Leave), or
//   - changed the view (Heartbeat: a join, a new Name or Weight, or an
//     expired member swept).
//
// Acquire, Renew, Topology and a Heartbeat that changes nothing send none:
// members answer a wake-up with a heartbeat, which must not wake them
// again. An expired lease is not announced (no call sees the moment it
// expires): members find it free at their next heartbeat.
//
// memstore wakes in process; redisstore PUBLISHes from the scripts that
// make the changes; sqlstore NOTIFYs in the changes' transactions on
// PostgreSQL through pgx, and returns ErrNotSupported elsewhere.
type LeaseWatcher interface {
	// WatchLeases subscribes to the wake-ups of ns and returns once
	// subscribed: a change made after it returned wakes the channel,
	// unless the subscription is lost meanwhile. The channel holds one
	// wake-up and the store never waits for its reader: wake-ups that find
	// it full are coalesced into the one waiting. A wake-up may come for no
	// change of ns, e.g. after the store reconnected, when wake-ups may
	// have been lost.
	//
	// The channel is closed when ctx ends, when the store is closed, or
	// when the subscription fails for good; the caller may subscribe
	// again. A store that cannot watch returns an error wrapping
	// ErrNotSupported, and the caller polls.
	WatchLeases(ctx context.Context, ns string) (<-chan struct{}, error)
}

// Wake sends a wake-up to ch without waiting: when ch's buffer is full, a
// wake-up is waiting already and this one is coalesced into it. Stores
// use it to feed a LeaseWatcher's channel.
func Wake(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// CheckLease validates the arguments of a Leaser call: the namespace
// first, then the checks of the other arguments (CheckShards, CheckOwner,
// CheckTTL, ...) in order. It returns the first error.
func CheckLease(ns string, errs ...error) error {
	if err := CheckNamespace(ns); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// SortMembers orders members as View.Members is: by Name, then
// Incarnation (byte order, whatever a database's collation says).
func SortMembers(members []Member) {
	slices.SortFunc(members, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Incarnation, b.Incarnation))
	})
}

// CheckNamespace validates a namespace: a valid queue name. Its error
// wraps ErrInvalidArgument, like the other checks', and ErrInvalidStream.
func CheckNamespace(ns string) error {
	if err := (Stream{Queue: ns}).Validate(); err != nil {
		return fmt.Errorf("%w: namespace: %w", ErrInvalidArgument, err)
	}
	return nil
}

// CheckMember validates m: a Name and an Incarnation of 1..MaxNameLen bytes
// of UTF-8 without NUL, and a Weight in 0..MaxWeight.
func CheckMember(m Member) error {
	if err := checkName("member name", m.Name); err != nil {
		return err
	}
	if err := checkName("incarnation", m.Incarnation); err != nil {
		return err
	}
	if m.Weight < 0 || m.Weight > MaxWeight {
		return fmt.Errorf("%w: member %q has weight %d, want 0..%d", ErrInvalidArgument, m.Name, m.Weight, MaxWeight)
	}
	return nil
}

// CheckOwner validates a lease owner (a Member's Incarnation).
func CheckOwner(owner string) error { return checkName("lease owner", owner) }

// CheckTTL validates a lease or heartbeat TTL: at least MinLeaseTTL.
func CheckTTL(ttl time.Duration) error {
	if ttl < MinLeaseTTL {
		return fmt.Errorf("%w: ttl %v, at least %v", ErrInvalidArgument, ttl, MinLeaseTTL)
	}
	return nil
}

// CheckShards validates the shards of an Acquire: each in 0..MaxShards-1,
// none twice.
func CheckShards(shards []int) error {
	seen := make(map[int]struct{}, len(shards))
	for _, s := range shards {
		if s < 0 || s >= MaxShards {
			return fmt.Errorf("%w: shard %d, want 0..%d", ErrInvalidArgument, s, MaxShards-1)
		}
		if _, dup := seen[s]; dup {
			return fmt.Errorf("%w: shard %d named twice", ErrInvalidArgument, s)
		}
		seen[s] = struct{}{}
	}
	return nil
}

// CheckLeases validates the leases of a Renew or Release: shards in range
// and none twice, tokens above 0, valid owners.
func CheckLeases(held []Lease) error {
	shards := make([]int, len(held))
	for i, l := range held {
		if l.Token == 0 {
			return fmt.Errorf("%w: lease of shard %d has token 0", ErrInvalidArgument, l.Shard)
		}
		if err := CheckOwner(l.Owner); err != nil {
			return err
		}
		shards[i] = l.Shard
	}
	return CheckShards(shards)
}

func checkName(what, s string) error {
	if len(s) < 1 || len(s) > MaxNameLen {
		return fmt.Errorf("%w: %s must be 1..%d bytes, got %d", ErrInvalidArgument, what, MaxNameLen, len(s))
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidArgument, what, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return fmt.Errorf("%w: %s %q contains a NUL byte", ErrInvalidArgument, what, s)
		}
	}
	return nil
}

// Fenced reports whether a cursor read from the store shows a newer owner
// than token: after an Advance from a cursor carrying token failed with
// ErrConflict, it tells a takeover (the caller must stop) from a plain
// conflict.
func Fenced(stored Cursor, token uint64) bool { return stored.Owner > token }

// maxClaimTries bounds Claim's compare-and-set attempts against writers that
// keep moving the cursor.
const maxClaimTries = 16

// Claim makes token (a Lease's, above 0) the Owner of stream s's cursor and
// returns the cursor as claimed, its Owner token: from then on, an advance
// from a cursor carrying an older token fails. A cursor that already carries
// token is returned as it is. It fails with an error wrapping ErrFenced when
// the cursor carries a higher token (a newer owner claimed the stream). The
// returned cursor includes every advance made before the claim, the older
// owners' too.
func Claim(ctx context.Context, st Store, s Stream, token uint64) (Cursor, error) {
	if token == 0 {
		return Cursor{}, fmt.Errorf("%w: claim of %s with token 0", ErrInvalidArgument, s)
	}
	if err := s.Validate(); err != nil {
		return Cursor{}, err
	}
	for range maxClaimTries {
		cs, err := st.Cursors(ctx, []Stream{s})
		if err != nil {
			return Cursor{}, Failed(err, 0, 1)
		}
		c := cs[0]
		if Fenced(c, token) {
			return Cursor{}, fmt.Errorf("%w: %s is claimed by token %d, above %d", ErrFenced, s, c.Owner, token)
		}
		if c.Owner == token {
			return c, nil
		}
		to := c
		to.Owner = token
		to.Skipped = append([]Range(nil), c.Skipped...)
		err = st.Advance(ctx, []Advance{{Stream: s, From: c, To: to}})
		if err == nil {
			return to, nil
		}
		if err = Failed(err, 0, 1); !errors.Is(err, ErrConflict) {
			return Cursor{}, err
		}
		if ctx.Err() != nil {
			return Cursor{}, ctx.Err()
		}
	}
	return Cursor{}, fmt.Errorf("%w: claim of %s: the cursor kept moving (%d tries)", ErrConflict, s, maxClaimTries)
}
