package lease

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/inorder/inorder/internal/shard"
	"github.com/inorder/inorder/seqstore"
)

// Kind is what an Action asks for.
type Kind int

// The kinds of Action. Heartbeat, Acquire, Renew, Release and Leave are
// store calls, whose outcomes come back as the matching Done event; Start,
// Revoke and Fence are for the receiver.
const (
	// Heartbeat: seqstore.Leaser.Heartbeat with the keeper's Member and
	// TTL, then Leaser.Leases; the outcome goes to Core.HeartbeatDone with
	// the time the heartbeat was sent.
	Heartbeat Kind = iota + 1
	// Acquire: Leaser.Acquire of Action.Shards; outcome to Core.AcquireDone.
	Acquire
	// Renew: Leaser.Renew of Action.Leases; outcome to Core.RenewDone.
	Renew
	// Release: Leaser.Release of Action.Leases; outcome to
	// Core.ReleaseDone.
	Release
	// Leave: Leaser.Leave of the keeper's incarnation; outcome to
	// Core.LeaveDone.
	Leave
	// Start: the receiver may fetch and deliver the shard of
	// Action.Leases[0], fencing its cursor writes with the lease's token.
	Start
	// Revoke: the receiver stops fetching Action.Shards[0], lets its open
	// deliveries finish, makes its advances durable, and then reports
	// Core.Drained.
	Revoke
	// Fence: the receiver stops Action.Shards[0] at once: it cancels the
	// handlers and drops what it buffered (never deleting it). No Drained
	// is expected.
	Fence
)

var kindNames = [...]string{"", "heartbeat", "acquire", "renew", "release", "leave", "start", "revoke", "fence"}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Action is one thing the shell must do.
type Action struct {
	Kind Kind
	// Shards are the shards of an Acquire, or the one shard of a Revoke or
	// a Fence.
	Shards []int
	// Leases are the leases of a Renew or a Release, or the one lease of a
	// Start.
	Leases []seqstore.Lease
}

// String describes a, as "acquire [0 3]", "renew [0#7 3#9]" or "fence 3".
func (a Action) String() string {
	switch a.Kind {
	case Acquire:
		return fmt.Sprintf("acquire %v", a.Shards)
	case Revoke, Fence:
		return fmt.Sprintf("%v %d", a.Kind, a.Shards[0])
	case Start:
		return fmt.Sprintf("start %d#%d", a.Leases[0].Shard, a.Leases[0].Token)
	case Renew, Release:
		parts := make([]string, len(a.Leases))
		for i, l := range a.Leases {
			parts[i] = fmt.Sprintf("%d#%d", l.Shard, l.Token)
		}
		return fmt.Sprintf("%v [%s]", a.Kind, strings.Join(parts, " "))
	}
	return a.Kind.String()
}

// phase is the keeper's: running, then the steps of Close.
type phase int

const (
	running   phase = iota
	draining        // Close: revoked everything, waiting for Drained
	releasing       // Close: Release of the drained leases in flight
	leaving         // Close: Leave in flight
	closed
)

// holding is where a held lease stands.
type holding int

const (
	serving holding = iota // started: the receiver may fetch
	revoked                // Revoke sent, waiting for Drained
	drained                // drained, to release at releaseAt
	freeing                // a Release of it in flight
)

type held struct {
	lease    seqstore.Lease
	state    holding
	deadline time.Time // local: send time of the last proof + RenewDeadline
	revokeAt time.Time // serving: when to revoke; zero when assigned here
	// adopted: acquired as an orphan, not assigned here; then view is the
	// view's Version at acquisition, and it is revoked only once the view
	// changed.
	adopted   bool
	view      uint64
	releaseAt time.Time // drained: when to send the Release
}

// Core is the keeper's decision logic: events in, actions out. Its methods
// are not safe for concurrent use; the shell calls them from one
// goroutine.
type Core struct {
	opts   Options
	self   seqstore.Member
	shards int
	phase  phase
	now    time.Time

	view    seqstore.View
	desired shard.Assignment
	// orphanSince is, per shard, when it was first read without a live
	// lease, neither held here; zero when it had one at the last read.
	orphanSince []time.Time

	held map[int]*held

	heartbeatOut  bool
	nextHeartbeat time.Time
	// wokenDuring: a Wake came while a Heartbeat was out, whose reads may
	// predate the change; another follows its answer.
	wokenDuring bool
	// wakeCredit is how many heartbeats wake-ups may bring forward at
	// once, as of creditAt: up to wakeBurst, refilled by one per WakeGap.
	// woken: the next heartbeat was brought forward, and spends one.
	wakeCredit float64
	creditAt   time.Time
	woken      bool
	renewOut   bool
	renewing   []seqstore.Lease // the leases of the Renew in flight
	nextRenew  time.Time
	acquireOut bool
	// orphans are the shards of the Acquire out that were asked for as
	// orphans, not as assigned here.
	orphans     map[int]bool
	releasesOut int
	closeBy     time.Time

	actions []Action
}

