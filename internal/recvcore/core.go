package recvcore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/seqstore"
)

// Core is the receive side's state machine. It is not safe for concurrent
// use: the shell serialises its calls.
//
// Its state is split into named parts: the groups and the ring of ready
// ones, one lane per kind of I/O (reads, commits, deletes, vis, deads,
// parks, unparks, scans), the budget (memory, the cap, the rates), the set
// of Unordered copies, and the outbox of reports and resolutions.
type Core struct {
	cfg     Config
	rng     *rand.Rand
	now     time.Time // the time of the event being handled
	closing bool

	groups   map[string]*group
	ring     fifo[ringItem]
	timers   timerHeap
	idle     groupList         // groups that hold and wait for nothing, oldest first
	quiet    groupList         // groups that hold nothing in memory but wait, oldest first
	compactq fifo[compactItem] // groups gone idle, compacted after compactDelay
	stuck    map[*group]struct{}

	reads    readLane
	commits  commitLane
	deletes  deleteLane
	vis      visLane
	deads    deadLane
	parks    parkLane
	unparks  unparkLane
	scans    scanLane
	requeues requeueLane

	budget      budget
	pu          parkUse
	unord       unorderedSet
	carves      map[*group]*carveState // AtMostOnce late arrivals to carve, by group (carve.go)
	pool        msgPool
	repairs     []repairWait // repairs waiting for an event (repair.go): few, an operator's
	out         outbox
	outstanding int // deliveries Next returned and not settled, abandoned or refused

	gbuf  [envelope.MaxGroupLen]byte // ParseRaw's buffer
	st    Stats
	trace func(group string, from, to phase) // see SetTrace
}

// ringItem is a ready group, or a ready Unordered message.
type ringItem struct {
	g   *group
	m   *msg
	gen uint32 // m.gen when pushed: m may be reused meanwhile
}

// outbox collects what the next Ready hands the shell besides actions.
type outbox struct {
	reports  []Report
	resolved []Resolution
	ids      uint64
	tickets  Ticket
}

// New returns a Core for cfg.
func New(cfg Config) (*Core, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Core{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		groups: make(map[string]*group),
		stuck:  make(map[*group]struct{}),
		unord:  newUnorderedSet(),
	}
	c.reads.init()
	c.commits.init()
	c.deletes.init()
	c.vis.init(&cfg)
	c.deads.init()
	c.parks.init()
	c.unparks.init()
	c.scans.init()
	c.requeues.init()
	c.budget.undelTokens = undeletedBurst(&c.cfg)
	return c, nil
}

// begin starts an event at now: every event method calls it first, and
// end last.
func (c *Core) begin(now time.Time) {
	c.now = now
	c.budget.refill(now, &c.cfg)
}

// end settles the Core after an event: the peak of held messages, and room
// made when the cap or the memory budget is short.
func (c *Core) end() {
	c.settle(c.now)
	if c.budget.live == 0 && len(c.pool.spare) > 0 && !c.now.Before(c.pool.arrived.Add(compactDelay)) {
		// Nothing received is held, and nothing arrived for
		// compactDelay: the spare msgs (up to 750 KB) go, and come back
		// with the traffic.
		c.pool.spare = nil
	}
	if checkInvariants {
		if err := c.Invariants(); err != nil {
			panic(err)
		}
	}
}

// checkInvariants makes every event check the Core's invariants (tests).
var checkInvariants = false

// backoff returns the wait before retry number attempt (1 for the first):
// exponential from RetryInitial, capped at RetryMax, with full jitter.
func (c *Core) backoff(attempt int) time.Duration {
	d := c.cfg.RetryInitial
	for i := 1; i < attempt && d < c.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.RetryMax)
	return d/2 + time.Duration(c.rng.Int64N(max(int64(d/2), 1)))
}

func (c *Core) id() uint64 {
	c.out.ids++
	return c.out.ids
}

func (c *Core) ticket() Ticket {
	c.out.tickets++
	return c.out.tickets
}

func (c *Core) report(r Report) { c.out.reports = append(c.out.reports, r) }

func (c *Core) resolve(t Ticket, err error) {
	if t != 0 {
		c.out.resolved = append(c.out.resolved, Resolution{Ticket: t, Err: err})
	}
}

