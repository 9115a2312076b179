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
	c.now = now
	if c.closing {
		return Delivery{}, false
	}
	for {
		it, ok := c.ring.pop()
		if !ok {
			return Delivery{}, false
		}
		if m := it.m; m != nil {
			if d, ok := c.nextUnordered(now, m); ok {
				c.outstanding++
				c.settle(now)
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
		c.settle(now)
		return d, true
	}
}

func (c *Core) nextUnordered(now time.Time, m *msg) (Delivery, bool) {
	if m.where == wHeld {
		c.unbuffer(m)
		m.where = wOut
	} else if m.where != wOut || m.out != outReady {
		return Delivery{}, false
	}
	m.attempt++
	m.out = outHanded
	c.st.Delivered++
	d := Delivery{Group: m.name, Epoch: m.epoch, Seq: m.seq, Body: m.payload, Raw: m.raw, ID: m.id,
		Attempt: m.attempt, Unordered: true, Redelivered: m.has(fRedelivered), m: m, mgen: m.gen}
	if c.cfg.Mode == AtMostOnce && m.attempt == 1 {
		// Delete first: a crash after the hand-out must not deliver it
		// again.
		m.out = outDelete
		m.ticket = c.ticket()
		d.Await = m.ticket
		c.queueDelete(now, m)
		m.where = wOut     // still out: queueDelete only queued its receipt
		c.delUrgent = true // a Receive waits for it: no batching delay
	}
	return d, true
}

// handOut hands out g's next message (or the one waiting for its retry).
func (c *Core) handOut(now time.Time, g *group) Delivery {
	m := g.out
	if m == nil {
		if plantUnsorted && len(g.held) > 1 && g.held[1].seq == g.next+1 {
			g.held[0], g.held[1] = g.held[1], g.held[0] // planted: out of order
			g.next++
		}
		m = g.held[0]
		if n := len(g.held); n > heldShift {
			// A long run: step past the head instead of moving the
			// rest down, which would cost O(n) per message. The array
			// is given back when it grows again, or the group idles.
			g.held[0] = nil
			g.held = g.held[1:]
		} else {
			copy(g.held, g.held[1:])
			g.held[n-1] = nil
			g.held = g.held[:n-1]
		}
		c.unbuffer(m)
		g.next = m.seq + 1
		g.out = m
		m.where = wOut
		g.forgetFar()
		g.passParked()
	}
	owed := m.out == outOwed
	if !owed {
		m.attempt++
	}
	m.out = outHanded
	g.outGen++
	g.started = true
	c.clearGap(g)
	d := Delivery{Group: g.name, Epoch: m.epoch, Seq: m.seq, Body: m.payload, Raw: m.raw, ID: m.id,
		Attempt: m.attempt, Redelivered: m.has(fRedelivered), m: m, gen: g.outGen, mgen: m.gen}
	switch c.cfg.Mode {
	case ExactlyOnce:
		to := cloneCursor(g.ack)
		to.Epoch, to.Next = m.epoch, m.seq+1
		d.Advance = seqstore.Advance{Stream: c.stream(g.name), From: cloneCursor(g.dur), To: to}
	case AtMostOnce:
		if owed || below(g.dur, m.epoch, m.seq) {
			break
		}
		if !below(g.ack, m.epoch, m.seq) {
			g.ack.Epoch, g.ack.Next = m.epoch, m.seq+1
		}
		m.out = outCommit
		m.ticket = c.ticket()
		d.Await = m.ticket
		c.markDirty(g)
		return d
	}
	c.st.Delivered++
	return d
}

// heldShift is the length of g.held above which a hand-out steps past
// the head rather than moving the rest down: short lists keep their array
// (no allocation per message), long ones cost O(1) per message.
const heldShift = 64

// check finds the message of d if d is still the current hand-out.
func (c *Core) check(d *Delivery) (*msg, error) {
	m := d.m
	if m == nil || m.gen != d.mgen || m.where != wOut {
		return nil, ErrSettled // settled, and maybe reused since (see take)
	}
	if g := m.g; g != nil && (g.out != m || g.outGen != d.gen) {
		return nil, ErrSettled
	}
	return m, nil
}

// Ack settles a delivery as processed. With sync, it returns a ticket that
// resolves once the cursor past the message is durable (AtLeastOnce).
func (c *Core) Ack(now time.Time, d *Delivery, sync bool) (Ticket, error) {
	c.now = now
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
		c.settleUnordered(now, m)
		c.settle(now)
		return 0, nil
	}
	var t Ticket
	reuse := false
	switch c.cfg.Mode {
	case AtLeastOnce:
		if !below(g.ack, m.epoch, m.seq) {
			g.ack.Epoch, g.ack.Next = m.epoch, m.seq+1
		}
		// Settled, m is left only in the application's Delivery, which
		// its generation fences off: it can be reused.
		reuse = !m.has(fStored) && m.receipt != ""
		c.settleMsg(g, m)
		c.markDirty(g)
		if sync {
			t = c.ticket()
			if below(g.dur, m.epoch, m.seq) {
				// Durable before this Ack: someone else (a second
				// receiver) moved the cursor past it, and this receiver
				// never wrote it.
				c.resolve(t, ErrConflict)
			} else {
				g.tickets = append(g.tickets, syncWait{target: seqstore.Cursor{Epoch: g.ack.Epoch, Next: g.ack.Next}, t: t})
			}
		}
	case AtMostOnce:
		c.queueDelete(now, m)
	case ExactlyOnce:
		to := d.Advance.To
		if !behind(to, g.ack) {
			g.dur, g.ack = cloneCursor(to), cloneCursor(to)
		}
		c.queueDelete(now, m)
		c.flushSettled(now, g)
	}
	g.out = nil
	if reuse {
		c.recycle(m)
	}
	c.clearStuck(g, "poison")
	c.update(g, now)
	c.settle(now)
	return t, nil
}