// NewCore returns the core of a keeper for member self over a topology of
// shards shards. Its first Tick sends a heartbeat.
func NewCore(self seqstore.Member, shards int, opts *Options) (*Core, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := seqstore.CheckMember(self); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	if shards < 1 || shards > seqstore.MaxShards {
		return nil, fmt.Errorf("lease: %w: %d shards, want 1..%d", seqstore.ErrInvalidArgument, shards, seqstore.MaxShards)
	}
	return &Core{
		opts:        o,
		self:        self,
		shards:      shards,
		orphanSince: make([]time.Time, shards),
		held:        make(map[int]*held),
	}, nil
}

// Ready returns the actions decided since the last call, in order, and
// forgets them.
func (c *Core) Ready() []Action {
	a := c.actions
	c.actions = nil
	return a
}

// Closed reports whether Close has run its course: every lease released or
// fenced, and the Leave answered.
func (c *Core) Closed() bool { return c.phase == closed }

// Held returns the leases held, by shard, whatever their state.
func (c *Core) Held() []seqstore.Lease {
	out := make([]seqstore.Lease, 0, len(c.held))
	for _, s := range c.heldShards() {
		out = append(out, c.held[s].lease)
	}
	return out
}

// Serving returns the shards the receiver may fetch: started and neither
// revoked nor fenced.
func (c *Core) Serving() []int {
	var out []int
	for _, s := range c.heldShards() {
		if c.held[s].state == serving {
			out = append(out, s)
		}
	}
	return out
}

// Deadline returns the lease held on shard and its local deadline: the
// time until which the receiver may hand out the shard's messages, before
// the store can let another member take the shard over. ok is false when
// no lease on shard is held.
func (c *Core) Deadline(shard int) (l seqstore.Lease, deadline time.Time, ok bool) {
	h := c.held[shard]
	if h == nil {
		return seqstore.Lease{}, time.Time{}, false
	}
	return h.lease, h.deadline, true
}

// Next returns the earliest time at which a Tick has something to do, or
// the zero time when only an event can change anything.
func (c *Core) Next() time.Time {
	var next time.Time
	at := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if c.phase == closed {
		return next
	}
	for _, h := range c.held {
		at(h.deadline)
		if c.phase == running {
			at(h.revokeAt)
			if h.state == drained {
				at(h.releaseAt)
			}
		}
	}
	if c.phase == running && !c.heartbeatOut {
		at(c.nextHeartbeat)
	}
	if c.renews() && !c.renewOut && len(c.held) > 0 {
		at(c.nextRenew)
	}
	if c.phase == draining && slices.ContainsFunc(c.Held(), func(l seqstore.Lease) bool { return c.held[l.Shard].state == revoked }) {
		at(c.closeBy) // past it, waiting for an Acquire's answer needs no tick
	}
	return next
}

// Tick advances the time to now and does what is due: fences, heartbeats,
// renewals, revokes, releases, the steps of Close.
func (c *Core) Tick(now time.Time) {
	c.begin(now)
	c.end()
}

// HeartbeatDone reports a Heartbeat's outcome: the view and the live
// leases read after it, or err; sentAt is when it was sent.
func (c *Core) HeartbeatDone(now time.Time, view seqstore.View, live []seqstore.Lease, err error, sentAt time.Time) {
	c.begin(now)
	defer c.end()
	c.heartbeatOut = false
	if err != nil {
		c.nextHeartbeat = c.now.Add(c.opts.RetryPeriod)
		c.followWake()
		return
	}
	c.nextHeartbeat = sentAt.Add(c.opts.RenewEvery)
	c.followWake()
	if c.phase != running {
		return
	}
	c.view = view
	if c.opts.Balance >= 1 {
		c.desired = shard.AssignBounded(view.Members, c.shards, c.opts.Balance)
	} else {
		c.desired = shard.Assign(view.Members, c.shards)
	}
	liveBy := make(map[int]seqstore.Lease, len(live))
	for _, l := range live {
		liveBy[l.Shard] = l
	}
	// A higher token on a held shard: taken over (tokens only grow, so a
	// lower one is a read older than this keeper's acquisition).
	for _, s := range c.heldShards() {
		if l, ok := liveBy[s]; ok && l.Token > c.held[s].lease.Token {
			c.lose(s)
		}
	}
	for s := range c.orphanSince {
		if _, ok := liveBy[s]; ok || c.held[s] != nil {
			c.orphanSince[s] = time.Time{}
		} else if c.orphanSince[s].IsZero() {
			c.orphanSince[s] = c.now
		}
	}
	c.planRevokes()
	c.planAcquire(liveBy)
}

