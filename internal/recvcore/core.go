package recvcore

import (
	"container/heap"

	"github.com/inorder/inorder/internal/envelope"
	"math"
	"math/rand/v2"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Memory charged per item, beyond the bytes of its bodies and strings. They
// are rounded up from the sizes of the structs, slice slots and map entries
// each item takes (TestMemoryBudget checks the heap against them).
const (
	msgCost   = 320 // the msg struct (240 B), its slot in a list, the headers of its strings' allocations
	groupCost = 448 // the group struct (320 B) and its map entry
	coldCost  = 288 // a working group's groupCold (256 B)
	seenCost  = 160
	slotCost  = 8 // one pointer in a group's slice
)

// Core is the receive side's state machine. It is not safe for concurrent
// use: the shell serialises its calls.
type Core struct {
	cfg Config
	rng *rand.Rand

	groups map[string]*group
	ring   fifo[ringItem]
	timers timerHeap
	idle   idleList
	vis    visList

	dirty     fifo[*group]
	reads     fifo[*group]
	readBusy  map[uint64][]*group
	readAfter time.Time
	readFails int

	commit      *commitBatch
	spareCommit *commitBatch // the last batch, for reuse
	commitAfter time.Time    // backoff after a failed commit
	commitFails int
	dirtySince  time.Time // the oldest advance waiting: it is written CommitInterval later

	delq        fifo[*msg]
	delSince    time.Time
	delUrgent   bool // a hand-out waits for a delete: send the partial batch now
	delBusy     map[uint64]delBatch
	visBusy     map[uint64]visChange
	shortq      fifo[string]
	deadq       []*msg
	deadBusy    map[uint64][]*msg
	deadAfter   time.Time
	deadFails   int
	parkq       []*msg
	parkBusy    map[uint64][]*msg
	parkAfter   time.Time
	parkFails   int
	unparkq     fifo[*group]
	unparkBusy  map[uint64][]*group
	unparkAfter time.Time
	unparkFails int
	scanned     bool // the park's streams were listed
	scanBusy    uint64
	scanAfter   time.Time
	scanFails   int

	unordered map[seenKey]*msg     // Unordered copies held or out
	seen      map[seenKey]struct{} // Unordered copies settled
	seenOrder fifo[seenKey]

	// released holds the messages given back to the queue that stay
	// invisible until their time: received and not deleted, for the
	// service.
	released relHeap
	relBy    map[string]*relEntry // by receipt, while a shortening is queued

	// fetchAfter holds the fetchers back after batches of which nothing
	// could be kept (without parking: all released), so that fetching does
	// not make the whole queue invisible while nothing moves.
	fetchAfter time.Time
	useless    int

	live, peakLive int // messages received and not deleted (receipts held)
	outstanding    int // deliveries Next returned and not settled, abandoned or refused
	buffered       int // messages waiting for their turn
	peakBuffered   int
	bufferedBytes  int
	mem            int

	visTokens   float64
	visAt       time.Time
	undelTokens float64
	undelAt     time.Time

	spare    []*msg                     // msgs to reuse (see take)
	spareDel []delBatch                 // recycled lists of Delete actions
	gbuf     [envelope.MaxGroupLen]byte // ParseRaw's buffer
	stuck    map[*group]struct{}
	compactq fifo[compactItem] // groups gone idle, compacted after compactDelay

	reports  []Report
	resolved []Resolution
	ids      uint64
	tickets  Ticket
	now      time.Time // the time of the event being handled
	closing  bool
	st       Stats
}

type commitBatch struct {
	id     uint64
	groups []*group
	tos    []seqstore.Cursor
	froms  []seqstore.Cursor
	advs   []seqstore.Advance
}

type visChange struct {
	m       *msg   // nil for a shortening
	gen     uint32 // m.gen: m may be reused meanwhile (see take)
	receipt string
}

type seenKey struct {
	group, id  string
	epoch, seq uint64
}

// New returns a Core for cfg.
func New(cfg Config) (*Core, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Core{
		cfg:         cfg,
		rng:         rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		groups:      make(map[string]*group),
		readBusy:    make(map[uint64][]*group),
		delBusy:     make(map[uint64]delBatch),
		visBusy:     make(map[uint64]visChange),
		deadBusy:    make(map[uint64][]*msg),
		parkBusy:    make(map[uint64][]*msg),
		unparkBusy:  make(map[uint64][]*group),
		unordered:   make(map[seenKey]*msg),
		relBy:       make(map[string]*relEntry),
		seen:        make(map[seenKey]struct{}),
		stuck:       make(map[*group]struct{}),
		visTokens:   cfg.MaxVisibilityRate,
		undelTokens: undeletedBurst(cfg),
	}
	return c, nil
}

// undeletedBurst is how many receipts may run ahead of their deletes before
// the rate bound applies: one second's worth, at least the cap.
func undeletedBurst(cfg Config) float64 {
	return max(cfg.MaxUndeletedRate, float64(cfg.MaxHeld))
}

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
	c.ids++
	return c.ids
}

