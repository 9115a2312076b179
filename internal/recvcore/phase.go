package recvcore

import (
	"fmt"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// A group's phase changes only in this file, in its become* functions.

// phase is a group's state.
type phase uint8

const (
	phLoading   phase = iota + 1 // its cursor is being read
	phFresh                      // no stored cursor: StartLowest settling, or waiting for a first arrival
	phActive                     // handing out
	phResolving                  // re-reading its cursor after a conflict or an ambiguous write
	phFailed                     // a permanent store error: retried after RetryMax
	phEvicted                    // dropped from memory
)

func (p phase) String() string {
	return [...]string{"", "loading", "fresh", "active", "resolving", "failed", "evicted"}[p]
}

// become moves g to phase p, and tells a tracer (the scripts print phase
// changes).
func (c *Core) become(g *group, p phase) {
	if g.phase == p {
		return
	}
	if c.trace != nil {
		c.trace(g.name, g.phase, p)
	}
	g.phase = p
	if p == phActive && g.pinned {
		c.carveAgain(g)
	}
}

// group returns the group named name, creating it (its cursor is then read
// from the store) or waking it from the idle list.
func (c *Core) group(now time.Time, name string) *group {
	g := c.groups[name]
	if g == nil {
		g = &group{name: name, groupCold: &groupCold{}}
		c.groups[name] = g
		c.becomeLoading(g, now)
		c.budget.recost(g)
		return g
	}
	c.unlist(g)
	g.wake()
	return g
}

// becomeLoading reads g's cursor.
func (c *Core) becomeLoading(g *group, now time.Time) {
	c.become(g, phLoading)
	g.since = now
	c.reads.need(g)
}

// becomeResolving re-reads g's cursor after a refused or ambiguous write;
// nothing of g is handed out meanwhile.
func (c *Core) becomeResolving(g *group) {
	if g.phase == phResolving {
		return
	}
	c.become(g, phResolving)
	c.reads.need(g)
	g.inRing = false
	c.endRepairs(g, repairSkip, ErrConflict) // the hole is the stored cursor's to say now
}

// becomeFresh waits for g's first arrivals: no cursor is stored.
func (c *Core) becomeFresh(g *group, now time.Time) {
	c.become(g, phFresh)
	g.since = now
}

// becomeActive hands out g's messages from next on.
func (c *Core) becomeActive(g *group, now time.Time) {
	c.become(g, phActive)
	g.since = now
}

// becomeLoaded starts g at cursor cur, read from the store.
func (c *Core) becomeLoaded(g *group, now time.Time, cur seqstore.Cursor) {
	if g.kept {
		c.resumeFailed(g, now, cur)
		return
	}
	g.dur, g.ack = cur, cloneCursor(cur)
	c.passParks(g)
	// What ExactlyOnce forced (a skip, a dead letter's advance) and a store
	// error kept from its write is not written now: the group hands out
	// again (it stayed stuck for good: the world model's
	// liveness/eo-dead-letter with permanent store errors).
	g.forced = false
	// SyncAcks made while the group was stopped, whose advance will not
	// be written now (review of a13399d, C).
	c.resolveDurable(g)
	c.refuseTickets(g)
	// Read again after a store error: the skip marks this Core owes (an
	// AtMostOnce message committed or carved and never handed out) and
	// did not write yet are marked again (review17).
	c.carryOwed(g)
	g.goOnFrom(cur) // past the seq out too (review of a13399d, D)
	g.started = false
	g.forgetPark()
	g.uncertain = nil
	c.clearStuck(g, "store")
	c.clearStuck(g, "conflict")
	if cur.Next == 0 {
		c.becomeFresh(g, now)
	} else {
		c.becomeActive(g, now)
	}
	c.routePending(now, g)
	c.update(g, now)
}

// keepsAcked reports whether g, which a store error stops, keeps what the
// application acknowledged and its advance is not durable yet: in
// AtLeastOnce mode, once, as a conflict would (resolveConflict). Read again,
// the group goes on from its acknowledged cursor wherever the stored one
// is behind it, and writes it again; given back and adopting the stored
// cursor, it would hand those messages out again, after their successors
// (the world model's order property, once it injected permanent store
// errors). Not when the group stopped again before what it kept was
// durable (a store that keeps refusing its writes, or its reads): what it
// kept counts against MaxUndeleted and would starve the other groups
// (review of a13399d, B). In AtMostOnce mode the stop gave back the
// hand-out waiting for its commit, whose advance the stored cursor undoes;
// in ExactlyOnce mode the application's transactions wrote the cursor.
func (c *Core) keepsAcked(g *group) bool {
	return c.cfg.Mode == AtLeastOnce && g.phase != phFailed && !g.kept && !sameCursor(g.ack, g.dur)
}

// resumeFailed restarts g, stopped by a store error with what was
// acknowledged kept (keepsAcked), at cursor cur read again: as a conflict
// settles (the write of unknown outcome, the cursor this Core last knew,
// someone else's behind what was acknowledged or past it).
func (c *Core) resumeFailed(g *group, now time.Time, cur seqstore.Cursor) {
	g.forgetPark()
	c.clearStuck(g, "store")
	if g.uncertain != nil {
		c.become(g, phActive)
		c.settleUncertain(now, g, cur)
	} else {
		c.resolveConflict(now, g, cur)
	}
	c.routePending(now, g)
	c.update(g, now)
}

// becomeFailed stops g after a store error that retrying soon cannot fix
// (corrupt stored state, a refused advance): it is reported stuck, lets go
// of what it holds (those messages come back from the queue), and its
// cursor is read again after RetryMax.
func (c *Core) becomeFailed(g *group, now time.Time, err error) {
	keep := c.keepsAcked(g)
	c.become(g, phFailed)
	g.since = now
	c.setStuck(g, now, "store", err)
	c.report(Report{Kind: ReportStuck, Msg: "group stopped by a store error", Group: g.name, Epoch: g.ack.Epoch, Seq: g.ack.Next, Err: err})
	release := func(m *msg) { c.release(m, now) }
	c.dropBuffered(g, release)
	if !keep {
		c.dropSettled(g, release)
	}
	g.kept = keep
	if m := g.out; m != nil && (m.out == outCommit || m.out == outAbandoned) {
		// An AtMostOnce hand-out waiting for its commit, which failed: its
		// wait ends with the error, and it goes back to the queue.
		if m.out == outCommit {
			c.outstanding--
		}
		c.resolve(m.ticket, err)
		m.ticket = 0
		g.out = nil
		switch {
		case g.uncertain == nil || !below(*g.uncertain, m.epoch, m.seq):
			c.release(m, now)
		case m.has(fStored):
			// As below; read back from the park, whose copy the write
			// dropped if it applied: sent back to the queue (a
			// duplicate of the parked one if it did not).
			c.oweUncertain(g, m)
			c.requeue(m)
		default:
			// Its commit's outcome is unknown: applied, the stored
			// cursor is past it and its copy would be deleted as a
			// duplicate, unseen. Owed a skip mark, written once the
			// cursor read again is past it (carryOwed), so that the copy
			// is handed out once, Unordered (the world model with a read
			// failing for good after a write of unknown outcome).
			c.oweUncertain(g, m)
			c.release(m, now)
		}
	}
	for _, w := range g.tickets {
		c.resolve(w.t, err)
	}
	g.tickets = nil
	c.dropCarves(g, err)
	c.endRepairs(g, repairSkip, err)
	c.addTimer(timer{at: now.Add(c.cfg.RetryMax), kind: tFailed, name: g.name})
}

// oweUncertain owes m's seq a skip mark: its hand-out ended with its
// commit's outcome unknown (becomeFailed). Reported now; written once the
// cursor read again is past it (carryOwed), and dropped if it is not.
func (c *Core) oweUncertain(g *group, m *msg) {
	r := seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}
	c.skipped(g, r, 0, "at-most-once message whose commit's outcome was unknown when a store error stopped its group: skipped if the commit took effect (a copy is then handed out Unordered)")
	g.owed = append(g.owed, r)
}