// Wake reports a wake-up from the store (seqstore.LeaseWatcher): a lease
// may have been released, or the membership changed. The core heartbeats
// (which reads the view and the live leases) at once; when a heartbeat is
// out, another follows its answer, since its reads may predate the change.
// Wake-ups spend a credit of wakeBurst (2) heartbeats, refilled by one per
// WakeGap: a storm of wake-ups costs at most one heartbeat per WakeGap,
// after a first two at once. Two, because one change often comes as two
// calls (a Close releases, then leaves) and the second must not wait a
// WakeGap. A wake-up only brings the next heartbeat forward; a missed one
// costs the wait until the next regular heartbeat. Wake does nothing once
// Close began.
func (c *Core) Wake(now time.Time) {
	c.begin(now)
	defer c.end()
	if c.phase != running {
		return
	}
	if c.heartbeatOut {
		c.wokenDuring = true
		return
	}
	c.heartbeatSoon()
}

// WakeGap is the time in which wake-ups earn one heartbeat: a quarter of
// RenewEvery.
func (c *Core) WakeGap() time.Duration { return c.opts.RenewEvery / 4 }

// wakeBurst is how many heartbeats wake-ups may ask for at once.
const wakeBurst = 2

// credit returns the wake credit at the core's time.
func (c *Core) credit() float64 {
	if c.creditAt.IsZero() {
		return wakeBurst
	}
	return min(wakeBurst, c.wakeCredit+float64(c.now.Sub(c.creditAt))/float64(c.WakeGap()))
}

// followWake schedules the heartbeat a Wake asked for while one was out.
func (c *Core) followWake() {
	if c.wokenDuring {
		c.wokenDuring = false
		c.heartbeatSoon()
	}
}

// heartbeatSoon brings the next heartbeat forward: to now with a credit
// to spend, else to when the credit reaches one.
func (c *Core) heartbeatSoon() {
	at := c.now
	if cr := c.credit(); cr < 1 {
		at = c.now.Add(time.Duration((1 - cr) * float64(c.WakeGap())))
	}
	if at.Before(c.nextHeartbeat) {
		c.nextHeartbeat, c.woken = at, true
	}
}

// planRevokes sets when to revoke each served shard assigned to another
// member, and clears it for those assigned here again.
func (c *Core) planRevokes() {
	for _, s := range c.heldShards() {
		h := c.held[s]
		if h.state != serving {
			continue
		}
		want := c.desired[s]
		elsewhere := want != "" && want != c.self.Name && (!h.adopted || h.view != c.view.Version)
		switch {
		case !elsewhere:
			h.revokeAt = time.Time{}
		case h.revokeAt.IsZero():
			h.revokeAt = c.now.Add(c.opts.RebalanceDelay)
		}
	}
}

// planAcquire asks for the shards assigned here and the orphans, of those
// with no live lease.
func (c *Core) planAcquire(liveBy map[int]seqstore.Lease) {
	if c.acquireOut {
		return
	}
	var want []int
	for s := range c.shards {
		if c.held[s] != nil {
			continue
		}
		if _, ok := liveBy[s]; ok {
			continue
		}
		orphan := !c.orphanSince[s].IsZero() && !c.now.Before(c.orphanSince[s].Add(2*c.opts.TTL))
		switch {
		case c.desired[s] == c.self.Name:
			want = append(want, s)
		case orphan:
			want = append(want, s)
			if c.orphans == nil {
				c.orphans = make(map[int]bool)
			}
			c.orphans[s] = true
		}
	}
	if len(want) > 0 {
		c.acquireOut = true
		c.emit(Action{Kind: Acquire, Shards: want})
	}
}