func (c *Core) ticket() Ticket {
	c.tickets++
	return c.tickets
}

func (c *Core) report(r Report) { c.reports = append(c.reports, r) }

func (c *Core) resolve(t Ticket, err error) {
	if t != 0 {
		c.resolved = append(c.resolved, Resolution{Ticket: t, Err: err})
	}
}

func (c *Core) addTimer(t timer) { c.timers.push(t) }

func (c *Core) stream(name string) seqstore.Stream {
	return seqstore.Stream{Queue: c.cfg.Queue, Group: name}
}

// Memory accounting. A message's cost is charged when the Core takes it and
// changed whenever it drops its body; a group's cost follows its slices.

func (c *Core) charge(m *msg) {
	m.cost = msgCost + len(m.raw) + len(m.id) + len(m.receipt)
	c.mem += m.cost
}

func (c *Core) recharge(m *msg) {
	c.mem -= m.cost
	c.charge(m)
}

func (c *Core) uncharge(m *msg) {
	c.mem -= m.cost
	m.cost = 0
}

func (c *Core) recost(g *group) {
	n := groupCost + len(g.name) + slotCost*cap(g.held) + 48*cap(g.settled) + 24*(cap(g.ack.Skipped)+cap(g.dur.Skipped))
	if !g.cold() {
		n += coldCost + slotCost*(cap(g.newer)+cap(g.pending)) + 32*cap(g.tickets)
	}
	c.mem += n - g.cost
	g.cost = n
}

// group returns the group named name, creating it (its cursor is then read
// from the store) or waking it from the idle list.
func (c *Core) group(now time.Time, name string) *group {
	g := c.groups[name]
	if g == nil {
		g = &group{name: name, groupCold: &groupCold{}}
		c.groups[name] = g
		c.becomeLoading(g, now)
		c.recost(g)
		return g
	}
	if g.idle {
		c.idle.remove(g)
	}
	g.wake()
	return g
}

// Phase transitions.

func (c *Core) becomeLoading(g *group, now time.Time) {
	g.phase, g.since = phLoading, now
	c.needRead(g)
}

func (c *Core) becomeResolving(g *group, now time.Time) {
	if g.phase == phResolving {
		return
	}
	g.phase = phResolving
	c.needRead(g)
	c.unring(g)
}

func (c *Core) needRead(g *group) {
	if !g.toRead {
		g.toRead = true
		c.reads.push(g)
	}
}

// becomeActive starts g at cursor cur, read from the store.
func (c *Core) becomeActive(g *group, now time.Time, cur seqstore.Cursor) {
	g.dur, g.ack = cur, cloneCursor(cur)
	g.epoch, g.next = cur.Epoch, max(cur.Next, 1)
	g.started = false
	g.probed, g.parkLow, g.parkHigh = false, 0, 0
	g.uncertain = nil
	c.clearStuck(g, "store")
	c.clearStuck(g, "conflict")
	if cur.Next == 0 {
		g.phase, g.since = phFresh, now
	} else {
		g.phase, g.since = phActive, now
	}
	pending := g.pending
	g.pending = nil
	for _, m := range pending {
		c.unbuffer(m)
		c.routeTagged(now, g, m)
	}
	c.update(g, now)
}

