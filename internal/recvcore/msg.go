package recvcore

import "time"

// A message's state changes only in this file: where it is (held, out,
// settled, on its way to a delete, a dead letter or the park, gone) and,
// while it is out, what its hand-out waits for.

// where is the place of a message in the Core: exactly one at a time.
type where uint8

const (
	wHeld    where = iota + 1 // waiting for its turn: g.held, g.newer, g.pending, or an Unordered one in the ring
	wOut                      // handed out, or waiting to be handed out again (g.out)
	wSettled                  // acked or a duplicate: waits for the durable cursor past it (g.settled)
	wDelete                   // queued for delete, or being deleted
	wDead                     // being dead-lettered
	wPark                     // being parked
	wGone                     // deleted, released or dropped: no longer held
)

// msg flags.
const (
	fRedelivered uint16 = 1 << iota
	fDup                // a copy of a handled message
	fLate               // an older epoch or a skipped seq
	fUntagged           // no valid header
	fStored             // read back from the park: no receipt, not in the queue
	fLapsed             // its visibility ended, or an extension's answer was lost: the receipt may be stale, and visible is the latest end it may have
	fNoPark             // the store refused to park it for good: never parked again
	fVisBusy            // a visibility change is in flight: it will rotate the receipt
	fDelWait            // queued for delete once the visibility change in flight ends
	fInVis              // on the visibility list
	fHoldTold           // reported held past MaxHold by a handler
	fBackWait           // given back once the visibility change in flight ends
	fInHold             // on the hold list
	fLoose              // its visibility end is known only loosely: the last change's answer came late
	fCarve              // AtMostOnce, late by a skipped range: its seq is carved out of it at its first hand-out, and it pins its group until the application settled it (carve.go)
)

// msg is one message held by the Core.
// Its fields are packed (160 bytes): a receiver holds thousands.
type msg struct {
	g            *group // nil for an Unordered message
	name         string // group name (also for Unordered ones)
	raw          []byte // the body as received (dropped once acked)
	id           string
	receipt      string
	vprev, vnext *msg // the visibility list, while it holds a live receipt
	hprev, hnext *msg // the hold list (see Core.watchHold)
	epoch, seq   uint64
	visible      int64  // when its visibility ends, in Unix nanoseconds
	since        int64  // when it was received (its hold began), in Unix nanoseconds
	ticket       Ticket // AtMostOnce: the hand-out waiting for its commit or delete
	hdr          uint32 // the header's length: raw[hdr:] is the payload
	dequeue      int32
	cost         int32
	attempt      int32
	tries        int32  // failed deletes or dead letters
	gen          uint32 // counts the msg's reuses: a Delivery of an earlier use no longer matches
	where        where
	out          outState // while wOut
	flags        uint16
}

// visibleAt returns when m's visibility ends.
func (m *msg) visibleAt() time.Time { return time.Unix(0, m.visible) }

// setVisibleAt records when m's visibility ends.
func (m *msg) setVisibleAt(t time.Time) { m.visible = t.UnixNano() }

func (m *msg) has(f uint16) bool { return m.flags&f != 0 }

// payload returns the body without its header (nil once dropped).
func (m *msg) payload() []byte {
	if m.raw == nil {
		return nil
	}
	return m.raw[m.hdr:]
}

// setBody keeps raw, whose last len(payload) bytes are the payload.
func (m *msg) setBody(raw, payload []byte) {
	m.raw, m.hdr = raw, uint32(len(raw)-len(payload))
}

// live reports whether m holds a receipt of a message not yet deleted.
func (m *msg) live() bool { return !m.has(fStored) && m.where != wGone }

// outState refines wOut: what the hand-out waits for.
type outState uint8

const (
	outHanded    outState = iota + 1 // with the application
	outRetry                         // waiting for its retry backoff
	outReady                         // waits to be handed out (a retry that is due, or an owed AtMostOnce message)
	outCommit                        // AtMostOnce: handed out once its cursor advance is durable
	outOwed                          // AtMostOnce: committed, but the Receive waiting for it gave up
	outAbandoned                     // AtMostOnce: the Receive gave up while the commit was in flight
	outDead                          // being dead-lettered (PoisonDeadLetter)
	outDelete                        // AtMostOnce Unordered: handed out once deleted
	outSkipped                       // AtMostOnce: given up at close, marked skipped in the cursor
	outRequeue                       // AtMostOnce: given up at close, its only copy on its way back to the queue
)

// hold makes m wait for its turn (in a group's lists, or in the ring for
// an Unordered message), counted as buffered.
func (c *Core) hold(m *msg) {
	m.where = wHeld
	c.budget.buffer(m)
	if m.g != nil {
		c.holding(m.g)
	}
}

