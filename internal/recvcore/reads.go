package recvcore

import (
	"errors"
	"fmt"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// readLane reads cursors: of new groups, and again to settle a write whose
// outcome is unknown or a conflict. One read is in flight at a time.
type readLane struct {
	lane
	q    fifo[*group]
	busy map[uint64][]*group
}

func (l *readLane) init() {
	l.lane = lane{what: "read cursors", limit: 1}
	l.busy = make(map[uint64][]*group)
}

// need queues g's cursor to be read.
func (l *readLane) need(g *group) {
	if !g.toRead {
		g.toRead = true
		l.q.push(g)
	}
}

// loading reports whether cursors are queued or being read.
func (l *readLane) loading() bool { return l.q.len() > 0 || len(l.busy) > 0 }

// pending reports whether a cursor is queued: without one, ready does
// nothing and due is zero.
func (l *readLane) pending() bool { return l.q.len() > 0 }

func (l *readLane) due(c *Core) time.Time {
	if l.q.len() > 0 && l.idle() {
		return l.after
	}
	return time.Time{}
}

func (l *readLane) flushed(c *Core) bool { return len(l.busy) == 0 }

func (l *readLane) ready(c *Core, now time.Time, rd *Ready) {
	if !l.open(now) || l.q.len() == 0 {
		return
	}
	var gs []*group
	var streams []seqstore.Stream
	for l.q.len() > 0 && len(gs) < c.cfg.MaxAdvances {
		g, _ := l.q.pop()
		if !g.toRead || g.phase == phEvicted {
			g.toRead = false
			continue
		}
		gs = append(gs, g)
		streams = append(streams, c.stream(g.name))
	}
	if len(gs) == 0 {
		return
	}
	id := c.id()
	l.busy[id] = gs
	l.inFlight++
	rd.Reads = append(rd.Reads, Read{ID: id, Streams: streams})
}

// Read reports the outcome of the Read action id: one cursor per stream,
// in order, or err.
func (c *Core) Read(now time.Time, id uint64, curs []seqstore.Cursor, err error) {
	c.begin(now)
	defer c.end()
	l := &c.reads
	gs, ok := l.busy[id]
	if !ok {
		return
	}
	delete(l.busy, id)
	l.inFlight--
	failed := false
	for i, g := range gs {
		g.toRead = false
		if g.phase == phEvicted {
			continue
		}
		e := seqstore.Failed(err, i, len(gs))
		switch {
		case e != nil && permanent(e):
			c.becomeFailed(g, now, e)
		case e != nil || i >= len(curs):
			failed = true
			l.need(g)
			if e == nil {
				e = errors.New("no cursor in the answer")
			}
		default:
			c.cursorRead(now, g, curs[i])
		}
		if e != nil {
			e = fmt.Errorf("read cursor: %w", e)
		}
		c.endRepairs(g, repairRead, e) // Reread waits for this read
	}
	if failed {
		c.failed(&l.lane, err)
	} else {
		l.succeeded()
	}
}

// permanent reports whether a store error for one stream will not go away
// by retrying soon.
func permanent(err error) bool {
	return errors.Is(err, seqstore.ErrCorrupt) || errors.Is(err, seqstore.ErrInvalidStream) ||
		errors.Is(err, seqstore.ErrInvalidArgument) || errors.Is(err, seqstore.ErrOverflow)
}

func (c *Core) cursorRead(now time.Time, g *group, cur seqstore.Cursor) {
	switch g.phase {
	case phLoading, phFailed:
		c.becomeLoaded(g, now, cur)
	case phResolving:
		c.resolveConflict(now, g, cur)
		c.routePending(now, g)
	default:
		switch {
		case g.uncertain != nil:
			c.settleUncertain(now, g, cur)
		case !g.writing && !sameCursor(cur, g.dur):
			// Read again while waiting on a hole, and someone else moved
			// the cursor: a conflict, settled like one.
			c.resolveConflict(now, g, cur)
			c.routePending(now, g)
		}
	}
	c.update(g, now)
}

// settleUncertain compares the cursor read with the write whose outcome
// was unknown: applied, not applied (written again), or someone else's.
func (c *Core) settleUncertain(now time.Time, g *group, cur seqstore.Cursor) {
	to := *g.uncertain
	g.uncertain = nil
	switch {
	case sameCursor(cur, to):
		c.durable(now, g, to)
	case sameCursor(cur, g.dur):
		c.markDirty(g)
	default:
		c.resolveConflict(now, g, cur)
	}
}

// resolveConflict settles a conflict with the cursor read: when the store
// holds what this Core last knew, there is none; when it is behind what
// this Core acknowledged, the advance is written again from it (nothing
// acknowledged is delivered twice), in an older epoch too (going back to
// it would hand out its later seqs after the newer epoch's message the
// application holds or acked); otherwise someone else is ahead, and
// the group continues from the stored cursor: what it holds below it is
// deleted, the rest is routed again.
func (c *Core) resolveConflict(now time.Time, g *group, cur seqstore.Cursor) {
	c.become(g, phActive)
	if g.uncertain != nil {
		c.settleUncertain(now, g, cur)
		return
	}
	if sameCursor(cur, g.dur) {
		c.clearStuck(g, "conflict")
		c.markDirty(g)
		return
	}
	c.st.Conflicts++
	if behind(cur, g.dur) {
		// Cursors only move forward: one that went back was lost (a
		// wiped or restored store), and what the store parked with it.
		c.report(Report{Kind: ReportConflict, Msg: "the stored cursor went back: the store lost data, and the messages it had parked",
			Group: g.name, Epoch: cur.Epoch, Seq: cur.Next, From: g.dur.Next, Last: g.park.high, Err: ErrStoreLost})
	} else {
		c.report(Report{Kind: ReportConflict, Msg: "cursor conflict: is a second receiver consuming this queue?",
			Group: g.name, Epoch: cur.Epoch, Seq: cur.Next, Err: g.stuckErr})
	}
	c.refuseTickets(g)
	c.dropAwaitedCommit(now, g)
	if c.cfg.Mode != ExactlyOnce && behind(cur, g.ack) {
		g.dur = cur
		c.passParks(g)
		c.recarve(g, cur, false)
		c.markDirty(g)
		return
	}
	c.moveTo(now, g, cur)
}

// dropAwaitedCommit takes back g's AtMostOnce hand-out whose commit a
// conflict refused: it was not ours to hand out, nor is the advance past
// it ours to write again.
func (c *Core) dropAwaitedCommit(now time.Time, g *group) {
	m := g.out
	if m == nil || m.out != outCommit && m.out != outAbandoned {
		return
	}
	if m.out == outCommit {
		c.outstanding-- // the Receive waiting for it drops it
	}
	c.takeBack(now, g, m, ErrConflict)
}

// takeBack takes back g's AtMostOnce hand-out m, whose commit is not
// written (refused, or not sent yet): its advance is rolled back and m
// waits for its turn again (given back, once the Core closes). Its ticket
// resolves with err.
func (c *Core) takeBack(now time.Time, g *group, m *msg, err error) {
	c.resolve(m.ticket, err)
	m.ticket = 0
	g.out = nil
	if g.ack.Epoch == m.epoch && g.ack.Next == m.seq+1 {
		g.ack.Next = m.seq
	}
	if g.epoch == m.epoch && g.next == m.seq+1 {
		g.next = m.seq
	}
	c.rearrive(now, g, m)
	if c.closing {
		c.giveBackGroup(now, g)
	}
}

// carryOwed marks again in g's cursor, someone else's now, the AtMostOnce
// messages it owes (see skipOwed) that the cursor passed over unmarked.
// Past the durable commit that owed them, no one else took them.
func (c *Core) carryOwed(g *group) {
	keep := g.owed[:0]
	for _, r := range g.owed {
		if !below(g.ack, r.Epoch, r.Last) || skippedIn(g.ack, r) {
			continue // ahead of the cursor (handed out normally), or marked
		}
		addSkipped(&g.ack, r)
		keep = append(keep, r)
	}
	g.owed = keep
	if len(keep) > 0 {
		c.markDirty(g)
	}
}

// refuseTickets resolves g's SyncAck tickets with ErrConflict: the advance
// they wait for will not be written.
func (c *Core) refuseTickets(g *group) {
	for _, w := range g.tickets {
		c.resolve(w.t, ErrConflict)
	}
	g.tickets = nil
}

// goOnFrom sets the seq g waits for next by cur, read or moved to: the one
// the store expects next, or the one after it when that one is out (with
// the application, or waiting for its retry, a Nack, or its
// dead-lettering): its Ack advances the cursor from here, and left at it,
// next would stay behind the cursor once that Ack is durable, waiting for
// ever for a seq already handled.
func (g *group) goOnFrom(cur seqstore.Cursor) {
	g.epoch, g.next = cur.Epoch, max(cur.Next, 1)
	if m := g.out; m != nil && m.epoch == g.epoch && m.seq == g.next {
		g.next = m.seq + 1
	}
}

// moveTo continues g from cur, someone else's cursor ahead of this Core's.
func (c *Core) moveTo(now time.Time, g *group, cur seqstore.Cursor) {
	g.dur, g.ack = cur, cloneCursor(cur)
	c.passParks(g)
	g.forced, g.kept = false, false // nothing of ours is left to write
	c.carryOwed(g)
	c.recarve(g, cur, false)
	if cur.Next == 0 {
		c.become(g, phFresh)
	}
	g.goOnFrom(cur)
	g.forgetPark()
	if m := g.out; m != nil && m.waitsForAny(outRetry, outReady) && below(cur, m.epoch, m.seq) {
		// Waiting for a hand-out that is not ours any more. (One on its
		// way to the dead-letter queue or back to the queue is left to
		// its lane: deleted here, it would be recycled under the lane.
		// An AtMostOnce hand-out owed (outOwed) stays: our own durable
		// commit passed it, and no one else will hand it out.)
		g.out = nil
		m.flags |= fDup
		c.queueDelete(now, m)
	}
	var again []*msg
	c.dropHeld(g, func(m *msg) { again = append(again, m) })
	for _, m := range again {
		if m.where == wSettled {
			// Settled (acked or duplicate): handled by someone.
			if below(cur, m.epoch, m.seq) {
				c.queueDelete(now, m)
			} else {
				c.release(m, now)
			}
			continue
		}
		c.routeTagged(now, g, m)
	}
}

// routePending routes what arrived while g's cursor was read again.
func (c *Core) routePending(now time.Time, g *group) {
	if g.phase != phActive && g.phase != phFresh {
		return
	}
	pending := g.pending
	g.pending = nil
	for _, m := range pending {
		c.budget.unbuffer(m)
		c.routeTagged(now, g, m)
	}
}

// rearrive puts a message that was never seen by the application back as an
// arrival of g.
func (c *Core) rearrive(now time.Time, g *group, m *msg) {
	m.clearOut()
	m.attempt = max(m.attempt-1, 0)
	c.routeTagged(now, g, m)
}

// conflicted handles a refused advance: someone else moved g's cursor, as
// far as the store says. The cursor is read again to tell a real second
// receiver from this receiver's own write that took effect.
func (c *Core) conflicted(g *group, cause error) {
	g.conflictTold = false
	g.stuckErr = cause
	c.becomeResolving(g)
}