// AcquireDone reports an Acquire's outcome: the leases taken, or err;
// sentAt is when it was sent, the start of the new leases' proof.
func (c *Core) AcquireDone(now time.Time, leases []seqstore.Lease, err error, sentAt time.Time) {
	c.begin(now)
	defer c.end()
	c.acquireOut = false
	orphans := c.orphans
	c.orphans = nil
	if err != nil || c.phase == closed {
		return // the next heartbeat tries again; or aborted: they expire
	}
	deadline := sentAt.Add(c.opts.RenewDeadline)
	for _, l := range leases {
		if l.Owner != c.self.Incarnation || l.Shard < 0 || l.Shard >= c.shards || c.held[l.Shard] != nil {
			continue
		}
		if !c.now.Before(deadline) {
			continue // proven too long ago: never started, it expires at the store
		}
		h := &held{lease: l, deadline: deadline}
		c.held[l.Shard] = h
		if c.phase != running {
			h.state, h.releaseAt = drained, c.now // closing: never started
			continue
		}
		// Adopted only if asked for as an orphan: a shard asked for as
		// assigned here, and assigned elsewhere by a view read since (a
		// join woke a heartbeat while the Acquire was out), is revoked
		// after RebalanceDelay like any other (planRevokes below).
		if orphans[l.Shard] && (c.desired == nil || c.desired[l.Shard] != c.self.Name) {
			h.adopted, h.view = true, c.view.Version
		}
		c.orphanSince[l.Shard] = time.Time{}
		c.emit(Action{Kind: Start, Leases: []seqstore.Lease{l}})
	}
	if c.phase == running {
		c.planRevokes()
	}
}

// RenewDone reports a Renew's outcome: the leases it reported lost, or
// err; sentAt is when it was sent. The leases renewed get the local
// deadline sentAt + RenewDeadline.
func (c *Core) RenewDone(now time.Time, lost []seqstore.Lease, err error, sentAt time.Time) {
	c.begin(now)
	defer c.end()
	sent := c.renewing
	c.renewOut, c.renewing = false, nil
	if err != nil {
		c.nextRenew = c.now.Add(c.opts.RetryPeriod)
		return
	}
	c.nextRenew = sentAt.Add(c.opts.RenewEvery)
	deadline := sentAt.Add(c.opts.RenewDeadline)
	for _, l := range sent {
		h := c.held[l.Shard]
		if h == nil || h.lease.Token != l.Token {
			continue // fenced or released meanwhile
		}
		if slices.ContainsFunc(lost, func(x seqstore.Lease) bool { return x.Shard == l.Shard && x.Token == l.Token }) {
			c.lose(l.Shard)
			continue
		}
		if deadline.After(h.deadline) {
			h.deadline = deadline
		}
	}
}

// ReleaseDone reports a Release's outcome. A failed release is sent again
// after RetryPeriod while running, and given up at Close (the lease then
// expires at the store).
func (c *Core) ReleaseDone(now time.Time, released []seqstore.Lease, err error) {
	c.begin(now)
	defer c.end()
	c.releasesOut--
	for _, l := range released {
		h := c.held[l.Shard]
		if h == nil || h.lease.Token != l.Token || h.state != freeing {
			continue
		}
		if err != nil && c.phase == running {
			h.state, h.releaseAt = drained, c.now.Add(c.opts.RetryPeriod)
			continue
		}
		delete(c.held, l.Shard)
	}
}

// LeaveDone reports the Leave's outcome, which ends Close.
func (c *Core) LeaveDone(now time.Time, err error) {
	c.begin(now)
	defer c.end()
	if c.phase == leaving {
		c.phase = closed
	}
}

// Drained reports that the receiver finished revoking shard: no delivery
// outstanding and its advances durable, so its lease may be released.
func (c *Core) Drained(now time.Time, shard int) {
	c.begin(now)
	defer c.end()
	if h := c.held[shard]; h != nil && h.state == revoked {
		h.state, h.releaseAt = drained, c.now
	}
}

// Expired reports that the receiver found the lease with token on shard
// past its local deadline (Deadline) at a hand-out: its clock ran ahead
// of this core's steps, for instance between a renewal's answer and the
// next publication of its deadline. The lease is dropped as lost: the
// receiver is fenced (it stopped handing out the shard already) and the
// lease is never released, so it expires at the store, after which the
// shard is acquired again. A lease no longer held, or another token, is
// ignored.
func (c *Core) Expired(now time.Time, shard int, token uint64) {
	c.begin(now)
	defer c.end()
	if h := c.held[shard]; h != nil && h.lease.Token == token {
		c.lose(shard)
	}
}