// takeOut hands m out: it leaves its wait.
func (c *Core) takeOut(m *msg) {
	if m.where == wHeld {
		c.budget.unbuffer(m)
	}
	m.where = wOut
}

// The states of a hand-out.

func (m *msg) handed()                        { m.out = outHanded }
func (m *msg) ready()                         { m.out = outReady }
func (m *msg) owe()                           { m.out = outOwed }
func (m *msg) abandoned()                     { m.out = outAbandoned }
func (m *msg) deadOut()                       { m.out = outDead }
func (m *msg) skippedOut()                    { m.out = outSkipped }
func (m *msg) requeued()                      { m.out = outRequeue }
func (m *msg) retryLater()                    { m.out = outRetry }
func (m *msg) awaitCommit(t Ticket)           { m.out, m.ticket = outCommit, t }
func (m *msg) awaitDelete(t Ticket)           { m.out, m.ticket = outDelete, t }
func (m *msg) clearOut()                      { m.out = 0 }
func (m *msg) waitsFor(st outState) bool      { return m.where == wOut && m.out == st }
func (m *msg) waitsForAny(a, b outState) bool { return m.where == wOut && (m.out == a || m.out == b) }

// settleMsg keeps of m, acknowledged or a duplicate, what deleting it
// takes once the cursor past it is durable, and keeping its visibility
// alive meanwhile (a store outage must not turn it into a redelivery every
// visibility timeout): a settledEntry, so that an outage during which acks
// go on costs a few dozen bytes per message. m itself is recycled. A
// message read back from the park has nothing to delete: the advance
// removes it from the park.
func (c *Core) settleMsg(g *group, m *msg) {
	if m.has(fStored) || m.receipt == "" {
		c.gone(m)
		return
	}
	e := settledEntry{epoch: m.epoch, seq: m.seq, receipt: m.receipt, visible: m.visible, since: m.since, flags: m.flags & (fDup | fLapsed | fVisBusy)}
	g.settled = append(g.settled, e)
	c.budget.mem += len(e.receipt)
	c.vis.watch(g, &e)
	// The receipt stays held: live counts it until the delete.
	c.budget.live++
	c.gone(m)
}

// unsettle makes a settled entry a message again, to delete or release it.
// A change of its visibility in flight becomes the message's: a delete
// waits for it (the receipt changes), and a release counts the message as
// extended until the change's outcome is known.
func (c *Core) unsettle(now time.Time, e settledEntry) *msg {
	c.budget.mem -= len(e.receipt)
	m := c.pool.take()
	m.epoch, m.seq, m.receipt, m.visible, m.since, m.where = e.epoch, e.seq, e.receipt, e.visible, e.since, wSettled
	m.flags = e.flags & (fDup | fLapsed)
	if e.flags&fVisBusy != 0 && c.vis.rebind(m) {
		m.flags |= fVisBusy
	}
	c.budget.charge(m)
	return m
}

// queueDelete queues m's receipt for deletion. Its cursor is durable, it is
// a proven duplicate, or it is an Unordered message that was settled.
// While a visibility change of m is in flight, the delete waits for it:
// the change rotates the receipt, and a delete with the old one would be
// refused as stale while the queue still holds the message.
func (c *Core) queueDelete(now time.Time, m *msg) {
	if m.has(fStored) || m.receipt == "" {
		c.gone(m)
		return
	}
	m.where = wDelete
	c.vis.list.remove(m)
	m.raw = nil
	c.budget.recharge(m)
	if m.has(fVisBusy) {
		m.flags |= fDelWait
		return
	}
	c.deletes.push(now, m)
}

// deleteFirst queues the delete of m, an AtMostOnce Unordered message
// handed out once deleted: it stays out (and keeps its body, which a
// Receive that gives up hands out again).
func (c *Core) deleteFirst(now time.Time, m *msg) {
	c.vis.list.remove(m)
	c.deletes.urgent = true // a Receive waits for it: no batching delay
	c.deletes.changed = true
	if m.has(fVisBusy) {
		m.flags |= fDelWait
		return
	}
	c.deletes.push(now, m)
}

// queueDead queues m to be sent to the dead-letter queue. A message out
// (a poison one) stays out until its dead letter is sent.
func (c *Core) queueDead(m *msg) {
	if m.where == wHeld {
		c.budget.unbuffer(m)
	}
	if m.where != wOut {
		m.where = wDead
	}
	c.deads.q = append(c.deads.q, m)
}