// Nack settles a delivery as failed: it is handed out again after a
// backoff, and after MaxAttempts the poison policy applies. In AtMostOnce
// mode it is not retried (its cursor is past it): it is deleted, or
// dead-lettered under PoisonDeadLetter. In ExactlyOnce mode a cause that
// wraps seqstore.ErrConflict makes the group re-read its cursor.
func (c *Core) Nack(now time.Time, d *Delivery, cause error) error {
	c.now = now
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
	if c.cfg.Mode == AtMostOnce {
		if c.cfg.Poison == PoisonDeadLetter {
			m.out = outDead
			c.queueDead(m)
		} else if g == nil {
			c.settleUnordered(now, m)
		} else {
			c.queueDelete(now, m)
		}
		if g != nil {
			g.out = nil
			c.update(g, now)
		}
		c.settle(now)
		return nil
	}
	if g != nil && c.cfg.Mode == ExactlyOnce && errors.Is(cause, seqstore.ErrConflict) {
		// The application's compare-and-set failed: the message comes
		// back from the queue if it still needs handling.
		g.out = nil
		c.release(m, now)
		c.conflicted(now, g, cause)
		c.settle(now)
		return nil
	}
	if m.attempt >= c.cfg.MaxAttempts {
		if c.cfg.Poison == PoisonDeadLetter {
			m.out = outDead
			c.queueDead(m)
			c.settle(now)
			return nil
		}
		if g != nil && g.stuck != "poison" {
			c.setStuck(g, now, "poison", cause)
			c.report(Report{Kind: ReportStuck, Msg: "group stuck on a poison message", Group: g.name, Epoch: m.epoch, Seq: m.seq,
				ID: m.id, Attempt: m.attempt, Err: cause})
		}
	}
	c.retryLater(now, m)
	c.settle(now)
	return nil
}

// retryLater hands m out again after a backoff (the longest one once it
// failed MaxAttempts times).
func (c *Core) retryLater(now time.Time, m *msg) {
	wait := c.cfg.RetryMax
	if m.attempt < c.cfg.MaxAttempts {
		wait = c.backoff(m.attempt)
	}
	m.out, m.retryAt = outRetry, now.Add(wait)
	if m.g != nil {
		c.addTimer(timer{at: m.retryAt, kind: tRetry, g: m.g})
		return
	}
	c.addTimer(timer{at: m.retryAt, kind: tUnordered, m: m})
}