// Close starts the shutdown: every served shard is revoked at once.
func (c *Core) Close(now time.Time) {
	c.begin(now)
	defer c.end()
	if c.phase != running {
		return
	}
	c.phase = draining
	c.closeBy = c.now.Add(c.opts.CloseDrain)
	for _, s := range c.heldShards() {
		if c.held[s].state == serving {
			c.revoke(s)
		}
	}
}

// begin starts every event: the time moves (never back), and each lease
// past its local deadline is fenced before anything else happens.
func (c *Core) begin(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
	for _, s := range c.heldShards() {
		if !c.now.Before(c.held[s].deadline) {
			c.lose(s)
		}
	}
}

// end finishes every event with what is due.
func (c *Core) end() {
	switch c.phase {
	case running:
		if !c.heartbeatOut && !c.now.Before(c.nextHeartbeat) {
			c.heartbeatOut = true
			if c.woken {
				c.wakeCredit, c.creditAt, c.woken = c.credit()-1, c.now, false
			}
			c.emit(Action{Kind: Heartbeat})
		}
		c.renewIfDue()
		for _, s := range c.heldShards() {
			h := c.held[s]
			if h.state == serving && !h.revokeAt.IsZero() && !c.now.Before(h.revokeAt) {
				c.revoke(s)
			}
		}
		c.release(func(h *held) bool { return !c.now.Before(h.releaseAt) })
	case draining:
		c.renewIfDue()
		pending := false
		for _, s := range c.heldShards() {
			if c.held[s].state == revoked {
				if c.now.Before(c.closeBy) {
					pending = true
				} else {
					c.lose(s) // not drained in time: stop at once, keep the lease
				}
			}
		}
		if pending || c.acquireOut {
			return
		}
		c.phase = releasing
		c.release(func(*held) bool { return true })
		fallthrough
	case releasing:
		if c.releasesOut == 0 {
			c.phase = leaving
			c.emit(Action{Kind: Leave})
		}
	}
}

func (c *Core) renews() bool { return c.phase == running || c.phase == draining }

func (c *Core) renewIfDue() {
	if c.renewOut || c.now.Before(c.nextRenew) {
		return
	}
	var ls []seqstore.Lease
	for _, s := range c.heldShards() {
		if h := c.held[s]; h.state != freeing {
			ls = append(ls, h.lease)
		}
	}
	if len(ls) == 0 {
		c.nextRenew = c.now.Add(c.opts.RenewEvery)
		return
	}
	c.renewOut, c.renewing = true, ls
	c.emit(Action{Kind: Renew, Leases: ls})
}

// release sends one Release of the drained leases that due selects.
func (c *Core) release(due func(*held) bool) {
	var ls []seqstore.Lease
	for _, s := range c.heldShards() {
		if h := c.held[s]; h.state == drained && due(h) {
			h.state = freeing
			ls = append(ls, h.lease)
		}
	}
	if len(ls) > 0 {
		c.releasesOut++
		c.emit(Action{Kind: Release, Leases: ls})
	}
}

func (c *Core) revoke(s int) {
	h := c.held[s]
	h.state, h.revokeAt = revoked, time.Time{}
	c.emit(Action{Kind: Revoke, Shards: []int{s}})
}

// lose forgets a lease this keeper can no longer prove: a receiver still
// working on it (serving or revoked) is fenced; a drained one has nothing
// left to stop. It is never released: it expires at the store.
func (c *Core) lose(s int) {
	h := c.held[s]
	if h.state == serving || h.state == revoked {
		c.emit(Action{Kind: Fence, Shards: []int{s}})
	}
	delete(c.held, s)
}

func (c *Core) heldShards() []int {
	ss := make([]int, 0, len(c.held))
	for s := range c.held {
		ss = append(ss, s)
	}
	slices.Sort(ss)
	return ss
}

func (c *Core) emit(a Action) { c.actions = append(c.actions, a) }

// Abort ends the keeper at once, as a Close whose time ran out: every
// lease is dropped, the shards the receiver still works on are fenced, and
// nothing is released (the leases expire at the store); there is no
// Leave either, so the membership expires after TTL. Calls in flight are
// ignored when they come back.
func (c *Core) Abort(now time.Time) {
	c.begin(now)
	if c.phase == closed {
		return
	}
	for _, s := range c.heldShards() {
		c.lose(s)
	}
	c.phase = closed
}