// becomeFailed stops g after a store error that retrying soon cannot fix
// (corrupt stored state, a refused advance): it is reported stuck, lets go
// of what it holds (those messages come back from the queue), and its
// cursor is read again after RetryMax.
func (c *Core) becomeFailed(g *group, now time.Time, err error) {
	g.phase, g.since = phFailed, now
	c.setStuck(g, now, "store", err)
	c.report(Report{Kind: ReportStuck, Msg: "group stopped by a store error", Group: g.name, Epoch: g.ack.Epoch, Seq: g.ack.Next, Err: err})
	c.dropHeld(g, now, func(m *msg) { c.release(m, now) })
	for _, w := range g.tickets {
		c.resolve(w.t, err)
	}
	g.tickets = nil
	c.addTimer(timer{at: now.Add(c.cfg.RetryMax), kind: tFailed, g: g})
}

// evict drops an idle group from memory: its cursor is in the store.
func (c *Core) evict(g *group) {
	c.idle.remove(g)
	g.phase = phEvicted
	delete(c.groups, g.name)
	c.mem -= g.cost
	g.cost = 0
	c.st.Evicted++
}

func (c *Core) setStuck(g *group, now time.Time, reason string, err error) {
	if g.stuck != reason {
		g.stuck, g.since = reason, now
	}
	g.stuckErr = err
	c.stuck[g] = struct{}{}
}

func (c *Core) clearStuck(g *group, reason string) {
	if g.stuck == reason {
		g.stuck, g.stuckErr = "", nil
		delete(c.stuck, g)
	}
}

// dropHeld lets go of every message g holds in memory, other than the one
// out: fn decides each one's fate (release, delete, re-route).
func (c *Core) dropHeld(g *group, now time.Time, fn func(*msg)) {
	var all []*msg
	all = append(all, g.held...)
	all = append(all, g.newer...)
	all = append(all, g.pending...)
	clear(g.held)
	clear(g.newer)
	clear(g.pending)
	g.held, g.newer, g.pending = g.held[:0], g.newer[:0], g.pending[:0]
	for _, m := range all {
		c.unbuffer(m)
		fn(m)
	}
	settled := g.settled
	g.settled = nil
	for _, e := range settled {
		fn(c.unsettle(e))
	}
	g.gapSince, g.gapTold = time.Time{}, false
	g.newerSince, g.newerEpoch = time.Time{}, 0
	g.farLow, g.farHigh = 0, 0
	c.unring(g)
}

func (c *Core) unring(g *group) {
	// The ring is lazy: a group popped while not ready is skipped.
	g.inRing = false
}

// buffer and unbuffer count messages waiting for their turn.
func (c *Core) buffer(m *msg) {
	m.where = wHeld
	c.buffered++
	c.bufferedBytes += len(m.raw)
	c.peakBuffered = max(c.peakBuffered, c.buffered)
}

func (c *Core) unbuffer(m *msg) {
	c.buffered--
	c.bufferedBytes -= len(m.raw)
}

// settleMsg keeps of m, acknowledged or a duplicate, what deleting it takes
// once the cursor past it is durable. A message read back from the park has
// nothing to delete: the advance removes it from the park.
func (c *Core) settleMsg(g *group, m *msg) {
	if m.has(fStored) || m.receipt == "" {
		c.gone(m)
		return
	}
	e := settledEntry{epoch: m.epoch, seq: m.seq, receipt: m.receipt, dup: m.has(fDup)}
	// The receipt stays held: live counts it until the delete.
	c.vis.remove(m)
	c.uncharge(m)
	m.where, m.raw, m.payload = wGone, nil, nil
	g.settled = append(g.settled, e)
	c.mem += settledCost + len(e.receipt)
}