func (c *Core) addTimer(t timer) {
	c.budget.mem += timerCost(&t)
	c.timers.push(t)
	if len(c.timers) > 2*(len(c.groups)+c.outstanding)+64 {
		c.dropStaleTimers()
	}
}

// dropStaleTimers drops the timers of groups shed since (a flood of groups
// would otherwise keep one per shed group for GapTimeout). It runs once
// the timers outnumber twice the groups in memory: amortised, O(1) per
// timer.
func (c *Core) dropStaleTimers() {
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.m != nil || c.groups[t.name] != nil {
			keep = append(keep, t)
		} else {
			c.budget.mem -= timerCost(&t)
		}
	}
	clear(c.timers[len(keep):])
	c.timers = keep
	slices.SortFunc(c.timers, func(a, b timer) int { return a.at.Compare(b.at) }) // a sorted slice is a heap
}

func (c *Core) stream(name string) seqstore.Stream {
	return seqstore.Stream{Queue: c.cfg.Queue, Group: name}
}

// Ready returns the actions due at now, the reports and resolutions made
// since the last call, and what the shell needs to know until the next
// event: whether Next may hand something out, the fetch room, and when to
// Tick. The shell executes every action and reports its outcome with the
// matching method and the action's ID.
func (c *Core) Ready(now time.Time) Ready {
	c.now = now
	c.budget.refill(now, &c.cfg)
	var rd Ready
	// Each lane in turn (not through ioLane: rd would escape), skipping
	// those whose ready would do nothing: most lanes have nothing queued
	// on most steps, and the commit and delete lanes nothing due before
	// the time they keep (see lane). One that ran changed.
	if c.reads.pending() {
		c.reads.ready(c, now, &rd)
	}
	if c.commits.pending(c, now) {
		c.commits.ready(c, now, &rd)
		c.commits.changed = true
	}
	if c.parks.pending() {
		c.parks.ready(c, now, &rd)
	}
	if c.unparks.pending() {
		c.unparks.ready(c, now, &rd)
	}
	if c.scans.pending() {
		c.scans.ready(c, now, &rd)
	}
	c.vis.ready(c, now, &rd)
	if c.deletes.pending(c, now) {
		c.deletes.ready(c, now, &rd)
		c.deletes.changed = true
	}
	if c.deads.pending() {
		c.deads.ready(c, now, &rd)
	}
	if c.requeues.pending() {
		c.requeues.ready(c, now, &rd)
	}
	if checkDues {
		c.verifySkipped(now)
	}
	rd.Reports, c.out.reports = c.out.reports, nil
	rd.Resolved, c.out.resolved = c.out.resolved, nil
	rd.Available = c.Available()
	rd.Room = c.Room(now)
	rd.Wake, _ = c.Deadline()
	return rd
}

// verifySkipped runs the ready of each lane that Ready skips now (its
// pending false) on a scratch Ready, and panics when one does anything
// (tests, with checkDues): a lane may be skipped only when its ready would
// do nothing. It allocates nothing (TestAllocsPerMessage runs with it).
func (c *Core) verifySkipped(now time.Time) {
	var rd Ready
	before, since := c.skipState(), c.deletes.since
	for i, name := range [...]string{"reads", "commits", "parks", "unparks", "scans", "deletes", "deads", "requeues"} {
		switch {
		case i == 0 && !c.reads.pending():
			c.reads.ready(c, now, &rd)
		case i == 1 && !c.commits.pending(c, now):
			c.commits.ready(c, now, &rd)
		case i == 2 && !c.parks.pending():
			c.parks.ready(c, now, &rd)
		case i == 3 && !c.unparks.pending():
			c.unparks.ready(c, now, &rd)
		case i == 4 && !c.scans.pending():
			c.scans.ready(c, now, &rd)
		case i == 5 && !c.deletes.pending(c, now):
			c.deletes.ready(c, now, &rd)
		case i == 6 && !c.deads.pending():
			c.deads.ready(c, now, &rd)
		case i == 7 && !c.requeues.pending():
			c.requeues.ready(c, now, &rd)
		default:
			continue
		}
		if after := c.skipState(); after != before || !rd.Empty() || !c.deletes.since.Equal(since) {
			panic(fmt.Sprintf("recvcore: Ready skipped the %s lane, whose ready did something: %v, then %v", name, before, after))
		}
	}
}

