package recvcore

import (
	"errors"
	"slices"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// commitLane writes cursor advances: one store write at a time carries the
// advances of every group that has one (group commit), CommitInterval
// after the first of them.
type commitLane struct {
	lane
	dirty fifo[*group]
	since time.Time    // the oldest advance waiting: it is written CommitInterval later
	batch *commitBatch // in flight
	spare *commitBatch // the last batch, for reuse
}

type commitBatch struct {
	id     uint64
	groups []*group
	tos    []seqstore.Cursor
	advs   []seqstore.Advance
}

func (l *commitLane) init() { l.lane = lane{what: "commit cursors", limit: 1} }

func (l *commitLane) due(c *Core) time.Time {
	if l.dirty.len() > 0 && l.idle() {
		return maxTime(l.after, l.since.Add(c.cfg.CommitInterval))
	}
	return time.Time{}
}

// pending reports whether ready may have something to do at now: the
// lane changed since dueAt was worked out, its due time came, or the Core
// closes (a commit then goes at once, before due). Otherwise ready would
// do nothing: dueAt is zero (nothing queued, or a commit in flight), or
// now is before the backoff or the batching window ends.
func (l *commitLane) pending(c *Core, now time.Time) bool {
	return l.changed || c.closing || !l.dueAt.IsZero() && !now.Before(l.dueAt)
}

func (l *commitLane) flushed(c *Core) bool {
	if !l.idle() {
		return false
	}
	for _, g := range l.dirty.all() {
		if c.committable(g) {
			return false
		}
	}
	return true
}

// markDirty queues g for the committer (in ExactlyOnce, only a cursor the
// Core writes itself: see forceCommit).
func (c *Core) markDirty(g *group) {
	if c.cfg.Mode == ExactlyOnce && !g.forced || g.dirty {
		return
	}
	c.commits.queue(c.now, g)
}

// forceCommit queues g's advance in ExactlyOnce mode, where the Core writes
// a cursor only past a message the application never settled (a dead
// letter). The group hands out nothing until that write is durable: the
// next message's CursorAdvance starts from it.
func (c *Core) forceCommit(g *group) {
	g.forced = true
	if !g.dirty {
		c.commits.queue(c.now, g)
	}
}

// queue queues g for the next commit. The first advance waiting sets when
// that commit may start: CommitInterval later, so that more advances
// share it.
func (l *commitLane) queue(now time.Time, g *group) {
	if l.dirty.len() == 0 {
		if l.batch == nil {
			l.since = now
		}
		l.changed = true // due now (a group behind others queued changes nothing)
	}
	g.dirty = true
	l.dirty.push(g)
}

func (c *Core) committable(g *group) bool {
	if g.phase != phActive || g.uncertain != nil || g.writing {
		return false
	}
	if c.cfg.Mode == ExactlyOnce && !g.forced {
		return false
	}
	return behind(g.dur, g.ack) || !sameCursor(g.dur, g.ack) && !behind(g.ack, g.dur)
}

func (l *commitLane) ready(c *Core, now time.Time, rd *Ready) {
	if !l.open(now) || l.dirty.len() == 0 || now.Before(l.since.Add(c.cfg.CommitInterval)) && !c.closing {
		return
	}
	// The batch and its advances are reused from one commit to the next:
	// one is in flight at a time, and the store keeps no reference to a
	// batch once it answered.
	b := l.spare
	if b == nil {
		b = &commitBatch{}
	}
	l.spare = nil
	b.id = c.id()
	for l.dirty.len() > 0 && len(b.advs) < c.cfg.MaxAdvances {
		g, _ := l.dirty.pop()
		g.dirty = false
		if g.phase != phEvicted {
			c.addToCommit(now, b, g)
		}
	}
	if len(b.advs) == 0 {
		l.spare = b
		return
	}
	l.batch = b
	l.inFlight++
	rd.Commits = append(rd.Commits, Commit{ID: b.id, Advances: b.advs})
}

// addToCommit adds g's advance to b, if g has one to write.
func (c *Core) addToCommit(now time.Time, b *commitBatch, g *group) {
	if !c.committable(g) {
		if g.phase == phActive && g.uncertain == nil && !g.writing {
			c.flushSettled(now, g)
			c.update(g, now)
		}
		return
	}
	a := seqstore.Advance{Stream: c.stream(g.name), From: cloneCursor(g.dur), To: cloneCursor(g.ack)}
	a.To.Owner = a.From.Owner // the receiver never changes a cursor's owner (a fencing token: seqstore.Claim)
	if err := a.Check(); err != nil {
		c.becomeFailed(g, now, err)
		return
	}
	g.writing = true
	b.groups = append(b.groups, g)
	b.tos = append(b.tos, a.To)
	b.advs = append(b.advs, a)
}

// Committed reports the outcome of the Commit action id.
func (c *Core) Committed(now time.Time, id uint64, err error) {
	c.begin(now)
	defer c.end()
	l := &c.commits
	b := l.batch
	if b == nil || b.id != id {
		return
	}
	l.batch = nil
	l.inFlight--
	l.changed = true
	var be *seqstore.BatchError
	known := err == nil || errors.As(err, &be) && len(be.Errs) == len(b.groups)
	if err == nil {
		c.st.Commits++
		l.succeeded()
	} else {
		c.st.CommitFailures++
	}
	transient := false
	for i, g := range b.groups {
		g.writing = false
		if g.phase == phEvicted {
			continue
		}
		if !known {
			// The outcome is unknown: read the cursor before writing
			// again. (A copy, so that to itself stays on the stack.)
			u := b.tos[i]
			g.uncertain = &u
			c.reads.need(g)
			continue
		}
		if c.committedOne(now, g, b.tos[i], seqstore.Failed(err, i, len(b.groups))) {
			transient = true
		}
	}
	clear(b.groups)
	clear(b.advs)
	b.groups, b.tos, b.advs = b.groups[:0], b.tos[:0], b.advs[:0]
	l.spare = b
	if !known || transient {
		c.failed(&l.lane, err)
	}
}

// committedOne applies the outcome e of g's advance to to, and reports
// whether it was a transient failure.
func (c *Core) committedOne(now time.Time, g *group, to seqstore.Cursor, e error) bool {
	switch {
	case e == nil:
		c.durable(now, g, to)
	case errors.Is(e, seqstore.ErrAborted):
		c.markDirty(g)
	case errors.Is(e, seqstore.ErrConflict):
		c.conflicted(g, e)
	case permanent(e):
		c.becomeFailed(g, now, e)
	default:
		c.markDirty(g)
		return true
	}
	return false
}

// durable records that g's cursor to is durable: the settled messages below
// it are deleted, the waits it satisfies end, and an AtMostOnce hand-out
// waiting for it proceeds.
func (c *Core) durable(now time.Time, g *group, to seqstore.Cursor) {
	c.st.Committed++
	g.dur = to
	c.passParks(g)
	if !behind(to, g.ack) {
		g.forced = false
		g.kept = false
	}
	if behind(g.ack, to) {
		g.ack = cloneCursor(to)
		c.recarve(g, to, true)
	}
	c.carvedDurable(g, to)
	c.flushSettled(now, g)
	c.resolveDurable(g)
	g.owed = slices.DeleteFunc(g.owed, func(r seqstore.Range) bool { return skippedIn(to, r) })
	if m := g.out; m != nil && below(g.dur, m.epoch, m.seq) {
		switch m.out {
		case outCommit:
			c.resolve(m.ticket, nil)
			m.ticket = 0
			m.handed()
			c.st.Delivered++
		case outAbandoned:
			m.ticket = 0
			m.owe()
			c.skipOwed(g)
		}
	}
	if c.committable(g) {
		c.markDirty(g)
	}
	c.update(g, now)
}

// resolveDurable ends the SyncAck waits that g's durable cursor satisfies.
func (c *Core) resolveDurable(g *group) {
	keep := g.tickets[:0]
	for _, w := range g.tickets {
		if behind(g.dur, w.target) {
			keep = append(keep, w)
		} else {
			c.resolve(w.t, nil)
		}
	}
	clear(g.tickets[len(keep):])
	g.tickets = keep
}

// flushSettled deletes the settled messages below the durable cursor. One
// whose visibility change is in flight waits for it (its receipt changes).
func (c *Core) flushSettled(now time.Time, g *group) {
	keep := g.settled[:0]
	for _, e := range g.settled {
		switch {
		case !below(g.dur, e.epoch, e.seq):
			keep = append(keep, e)
		case e.flags&fVisBusy != 0:
			e.flags |= fDelWait
			keep = append(keep, e)
		default:
			c.queueDelete(now, c.unsettle(now, e))
		}
	}
	clear(g.settled[len(keep):])
	g.settled = keep
}