// unsettle makes a settled entry a message again, to delete or release it.
// Such messages are never seen outside the Core: they are recycled.
func (c *Core) unsettle(e settledEntry) *msg {
	c.mem -= settledCost + len(e.receipt)
	m := c.take()
	m.epoch, m.seq, m.receipt, m.where, m.flags = e.epoch, e.seq, e.receipt, wHeld, fLapsed|fSpare
	if e.dup {
		m.flags |= fDup
	}
	c.charge(m)
	return m
}

// gone forgets m: it no longer holds a receipt.
func (c *Core) gone(m *msg) {
	if m.where == wGone {
		return
	}
	if m.live() {
		c.live--
	}
	m.where = wGone
	c.vis.remove(m)
	c.uncharge(m)
	m.raw, m.payload = nil, nil
	if m.has(fSpare) {
		c.recycle(m)
	}
}

// maxSpare bounds the msgs kept for reuse: about 250 KB.
const maxSpare = 1024

// take returns a zero msg, reused when one is spare, to save an
// allocation per arrival and per delete of a settled message. A msg is
// reused only once nothing in the Core refers to it: after a settling Ack
// (the application's Delivery still does, and check tells it apart by
// the generation), or once a spare one is gone.
func (c *Core) take() *msg {
	n := len(c.spare)
	if n == 0 {
		return new(msg)
	}
	m := c.spare[n-1]
	c.spare[n-1] = nil
	c.spare = c.spare[:n-1]
	m.where = 0 // as new: not gone
	return m
}

// recycle keeps m, which nothing in the Core refers to any more, for take.
func (c *Core) recycle(m *msg) {
	if len(c.spare) >= maxSpare {
		return
	}
	*m = msg{where: wGone, gen: m.gen + 1}
	c.spare = append(c.spare, m)
}

// release gives m back to the queue unprocessed: it is forgotten here and
// comes back after its visibility timeout, which is shortened when the
// request budget allows so that it comes back soon.
func (c *Core) release(m *msg, now time.Time) {
	if m.has(fStored) {
		c.gone(m)
		return
	}
	c.st.Released++
	if m.visibleAt.After(now) {
		e := &relEntry{until: m.visibleAt, receipt: m.receipt}
		heap.Push(&c.released, e)
		if m.receipt != "" && !m.has(fLapsed) && c.shortq.len() < 64*c.cfg.MaxBatch &&
			m.visibleAt.Sub(now) > 2*c.cfg.ShortVisibility {
			c.shortq.push(m.receipt)
			c.relBy[m.receipt] = e
		}
	}
	c.gone(m)
}

// Available reports whether Next may have a message to hand out.
func (c *Core) Available() bool { return c.ring.len() > 0 && !c.closing }

// Room returns how many messages the fetchers may receive now: what is
// left of the cap on messages received and not deleted, of the memory
// budget, and of the rate of receipts not followed by a delete.
func (c *Core) Room(now time.Time) int {
	c.now = now
	if c.closing {
		return 0
	}
	c.expireReleased(now)
	if now.Before(c.fetchAfter) {
		return 0
	}
	room := c.cfg.MaxHeld - c.live - len(c.released)
	if !c.cfg.Park && c.buffered >= max(c.cfg.Window/2, c.cfg.MaxBatch) && (c.ring.len() > 0 || c.outstanding > 0) {
		// Without parking, what arrives beyond a group's window is given
		// back and received again: while much waits and delivery moves,
		// let delivery catch up first.
		return 0
	}
	if c.mem >= c.cfg.MaxMemory*15/16 && (c.reads.len() > 0 || len(c.readBusy) > 0 || len(c.parkq) > 0 || len(c.parkBusy) > 0) {
		// Nearly spent while cursors load or parks are on their way:
		// wait for them. What arrives meanwhile would push out the
		// loading groups' arrivals, which could only go back to the
		// queue, and parks free their bodies' memory once durable.
		return 0
	}
	if c.mem >= c.cfg.MaxMemory {
		// Spent: nothing more unless nothing moves, when one batch may
		// bring the message everything waits for.
		if c.moving() {
			return 0
		}
		room = min(room, c.reserve())
	}
	c.refillUndeleted(now)
	return max(0, min(room, int(c.undelTokens)))
}