// Abandon says that the Receive waiting for d's Await ticket gave up. The
// message was not seen by the application: it is handed out again first,
// without a new commit when its commit is already durable.
func (c *Core) Abandon(now time.Time, d *Delivery) error {
	c.now = now
	m, err := c.check(d)
	if err != nil {
		return err
	}
	c.outstanding--
	switch m.out {
	case outCommit:
		m.out = outAbandoned
	case outHanded:
		// The ticket resolved meanwhile: the commit is durable.
		m.out = outOwed
		m.attempt--
		c.update(m.g, now)
	case outDelete:
		m.out = outAbandoned
	default:
		c.outstanding++
		return ErrSettled
	}
	c.settle(now)
	return nil
}

// settleUnordered ends an Unordered message after its Ack (or Nack under
// AtMostOnce): it is deleted, and its key remembered so that later copies
// are deleted too.
func (c *Core) settleUnordered(now time.Time, m *msg) {
	c.remember(unorderedKey(m))
	if m.out == outHanded && c.cfg.Mode == AtMostOnce && m.attempt == 1 {
		c.gone(m) // deleted before it was handed out
		return
	}
	c.queueDelete(now, m)
}

func unorderedKey(m *msg) seenKey {
	if m.has(fUntagged) {
		return seenKey{id: m.id}
	}
	return seenKey{group: m.name, epoch: m.epoch, seq: m.seq}
}

// markDirty queues g for the committer.
func (c *Core) markDirty(g *group) {
	if c.cfg.Mode == ExactlyOnce || g.dirty {
		return
	}
	c.queueCommit(g)
}

// queueCommit queues g for the next commit. The first advance waiting sets
// when that commit may start: CommitInterval later, so that more advances
// share it.
func (c *Core) queueCommit(g *group) {
	if c.dirty.len() == 0 && c.commit == nil {
		c.dirtySince = c.now
	}
	g.dirty = true
	c.dirty.push(g)
}

// queueDelete queues m's receipt for deletion. Its cursor is durable, it is
// a proven duplicate, or it is an Unordered message that was settled.
func (c *Core) queueDelete(now time.Time, m *msg) {
	if m.has(fStored) || m.receipt == "" {
		c.gone(m)
		return
	}
	if c.delq.len() == 0 {
		c.delSince = now
	}
	m.where = wDelete
	c.vis.remove(m)
	m.raw, m.payload = nil, nil
	c.recharge(m)
	c.delq.push(m)
}

// queueDead queues m to be sent to the dead-letter queue.
func (c *Core) queueDead(m *msg) {
	if m.where == wHeld {
		c.unbuffer(m)
	}
	if m.where != wOut {
		m.where = wDead
	}
	c.deadq = append(c.deadq, m)
}

// flushSettled deletes the settled messages below the durable cursor.
func (c *Core) flushSettled(now time.Time, g *group) {
	keep := g.settled[:0]
	for _, e := range g.settled {
		if below(g.dur, e.epoch, e.seq) {
			c.queueDelete(now, c.unsettle(e))
		} else {
			keep = append(keep, e)
		}
	}
	clear(g.settled[len(keep):])
	g.settled = keep
}

// update puts g in the ready ring if it can hand out; otherwise it checks
// g's hole and epoch switch, asks the park for what comes next, and lets g
// go idle when it holds nothing.
func (c *Core) update(g *group, now time.Time) {
	if g.phase == phEvicted {
		return
	}
	g.wake()
	if g.ready(now) {
		c.clearGap(g)
		if !g.inRing && !c.closing {
			g.inRing = true
			c.ring.push(ringItem{g: g})
		}
		return
	}
	if g.phase != phActive {
		return
	}
	if g.out == nil {
		c.checkEpoch(g, now)
		if g.ready(now) {
			c.update(g, now)
			return
		}
		c.checkPark(g)
		c.checkGap(g, now)
	}
	if g.empty() {
		g.idleAt = now
		if !g.compactQueued {
			g.compactQueued = true
			c.compactq.push(compactItem{g: g, at: now})
		}
		if c.cfg.IdleEvict >= 0 && !g.idle {
			g.idleSince = now
			c.idle.push(g)
		}
	}
}