// skipState is what a lane's ready changes when it does anything: the
// action ids taken, the lanes' queues, the urgent delete, the reports.
func (c *Core) skipState() [4]int {
	queued := c.reads.q.len() + c.commits.dirty.len() + len(c.parks.q) + c.unparks.q.len() +
		c.deletes.q.len() + len(c.deads.q) + len(c.requeues.q)
	urgent := 0
	if c.deletes.urgent {
		urgent = 1
	}
	return [4]int{int(c.out.ids), queued, urgent, len(c.out.reports)}
}

// Deadline returns when the Core next has something to do on its own (a
// timer, a lane's batching window or backoff, a visibility to extend), if
// anything.
func (c *Core) Deadline() (time.Time, bool) {
	var at time.Time
	if len(c.timers) > 0 {
		at = earlier(at, c.timers[0].at)
	}
	at = c.lanesDue(at)
	if b := &c.budget; b.fetchAfter.After(c.now) {
		at = earlier(at, b.fetchAfter) // the fetchers may go on then
	}
	if b := &c.budget; len(b.released) > 0 && !c.closing && c.cfg.MaxHeld-b.live-len(b.released) < c.reserve() {
		at = earlier(at, b.released[0].until) // the cap is short: room comes back then
	}
	if it, ok := c.compactq.peek(); ok {
		at = earlier(at, it.at.Add(compactDelay))
	}
	if g := c.idle.head; g != nil && c.cfg.IdleEvict >= 0 {
		at = earlier(at, g.idleSince.Add(c.cfg.IdleEvict))
	}
	return at, !at.IsZero()
}

// earlier returns the earlier of at and t, where zero means none.
func earlier(at, t time.Time) time.Time {
	if !t.IsZero() && (at.IsZero() || t.Before(at)) {
		return t
	}
	return at
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Tick fires the timers due at now.
func (c *Core) Tick(now time.Time) {
	c.begin(now)
	defer c.end()
	for len(c.timers) > 0 && !c.timers[0].at.After(now) {
		t := c.timers.pop()
		c.budget.mem -= timerCost(&t)
		c.fire(t, now)
	}
	c.evictIdle(now)
	c.endHolds(now)
	c.settle(now)
	c.compact(now)
}

func (c *Core) fire(t timer, now time.Time) {
	if t.kind == tRetry {
		c.retryDue(now, t)
		return
	}
	g := c.groups[t.name]
	if g == nil {
		return // shed since
	}
	g.wake()
	switch t.kind {
	case tStart:
		c.endSettle(g, now)
	case tFailed:
		if g.phase == phFailed && !now.Before(g.since.Add(c.cfg.RetryMax)) {
			c.reads.need(g)
		}
	case tGap:
		g.gapTimer = false
	}
	c.update(g, now)
}

// retryDue makes a Nacked message ready to be handed out again, if the
// timer is its latest retry's.
func (c *Core) retryDue(now time.Time, t timer) {
	m := t.m
	if m.gen != t.gen || m.attempt != t.attempt || !m.waitsFor(outRetry) {
		return
	}
	if c.closing {
		m.dropOut() // no hand-out comes: back to the queue
		c.giveBack(now, m)
		return
	}
	m.ready()
	if g := m.g; g != nil {
		if g.phase != phEvicted && g.out == m {
			c.update(g, now)
		}
		return
	}
	c.ring.push(ringItem{m: m, gen: m.gen})
}

// Stats returns a snapshot of the counters.
func (c *Core) Stats() Stats {
	s := c.st
	b := &c.budget
	s.Held, s.MaxHeld = b.live, b.peakLive
	s.Buffered, s.BufferedBytes, s.MaxBuffered = b.buffered, b.bufferedBytes, b.peakBuffered
	s.Memory = b.mem
	s.ParkedNow, s.ParkedBytes = c.pu.n, c.pu.bytes
	s.Groups = len(c.groups)
	for g := range c.stuck {
		s.Stuck = append(s.Stuck, StuckGroup{Group: g.name, Reason: g.stuck, Since: g.since, Err: g.stuckErr})
	}
	return s
}