// expireReleased forgets the released messages visible again.
func (c *Core) expireReleased(now time.Time) {
	for len(c.released) > 0 && !c.released[0].until.After(now) {
		e := heap.Pop(&c.released).(*relEntry)
		if c.relBy[e.receipt] == e {
			delete(c.relBy, e.receipt)
		}
	}
}

// relEntry is a released message, invisible until a time.
type relEntry struct {
	until   time.Time
	receipt string
	index   int
}

// relHeap is a min-heap of released messages by time (container/heap).
type relHeap []*relEntry

func (h relHeap) Len() int           { return len(h) }
func (h relHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h relHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *relHeap) Push(x any) {
	e := x.(*relEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *relHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

func (c *Core) refillUndeleted(now time.Time) {
	if !c.undelAt.IsZero() && now.After(c.undelAt) {
		c.undelTokens = min(undeletedBurst(c.cfg), c.undelTokens+c.cfg.MaxUndeletedRate*now.Sub(c.undelAt).Seconds())
	}
	c.undelAt = now
}

// Close begins the shutdown: nothing more is handed out or fetched, and
// what is acknowledged is flushed. An AtMostOnce message whose commit is
// durable but that no application took is marked skipped in its cursor, so
// that the next receiver hands it out flagged Unordered instead of deleting
// it as a duplicate.
func (c *Core) Close(now time.Time) {
	c.now = now
	if c.closing {
		return
	}
	c.closing = true
	for _, g := range c.groups {
		c.skipOwed(g)
	}
	for _, g := range c.groups {
		if g.cold() {
			continue
		}
		for _, w := range g.tickets {
			if !behind(g.ack, w.target) {
				continue // its commit is still flushed
			}
			c.resolve(w.t, ErrClosed)
		}
	}
}

// skipOwed marks as skipped the AtMostOnce message of g whose commit is
// durable but that no application took, once the Core closes: the next
// receiver then hands it out flagged Unordered (or dead-letters it)
// instead of deleting it as a duplicate. The commit of one whose Receive
// gave up may end after Close began: durable calls this too.
func (c *Core) skipOwed(g *group) {
	m := g.out
	if !c.closing || m == nil || m.out != outOwed {
		return
	}
	m.out = outSkipped
	r := seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}
	addSkipped(&g.ack, r)
	c.markDirty(g)
	c.st.Skipped++
	c.report(Report{Kind: ReportSkip, Msg: "at-most-once message committed but not taken before close: marked skipped",
		Group: g.name, Epoch: m.epoch, Seq: m.seq, Last: m.seq})
}

// Flushed reports whether, after Close, nothing is left to commit or
// delete (or in flight).
func (c *Core) Flushed() bool {
	if c.commit != nil || len(c.readBusy) > 0 || len(c.delBusy) > 0 || c.delq.len() > 0 || len(c.parkBusy) > 0 || len(c.parkq) > 0 {
		return false
	}
	for g := range c.dirty.items[c.dirty.head:] {
		gg := c.dirty.items[c.dirty.head+g]
		if c.committable(gg) {
			return false
		}
	}
	for _, g := range c.groups {
		if g.uncertain != nil && c.cfg.Mode != ExactlyOnce {
			return false
		}
	}
	return true
}

// Deadline returns when the next timer is due, if any.
func (c *Core) Deadline() (time.Time, bool) {
	var at time.Time
	set := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	if len(c.timers) > 0 {
		set(c.timers[0].at)
	}
	if c.delq.len() > 0 && len(c.delBusy) < maxDeletesInFlight {
		if c.delUrgent {
			set(c.now)
		} else {
			set(c.delSince.Add(c.cfg.ReapInterval))
		}
	}
	if c.reads.len() > 0 && len(c.readBusy) == 0 {
		set(c.readAfter)
	}
	if c.dirty.len() > 0 && c.commit == nil {
		set(maxTime(c.commitAfter, c.dirtySince.Add(c.cfg.CommitInterval)))
	}
	if len(c.deadq) > 0 && len(c.deadBusy) == 0 {
		set(c.deadAfter)
	}
	if len(c.parkq) > 0 && len(c.parkBusy) == 0 {
		set(c.parkAfter)
	}
	if c.unparkq.len() > 0 && len(c.unparkBusy) == 0 {
		set(c.unparkAfter)
	}
	if c.cfg.Park && !c.scanned && c.scanBusy == 0 {
		set(c.scanAfter)
	}
	if c.fetchAfter.After(c.now) {
		set(c.fetchAfter) // the fetchers may go on then
	}
	if len(c.visBusy) < maxVisibilityInFlight {
		// When the budget is spent, nothing can be done before a token
		// comes back.
		token := c.visAt
		if c.visTokens < 1 {
			// Rounded up, at least a millisecond: a token short by a
			// rounding error must not make a deadline that is already due.
			d := time.Duration(math.Ceil((1 - c.visTokens) / c.cfg.MaxVisibilityRate * float64(time.Second)))
			token = c.visAt.Add(max(d, time.Millisecond))
		}
		if m := c.vis.head; m != nil && c.cfg.VisibilityMargin >= 0 {
			set(maxTime(m.visibleAt.Add(-c.cfg.VisibilityMargin), token))
		}
		if c.shortq.len() > 0 {
			set(token)
		}
	}
	if it, ok := c.compactq.peek(); ok {
		set(it.at.Add(compactDelay))
	}
	if g := c.idle.head; g != nil && c.cfg.IdleEvict >= 0 {
		set(g.idleSince.Add(c.cfg.IdleEvict))
	}
	return at, !at.IsZero()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Tick fires the timers due at now.
func (c *Core) Tick(now time.Time) {
	c.now = now
	for len(c.timers) > 0 && !c.timers[0].at.After(now) {
		c.fire(c.timers.pop(), now)
	}
	if c.cfg.IdleEvict >= 0 {
		for g := c.idle.head; g != nil && !now.Before(g.idleSince.Add(c.cfg.IdleEvict)); g = c.idle.head {
			c.evict(g)
		}
	}
	c.settle(now)
	c.compact(now)
}

func (c *Core) fire(t timer, now time.Time) {
	if t.kind == tUnordered {
		m := t.m
		if m.where == wOut && m.out == outRetry && !now.Before(m.retryAt) {
			m.out = outReady
			c.ring.push(ringItem{m: m})
		}
		return
	}
	g := t.g
	if g.phase == phEvicted {
		return
	}
	g.wake()
	switch t.kind {
	case tStart:
		c.endSettle(g, now)
	case tFailed:
		if g.phase == phFailed && !now.Before(g.since.Add(c.cfg.RetryMax)) {
			c.needRead(g)
		}
	case tGap:
		g.gapTimer = false
	}
	c.update(g, now)
}

// Stats returns a snapshot of the counters.
func (c *Core) Stats() Stats {
	s := c.st
	s.Held, s.MaxHeld = c.live, c.peakLive
	s.Buffered, s.BufferedBytes, s.MaxBuffered = c.buffered, c.bufferedBytes, c.peakBuffered
	s.Memory = c.mem
	s.Groups = len(c.groups)
	for g := range c.stuck {
		s.Stuck = append(s.Stuck, StuckGroup{Group: g.name, Reason: g.stuck, Since: g.since, Err: g.stuckErr})
	}
	return s
}
