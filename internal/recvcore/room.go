package recvcore

import (
	"cmp"
	"slices"
	"time"
)

// settle ends every event: it keeps the peak of held messages and makes
// room when the cap or the memory budget is short.
func (c *Core) settle(now time.Time) {
	c.peakLive = max(c.peakLive, c.live)
	c.makeRoom(now)
}

// compactDelay is how long a group stays idle before it drops its working
// state: a busy group goes idle between two messages, and must not pay an
// allocation for each.
const compactDelay = 5 * time.Second

// compact drops the working state of the groups idle for compactDelay. It
// runs from Tick, at the end of the event: the next event that touches such
// a group wakes it first.
func (c *Core) compact(now time.Time) {
	for {
		it, ok := c.compactq.peek()
		if !ok || now.Before(it.at.Add(compactDelay)) {
			return
		}
		c.compactq.pop()
		g := it.g
		g.compactQueued = false
		if g.phase == phEvicted || g.cold() || !g.empty() {
			continue
		}
		if now.Before(g.idleAt.Add(compactDelay)) {
			// Busy again in between, idle again since: look later.
			g.compactQueued = true
			c.compactq.push(compactItem{g: g, at: g.idleAt})
			continue
		}
		g.held, g.settled = nil, nil
		g.groupCold = nil
		c.recost(g)
	}
}

type compactItem struct {
	g  *group
	at time.Time
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
	return c.ring.len() > 0 || c.outstanding > 0 || c.delq.len() > 0 || len(c.delBusy) > 0 ||
		c.commit != nil || c.dirty.len() > 0 || c.reads.len() > 0 || len(c.readBusy) > 0
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
	room := c.cfg.MaxHeld - c.live - len(c.released)
	need := 0
	if r := c.reserve(); room < r && !c.moving() {
		// Evict in chunks, so that a full cap costs one pass now and then.
		need = r - room + c.cfg.MaxHeld/8
	}
	overMem := c.mem > c.cfg.MaxMemory
	if need == 0 && !overMem {
		return
	}
	if overMem {
		for g := c.idle.head; g != nil && c.mem > c.cfg.MaxMemory; g = c.idle.head {
			c.evict(g)
		}
	}
	type cand struct {
		m     *msg
		score uint64
	}
	var cands []cand
	names := make([]string, 0, len(c.groups))
	for name, g := range c.groups {
		if !g.cold() && len(g.held)+len(g.newer)+len(g.pending) > 0 {
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
			cands = append(cands, cand{m, bonus + (m.seq - g.next)})
		}
		for _, m := range g.newer {
			cands = append(cands, cand{m, bonus + newerBonus + m.seq})
		}
		if (g.phase == phLoading || g.phase == phResolving) && c.readFails == 0 {
			// Its cursor is on its way: then what does not fit is
			// parked. Released now, it would cost a visibility timeout
			// and a receive; fetching stops meanwhile (see Room).
			continue
		}
		for _, m := range g.pending {
			cands = append(cands, cand{m, blockedBonus + m.seq})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.score, a.score) })
	for _, cd := range cands {
		if need <= 0 && c.mem <= c.cfg.MaxMemory*15/16 {
			break
		}
		m := cd.m
		g := m.g
		if m.has(fStored) && c.mem <= c.cfg.MaxMemory*15/16 {
			continue // holds no receipt: evicting it frees memory, not the cap
		}
		c.unhold(m)
		if !m.has(fStored) {
			need--
		}
		switch {
		case c.canPark(g, m):
			c.park(g, m)
		case m.has(fStored):
			// Parked already: forget it here, read it back later.
			g.knowParked(m.seq)
			c.gone(m)
		default:
			if g.phase == phActive && m.epoch == g.epoch {
				g.noteFar(m.seq)
			}
			c.release(m, now)
		}
	}
	for _, name := range names {
		if g := c.groups[name]; g != nil {
			c.recost(g)
			c.update(g, now)
		}
	}
	if c.mem > c.cfg.MaxMemory {
		c.shed(now)
	}
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
	if len(c.parkq) > 0 || len(c.parkBusy) > 0 {
		return
	}
	var gs []*group
	for _, g := range c.groups {
		if g.cold() {
			gs = append(gs, g) // idle: the cheapest to drop
			continue
		}
		if (g.parkLow != 0 || g.parkHigh != 0) && g.dur.Epoch == 0 {
			// Parks of a group that never stored a cursor: loaded again,
			// it would not know their epoch. A group with a stored cursor
			// may go: the park's streams are listed again (below) and it
			// is loaded from its cursor. (No park is on its way here: see
			// above.)
			continue
		}
		if g.out == nil && len(g.held)+len(g.newer)+len(g.pending)+len(g.settled)+len(g.tickets) == 0 &&
			!g.dirty && !g.writing && g.uncertain == nil && !g.toRead && !g.unparking && !g.inRing &&
			(g.phase == phActive || g.phase == phFailed || g.phase == phFresh) && !behind(g.dur, g.ack) {
			gs = append(gs, g)
		}
	}
	slices.SortFunc(gs, func(a, b *group) int {
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
	})
	for _, g := range gs {
		if c.mem <= c.cfg.MaxMemory*15/16 {
			break
		}
		if !g.cold() {
			c.clearStuck(g, g.stuck)
		}
		// (A cold group knows of no parked seq, or it would not be cold:
		// only probed is left to look at.)
		if c.cfg.Park && (!g.probed || !g.cold() && (g.parkLow != 0 || g.parkHigh != 0)) && c.scanned {
			c.scanned = false
			c.scanAfter = now.Add(rescanInterval)
		}
		c.evict(g)
	}
}

// rescanInterval is how long after shedding a group that may have parked
// messages the park's streams are listed again.
const rescanInterval = time.Second