// becomeEvicted drops g from memory: its cursor is in the store.
func (c *Core) becomeEvicted(g *group) {
	if g.repairing { // (never: a repair keeps its group from idling or being shed)
		err := fmt.Errorf("%w: dropped from memory", ErrNotStuck)
		for _, k := range [...]repairKind{repairSkip, repairDead, repairRead} {
			c.endRepairs(g, k, err)
		}
	}
	c.unlist(g)
	c.become(g, phEvicted)
	delete(c.groups, g.name)
	delete(c.stuck, g) // (an idle group evicted while stuck: its report goes with it)
	c.budget.mem -= g.cost
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

// unlist takes g off the idle or quiet list.
func (c *Core) unlist(g *group) {
	switch g.list {
	case onIdle:
		c.idle.remove(g)
	case onQuiet:
		c.quiet.remove(g)
	}
	g.list = onNoList
}

// relist puts g on the list its state calls for: idle (holds and waits for
// nothing), quiet (holds nothing in memory, but waits), or none. The lists
// are what shed and the idle eviction take groups from, oldest first, so
// that no step walks every group.
func (c *Core) relist(g *group, now time.Time) {
	switch {
	case g.empty():
		c.goIdle(g, now)
	case g.quiet():
		if g.list != onQuiet {
			c.unlist(g)
			g.list = onQuiet
			c.quiet.push(g)
		}
	default:
		c.unlist(g)
	}
}

// goIdle notes that g holds and waits for nothing: its working state is
// dropped compactDelay later, and the group itself after IdleEvict.
func (c *Core) goIdle(g *group, now time.Time) {
	g.idleAt = now
	if !g.compactQueued {
		g.compactQueued = true
		c.compactq.push(compactItem{name: g.name, at: now})
	}
	if g.list != onIdle {
		c.unlist(g)
		g.idleSince = now
		g.list = onIdle
		c.idle.push(g)
	}
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
		g := c.groups[it.name]
		if g == nil {
			continue // shed since
		}
		g.compactQueued = false
		if g.cold() || !g.empty() || g.stuck != "" {
			continue // (a stuck group keeps its report, which is cold state)
		}
		if now.Before(g.idleAt.Add(compactDelay)) {
			// Busy again in between, idle again since: look later.
			g.compactQueued = true
			c.compactq.push(compactItem{name: g.name, at: g.idleAt})
			continue
		}
		g.held, g.settled, g.settledDue = nil, nil, 0
		g.groupCold = nil
		c.budget.recost(g)
	}
}

type compactItem struct {
	name string // the group: a shed group is not kept in memory by the queue
	at   time.Time
}

// evictIdle drops the groups idle for IdleEvict.
func (c *Core) evictIdle(now time.Time) {
	if c.cfg.IdleEvict < 0 {
		return
	}
	for g := c.idle.head; g != nil && !now.Before(g.idleSince.Add(c.cfg.IdleEvict)); g = c.idle.head {
		c.becomeEvicted(g)
	}
}
