package recvcore

import (
	"container/heap"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/seqstore"
)

// In-flight limits of the actions the Core asks for.
const (
	maxDeletesInFlight    = 4
	maxVisibilityInFlight = 8
	maxUnparkQueries      = 64
	maxUnparkEntries      = 256
	maxDeleteTries        = 5
	maxDeadTries          = 5
)

// Ready returns the actions due at now, and the reports and resolutions
// made since the last call. The shell executes every action and reports
// its outcome with the matching method and the action's ID.
func (c *Core) Ready(now time.Time) Ready {
	c.now = now
	var rd Ready
	c.readyReads(now, &rd)
	c.readyCommit(now, &rd)
	c.readyParks(now, &rd)
	c.readyUnparks(now, &rd)
	c.readyScan(now, &rd)
	c.readyVisibility(now, &rd)
	c.readyDeletes(now, &rd)
	c.readyDead(now, &rd)
	rd.Reports, c.reports = c.reports, nil
	rd.Resolved, c.resolved = c.resolved, nil
	return rd
}

// permanent reports whether a store error for one stream will not go away
// by retrying soon.
func permanent(err error) bool {
	return errors.Is(err, seqstore.ErrCorrupt) || errors.Is(err, seqstore.ErrInvalidStream) ||
		errors.Is(err, seqstore.ErrInvalidArgument) || errors.Is(err, seqstore.ErrOverflow)
}

// Cursor reads.