// toPark queues m, held for g, to be parked in the store and then deleted
// from the queue.
func (c *Core) toPark(g *group, m *msg) {
	m.where = wPark
	c.parks.q = append(c.parks.q, m)
	g.park.parking++
	c.countPark(m)
	if !m.stored() {
		c.pin(g)
	}
}

// requeueHeld makes a message that came back from a lane (a park refused,
// a dead letter given up) held again, for its next fate.
func (m *msg) requeueHeld() { m.where = wHeld }

// gone forgets m: it no longer holds a receipt. Nothing in the Core refers
// to it any more but what checks its generation (a Delivery, a visibility
// change in flight, the ring, a timer): it is recycled.
func (c *Core) gone(m *msg) {
	if m.where == wGone {
		return
	}
	if m.has(fCarve) {
		c.uncarve(m, m.where == wOut)
	}
	if m.live() {
		c.budget.live--
	}
	m.where = wGone
	c.vis.list.remove(m)
	c.vis.holds.remove(m)
	c.budget.uncharge(m)
	if m.g == nil {
		c.unord.drop(m)
	}
	c.pool.recycle(m)
}

// deletedFirst records that m, an AtMostOnce Unordered message, was
// deleted before its hand-out: it holds no receipt any more.
func (c *Core) deletedFirst(m *msg) {
	c.budget.live--
	m.flags |= fStored
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
	c.countUntilVisible(now, m, true)
	c.gone(m)
}

// countUntilVisible counts m, which the Core lets go of, as the queue does:
// received and not deleted until its visibility ends. With shorten, its
// visibility is shortened (when the request budget allows) so that it
// comes back soon. While a change of it is in flight, the end is unknown:
// counted as extended, and not shortened (the receipt will change).
func (c *Core) countUntilVisible(now time.Time, m *msg, shorten bool) {
	until := m.visibleAt()
	if m.has(fVisBusy) {
		until, shorten = maxTime(until, now.Add(c.cfg.VisibilityExtend)), false
	}
	if !until.After(now) {
		return
	}
	e := c.budget.addReleased(until, m.receipt, m.id)
	c.vis.released(m.receipt, e)
	if shorten && m.receipt != "" && !m.has(fLapsed) && c.worthShortening(now, until) {
		c.vis.shorten(e, c.shortBound())
	}
}

// worthShortening reports whether a message invisible until then comes
// back sooner with its visibility shortened.
func (c *Core) worthShortening(now, until time.Time) bool {
	return until.Sub(now) > 2*c.cfg.ShortVisibility
}

// shortBound bounds the shortenings queued: none once the Core closes,
// when everything held is given back.
func (c *Core) shortBound() int {
	if c.closing {
		return 0
	}
	return 64 * c.cfg.MaxBatch
}

// dropOut takes m, out, off its group.
func (m *msg) dropOut() {
	if g := m.g; g != nil && g.out == m {
		g.out = nil
	}
}

// maxSpare bounds the msgs kept for reuse: about 750 KB at most, and no
// more than the most msgs that were ever live at once (a Core whose MaxHeld
// is small never keeps many). 1,024 overflowed with 1,000 groups: a new
// msg for 0.87 arrivals in 1 (the bench's ordered/memqueue/memstore/
// durable/g1000: 5.67 allocations per message, 4.66-4.79 with 4,096); CPU
// per message the same within the noise of the bench guard's pairs.
const maxSpare = 4096

// msgPool keeps msgs for reuse, to save an allocation per arrival. A msg is
// reused once it is gone: what still refers to it then (the application's
// Delivery, a visibility change in flight, a ring item, a timer) checks its
// generation.
type msgPool struct {
	spare   []*msg
	arrived time.Time // the last arrival (Core.end drops spare when idle)
}

// take returns a zero msg, reused when one is spare.
func (p *msgPool) take() *msg {
	n := len(p.spare)
	if n == 0 {
		return new(msg)
	}
	m := p.spare[n-1]
	p.spare[n-1] = nil
	p.spare = p.spare[:n-1]
	m.where = 0 // as new: not gone
	return m
}

// recycle keeps m, which nothing in the Core refers to any more, for take.
func (p *msgPool) recycle(m *msg) {
	if len(p.spare) >= maxSpare {
		return
	}
	*m = msg{where: wGone, gen: m.gen + 1}
	p.spare = append(p.spare, m)
}

// countOnce drops m, another receipt of a message the Core holds (which
// took m's receipt): the queue counts the message once.
func (c *Core) countOnce(m *msg) {
	c.vis.list.remove(m)
	c.vis.holds.remove(m)
	c.budget.live--
	c.budget.uncharge(m)
	m.where = wGone
	c.pool.recycle(m)
}
