package recvcore

import (
	"cmp"
	"slices"
	"time"
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

// budget is what the receiver may hold: memory (Config.MaxMemory), messages
// received and not deleted (Config.MaxHeld, counted as the queue counts
// them), and the rate of receipts not followed by a delete
// (Config.MaxUndeletedRate). The Core's makeRoom and shed keep within it.
type budget struct {
	mem            int // bytes charged
	live, peakLive int // receipts held (messages received and not deleted), now and peak

	// released holds the messages given back to the queue that stay
	// invisible until their time: received and not deleted, for the
	// service.
	released relHeap

	undelTokens float64 // receipts that may run ahead of their deletes
	undelAt     time.Time

	// fetchAfter holds the fetchers back after batches of which nothing
	// could be kept (without parking: all released), so that fetching does
	// not make the whole queue invisible while nothing moves.
	fetchAfter time.Time
	useless    int

	buffered, bufferedBytes, peakBuffered int // messages waiting for their turn
}

// undeletedBurst is how many receipts may run ahead of their deletes before
// the rate bound applies: one second's worth, at least the cap.
func undeletedBurst(cfg *Config) float64 {
	return max(cfg.MaxUndeletedRate, float64(cfg.MaxHeld))
}

// Memory accounting. A message's cost is charged when the Core takes it and
// changed whenever it drops its body; a group's cost follows its slices.

func (b *budget) charge(m *msg) {
	m.cost = int32(msgCost + len(m.raw) + len(m.id) + len(m.receipt))
	b.mem += int(m.cost)
}

func (b *budget) recharge(m *msg) {
	b.mem -= int(m.cost)
	b.charge(m)
}

func (b *budget) uncharge(m *msg) {
	b.mem -= int(m.cost)
	m.cost = 0
}

func (b *budget) recost(g *group) {
	n := groupCost + len(g.name) + slotCost*cap(g.held) + settledCost*cap(g.settled) + 24*(cap(g.ack.Skipped)+cap(g.dur.Skipped))
	if !g.cold() {
		n += coldCost + slotCost*(cap(g.newer)+cap(g.pending)) + 32*cap(g.tickets)
	}
	b.mem += n - g.cost
	g.cost = n
}

// buffer and unbuffer count messages waiting for their turn.
func (b *budget) buffer(m *msg) {
	b.buffered++
	b.bufferedBytes += len(m.raw)
	b.peakBuffered = max(b.peakBuffered, b.buffered)
}

func (b *budget) unbuffer(m *msg) {
	b.buffered--
	b.bufferedBytes -= len(m.raw)
}

// received counts a new receipt.
func (b *budget) received() {
	b.undelTokens--
	b.live++
	b.peakLive = max(b.peakLive, b.live)
}

// addReleased counts a message given back to the queue until it is visible
// again.
func (b *budget) addReleased(until time.Time, receipt string) *relEntry {
	e := &relEntry{until: until, receipt: receipt}
	b.released.push(e)
	return e
}

// refill adds the undeleted-rate tokens earned since the last event.
func (b *budget) refill(now time.Time, cfg *Config) {
	b.undelTokens = b.tokens(now, cfg)
	b.undelAt = now
}

// tokens returns the undeleted-rate tokens at now.
func (b *budget) tokens(now time.Time, cfg *Config) float64 {
	if b.undelAt.IsZero() || !now.After(b.undelAt) {
		return b.undelTokens
	}
	return min(undeletedBurst(cfg), b.undelTokens+cfg.MaxUndeletedRate*now.Sub(b.undelAt).Seconds())
}

// expireReleased forgets the released messages visible again.
func (c *Core) expireReleased(now time.Time) {
	b := &c.budget
	for len(b.released) > 0 && !b.released[0].until.After(now) {
		c.vis.unshorten(b.released.pop())
	}
}

// Available reports whether Next may have a message to hand out.
func (c *Core) Available() bool { return c.ring.len() > 0 && !c.closing }

// Room returns how many messages the fetchers may receive now: what is
// left of the cap on messages received and not deleted, of the memory
// budget, and of the rate of receipts not followed by a delete. It changes
// nothing.
func (c *Core) Room(now time.Time) int {
	b := &c.budget
	if c.closing || now.Before(b.fetchAfter) {
		return 0
	}
	room := c.cfg.MaxHeld - b.live - len(b.released)
	if !c.cfg.Park && b.buffered >= max(c.cfg.Window/2, c.cfg.MaxBatch) && (c.ring.len() > 0 || c.outstanding > 0) {
		// Without parking, what arrives beyond a group's window is given
		// back and received again: while much waits and delivery moves,
		// let delivery catch up first.
		return 0
	}
	if b.mem >= c.cfg.MaxMemory*15/16 && (c.reads.loading() || len(c.parks.q) > 0 || !c.parks.idle()) {
		// Nearly spent while cursors load or parks are on their way:
		// wait for them. What arrives meanwhile would push out the
		// loading groups' arrivals, which could only go back to the
		// queue, and parks free their bodies' memory once durable.
		return 0
	}
	if b.mem >= c.cfg.MaxMemory {
		// Spent: nothing more unless nothing moves, when one batch may
		// bring the message everything waits for.
		if c.moving() {
			return 0
		}
		room = min(room, c.reserve())
	}
	return max(0, min(room, int(b.tokens(now, &c.cfg))))
}

// reserve is the fetch room the Core keeps free when it must make room:
// one batch, so that the message a stuck group waits for can still come.
func (c *Core) reserve() int {
	return max(1, min(c.cfg.MaxBatch, c.cfg.MaxHeld/4))
}

// moving reports whether delivery is progressing: messages with the
// application, cursors being read, advances to write, or deletes queued
// will free room by themselves.
func (c *Core) moving() bool {
	return c.ring.len() > 0 || c.outstanding > 0 || c.deletes.q.len() > 0 || !c.deletes.idle() ||
		!c.commits.idle() || c.commits.dirty.len() > 0 || c.reads.loading()
}

// settle ends every event: it keeps the peak of held messages and makes
// room when the cap or the memory budget is short.
func (c *Core) settle(now time.Time) {
	c.budget.peakLive = max(c.budget.peakLive, c.budget.live)
	c.makeRoom(now)
}

// makeRoom evicts held messages when the cap leaves less than a reserve of
// fetch room, or memory is over budget. The farthest from their group's
// next seq go first, those of blocked groups before all others; a group's
// next message is evicted only if the group is blocked. Evicted messages
// are parked in the store when it can (then deleted from the queue), else
// released (they come back). Nothing is evicted for the cap while delivery
// moves: the room it frees is enough, and a fast drain parks nothing.
func (c *Core) makeRoom(now time.Time) {
	if c.closing {
		return
	}
	c.expireReleased(now)
	b := &c.budget
	room := c.cfg.MaxHeld - b.live - len(b.released)
	need := 0
	if r := c.reserve(); room < r && !c.moving() {
		// Evict in chunks, so that a full cap costs one pass now and then.
		need = r - room + c.cfg.MaxHeld/8
	}
	overMem := b.mem > c.cfg.MaxMemory
	if need == 0 && !overMem {
		return
	}
	if overMem {
		for g := c.idle.head; g != nil && b.mem > c.cfg.MaxMemory; g = c.idle.head {
			c.becomeEvicted(g)
		}
	}
	names, cands := c.evictionCandidates()
	for _, cd := range cands {
		if need <= 0 && b.mem <= c.cfg.MaxMemory*15/16 {
			break
		}
		if c.evict(now, cd.m) {
			need--
		}
	}
	for _, name := range names {
		if g := c.groups[name]; g != nil {
			c.budget.recost(g)
			c.update(g, now)
		}
	}
	if b.mem > c.cfg.MaxMemory {
		c.shed(now)
	}
}

type candidate struct {
	m     *msg
	score uint64
}

// evictionCandidates lists the held messages that may be evicted, the
// first to go first, and the groups that hold them.
func (c *Core) evictionCandidates() ([]string, []candidate) {
	var cands []candidate
	names := make([]string, 0, len(c.groups))
	for name, g := range c.groups {
		if !g.cold() && g.buffered() > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	const blockedBonus, newerBonus = 1 << 62, 1 << 61
	for _, name := range names {
		g := c.groups[name]
		bonus := uint64(0)
		if g.blocked() {
			bonus = blockedBonus
		}
		for i, m := range g.held {
			if i == 0 && m.seq == g.next && bonus == 0 {
				continue // deliverable: it frees room by itself
			}
			cands = append(cands, candidate{m, bonus + (m.seq - g.next)})
		}
		for _, m := range g.newer {
			cands = append(cands, candidate{m, bonus + newerBonus + m.seq})
		}
		if (g.phase == phLoading || g.phase == phResolving) && c.reads.fails == 0 {
			// Its cursor is on its way: then what does not fit is
			// parked. Released now, it would cost a visibility timeout
			// and a receive; fetching stops meanwhile (see Room).
			continue
		}
		for _, m := range g.pending {
			cands = append(cands, candidate{m, blockedBonus + m.seq})
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })
	return names, cands
}

// evict takes m out of its group's memory: parked when the store can, else
// released (or, read back from the park already, forgotten). It reports
// whether that freed a receipt.
func (c *Core) evict(now time.Time, m *msg) bool {
	g, stored := m.g, m.has(fStored)
	if stored && c.budget.mem <= c.cfg.MaxMemory*15/16 {
		return false // holds no receipt: evicting it frees memory, not the cap
	}
	c.unhold(m)
	switch {
	case c.canPark(g, m):
		c.toPark(g, m)
	case stored:
		// Parked already: forget it here, read it back later.
		g.knowParked(m.seq)
		c.gone(m)
	default:
		if g.phase == phActive && m.epoch == g.epoch {
			g.noteFar(m.seq)
		}
		c.release(m, now)
	}
	return !stored
}

// shed drops from memory the groups that hold nothing there but wait (a
// hole, a failed store call), blocked ones first, until the budget holds:
// their cursors are in the store, their parked messages in the park, and
// the rest comes back from the queue; a group is loaded again when its
// next message arrives. Under a flood of groups this bounds their state.
// Nothing is shed while parks are on their way: once durable, their
// bodies leave memory by themselves. A group shed with parked messages
// may have none left in the queue to load it again: the park's streams are
// listed again (ParkedStreams) a rescan interval later.
func (c *Core) shed(now time.Time) {
	if len(c.parks.q) > 0 || !c.parks.idle() {
		return
	}
	var gs []*group
	for _, g := range c.groups {
		if g.cold() {
			gs = append(gs, g) // idle: the cheapest to drop
			continue
		}
		if g.park.known() && g.dur.Epoch == 0 {
			// Parks of a group that never stored a cursor: loaded again,
			// it would not know their epoch. A group with a stored cursor
			// may go: the park's streams are listed again (below) and it
			// is loaded from its cursor. (No park is on its way here: see
			// above.)
			continue
		}
		if g.quiet() {
			gs = append(gs, g)
		}
	}
	slices.SortFunc(gs, shedOrder)
	for _, g := range gs {
		if c.budget.mem <= c.cfg.MaxMemory*15/16 {
			break
		}
		if !g.cold() {
			c.clearStuck(g, g.stuck)
		}
		// (A cold group knows of no parked seq, or it would not be cold:
		// only probed is left to look at.)
		if c.cfg.Park && (!g.probed || !g.cold() && g.park.known()) && c.scans.done {
			c.scans.again(now.Add(rescanInterval))
		}
		c.becomeEvicted(g)
	}
}

// shedOrder puts cold groups first, then blocked ones, then by name.
func shedOrder(a, b *group) int {
	if a.cold() != b.cold() {
		if a.cold() {
			return -1
		}
		return 1
	}
	if !a.cold() && a.blocked() != b.blocked() {
		if a.blocked() {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.name, b.name)
}

// rescanInterval is how long after shedding a group that may have parked
// messages the park's streams are listed again.
const rescanInterval = time.Second