func (c *Core) readyReads(now time.Time, rd *Ready) {
	if len(c.readBusy) > 0 || now.Before(c.readAfter) || c.reads.len() == 0 {
		return
	}
	var gs []*group
	var streams []seqstore.Stream
	for c.reads.len() > 0 && len(gs) < c.cfg.MaxAdvances {
		g, _ := c.reads.pop()
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
	c.readBusy[id] = gs
	rd.Reads = append(rd.Reads, Read{ID: id, Streams: streams})
}

// Read reports the outcome of the Read action id: one cursor per stream,
// in order, or err.
func (c *Core) Read(now time.Time, id uint64, curs []seqstore.Cursor, err error) {
	c.now = now
	gs, ok := c.readBusy[id]
	if !ok {
		return
	}
	delete(c.readBusy, id)
	failed := false
	for i, g := range gs {
		g.toRead = false
		if g.phase == phEvicted {
			continue
		}
		if e := seqstore.Failed(err, i, len(gs)); e != nil {
			if permanent(e) {
				c.becomeFailed(g, now, e)
				continue
			}
			failed = true
			c.needRead(g)
			continue
		}
		if i >= len(curs) {
			failed = true
			c.needRead(g)
			continue
		}
		c.cursorRead(now, g, curs[i])
	}
	if failed {
		c.readFails++
		c.readAfter = now.Add(c.backoff(c.readFails))
		if c.readFails == 1 || c.readFails%10 == 0 {
			c.report(Report{Kind: ReportWarn, Msg: "read cursors failed", Attempt: c.readFails, Err: err})
		}
	} else {
		c.readFails = 0
	}
	c.settle(now)
}

func (c *Core) cursorRead(now time.Time, g *group, cur seqstore.Cursor) {
	switch g.phase {
	case phLoading, phFailed:
		c.becomeActive(g, now, cur)
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
			g.phase = phResolving
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
		g.phase = phResolving
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
	g.phase = phActive
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
	c.report(Report{Kind: ReportConflict, Msg: "cursor conflict: is a second receiver consuming this queue?",
		Group: g.name, Epoch: cur.Epoch, Seq: cur.Next, Err: g.stuckErr})
	for _, w := range g.tickets {
		c.resolve(w.t, ErrConflict)
	}
	g.tickets = nil
	if m := g.out; m != nil && (m.out == outCommit || m.out == outAbandoned) {
		if m.out == outCommit {
			c.outstanding-- // the Receive waiting for it drops it
		}
		c.resolve(m.ticket, ErrConflict)
		m.ticket = 0
		g.out = nil
		c.requeue(now, g, m)
	}
	if c.cfg.Mode != ExactlyOnce && behind(cur, g.ack) {
		g.dur = cur
		c.markDirty(g)
		return
	}
	g.dur, g.ack = cur, cloneCursor(cur)
	if cur.Next == 0 {
		g.phase = phFresh
	}
	g.epoch, g.next = cur.Epoch, max(cur.Next, 1)
	if m := g.out; m != nil && m.epoch == g.epoch && m.seq == g.next {
		// The seq the store expects next is out: with the application,
		// or waiting for its retry (a Nack) or its dead-lettering. The
		// group goes on after it (its Ack advances the cursor from here);
		// left at it, next would stay behind the cursor once that Ack is
		// durable, waiting forever for a seq already handled.
		g.next = m.seq + 1
	}
	g.parkLow, g.parkHigh, g.probed = 0, 0, false
	if m := g.out; m != nil && m.out != outHanded && below(cur, m.epoch, m.seq) {
		g.out = nil
		m.flags |= fDup
		c.queueDelete(now, m)
	}
	var again []*msg
	c.dropHeld(g, now, func(m *msg) { again = append(again, m) })
	for _, m := range again {
		if m.where == wHeld && m.raw == nil && !m.has(fStored) && m.g == nil {
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
		c.unbuffer(m)
		c.routeTagged(now, g, m)
	}
}

// requeue puts a message that was never seen by the application back as an
// arrival of g.
func (c *Core) requeue(now time.Time, g *group, m *msg) {
	m.out = 0
	m.attempt = max(m.attempt-1, 0)
	c.routeTagged(now, g, m)
}

// Commits.

func (c *Core) committable(g *group) bool {
	if g.phase != phActive || g.uncertain != nil || g.writing {
		return false
	}
	if c.cfg.Mode == ExactlyOnce && !g.forced {
		return false
	}
	return behind(g.dur, g.ack) || !sameCursor(g.dur, g.ack) && !behind(g.ack, g.dur)
}

func (c *Core) readyCommit(now time.Time, rd *Ready) {
	if c.commit != nil || c.dirty.len() == 0 || now.Before(c.commitAfter) ||
		now.Before(c.dirtySince.Add(c.cfg.CommitInterval)) && !c.closing {
		return
	}
	// The batch and its advances are reused from one commit to the next:
	// one is in flight at a time, and the store keeps no reference to a
	// batch once it answered.
	b := c.spareCommit
	if b == nil {
		b = &commitBatch{}
	}
	c.spareCommit = nil
	b.id = c.id()
	advs := b.advs[:0]
	for c.dirty.len() > 0 && len(advs) < c.cfg.MaxAdvances {
		g, _ := c.dirty.pop()
		g.dirty = false
		if g.phase == phEvicted {
			continue
		}
		if !c.committable(g) {
			if g.phase == phActive && g.uncertain == nil && !g.writing {
				c.flushSettled(now, g)
				c.update(g, now)
			}
			continue
		}
		a := seqstore.Advance{Stream: c.stream(g.name), From: cloneCursor(g.dur), To: cloneCursor(g.ack)}
		if err := a.Check(); err != nil {
			c.becomeFailed(g, now, err)
			continue
		}
		to := a.To
		g.writing = true
		b.groups = append(b.groups, g)
		b.tos = append(b.tos, to)
		b.froms = append(b.froms, a.From)
		advs = append(advs, a)
	}
	b.advs = advs
	if len(advs) == 0 {
		c.spareCommit = b
		return
	}
	c.commit = b
	rd.Commits = append(rd.Commits, Commit{ID: b.id, Advances: advs})
}

// Committed reports the outcome of the Commit action id.
func (c *Core) Committed(now time.Time, id uint64, err error) {
	c.now = now
	b := c.commit
	if b == nil || b.id != id {
		return
	}
	c.commit = nil
	var be *seqstore.BatchError
	known := err == nil || errors.As(err, &be) && len(be.Errs) == len(b.groups)
	if err == nil {
		c.st.Commits++
		c.commitFails = 0
	} else {
		c.st.CommitFailures++
	}
	transient := false
	for i, g := range b.groups {
		g.writing = false
		if g.phase == phEvicted {
			continue
		}
		to := b.tos[i]
		if !known {
			// The outcome is unknown: read the cursor before writing
			// again. (A copy, so that to itself stays on the stack.)
			u := to
			g.uncertain = &u
			c.needRead(g)
			continue
		}
		e := seqstore.Failed(err, i, len(b.groups))
		switch {
		case e == nil:
			c.durable(now, g, to)
		case errors.Is(e, seqstore.ErrAborted):
			c.markDirty(g)
		case errors.Is(e, seqstore.ErrConflict):
			c.conflicted(now, g, e)
		case permanent(e):
			c.becomeFailed(g, now, e)
		default:
			transient = true
			c.markDirty(g)
		}
	}
	clear(b.groups)
	clear(b.advs)
	b.groups, b.tos, b.froms, b.advs = b.groups[:0], b.tos[:0], b.froms[:0], b.advs[:0]
	c.spareCommit = b
	if !known || transient {
		c.commitFails++
		c.commitAfter = now.Add(c.backoff(c.commitFails))
		if c.commitFails == 1 || c.commitFails%10 == 0 {
			c.report(Report{Kind: ReportWarn, Msg: "commit cursors failed", Attempt: c.commitFails, Err: err})
		}
	}
	c.settle(now)
}

// durable records that g's cursor to is durable: the settled messages below
// it are deleted, the waits it satisfies end, and an AtMostOnce hand-out
// waiting for it proceeds.
func (c *Core) durable(now time.Time, g *group, to seqstore.Cursor) {
	c.st.Committed++
	g.dur = to
	if !behind(to, g.ack) {
		g.forced = false
	}
	if behind(g.ack, to) {
		g.ack = cloneCursor(to)
	}
	c.flushSettled(now, g)
	c.resolveDurable(g)
	if m := g.out; m != nil && below(g.dur, m.epoch, m.seq) {
		switch m.out {
		case outCommit:
			c.resolve(m.ticket, nil)
			m.ticket = 0
			m.out = outHanded
			c.st.Delivered++
		case outAbandoned:
			m.ticket = 0
			m.out = outOwed
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

// Deletes.

func (c *Core) readyDeletes(now time.Time, rd *Ready) {
	full := c.delq.len() >= c.cfg.MaxBatch
	due := c.delq.len() > 0 && (c.closing || c.delUrgent || !now.Before(c.delSince.Add(c.cfg.ReapInterval)))
	if due {
		c.delUrgent = false
	}
	for len(c.delBusy) < maxDeletesInFlight && (full || due) {
		n := min(c.delq.len(), c.cfg.MaxBatch)
		if n == 0 {
			break
		}
		var b delBatch
		if k := len(c.spareDel); k > 0 && cap(c.spareDel[k-1].ms) >= n {
			b, c.spareDel = c.spareDel[k-1], c.spareDel[:k-1]
		} else {
			b = delBatch{make([]*msg, 0, c.cfg.MaxBatch), make([]string, 0, c.cfg.MaxBatch)}
		}
		for range n {
			m, _ := c.delq.pop()
			b.ms = append(b.ms, m)
			b.receipts = append(b.receipts, m.receipt)
		}
		id := c.id()
		c.delBusy[id] = b
		rd.Deletes = append(rd.Deletes, Delete{ID: id, Receipts: b.receipts})
		full = c.delq.len() >= c.cfg.MaxBatch
		due = due && c.delq.len() > 0
		c.delSince = now
	}
}

// delBatch is a Delete in flight: its messages and the receipts the shell
// was given. Both are recycled once Deleted answers.
type delBatch struct {
	ms       []*msg
	receipts []string
}

// Deleted reports the outcome of the Delete action id, one result per
// receipt; nil results mean every receipt was deleted.
func (c *Core) Deleted(now time.Time, id uint64, res []DeleteResult) {
	c.now = now
	b, ok := c.delBusy[id]
	if !ok {
		return
	}
	delete(c.delBusy, id)
	ms := b.ms
	for i, m := range ms {
		var r DeleteResult
		switch {
		case res == nil:
		case i < len(res):
			r = res[i]
		default:
			r = DeleteResult{Err: errors.New("no result"), Retry: true}
		}
		if m.where == wOut && (m.out == outDelete || m.out == outAbandoned) {
			c.deletedBeforeHandOut(now, m, r)
			continue
		}
		switch {
		case r.Err == nil:
			c.st.Deleted++
			if m.has(fDup) {
				c.st.DuplicatesReaped++
			}
			c.undelTokens++
			c.gone(m)
		case r.Stale:
			c.st.StaleReceipts++
			c.gone(m)
		case r.Retry && m.tries+1 < maxDeleteTries && !c.closing:
			m.tries++
			if c.delq.len() == 0 {
				c.delSince = now
			}
			c.delq.push(m)
		default:
			c.report(Report{Kind: ReportWarn, Msg: "delete failed; the message comes back and is deleted then", ID: m.id, Err: r.Err})
			c.gone(m)
		}
	}
	if len(c.spareDel) < maxDeletesInFlight {
		clear(b.ms)
		clear(b.receipts)
		c.spareDel = append(c.spareDel, delBatch{b.ms[:0], b.receipts[:0]})
	}
	c.settle(now)
}

// deletedBeforeHandOut completes an AtMostOnce Unordered hand-out, which
// waits for its delete.
func (c *Core) deletedBeforeHandOut(now time.Time, m *msg, r DeleteResult) {
	switch {
	case r.Err == nil:
		c.st.Deleted++
		c.live--
		m.flags |= fStored // no receipt any more
		if m.out == outAbandoned {
			m.out = outReady
			c.ring.push(ringItem{m: m})
		} else {
			m.out = outHanded
		}
		c.resolve(m.ticket, nil)
		m.ticket = 0
	case r.Retry && m.tries+1 < maxDeleteTries:
		m.tries++
		c.delq.push(m)
	default:
		// Someone else may hold it now: do not hand it out.
		if m.out == outDelete {
			c.outstanding-- // the Receive waiting for it drops it
		}
		c.resolve(m.ticket, r.Err)
		m.ticket = 0
		delete(c.unordered, unorderedKey(m))
		c.gone(m)
	}
}

// Visibility.

func (c *Core) refillVisibility(now time.Time) {
	if !c.visAt.IsZero() && now.After(c.visAt) {
		c.visTokens = min(c.cfg.MaxVisibilityRate, c.visTokens+c.cfg.MaxVisibilityRate*now.Sub(c.visAt).Seconds())
	}
	c.visAt = now
}

// readyVisibility extends the visibility of held messages before it ends,
// within the request budget; a held message it cannot extend is parked
// when the store can, else it is left to come back (its newer receipt then
// replaces the held one). Released messages get a short timeout after that.
func (c *Core) readyVisibility(now time.Time, rd *Ready) {
	c.refillVisibility(now)
	if c.cfg.VisibilityMargin < 0 {
		return
	}
	limit := now.Add(c.cfg.VisibilityMargin)
	for m := c.vis.head; m != nil && !m.visibleAt.After(limit); {
		next := m.vnext
		switch {
		case !m.visibleAt.After(now):
			m.flags |= fLapsed
			c.vis.remove(m)
		case m.where == wDelete || m.where == wGone:
			c.vis.remove(m)
		case c.visTokens >= 1 && len(c.visBusy) < maxVisibilityInFlight:
			c.visTokens--
			c.vis.remove(m)
			id := c.id()
			c.visBusy[id] = visChange{m: m, gen: m.gen, receipt: m.receipt}
			rd.Visibility = append(rd.Visibility, ChangeVisibility{ID: id, Receipt: m.receipt, Timeout: c.cfg.VisibilityExtend})
		case m.where == wHeld && m.g != nil && c.canPark(m.g, m):
			c.unhold(m)
			c.park(m.g, m)
		default:
			next = nil // out of budget: look again when it refills
		}
		m = next
	}
	for c.shortq.len() > 0 && c.visTokens >= 1 && len(c.visBusy) < maxVisibilityInFlight {
		receipt, _ := c.shortq.pop()
		if c.relBy[receipt] == nil {
			continue // visible again already
		}
		c.visTokens--
		id := c.id()
		c.visBusy[id] = visChange{receipt: receipt}
		rd.Visibility = append(rd.Visibility, ChangeVisibility{ID: id, Receipt: receipt, Timeout: c.cfg.ShortVisibility})
	}
}

// Visibility reports the outcome of the ChangeVisibility action id.
func (c *Core) Visibility(now time.Time, id uint64, receipt string, err error) {
	c.now = now
	v, ok := c.visBusy[id]
	if !ok {
		return
	}
	delete(c.visBusy, id)
	m := v.m
	if m != nil && m.gen != v.gen {
		// m was settled (and maybe reused) meanwhile: as for a settled
		// one below, its receipt is not updated.
		if err == nil {
			c.st.Extended++
		}
		c.settle(now)
		return
	}
	if m == nil {
		e := c.relBy[v.receipt]
		delete(c.relBy, v.receipt)
		if err == nil {
			c.st.Shortened++
			if e != nil && e.index >= 0 && e.index < len(c.released) && c.released[e.index] == e {
				e.until = now.Add(c.cfg.ShortVisibility)
				heap.Fix(&c.released, e.index)
			}
		}
		return
	}
	if err != nil {
		if m.receipt == v.receipt {
			m.flags |= fLapsed
		}
		c.report(Report{Kind: ReportWarn, Msg: "extend visibility failed", Group: m.name, Seq: m.seq, ID: m.id, Err: err})
		c.settle(now)
		return
	}
	c.st.Extended++
	if m.receipt == v.receipt && m.where != wGone && m.where != wDelete {
		m.receipt = receipt
		m.visibleAt = now.Add(c.cfg.VisibilityExtend)
		m.flags &^= fLapsed
		c.vis.remove(m)
		c.vis.push(m)
		c.recharge(m)
	}
	c.settle(now)
}

// Dead letters.

func (c *Core) readyDead(now time.Time, rd *Ready) {
	if len(c.deadBusy) > 0 || len(c.deadq) == 0 || now.Before(c.deadAfter) {
		return
	}
	n := min(len(c.deadq), c.cfg.MaxBatch)
	ms := slices.Clone(c.deadq[:n])
	c.deadq = slices.Delete(c.deadq, 0, n)
	bodies := make([][]byte, n)
	for i, m := range ms {
		bodies[i] = m.raw
	}
	id := c.id()
	c.deadBusy[id] = ms
	rd.DeadLetters = append(rd.DeadLetters, DeadLetter{ID: id, Bodies: bodies})
}

// DeadLettered reports the outcome of the DeadLetter action id, one error
// per body.
func (c *Core) DeadLettered(now time.Time, id uint64, errs []error) {
	c.now = now
	ms, ok := c.deadBusy[id]
	if !ok {
		return
	}
	delete(c.deadBusy, id)
	failed := false
	for i, m := range ms {
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = errors.New("no result")
		}
		if err != nil {
			failed = true
			m.tries++
			if m.g == nil && m.tries >= maxDeadTries {
				c.report(Report{Kind: ReportWarn, Msg: "dead-letter send failed; the message comes back", Group: m.name, Seq: m.seq, ID: m.id, Err: err})
				delete(c.unordered, unorderedKey(m))
				c.release(m, now)
				continue
			}
			c.deadq = append(c.deadq, m)
			continue
		}
		c.deadLettered(now, m)
	}
	if failed {
		c.deadFails++
		c.deadAfter = now.Add(c.backoff(c.deadFails))
	} else {
		c.deadFails = 0
	}
	c.settle(now)
}

func (c *Core) deadLettered(now time.Time, m *msg) {
	c.st.DeadLettered++
	var cause error = ErrUntagged
	switch {
	case m.has(fLate):
		cause = ErrLate
	case m.g != nil:
		cause = errors.New("poison message: failed MaxAttempts times")
	}
	c.report(Report{Kind: ReportDeadLetter, Msg: "dead-lettered", Group: m.name, Epoch: m.epoch, Seq: m.seq, ID: m.id,
		DequeueCount: m.dequeue, Attempt: m.attempt, Err: cause})
	g := m.g
	if g == nil {
		c.remember(unorderedKey(m))
		m.where = wHeld
		c.queueDelete(now, m)
		return
	}
	// A poison message: settled as an Ack would.
	if g.out == m {
		g.out = nil
	}
	if c.cfg.Mode == AtMostOnce || below(g.dur, m.epoch, m.seq) {
		c.queueDelete(now, m)
		c.update(g, now)
		return
	}
	if !below(g.ack, m.epoch, m.seq) {
		g.ack.Epoch, g.ack.Next = m.epoch, m.seq+1
	}
	c.settleMsg(g, m)
	c.clearStuck(g, "poison")
	if c.cfg.Mode == ExactlyOnce {
		// No application Ack moves this cursor: write it here.
		c.forceCommit(g)
	} else {
		c.markDirty(g)
	}
	c.update(g, now)
}

// forceCommit queues g's advance in ExactlyOnce mode, where the Core writes
// a cursor only past a message the application never settled (a dead
// letter). The group hands out nothing until that write is durable: the
// next message's CursorAdvance starts from it.
func (c *Core) forceCommit(g *group) {
	g.forced = true
	if !g.dirty {
		c.queueCommit(g)
	}
}

// Parking.

// canPark reports whether m, held for g, may be parked: the store can,
// m is of g's current epoch, beyond its next seq, and its body fits a
// park entry (a larger one would be refused on every retry).
func (c *Core) canPark(g *group, m *msg) bool {
	return c.cfg.Park && g != nil && g.phase == phActive && m.epoch == g.epoch && m.seq > g.next &&
		!m.has(fStored|fNoPark) && !c.closing && len(m.raw) <= seqstore.MaxParkBody
}

// park queues m to be parked in the store, then deleted from the queue.
func (c *Core) park(g *group, m *msg) {
	m.where = wPark
	c.parkq = append(c.parkq, m)
	g.parking++
}

// unhold removes a held message from its group's lists.
func (c *Core) unhold(m *msg) {
	g := m.g
	if g == nil {
		return
	}
	if i, ok := g.heldIndex(m.seq); ok && g.held[i] == m {
		g.held = slices.Delete(g.held, i, i+1)
	} else if i := slices.Index(g.newer, m); i >= 0 {
		g.newer = slices.Delete(g.newer, i, i+1)
	} else if i := slices.Index(g.pending, m); i >= 0 {
		g.pending = slices.Delete(g.pending, i, i+1)
	}
	c.unbuffer(m)
}

func (c *Core) readyParks(now time.Time, rd *Ready) {
	if len(c.parkBusy) > 0 || len(c.parkq) == 0 || now.Before(c.parkAfter) {
		return
	}
	// Two copies of one seq (a redelivery, a duplicate send) never go in
	// one call, which a store refuses whole: the second waits for the
	// next call, where it replaces the first's body.
	type seqKey struct {
		g          *group
		epoch, seq uint64
	}
	var ms []*msg
	seen := make(map[seqKey]struct{}, min(len(c.parkq), c.cfg.MaxParks))
	rest := c.parkq[:0]
	for _, m := range c.parkq {
		k := seqKey{m.g, m.epoch, m.seq}
		if _, dup := seen[k]; dup || len(ms) == c.cfg.MaxParks {
			rest = append(rest, m)
			continue
		}
		seen[k] = struct{}{}
		ms = append(ms, m)
	}
	clear(c.parkq[len(rest):])
	c.parkq = rest
	n := len(ms)
	entries := make([]seqstore.Parked, n)
	for i, m := range ms {
		entries[i] = seqstore.Parked{Stream: c.stream(m.g.name), Epoch: m.epoch, Seq: m.seq, Body: m.raw}
	}
	id := c.id()
	c.parkBusy[id] = ms
	rd.Parks = append(rd.Parks, Park{ID: id, Entries: entries})
}

// Parked reports the outcome of the Park action id. A park refused with
// seqstore.ErrConflict means its seq is below the stored cursor: handled.
func (c *Core) Parked(now time.Time, id uint64, err error) {
	c.now = now
	ms, ok := c.parkBusy[id]
	if !ok {
		return
	}
	delete(c.parkBusy, id)
	failed := false
	for i, m := range ms {
		e := seqstore.Failed(err, i, len(ms))
		g := m.g
		if e == nil || !errors.Is(e, seqstore.ErrAborted) && errors.Is(e, seqstore.ErrConflict) {
			g.parking-- // no longer on its way
		}
		switch {
		case e == nil:
			c.st.Parked++
			if g.phase != phEvicted && m.epoch == g.epoch {
				g.knowParked(m.seq)
				g.parkGen++
			}
			c.queueDelete(now, m)
		case errors.Is(e, seqstore.ErrConflict):
			// Below the stored cursor: a duplicate or a late arrival if
			// this Core's cursor says so too; else someone else moved
			// the cursor.
			m.where = wHeld
			if g.phase == phActive && m.epoch == g.epoch && m.seq < g.next {
				c.arriveCurrent(now, g, m)
			} else {
				c.release(m, now)
				c.conflicted(now, g, e)
			}
		case errors.Is(e, seqstore.ErrAborted):
			c.parkq = append(c.parkq, m)
		case e != err && permanent(e):
			// The store refuses this entry for good: it goes back to the
			// queue and is held, not parked, when it comes back.
			g.parking--
			m.flags |= fNoPark
			m.where = wHeld
			c.report(Report{Kind: ReportWarn, Msg: "park refused: held in memory instead", Group: g.name, Epoch: m.epoch, Seq: m.seq, Err: e})
			c.release(m, now)
		default:
			failed = true
			c.parkq = append(c.parkq, m)
		}
	}
	if failed {
		c.parkFails++
		c.parkAfter = now.Add(c.backoff(c.parkFails))
		if c.parkFails == 1 || c.parkFails%10 == 0 {
			c.report(Report{Kind: ReportWarn, Msg: "park failed", Attempt: c.parkFails, Err: err})
		}
	} else {
		c.parkFails = 0
	}
	for _, m := range ms {
		if m.g != nil {
			c.update(m.g, now)
		}
	}
	c.settle(now)
}

// lowestParking returns the lowest seq of g on its way to the park (queued
// or in flight, not yet durable), 0 if none: a hole is never skipped over
// it, and the park is not read for it before it is durable.
func (c *Core) lowestParking(g *group) uint64 {
	if g.parking == 0 {
		return 0
	}
	low := uint64(0)
	see := func(m *msg) {
		if m.g == g && m.epoch == g.epoch && (low == 0 || m.seq < low) {
			low = m.seq
		}
	}
	for _, m := range c.parkq {
		see(m)
	}
	for _, ms := range c.parkBusy {
		for _, m := range ms {
			see(m)
		}
	}
	return low
}

func (c *Core) readyScan(now time.Time, rd *Ready) {
	if !c.cfg.Park || c.scanned || c.scanBusy != 0 || now.Before(c.scanAfter) || c.closing {
		return
	}
	c.scanBusy = c.id()
	rd.Scans = append(rd.Scans, Scan{ID: c.scanBusy})
}

// Scanned reports the outcome of the Scan action id: the groups with parked
// entries. Each is loaded, and reads its park once its cursor is known.
func (c *Core) Scanned(now time.Time, id uint64, groups []string, err error) {
	c.now = now
	if id != c.scanBusy {
		return
	}
	c.scanBusy = 0
	if err != nil {
		c.scanFails++
		c.scanAfter = now.Add(c.backoff(c.scanFails))
		c.report(Report{Kind: ReportWarn, Msg: "list parked streams failed", Attempt: c.scanFails, Err: err})
		c.settle(now)
		return
	}
	c.scanned = true
	for _, name := range groups {
		g := c.group(now, name)
		c.update(g, now)
	}
	c.settle(now)
}

// checkPark asks the park for g's next messages when g's next seq is not in
// memory: when g parked it, or when g never looked since its cursor was
// read (a parking receiver may have crashed after deleting it from the
// queue).
func (c *Core) checkPark(g *group) {
	if !c.cfg.Park {
		g.probed = true
		return
	}
	if g.unparking || g.out != nil || g.phase != phActive || c.closing {
		return
	}
	if len(g.held) > 0 && g.held[0].seq == g.next {
		return
	}
	if g.parkLow != g.next && g.probed {
		return
	}
	g.unparking = true
	c.unparkq.push(g)
}

func (c *Core) readyUnparks(now time.Time, rd *Ready) {
	if len(c.unparkBusy) > 0 || c.unparkq.len() == 0 || now.Before(c.unparkAfter) {
		return
	}
	var gs []*group
	var qs []seqstore.ParkQuery
	for c.unparkq.len() > 0 && len(gs) < maxUnparkQueries {
		g, _ := c.unparkq.pop()
		if g.phase != phActive {
			g.unparking = false
			continue
		}
		g.unparkGen = g.parkGen
		gs = append(gs, g)
		qs = append(qs, seqstore.ParkQuery{Stream: c.stream(g.name), Epoch: g.epoch, From: g.next, Max: min(maxUnparkEntries, c.cfg.Window)})
	}
	if len(gs) == 0 {
		return
	}
	id := c.id()
	c.unparkBusy[id] = gs
	rd.Unparks = append(rd.Unparks, Unpark{ID: id, Queries: qs})
}

// Unparked reports the outcome of the Unpark action id: for each query, the
// entries read.
func (c *Core) Unparked(now time.Time, id uint64, res [][]seqstore.Parked, err error) {
	c.now = now
	gs, ok := c.unparkBusy[id]
	if !ok {
		return
	}
	delete(c.unparkBusy, id)
	failed := false
	for i, g := range gs {
		g.unparking = false
		if g.phase == phEvicted {
			continue
		}
		if e := seqstore.Failed(err, i, len(gs)); e != nil || i >= len(res) {
			failed = true
			g.unparking = true // look again after a backoff
			c.unparkq.push(g)
			continue
		}
		c.unparkedGroup(now, g, res[i])
	}
	if failed {
		c.unparkFails++
		c.unparkAfter = now.Add(c.backoff(c.unparkFails))
		if c.unparkFails == 1 || c.unparkFails%10 == 0 {
			c.report(Report{Kind: ReportWarn, Msg: "read parked messages failed", Attempt: c.unparkFails, Err: err})
		}
	} else {
		c.unparkFails = 0
	}
	c.settle(now)
}

func (c *Core) unparkedGroup(now time.Time, g *group, entries []seqstore.Parked) {
	if g.phase != phActive {
		return
	}
	// What the read leaves in the park: from the first entry not loaded
	// on; with a full answer, maybe more beyond the last.
	var low, high uint64
	if len(entries) >= min(maxUnparkEntries, c.cfg.Window) {
		low, high = entries[len(entries)-1].Seq+1, math.MaxUint64
	}
	for _, e := range entries {
		if e.Epoch != g.epoch || e.Seq < g.next {
			continue
		}
		// Over the memory budget, only the seq the group waits for is
		// taken: it leaves again as it is handed out, and without it the
		// group would read its park again and again.
		if e.Seq-g.next >= uint64(c.cfg.Window) || c.mem >= c.cfg.MaxMemory && e.Seq != g.next {
			low, high = e.Seq, math.MaxUint64
			break
		}
		c.st.Unparked++
		h, payload, ok := envelope.Parse(e.Body)
		if !ok || h.Seq != e.Seq || h.Epoch != e.Epoch || h.Group != g.name {
			// A parked body that does not decode as what it was parked
			// for: reported, and handed out flagged Unordered.
			m := &msg{name: g.name, epoch: e.Epoch, seq: e.Seq, raw: e.Body, payload: e.Body, flags: fStored | fLate}
			c.charge(m)
			c.report(Report{Kind: ReportWarn, Msg: "parked body does not decode: handed out Unordered", Group: g.name, Epoch: e.Epoch, Seq: e.Seq})
			c.unorderedArrival(now, m, seenKey{group: g.name, epoch: e.Epoch, seq: e.Seq, id: "parked"}, c.cfg.DeadLetter)
			continue
		}
		m := &msg{g: g, name: g.name, epoch: e.Epoch, seq: e.Seq, raw: e.Body, payload: payload, flags: fStored}
		c.charge(m)
		i, found := g.heldIndex(e.Seq)
		if found {
			c.gone(m) // a copy from the queue is held: keep it
			continue
		}
		g.held = insertAt(g.held, i, m)
		c.buffer(m)
	}
	g.probedAt = now
	if g.parkGen == g.unparkGen {
		g.parkLow, g.parkHigh = low, high
		g.probed = true
	} else {
		// Parks became durable while the read was in flight: keep what
		// they taught, and read again when next is missing.
		if low != 0 {
			g.knowParked(low)
			g.parkHigh = max(g.parkHigh, high)
		}
		g.probed = false
	}
	c.update(g, now)
}
