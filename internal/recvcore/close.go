package recvcore

import (
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Close begins the shutdown: nothing more is handed out or fetched, what is
// acknowledged is flushed (commits, then deletes), and what the Core holds
// and will not deliver is given back to the queue, its visibility
// shortened to ShortVisibility, so that a restart takes it within seconds
// instead of a visibility timeout: held messages, messages released and
// still invisible, messages waiting for a retry, what was on its way to the
// park, and what arrives from now on.
//
// An AtMostOnce message whose commit is durable but that no application
// took is always recoverable by the next receiver: it is marked skipped in
// its cursor, so that it is handed out flagged Unordered instead of deleted
// as a duplicate, and its copy stays in the queue (given back) or, when
// this Core holds the only one (read back from the park, or an Unordered
// message deleted before its hand-out), is sent back to the queue
// (Requeue). A hand-out whose commit or delete is in flight is not given
// up: its wait resolves as the flush ends it.
func (c *Core) Close(now time.Time) {
	c.begin(now)
	defer c.end()
	if c.closing {
		return
	}
	c.closing = true
	for _, g := range c.groups {
		if g.cold() {
			continue
		}
		c.skipOwed(g)
		for _, w := range g.tickets {
			if behind(g.ack, w.target) {
				c.resolve(w.t, ErrClosed) // its advance is not written
			}
		}
		// A skip not made and a read not done are not made now; a dead
		// letter on its way is (the flush sends it).
		c.endRepairs(g, repairSkip, ErrClosed)
		c.endRepairs(g, repairRead, ErrClosed)
		c.giveBackGroup(now, g)
	}
	c.giveBackUnordered(now)
	for _, m := range c.parks.q {
		m.g.park.parking--
		m.requeueHeld()
		c.giveBack(now, m)
	}
	c.parks.q = nil
	for _, e := range c.budget.released {
		if c.worthShortening(now, e.until) && e.receipt != "" {
			c.vis.shorten(e, 0) // released before: given back too
		}
	}
}

// skipOwed marks as skipped the AtMostOnce message of g whose commit is
// durable but that no application took, once the Core closes; its only
// copy, if this Core holds it, goes back to the queue. The commit of one
// whose Receive gave up may end after Close began: durable and Abandon
// call this too.
func (c *Core) skipOwed(g *group) {
	m := g.out
	if !c.closing || m == nil || m.out != outOwed {
		return
	}
	m.skippedOut()
	r := seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}
	c.skipped(g, r, 0, "at-most-once message committed but not taken before close: marked skipped")
	g.owed = append(g.owed, r)
	c.markDirty(g)
	if m.has(fStored) {
		c.requeue(m)
		return
	}
	g.out = nil
	c.giveBack(c.now, m)
}

// giveBackGroup gives back what g holds and will not deliver.
func (c *Core) giveBackGroup(now time.Time, g *group) {
	if m := g.out; m != nil && (m.out == outRetry || m.out == outReady) {
		g.out = nil
		c.giveBack(now, m)
	}
	var all []*msg
	all = append(all, g.held...)
	all = append(all, g.newer...)
	all = append(all, g.pending...)
	clear(g.held)
	clear(g.newer)
	clear(g.pending)
	g.held, g.newer, g.pending = g.held[:0], g.newer[:0], g.pending[:0]
	g.newerSince, g.newerEpoch = time.Time{}, 0
	for _, m := range all {
		c.budget.unbuffer(m)
		c.giveBack(now, m)
	}
}

// giveBackUnordered gives back the Unordered messages waiting for a hand-out
// (or their retry); one deleted before its hand-out goes back to the queue.
func (c *Core) giveBackUnordered(now time.Time) {
	for _, m := range c.unord.held {
		switch {
		case m.where == wHeld:
			c.budget.unbuffer(m)
			c.giveBack(now, m)
		case m.waitsForAny(outRetry, outReady) && m.has(fStored):
			c.requeue(m)
		case m.waitsForAny(outRetry, outReady):
			c.giveBack(now, m)
		}
	}
}

// giveBack lets go of m, which the Core holds and will not deliver: its
// visibility is shortened so that it comes back soon. Read back from the
// park, it has nothing to give back: the park keeps it.
//
// While a change of its visibility is in flight, it waits for it: the
// change rotates the receipt, and a shortening with the old one would be
// refused while the new one kept it invisible.
func (c *Core) giveBack(now time.Time, m *msg) {
	if m.has(fStored) {
		c.gone(m)
		return
	}
	if m.has(fVisBusy) {
		m.flags |= fBackWait
		c.vis.list.remove(m)
		return
	}
	c.st.GivenBack++
	c.countUntilVisible(now, m, true)
	c.gone(m)
}

// Flushed reports whether, after Close, nothing is left to commit, delete,
// give back or send back (or in flight).
func (c *Core) Flushed() bool {
	for _, l := range c.lanes() {
		if !l.flushed(c) {
			return false
		}
	}
	for _, g := range c.groups {
		if g.uncertain != nil && c.cfg.Mode != ExactlyOnce {
			return false
		}
		if g.phase == phFailed && !g.cold() && len(g.owed) > 0 {
			// A skip mark owed (an AtMostOnce message committed or
			// carved, never handed out) that a store error kept from
			// its write: the group's retry writes it (becomeLoaded);
			// flushed without it, the next receiver would delete the
			// message as a duplicate, unseen.
			return false
		}
		if g.phase == phFailed && !g.cold() && g.kept {
			// An acknowledged advance that a store error kept from its
			// write: the group's retry writes it (keepsAcked). Flushed
			// without it, the next receiver would hand the messages out
			// again.
			return false
		}
	}
	return true
}