func (c *Core) clearGap(g *group) {
	g.gapSince, g.gapTold = time.Time{}, false
	c.clearStuck(g, "gap")
}

// knowParked records that seq of g's current epoch is parked and not in
// memory.
func (g *group) knowParked(seq uint64) {
	if seq >= g.next && (g.parkLow == 0 || seq < g.parkLow) {
		g.parkLow = seq
	}
	g.parkHigh = max(g.parkHigh, seq)
}

// passParked forgets what next has passed of the park: when more may be
// parked beyond, the park is read again once next is missing.
func (g *group) passParked() {
	if g.parkLow != 0 && g.parkLow < g.next {
		g.parkLow = 0
		if g.parkHigh >= g.next {
			g.probed = false
		}
	}
	if g.parkHigh < g.next {
		g.parkHigh = 0
	}
}

// noteFar records that seq of g's current epoch was released.
func (g *group) noteFar(seq uint64) {
	if g.farLow == 0 || seq < g.farLow {
		g.farLow = seq
	}
	g.farHigh = max(g.farHigh, seq)
}

// forgetFar drops what next has passed of the released range: below
// farHigh, the lowest released seq is then unknown.
func (g *group) forgetFar() {
	switch {
	case g.farHigh < g.next:
		g.farLow, g.farHigh = 0, 0
	case g.farLow < g.next:
		g.farLow = 0
	}
}

// waiting reports whether g's next seq is missing while later seqs of its
// epoch are known (held, parked, or seen too far ahead).
func (g *group) waiting() bool {
	return g.out == nil && (len(g.held) > 0 || g.parkLow != 0 || g.farHigh != 0 && g.farHigh >= g.next)
}

// lowestKnown returns the lowest seq of g's epoch above next that g holds,
// knows parked, or saw too far ahead.
func (g *group) lowestKnown() uint64 {
	low := uint64(0)
	for _, s := range [...]uint64{g.parkLow, g.farLow} {
		if s != 0 && (low == 0 || s < low) {
			low = s
		}
	}
	if len(g.held) > 0 && (low == 0 || g.held[0].seq < low) {
		low = g.held[0].seq
	}
	return low
}

// checkGap starts, reports or skips a hole: g's next seq is missing while
// later ones are known. The hole ages while the park is read (a read in
// flight does not hide a stuck group); skip reads the park before it skips.
func (c *Core) checkGap(g *group, now time.Time) {
	if !g.waiting() && g.parking == 0 || g.parkLow == g.next || c.lowestParking(g) == g.next {
		c.clearGap(g)
		return
	}
	if g.gapSince.IsZero() {
		g.gapSince, g.gapTold = now, false
	}
	due := g.gapSince.Add(c.cfg.GapTimeout)
	if now.Before(due) {
		if !g.gapTimer {
			g.gapTimer = true
			c.addTimer(timer{at: due, kind: tGap, g: g})
		}
		return
	}
	if c.cfg.GapPolicy == GapSkip {
		c.skip(g, now)
		return
	}
	if !g.gapTold {
		g.gapTold = true
		c.st.Gaps++
		c.setStuck(g, g.gapSince, "gap", nil)
		var last uint64
		if low := g.lowestKnown(); low > g.next {
			last = low - 1
		}
		c.report(Report{Kind: ReportGap, Msg: "gap", Group: g.name, Epoch: g.epoch, Seq: g.next, Last: last, Age: now.Sub(g.gapSince)})
	}
	// Every GapTimeout the hole lasts, read the cursor again: a second
	// receiver may have handled the missing seq (then the group goes on
	// from the stored cursor), and the park may hold it.
	if !g.gapTimer {
		g.gapTimer = true
		c.addTimer(timer{at: now.Add(c.cfg.GapTimeout), kind: tGap, g: g})
		c.needRead(g)
		g.probed = false
	}
}

