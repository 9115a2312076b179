package recvcore

import (
	"errors"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Next hands out the next message of a ready group, groups taking turns,
// or reports false when none is ready. In AtMostOnce mode the Delivery may
// carry an Await ticket: the message goes to the application only once the
// ticket resolves without error.
func (c *Core) Next(now time.Time) (Delivery, bool) {
	c.begin(now)
	defer c.end()
	if c.closing {
		return Delivery{}, false
	}
	for {
		it, ok := c.ring.pop()
		if !ok {
			return Delivery{}, false
		}
		if m := it.m; m != nil {
			if m.gen != it.gen {
				continue // settled and reused since
			}
			if d, ok := c.nextUnordered(now, m); ok {
				c.outstanding++
				return d, true
			}
			continue
		}
		g := it.g
		if !g.inRing {
			continue
		}
		g.inRing = false
		if !g.ready(now) {
			c.update(g, now)
			continue
		}
		d := c.handOut(now, g)
		c.outstanding++
		return d, true
	}
}

func (c *Core) nextUnordered(now time.Time, m *msg) (Delivery, bool) {
	if m.where != wHeld && !m.waitsFor(outReady) {
		return Delivery{}, false
	}
	first := m.where == wHeld // (outReady: owed again after its Receive gave up)
	var carve *group
	if c.cfg.Mode == AtMostOnce && first && m.has(fCarve) {
		var wait bool
		if carve, wait = c.carvable(m); wait {
			return Delivery{}, false // in line again once its group is active (carve.go)
		}
	}
	c.takeOut(m)
	m.attempt++
	m.handed()
	c.st.Delivered++
	d := Delivery{Group: m.name, Epoch: m.epoch, Seq: m.seq, Body: m.payload(), Raw: m.raw, ID: m.id,
		Attempt: int(m.attempt), Unordered: true, Redelivered: m.has(fRedelivered), m: m, mgen: m.gen}
	if c.cfg.Mode != AtMostOnce || m.has(fStored) || m.has(fCarve) && !first {
		// (Owed again after its Receive gave up: deleted, or its carve
		// is durable.)
		return d, true
	}
	if carve != nil {
		// Its seq is carved out of its skipped range first, as an
		// ordered hand-out's advance is committed first; its Ack deletes
		// it (carve.go).
		c.carve(carve, m)
		d.Await = m.ticket
		return d, true
	}
	// Delete first: a crash after the hand-out must not deliver it
	// again.
	m.awaitDelete(c.ticket())
	d.Await = m.ticket
	c.deleteFirst(now, m)
	return d, true
}

// handOut hands out g's next message (or the one waiting for its retry).
func (c *Core) handOut(now time.Time, g *group) Delivery {
	m := g.out
	if m == nil {
		m = c.takeNext(g)
	}
	owed := m.out == outOwed
	if !owed {
		m.attempt++
	}
	m.handed()
	g.outGen++
	g.started = true
	c.clearGap(g)
	d := Delivery{Group: g.name, Epoch: m.epoch, Seq: m.seq, Body: m.payload(), Raw: m.raw, ID: m.id,
		Attempt: int(m.attempt), Redelivered: m.has(fRedelivered), m: m, gen: g.outGen, mgen: m.gen}
	switch c.cfg.Mode {
	case ExactlyOnce:
		to := cloneCursor(g.ack)
		to.Epoch, to.Next = m.epoch, m.seq+1
		// g.ack may have been built afresh (StartAt, pin): the advance
		// keeps the stored Owner, a fencing token, as addToCommit's do.
		to.Owner = g.dur.Owner
		d.Advance = seqstore.Advance{Stream: c.stream(g.name), From: cloneCursor(g.dur), To: to}
	case AtMostOnce:
		if owed || below(g.dur, m.epoch, m.seq) {
			break
		}
		if !below(g.ack, m.epoch, m.seq) {
			g.ack.Epoch, g.ack.Next = m.epoch, m.seq+1
		}
		m.awaitCommit(c.ticket())
		d.Await = m.ticket
		c.markDirty(g)
		return d
	}
	c.st.Delivered++
	return d
}

// takeNext takes g's next held message out.
func (c *Core) takeNext(g *group) *msg {
	if plantUnsorted && len(g.held) > 1 && g.held[1].seq == g.next+1 {
		g.held[0], g.held[1] = g.held[1], g.held[0] // planted: out of order
		g.next++
	}
	m := g.held[0]
	if n := len(g.held); n > heldShift {
		// A long run: step past the head instead of moving the rest
		// down, which would cost O(n) per message. The array is given
		// back when it grows again, or the group idles.
		g.held[0] = nil
		g.held = g.held[1:]
	} else {
		copy(g.held, g.held[1:])
		g.held[n-1] = nil
		g.held = g.held[:n-1]
	}
	c.takeOut(m)
	g.next = m.seq + 1
	g.out = m
	g.forgetFar()
	g.passParked()
	return m
}

// heldShift is the length of g.held above which a hand-out steps past
// the head rather than moving the rest down: short lists keep their array
// (no allocation per message), long ones cost O(1) per message.
const heldShift = 64

// check finds the message of d if d is still the current hand-out.
func (c *Core) check(d *Delivery) (*msg, error) {
	m := d.m
	if m == nil || m.gen != d.mgen || m.where != wOut {
		return nil, ErrSettled // settled, and maybe reused since (see msgPool)
	}
	if g := m.g; g != nil && (g.out != m || g.outGen != d.gen) {
		return nil, ErrSettled
	}
	if m.g == nil && d.Attempt != int(m.attempt) {
		return nil, ErrSettled // an Unordered message's earlier hand-out
	}
	return m, nil
}

// Ack settles a delivery as processed. With sync, it returns a ticket that
// resolves once the cursor past the message is durable (AtLeastOnce).
func (c *Core) Ack(now time.Time, d *Delivery, sync bool) (Ticket, error) {
	c.begin(now)
	defer c.end()
	m, err := c.check(d)
	if err != nil {
		return 0, err
	}
	if m.out != outHanded {
		return 0, ErrSettled
	}
	c.outstanding--
	c.st.Acked++
	g := m.g
	if g == nil {
		c.carveSeen(m)
		c.settleUnordered(now, m)
		return 0, nil
	}
	var t Ticket
	switch c.cfg.Mode {
	case AtLeastOnce:
		t = c.ackAtLeastOnce(g, m, sync)
	case AtMostOnce:
		c.queueDelete(now, m)
	case ExactlyOnce:
		to := d.Advance.To
		if !behind(to, g.ack) {
			g.dur, g.ack = cloneCursor(to), cloneCursor(to)
			c.passParks(g)
		}
		c.queueDelete(now, m)
		c.flushSettled(now, g)
	}
	g.out = nil
	c.clearStuck(g, "poison")
	c.update(g, now)
	return t, nil
}

// ackAtLeastOnce moves g's acknowledged cursor past m and settles m until
// that is durable; with sync, it returns a ticket that resolves then.
func (c *Core) ackAtLeastOnce(g *group, m *msg, sync bool) Ticket {
	epoch, seq := m.epoch, m.seq
	if !below(g.ack, epoch, seq) {
		g.ack.Epoch, g.ack.Next = epoch, seq+1
	}
	c.settleMsg(g, m) // m is recycled
	c.markDirty(g)
	if !sync {
		return 0
	}
	t := c.ticket()
	if below(g.dur, epoch, seq) {
		// Durable before this Ack: someone else (a second receiver)
		// moved the cursor past it, and this receiver never wrote it.
		c.resolve(t, ErrConflict)
	} else {
		g.tickets = append(g.tickets, syncWait{target: seqstore.Cursor{Epoch: g.ack.Epoch, Next: g.ack.Next}, t: t})
	}
	return t
}

// Nack settles a delivery as failed: it is handed out again after a
// backoff, and after MaxAttempts the poison policy applies. In AtMostOnce
// mode it is not retried (its cursor is past it): it is deleted, or
// dead-lettered under PoisonDeadLetter. In ExactlyOnce mode a cause that
// wraps seqstore.ErrConflict makes the group re-read its cursor.
func (c *Core) Nack(now time.Time, d *Delivery, cause error) error {
	c.begin(now)
	defer c.end()
	m, err := c.check(d)
	if err != nil {
		return err
	}
	if m.out != outHanded {
		return ErrSettled
	}
	c.outstanding--
	c.st.Nacked++
	g := m.g
	switch {
	case c.cfg.Mode == AtMostOnce:
		c.nackAtMostOnce(now, m)
	case g != nil && c.cfg.Mode == ExactlyOnce && errors.Is(cause, seqstore.ErrConflict):
		// The application's compare-and-set failed: the message comes
		// back from the queue if it still needs handling. Its seq is
		// next again until the re-read cursor says otherwise (a cursor
		// found unchanged leaves next as it is).
		g.out = nil
		if m.epoch == g.epoch && m.seq < g.next {
			g.next = m.seq
		}
		c.release(m, now)
		c.conflicted(g, cause)
	case int(m.attempt) >= c.cfg.MaxAttempts && c.cfg.Poison == PoisonDeadLetter:
		m.deadOut()
		c.queueDead(m)
	case c.closing:
		// No retry comes: it goes back to the queue, for the next receiver.
		m.dropOut()
		c.giveBack(now, m)
	default:
		if int(m.attempt) >= c.cfg.MaxAttempts && g != nil && g.stuck != "poison" {
			c.setStuck(g, now, "poison", cause)
			c.report(Report{Kind: ReportStuck, Msg: "group stuck on a poison message", Group: g.name, Epoch: m.epoch, Seq: m.seq,
				ID: m.id, Attempt: int(m.attempt), Err: cause})
		}
		c.retryLater(now, m)
	}
	return nil
}

// nackAtMostOnce drops a failed AtMostOnce message: its cursor is past it,
// so it is deleted (or dead-lettered under PoisonDeadLetter), never
// retried.
func (c *Core) nackAtMostOnce(now time.Time, m *msg) {
	g := m.g
	if g == nil {
		c.carveSeen(m) // the application had it
	}
	switch {
	case c.cfg.Poison == PoisonDeadLetter:
		m.deadOut()
		c.queueDead(m)
	case g == nil:
		c.settleUnordered(now, m)
	default:
		c.queueDelete(now, m)
	}
	if g != nil {
		g.out = nil
		c.update(g, now)
	}
}

// retryLater hands m out again after a backoff (the longest one once it
// failed MaxAttempts times).
func (c *Core) retryLater(now time.Time, m *msg) {
	wait := c.cfg.RetryMax
	if int(m.attempt) < c.cfg.MaxAttempts {
		wait = c.backoff(int(m.attempt))
	}
	m.retryLater()
	c.addTimer(timer{at: now.Add(wait), kind: tRetry, m: m, gen: m.gen, attempt: m.attempt})
}

// Return takes back a hand-out that never reached the application (a Run
// worker handed d as it left). The message is handed out again first, as
// the same attempt, and not counted as delivered; after Close it is given
// back. AtMostOnce hand-outs are not returned (see Abandon): it returns
// ErrNotReturnable.
func (c *Core) Return(now time.Time, d *Delivery) error { return c.handBack(now, d, true) }

// Disown takes back a hand-out that the application had but whose Ack or
// Nack can no longer count: the receiver's lease ended. Left out, it would
// stay invisible until its last extension ends, and its group would wait
// for it at its next owner. It counts as delivered; the attempt of an
// ordered message does not count towards MaxAttempts (no handler failed).
// It is handed out again (or, after Close, given back) as Return's.
// AtMostOnce hand-outs are not taken back: ErrNotReturnable.
func (c *Core) Disown(now time.Time, d *Delivery) error { return c.handBack(now, d, false) }

// handBack implements Return (unseen: the hand-out is not counted) and
// Disown.
func (c *Core) handBack(now time.Time, d *Delivery, unseen bool) error {
	c.begin(now)
	defer c.end()
	if c.cfg.Mode == AtMostOnce {
		return ErrNotReturnable
	}
	m, err := c.check(d)
	if err != nil {
		return err
	}
	if m.out != outHanded {
		return ErrSettled
	}
	c.outstanding--
	if unseen || m.g != nil {
		// Not a failure: it does not count towards MaxAttempts. (An
		// Unordered message's hand-outs are told apart by their attempt
		// alone: a disowned one's Delivery, which reached the application,
		// must not settle the next.)
		m.attempt--
	}
	if unseen {
		c.st.Delivered--
	}
	if c.closing {
		m.dropOut()
		c.giveBack(now, m)
		return nil
	}
	m.ready()
	if g := m.g; g != nil {
		c.update(g, now)
		return nil
	}
	c.ring.push(ringItem{m: m, gen: m.gen})
	return nil
}

// Abandon says that the Receive waiting for d's Await ticket gave up. The
// message was not seen by the application: it is handed out again first,
// without a new commit when its commit is already durable.
func (c *Core) Abandon(now time.Time, d *Delivery) error {
	c.begin(now)
	defer c.end()
	m, err := c.check(d)
	if err != nil {
		return err
	}
	switch {
	case m.out == outCommit && m.g != nil && !m.g.writing && m.g.uncertain == nil:
		// Its commit has not gone out: the advance is taken back, and
		// the message, unseen, waits for its turn again (given back at
		// Close) instead of being passed over with a skip mark.
		g := m.g
		c.takeBack(now, g, m, ErrClosed)
		if !c.closing {
			c.update(g, now) // next in line again
		}
	case m.out == outCommit || m.out == outDelete:
		m.abandoned()
	case m.out != outHanded:
		return ErrSettled
	case m.g == nil:
		// The ticket resolved meanwhile: an Unordered message deleted
		// from the queue, whose copy is now only here, or carved.
		c.owedUnordered(m)
	default:
		// The ticket resolved meanwhile: the commit is durable.
		g := m.g
		m.owe()
		m.attempt--
		c.skipOwed(g) // after Close: m is given back, or sent back
		c.update(g, now)
	}
	c.outstanding--
	return nil
}

// owedUnordered hands out again an AtMostOnce Unordered message whose
// Receive gave up after its delete or its carve; once the Core closes, it
// goes back to the queue (sent back when its only copy is here).
func (c *Core) owedUnordered(m *msg) {
	switch {
	case c.closing && m.has(fStored):
		c.requeue(m)
		return
	case c.closing:
		c.giveBack(c.now, m) // carved: its copy is in the queue (carve.go)
		return
	}
	m.ready()
	c.ring.push(ringItem{m: m, gen: m.gen})
}

// settleUnordered ends an Unordered message after its Ack (or Nack under
// AtMostOnce): it is deleted, and its key remembered so that later copies
// are deleted too.
func (c *Core) settleUnordered(now time.Time, m *msg) {
	c.unord.remember(c, unorderedKey(m))
	c.queueDelete(now, m) // (AtMostOnce: deleted before its hand-out, it is just forgotten)
}
