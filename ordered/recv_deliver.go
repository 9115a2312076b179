package ordered

import (
	"context"
	"errors"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// handOutLocked takes the next ready item off the ring. For AtMostOnce it
// also returns the waiter of the commit that must be durable first.
func (r *receiver) handOutLocked() (*Message, *durWaiter) {
	for {
		it, ok := r.ring.pop()
		if !ok {
			return nil, nil
		}
		if r.ring.len() < r.highWater {
			signal(r.room)
		}
		if e := it.e; e != nil {
			r.unholdLocked(e)
			e.attempt++
			r.out[e] = struct{}{}
			r.st.Delivered++
			return &Message{
				Group: e.group, Epoch: e.epoch, Seq: e.seq, Body: e.payload, ID: e.id, Attempt: e.attempt,
				Unordered: true, Redelivered: e.redelivered, r: r, e: e,
			}, nil
		}
		g := it.g
		g.clear(gInRing)
		if !g.ready() {
			continue
		}
		e := g.out
		if e == nil {
			_, e, _ = g.buf.Pop()
			r.unholdLocked(e)
			g.run--
			r.readyMsg--
			g.out = e
			if g.x != nil {
				g.x.farLow = 0
			}
		}
		e.attempt++
		g.outGen++
		g.set(gStarted)
		r.out[e] = struct{}{}
		m := &Message{
			Group: g.name, Epoch: e.epoch, Seq: e.seq, Body: e.payload, ID: e.id, Attempt: e.attempt,
			Redelivered: e.redelivered, r: r, e: e, gen: g.outGen,
		}
		switch r.o.Mode {
		case ExactlyOnce:
			to := cloneCursor(g.ack)
			to.Epoch, to.Next = e.epoch, e.seq+1
			m.adv = seqstore.Advance{Stream: r.streamOf(g), From: cloneCursor(g.dur), To: to}
		case AtMostOnce:
			if !below(g.dur, e.epoch, e.seq) {
				if !below(g.ack, e.epoch, e.seq) {
					g.ack.Epoch, g.ack.Next = e.epoch, e.seq+1
					g.unflushed = append(g.unflushed, e)
					r.markDirtyLocked(g)
				}
				g.set(gAwait)
				return m, r.addWaiterLocked(g)
			}
		}
		g.set(gHanded)
		r.st.Delivered++
		return m, nil
	}
}

func (r *receiver) addWaiterLocked(g *group) *durWaiter {
	w := &durWaiter{target: seqstore.Cursor{Epoch: g.ack.Epoch, Next: g.ack.Next}, ch: make(chan error, 1)}
	x := g.extra()
	x.waiters = append(x.waiters, *w)
	return w
}

// awaitDurable waits for an AtMostOnce commit; on success the message is
// handed to the application.
func (r *receiver) awaitDurable(ctx context.Context, w *durWaiter) error {
	select {
	case err := <-w.ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// markHanded completes an AtMostOnce hand-out once its commit is durable.
func (r *receiver) markHanded(m *Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := m.e.g; g != nil && g.out == m.e {
		g.clear(gAwait)
		g.set(gHanded)
		r.st.Delivered++
	}
}

// requeueUnseen puts back a message whose AtMostOnce commit could not be
// awaited: the application never saw it.
func (r *receiver) requeueUnseen(m *Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := m.e.g
	if g == nil || g.out != m.e {
		return
	}
	m.e.attempt--
	g.clear(gAwait)
	r.updateLocked(g, time.Now())
}

// ack implements Message.Ack.
func (r *receiver) ack(ctx context.Context, m *Message) error {
	r.mu.Lock()
	if err := r.checkSettleLocked(m); err != nil {
		r.mu.Unlock()
		return err
	}
	m.done = true
	r.st.Acked++
	e := m.e
	delete(r.out, e)
	g := e.g
	if g == nil {
		r.reapLocked(e)
		r.mu.Unlock()
		return nil
	}
	now := time.Now()
	var w *durWaiter
	switch r.o.Mode {
	case AtLeastOnce:
		r.advanceLocked(g, e)
		if r.o.SyncAck {
			w = r.addWaiterLocked(g)
		}
	case ExactlyOnce:
		g.dur, g.ack = cloneCursor(m.adv.To), cloneCursor(m.adv.To)
		r.reapLocked(e)
		r.flushUnflushedLocked(g)
	}
	r.releaseLocked(g, now)
	r.mu.Unlock()
	if w != nil {
		select {
		case err := <-w.ch:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (r *receiver) checkSettleLocked(m *Message) error {
	if r.closed {
		return ErrClosed
	}
	if m.done {
		return ErrAcked
	}
	if g := m.e.g; g != nil && (g.out != m.e || g.outGen != m.gen || !g.has(gHanded)) {
		return ErrAcked
	}
	return nil
}

// advanceLocked records that e is done: the cursor may move past it, and e
// is deleted once that is durable.
func (r *receiver) advanceLocked(g *group, e *entry) {
	if !below(g.ack, e.epoch, e.seq) {
		g.ack.Epoch, g.ack.Next = e.epoch, e.seq+1
	}
	g.unflushed = append(g.unflushed, e)
	r.markDirtyLocked(g)
}

// flushUnflushedLocked reaps the unflushed messages below the durable
// cursor (ExactlyOnce, where acks make the cursor durable).
func (r *receiver) flushUnflushedLocked(g *group) {
	keep := g.unflushed[:0]
	for _, e := range g.unflushed {
		if below(g.dur, e.epoch, e.seq) {
			r.reapLocked(e)
		} else {
			keep = append(keep, e)
		}
	}
	clear(g.unflushed[len(keep):])
	g.unflushed = keep
}

// releaseLocked unlocks a group whose message is settled.
func (r *receiver) releaseLocked(g *group, now time.Time) {
	signal(r.room) // fetchers may wait for delivery to move
	g.out = nil
	g.clear(gHanded | gAwait)
	if g.x != nil {
		g.x.retryAt = time.Time{}
		g.x.stuckErr = nil
	}
	if info, ok := r.stuck[g]; ok && info.reason == "poison" {
		delete(r.stuck, g)
	}
	if g.has(gConflict) {
		r.queueResolveLocked(g)
		return
	}
	r.checkEpochLocked(g, now)
	r.updateLocked(g, now)
}

// nack implements Message.Nack.
func (r *receiver) nack(ctx context.Context, m *Message, cause error) error {
	r.mu.Lock()
	if err := r.checkSettleLocked(m); err != nil {
		r.mu.Unlock()
		return err
	}
	m.done = true
	r.st.Nacked++
	e := m.e
	g := e.g
	now := time.Now()
	if g != nil {
		g.clear(gHanded)
	}
	if r.o.Mode == AtMostOnce {
		// Never retried: the cursor is already past it.
		delete(r.out, e)
		if g != nil {
			r.releaseLocked(g, now)
		}
		r.mu.Unlock()
		if r.o.Poison == PoisonDeadLetter {
			r.deadLetter(ctx, []deadItem{{e: e, group: m.Group, reason: cause, settled: true}})
		}
		return nil
	}
	if g != nil && r.o.Mode == ExactlyOnce && errors.Is(cause, seqstore.ErrConflict) {
		r.conflictLocked(g, cause)
		delete(r.out, e)
		r.mu.Unlock()
		return nil
	}
	if e.attempt >= r.o.MaxAttempts {
		if r.o.Poison == PoisonDeadLetter {
			if g != nil {
				g.set(gAwait)
			}
			r.mu.Unlock()
			r.deadLetter(ctx, []deadItem{{e: e, group: m.Group, reason: cause, poison: true}})
			return nil
		}
		if g != nil {
			if _, ok := r.stuck[g]; !ok {
				r.stuck[g] = stuckInfo{since: now, reason: "poison"}
				if r.hooks.OnStuck != nil {
					r.hooks.OnStuck(Event{Group: g.name, Epoch: e.epoch, Seq: e.seq, ID: e.id, Attempt: e.attempt, Err: cause})
				}
				r.log.WarnContext(ctx, "ordered: group stuck on a poison message", "group", g.name, "seq", e.seq, "attempt", e.attempt, "err", cause)
			}
			g.extra().stuckErr = cause
		}
	}
	r.scheduleRetryLocked(e, now)
	r.mu.Unlock()
	return nil
}

// scheduleRetryLocked hands e out again after a backoff.
func (r *receiver) scheduleRetryLocked(e *entry, now time.Time) {
	d := r.q.opts.Retry.Max
	if e.attempt < r.o.MaxAttempts {
		d = r.q.opts.Retry.backoff(e.attempt)
	}
	at := now.Add(d)
	if g := e.g; g != nil {
		g.extra().retryAt = at
		r.addTimerLocked(timer{at: at, g: g, e: e, kind: tRetry})
		return
	}
	r.addTimerLocked(timer{at: at, e: e, kind: tLoose})
}

// markDirtyLocked queues g for the committer.
func (r *receiver) markDirtyLocked(g *group) {
	if r.o.Mode == ExactlyOnce || g.has(gDirty) {
		return
	}
	g.set(gDirty)
	r.dirty = append(r.dirty, g)
	signal(r.commitWake)
}

// reapLocked queues e for deletion. Its cursor is durable (or it is not
// part of any order).
func (r *receiver) reapLocked(e *entry) {
	r.reapq = append(r.reapq, e)
	if len(r.reapq) >= r.q.limits.MaxBatch {
		signal(r.reapWake)
	}
}

// updateLocked puts g in the ready ring if it can hand out, else checks its
// hole, else lets it go idle.
func (r *receiver) updateLocked(g *group, now time.Time) {
	if g.has(gEvicted) {
		return
	}
	if g.ready() {
		if !g.has(gInRing) {
			g.set(gInRing)
			r.ring.push(ringItem{g: g})
			signal(r.avail)
		}
		r.clearGapLocked(g)
		return
	}
	r.checkGapLocked(g, now)
	r.checkEpochLocked(g, now)
	r.maybeIdleLocked(g, now)
}

func (r *receiver) clearGapLocked(g *group) {
	if g.x != nil && !g.x.gapSince.IsZero() {
		g.x.gapSince = time.Time{}
		g.x.gapReport = false
	}
	if info, ok := r.stuck[g]; ok && info.reason == "gap" {
		delete(r.stuck, g)
	}
}

// checkGapLocked starts, reports or skips a hole: the next seq is missing
// while later ones wait.
func (r *receiver) checkGapLocked(g *group, now time.Time) {
	if g.out != nil || g.has(gFresh|gLoading|gConflict|gResolving) || g.ready() {
		r.clearGapLocked(g)
		return
	}
	if g.bufLen() == 0 && (g.x == nil || g.x.farLow == 0) {
		r.clearGapLocked(g)
		return
	}
	x := g.extra()
	if x.gapSince.IsZero() {
		x.gapSince = now
		x.gapReport = false
	}
	due := x.gapSince.Add(r.o.GapTimeout)
	if now.Before(due) {
		if !x.gapTimer {
			x.gapTimer = true
			r.addTimerLocked(timer{at: due, g: g, kind: tGap})
		}
		return
	}
	if r.o.GapPolicy == GapSkip {
		r.skipLocked(g, now)
		if g.ready() && !g.has(gInRing) {
			g.set(gInRing)
			r.ring.push(ringItem{g: g})
			signal(r.avail)
		}
		return
	}
	if !x.gapReport {
		x.gapReport = true
		r.st.Gaps++
		next := g.nextSeq()
		last := x.farLow - 1
		if low, ok := r.lowestLocked(g); ok {
			last = low - 1
		}
		r.stuck[g] = stuckInfo{since: x.gapSince, reason: "gap"}
		if r.hooks.OnGap != nil {
			r.hooks.OnGap(Event{Group: g.name, Epoch: g.epoch, Seq: next, Last: last, Age: now.Sub(x.gapSince)})
		}
		r.log.Warn("ordered: gap", "group", g.name, "epoch", g.epoch, "seq", next, "last", last, "age", now.Sub(x.gapSince))
	}
}

func (r *receiver) lowestLocked(g *group) (uint64, bool) {
	if g.buf == nil {
		return 0, false
	}
	return g.buf.Lowest()
}

// skipLocked moves the group past its hole, to the lowest seq held (or seen
// too far ahead), and records the skipped range in the cursor.
func (r *receiver) skipLocked(g *group, now time.Time) {
	x := g.extra()
	target, ok := r.lowestLocked(g)
	if !ok {
		target = x.farLow
	}
	next := g.nextSeq()
	if target <= next {
		return
	}
	if g.buf != nil {
		g.buf.SkipTo(target, nil)
		r.resetRunLocked(g)
	} else {
		g.next = target
	}
	if x.farLow <= target {
		x.farLow = 0
	}
	rg := seqstore.Range{Epoch: g.epoch, First: next, Last: target - 1}
	addSkipped(&g.ack, rg)
	g.ack.Epoch, g.ack.Next = g.epoch, target
	age := now.Sub(x.gapSince)
	r.clearGapLocked(g)
	r.st.Skipped += int64(target - next)
	if r.hooks.OnSkip != nil {
		r.hooks.OnSkip(Event{Group: g.name, Epoch: g.epoch, Seq: next, Last: target - 1, Age: age})
	}
	r.log.Warn("ordered: skipped", "group", g.name, "epoch", g.epoch, "seq", next, "last", target-1)
	r.markDirtyLocked(g)
}

// checkEpochLocked switches g to a newer epoch once the old one has nothing
// out and nothing buffered and the newer one has waited GapTimeout. The
// holes of the old epoch are skipped then, whatever the gap policy: a newer
// epoch proves its sender is gone.
func (r *receiver) checkEpochLocked(g *group, now time.Time) {
	x := g.x
	if x == nil || len(x.newer) == 0 || g.out != nil || g.has(gFresh|gLoading|gConflict|gResolving) {
		return
	}
	if now.Before(x.newerSince.Add(r.o.GapTimeout)) {
		return
	}
	if g.bufLen() > 0 {
		if !g.buf.Ready() {
			r.skipLocked(g, now)
			r.updateLocked(g, now)
		}
		return
	}
	to := x.newer[0].epoch
	for _, e := range x.newer {
		to = min(to, e.epoch)
	}
	from, oldNext := g.epoch, g.nextSeq()
	addSkipped(&g.ack, seqstore.Range{Epoch: from, First: oldNext, Last: seqstore.MaxSeq})
	g.ack.Epoch, g.ack.Next = to, 1
	g.epoch, g.next, g.buf = to, 1, nil
	x.farLow = 0
	r.clearGapLocked(g)
	var take, keep []*entry
	for _, e := range x.newer {
		if e.epoch == to {
			take = append(take, e)
		} else {
			keep = append(keep, e)
		}
	}
	x.newer, x.newerSince = keep, time.Time{}
	if len(keep) > 0 {
		x.newerSince = now
		r.addTimerLocked(timer{at: now.Add(r.o.GapTimeout), g: g, kind: tEpoch})
	}
	r.st.EpochSwitches++
	if r.hooks.OnEpoch != nil {
		r.hooks.OnEpoch(Event{Group: g.name, Epoch: to, From: from})
	}
	r.log.Info("ordered: new sender epoch", "group", g.name, "from", from, "epoch", to)
	r.markDirtyLocked(g)
	var dead []deadItem
	for _, e := range take {
		r.unholdLocked(e)
		r.currentLocked(g, e, now, &dead)
	}
	for _, d := range dead {
		r.looseLocked(d.e)
	}
	r.updateLocked(g, now)
}

// maybeIdleLocked drops the reorder buffer of a group that holds nothing and
// queues it for eviction.
func (r *receiver) maybeIdleLocked(g *group, now time.Time) {
	if g.out != nil || g.bufLen() > 0 || len(g.unflushed) > 0 ||
		g.has(gLoading|gFresh|gInRing|gDirty|gCommitting|gConflict|gResolving|gIdle|gEvicted) ||
		g.x != nil && !g.x.empty() {
		return
	}
	if g.buf != nil {
		g.next = g.buf.Next()
		g.buf = nil
	}
	g.x = nil
	r.clearGapLocked(g)
	if r.o.IdleEvict < 0 {
		return
	}
	g.idleSince = now
	g.set(gIdle)
	r.idle.pushBack(g)
}

// evictLocked drops groups idle for IdleEvict.
func (r *receiver) evictLocked(now time.Time) {
	for g := r.idle.head; g != nil && now.Sub(g.idleSince) >= r.o.IdleEvict; g = r.idle.head {
		r.idle.remove(g)
		g.clear(gIdle)
		g.set(gEvicted)
		delete(r.groups, g.name)
		r.st.Evicted++
	}
}

// fireLocked runs a due timer. Timers are not cancelled: each checks that
// what it was set for still holds.
func (r *receiver) fireLocked(t timer, now time.Time) {
	if t.kind == tLoose {
		if _, ok := r.out[t.e]; ok {
			delete(r.out, t.e)
			r.holdLocked(t.e)
			r.ring.push(ringItem{e: t.e})
			signal(r.avail)
		}
		return
	}
	g := t.g
	if g.has(gEvicted) {
		return
	}
	switch t.kind {
	case tRetry:
		if g.out != t.e || g.x == nil || !g.x.retryAt.Equal(t.at) {
			return
		}
		g.x.retryAt = time.Time{}
	case tGap:
		if g.x != nil {
			g.x.gapTimer = false
		}
	case tStart:
		r.startLocked(g, now)
	}
	r.updateLocked(g, now)
}

// failWaitersLocked ends every durability wait with err.
func (r *receiver) failWaitersLocked(err error) {
	for _, g := range r.groups {
		if g.x != nil {
			for _, w := range g.x.waiters {
				w.ch <- err
			}
			g.x.waiters = nil
		}
	}
}

// notifyWaitersLocked ends the durability waits g's durable cursor satisfies.
func (r *receiver) notifyWaitersLocked(g *group) {
	if g.x == nil || len(g.x.waiters) == 0 {
		return
	}
	keep := g.x.waiters[:0]
	for _, w := range g.x.waiters {
		if cursorBefore(g.dur, w.target) {
			keep = append(keep, w)
		} else {
			w.ch <- nil
		}
	}
	g.x.waiters = keep
}