// skip moves g past its hole, to the lowest seq it knows, and records the
// skipped range in the cursor.
func (c *Core) skip(g *group, now time.Time) {
	if c.cfg.Park && (!g.probed || g.probedAt.Before(g.gapSince)) {
		// Skip only what the park was seen not to hold: read it first.
		g.probed = false
		c.checkPark(g)
		return
	}
	target := g.lowestKnown()
	if p := c.lowestParking(g); p != 0 && (target == 0 || p < target) {
		target = p
	}
	next := g.next
	if target <= next {
		return
	}
	age := now.Sub(g.gapSince)
	g.next = target
	g.forgetFar()
	g.passParked()
	r := seqstore.Range{Epoch: g.epoch, First: next, Last: target - 1}
	addSkipped(&g.ack, r)
	g.ack.Epoch, g.ack.Next = g.epoch, target
	c.clearGap(g)
	c.st.Skipped += int64(target - next)
	c.report(Report{Kind: ReportSkip, Msg: "skipped", Group: g.name, Epoch: g.epoch, Seq: next, Last: target - 1, Age: age})
	c.markDirty(g)
	c.update(g, now)
}

// checkEpoch switches g to a newer epoch once the old one has nothing out
// and the newer one has waited GapTimeout. Under GapWait it waits as long
// as the old epoch holds anything (a hole is never passed over: it is
// reported); under GapSkip the hole is skipped first. A switch records
// Range{old, next, MaxSeq}: a seq of the old epoch that arrives later is a
// duplicate below next, a late arrival from next on.
func (c *Core) checkEpoch(g *group, now time.Time) {
	if g.newerEpoch == 0 || g.out != nil || now.Before(g.newerSince.Add(c.cfg.GapTimeout)) {
		return
	}
	if g.waiting() || g.unparking || g.parking > 0 || g.farHigh >= g.next {
		if c.cfg.GapPolicy == GapSkip && !g.unparking && g.parkLow != g.next {
			if g.gapSince.IsZero() || now.Before(g.gapSince.Add(c.cfg.GapTimeout)) {
				g.gapSince = now.Add(-c.cfg.GapTimeout) // a newer epoch proves the hole old enough
			}
			c.skip(g, now)
		}
		return
	}
	if c.cfg.Park && !g.probed {
		return // the park may hold more of the old epoch: checkPark reads it first
	}
	to := g.newerEpoch
	from, oldNext := g.epoch, g.next
	// The new epoch starts at 1, or past what is already acknowledged or
	// durable in it: after a conflict reset the group to an older epoch,
	// the application may still have held, and acked, a message of this
	// one. Starting below would wait forever for a seq already handled.
	start := uint64(1)
	if g.ack.Epoch == to {
		start = max(start, g.ack.Next)
	}
	if g.dur.Epoch == to {
		start = max(start, g.dur.Next)
	}
	addSkipped(&g.ack, seqstore.Range{Epoch: from, First: oldNext, Last: seqstore.MaxSeq})
	g.ack.Epoch, g.ack.Next = to, start
	g.epoch, g.next = to, start
	g.farLow, g.farHigh, g.parkLow, g.parkHigh, g.probed = 0, 0, 0, 0, false
	c.clearGap(g)
	take, keep := []*msg(nil), g.newer[:0]
	for _, m := range g.newer {
		if m.epoch == to {
			take = append(take, m)
		} else {
			keep = append(keep, m)
		}
	}
	clear(g.newer[len(keep):])
	g.newer = keep
	g.newerSince, g.newerEpoch = time.Time{}, 0
	for _, m := range keep {
		if g.newerEpoch == 0 || m.epoch < g.newerEpoch {
			g.newerEpoch = m.epoch
		}
	}
	if len(keep) > 0 {
		g.newerSince = now
		c.addTimer(timer{at: now.Add(c.cfg.GapTimeout), kind: tEpoch, g: g})
	}
	c.st.EpochSwitches++
	c.report(Report{Kind: ReportEpoch, Msg: "new sender epoch", Group: g.name, Epoch: to, From: from})
	c.markDirty(g)
	for _, m := range take {
		c.unbuffer(m)
		c.arriveCurrent(now, g, m)
	}
}

// conflicted handles a refused advance: someone else moved g's cursor, as
// far as the store says. The cursor is read again to tell a real second
// receiver from this receiver's own write that took effect.
func (c *Core) conflicted(now time.Time, g *group, cause error) {
	g.conflictTold = false
	g.stuckErr = cause
	c.becomeResolving(g, now)
}
