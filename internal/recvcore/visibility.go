package recvcore

import (
	"math"
	"time"
)

// visLane changes visibility timeouts: it extends the visibility of the
// messages the Core holds before it ends (held, out, and settled ones
// waiting for their commit), and shortens that of released ones so that
// they come back soon, within MaxVisibilityRate.
type visLane struct {
	lane
	list    visList       // the messages whose visibility is kept alive
	holds   holdList      // the messages whose visibility outlasts their hold (see Core.watchHold)
	settled []settledWait // the groups whose settled entries are, by their earliest end
	holdq   []msgRef      // messages whose hold ends: their visibility is shortened
	busy    map[uint64]visChange
	shortq  fifo[string]         // receipts of released messages to shorten
	relBy   map[string]*relEntry // by receipt, while a shortening is queued
	tokens  float64
	at      time.Time
}

// visChange is a visibility change in flight: of m (m.gen when asked: m may
// be settled or reused meanwhile), of a settled entry of g, or (m and g nil)
// the shortening of a released message.
type visChange struct {
	m          *msg
	gen        uint32
	g          *group
	epoch, seq uint64
	receipt    string
	timeout    time.Duration
	rel        *relEntry // the message, released while this was in flight
	at         time.Time // when it was asked for: the queue applies it between then and its answer
	orphan     bool      // its message was received again: the answer is for a receipt no longer held
}

// settledWait is a group whose settled entries' visibility is kept alive,
// by the earliest end among them (stale once g.settledDue moved).
type settledWait struct {
	name string // the group (not a pointer: a shed group is not kept)
	due  int64
}

// watch keeps the visibility of e, a settled entry of g, alive.
func (l *visLane) watch(g *group, e *settledEntry) {
	if !e.watched() || g.settledDue != 0 && g.settledDue <= e.visible {
		return
	}
	g.settledDue = e.visible
	l.pushSettled(settledWait{g.name, e.visible})
}

func (l *visLane) pushSettled(w settledWait) {
	l.settled = append(l.settled, w)
	s := l.settled
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].due <= s[i].due {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (l *visLane) popSettled() settledWait {
	s := l.settled
	w := s[0]
	n := len(s) - 1
	s[0], s[n] = s[n], settledWait{}
	s = s[:n]
	for i := 0; ; {
		a, b, m := 2*i+1, 2*i+2, i
		if a < n && s[a].due < s[m].due {
			m = a
		}
		if b < n && s[b].due < s[m].due {
			m = b
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	l.settled = s
	return w
}

func (l *visLane) init(cfg *Config) {
	l.lane = lane{limit: maxVisibilityInFlight}
	l.busy = make(map[uint64]visChange)
	l.relBy = make(map[string]*relEntry)
	l.tokens = cfg.MaxVisibilityRate
}

// shorten queues the released message e for a short visibility, within a
// bound of queued shortenings (none when bound is 0).
func (l *visLane) shorten(e *relEntry, bound int) {
	if (bound == 0 || l.shortq.len() < bound) && l.relBy[e.receipt] != e {
		l.shortq.push(e.receipt)
		l.relBy[e.receipt] = e
	}
}

// unshorten forgets the released message e, visible again.
func (l *visLane) unshorten(e *relEntry) {
	if l.relBy[e.receipt] == e {
		delete(l.relBy, e.receipt)
	}
}

func (l *visLane) refill(now time.Time, rate float64) {
	if !l.at.IsZero() && now.After(l.at) {
		l.tokens = min(rate, l.tokens+rate*now.Sub(l.at).Seconds())
	}
	l.at = now
}

func (l *visLane) due(c *Core) time.Time {
	if l.inFlight >= l.limit {
		return time.Time{}
	}
	// When the budget is spent, nothing can be done before a token
	// comes back.
	token := l.at
	if l.tokens < 1 {
		// Rounded up, at least a millisecond: a token short by a rounding
		// error must not make a deadline that is already due.
		d := time.Duration(math.Ceil((1 - l.tokens) / c.cfg.MaxVisibilityRate * float64(time.Second)))
		token = l.at.Add(max(d, time.Millisecond))
	}
	var at time.Time
	if m := l.list.head; m != nil && c.cfg.VisibilityMargin >= 0 {
		at = maxTime(m.visibleAt().Add(-c.cfg.VisibilityMargin), token)
	}
	if l.shortq.len() > 0 && c.closing || len(l.holdq) > 0 {
		return c.now // giving back at Close, or ending holds: not rate-limited
	}
	if m := l.holds.head; m != nil {
		if d := c.holdDue(m); at.IsZero() || d.Before(at) {
			at = d
		}
	}
	if len(l.settled) > 0 && c.cfg.VisibilityMargin >= 0 {
		if t := maxTime(time.Unix(0, l.settled[0].due).Add(-c.cfg.VisibilityMargin), token); at.IsZero() || t.Before(at) {
			at = t
		}
	}
	// Shortenings go with the budget; without extensions (a negative
	// margin) ready sends them only at Close, handled above, and a
	// deadline for them before it would come back at once, every step.
	if l.shortq.len() > 0 && c.cfg.VisibilityMargin >= 0 && (at.IsZero() || token.Before(at)) {
		at = token
	}
	return at
}

func (l *visLane) flushed(c *Core) bool { return l.idle() && l.shortq.len() == 0 }

// ready extends the visibility of held messages before it ends, within the
// request budget; a held message it cannot extend is parked when the store
// can, else it is left to come back (its newer receipt then replaces the
// held one). Released messages get a short timeout after that.
func (l *visLane) ready(c *Core, now time.Time, rd *Ready) {
	l.refill(now, c.cfg.MaxVisibilityRate)
	l.readyHold(c, rd)
	if c.closing {
		l.readyShort(c, rd)
	}
	if c.cfg.VisibilityMargin < 0 {
		return
	}
	limit := now.Add(c.cfg.VisibilityMargin)
	for m := l.list.head; m != nil && m.visible <= limit.UnixNano(); {
		next := m.vnext
		switch {
		case m.visible <= now.UnixNano():
			m.flags |= fLapsed
			l.list.remove(m)
		case m.where == wDelete || m.where == wGone:
			l.list.remove(m)
		case c.pastHold(now, m.since):
			c.holdEnds(m)
		case l.tokens >= 1 && l.inFlight < l.limit:
			l.extend(c, m, rd)
		case m.where == wHeld && m.g != nil && c.canPark(m.g, m):
			c.unhold(m)
			c.toPark(m.g, m)
		default:
			next = nil // out of budget: look again when it refills
		}
		m = next
	}
	l.readySettled(c, now, limit, rd)
	l.readyShort(c, rd)
}

// readyShort shortens the visibility of released messages, within the
// request budget (all of them once the Core closes).
func (l *visLane) readyShort(c *Core, rd *Ready) {
	for l.shortq.len() > 0 && (l.tokens >= 1 || c.closing) && l.inFlight < l.limit {
		receipt, _ := l.shortq.pop()
		e := l.relBy[receipt]
		if e == nil {
			continue // visible again already
		}
		if e.receipt != receipt {
			// A change in flight when it was released rotated the
			// receipt (releasedChanged queued the new one).
			delete(l.relBy, receipt)
			continue
		}
		if !c.worthShortening(c.now, e.until) {
			// Queued behind the request budget until its visibility
			// nearly ended: a short timeout now would lengthen it.
			delete(l.relBy, receipt)
			continue
		}
		l.start(c, visChange{receipt: receipt}, c.cfg.ShortVisibility, rd)
	}
}

// pastHold reports whether extending a message received at since would
// carry it past Config.MaxHold, less holdSlack: the queue applies an
// extension some time after it is asked for (up to its answer), and its
// end counts from then.
func (c *Core) pastHold(now time.Time, since int64) bool {
	return c.cfg.MaxHold > 0 && now.Add(c.cfg.VisibilityExtend).UnixNano()-since > int64(c.cfg.MaxHold-c.holdSlack())
}

// holdDue is when the hold of m must end, a little before Config.MaxHold
// after it was received (holdSlack).
func (c *Core) holdDue(m *msg) time.Time {
	return time.Unix(0, m.since).Add(c.cfg.MaxHold - c.holdSlack())
}

// holdSlack is how early a hold ends: a tenth of MaxHold, at most a
// minute.
func (c *Core) holdSlack() time.Duration { return HoldSlack(c.cfg.MaxHold) }

// HoldSlack is how long before maxHold a hold ends (no extension is asked
// for past it): a tenth of maxHold, at most a minute. It covers a visibility
// change the queue applies that much after it was asked for.
func HoldSlack(maxHold time.Duration) time.Duration { return min(maxHold/10, time.Minute) }

// watchHold puts m on the hold list when its visibility (a queue's
// visibility timeout longer than MaxHold, or extension off) would carry it
// past the end of its hold: extensions, which look at the hold, may never
// come. The list is in the order of receipt (the order of holdDue); a
// message leaves it when it is gone (nothing refers to a gone message).
func (c *Core) watchHold(m *msg) {
	c.vis.holds.remove(m)
	if c.cfg.MaxHold > 0 && m.visibleAt().After(c.holdDue(m)) {
		c.vis.holds.push(m)
	}
}

// endHolds ends the holds that are due at now.
func (c *Core) endHolds(now time.Time) {
	for m := c.vis.holds.head; m != nil && !c.holdDue(m).After(now); m = c.vis.holds.head {
		c.vis.holds.remove(m)
		if m.where == wHeld || m.where == wOut {
			c.holdEnds(m)
		}
	}
}

// holdEnds ends the hold of m, received MaxHold ago or nearly: its
// visibility is not extended again. Waiting for its turn, it is parked when
// it can be; otherwise it is left to come back from the queue (its copy in
// memory takes the new receipt then), its visibility shortened when it
// would last past MaxHold. One out to a handler is reported.
func (c *Core) holdEnds(m *msg) {
	c.vis.list.remove(m)
	switch {
	case m.where == wHeld && m.g != nil && c.canPark(m.g, m):
		c.unhold(m)
		c.toPark(m.g, m)
		return
	case m.waitsFor(outHanded) && !m.has(fHoldTold):
		m.flags |= fHoldTold
		c.report(Report{Kind: ReportWarn, Msg: "a handler holds a message past MaxHold: its visibility is shortened, and the queue delivers it again",
			Group: m.name, Epoch: m.epoch, Seq: m.seq, ID: m.id})
	}
	if m.visible-m.since > int64(c.cfg.MaxHold) && !m.has(fVisBusy) && m.receipt != "" {
		c.vis.holdq = append(c.vis.holdq, msgRef{m, m.gen})
	}
}

// msgRef names a message at one generation (it may be reused meanwhile).
type msgRef struct {
	m   *msg
	gen uint32
}

// readyHold shortens the visibility of the messages whose hold ends (not
// rate-limited: the service's hold rule costs more than the requests).
func (l *visLane) readyHold(c *Core, rd *Ready) {
	for len(l.holdq) > 0 && l.inFlight < l.limit {
		r := l.holdq[0]
		l.holdq = l.holdq[1:]
		if m := r.m; m.gen == r.gen && (m.where == wHeld || m.where == wOut) && !m.has(fVisBusy) {
			m.flags |= fVisBusy
			l.tokens++ // (start takes one)
			l.start(c, visChange{m: m, gen: m.gen, g: m.g, epoch: m.epoch, seq: m.seq, receipt: m.receipt}, c.cfg.ShortVisibility, rd)
		}
	}
}

// extend asks for m's visibility to be extended.
func (l *visLane) extend(c *Core, m *msg, rd *Ready) {
	l.list.remove(m)
	m.flags |= fVisBusy
	l.start(c, visChange{m: m, gen: m.gen, g: m.g, epoch: m.epoch, seq: m.seq, receipt: m.receipt}, c.cfg.VisibilityExtend, rd)
}

// readySettled extends the visibility of the settled entries that end
// before limit, group by group, within the request budget.
func (l *visLane) readySettled(c *Core, now, limit time.Time, rd *Ready) {
	for len(l.settled) > 0 && l.settled[0].due <= limit.UnixNano() {
		w := l.settled[0]
		g := c.groups[w.name]
		if g == nil || g.settledDue != w.due {
			l.popSettled() // stale
			continue
		}
		if l.tokens < 1 || l.inFlight >= l.limit {
			return
		}
		l.popSettled()
		l.extendSettled(c, g, now, limit, rd)
	}
}

// extendSettled extends the settled entries of g that end before limit,
// and watches g again by the earliest end left.
func (l *visLane) extendSettled(c *Core, g *group, now, limit time.Time, rd *Ready) {
	due := int64(0)
	for i := range g.settled {
		e := &g.settled[i]
		switch {
		case !e.watched():
		case e.visible <= now.UnixNano():
			e.flags |= fLapsed
		case e.visible <= limit.UnixNano() && c.pastHold(now, e.since):
			e.flags |= fLapsed // left to come back (a duplicate then): see Config.MaxHold
		case e.visible <= limit.UnixNano() && l.tokens >= 1 && l.inFlight < l.limit:
			e.flags |= fVisBusy
			l.start(c, visChange{g: g, epoch: e.epoch, seq: e.seq, receipt: e.receipt}, c.cfg.VisibilityExtend, rd)
		case due == 0 || e.visible < due:
			due = e.visible
		}
	}
	g.settledDue = due
	if due != 0 {
		l.pushSettled(settledWait{g.name, due})
	}
}

func (l *visLane) start(c *Core, v visChange, timeout time.Duration, rd *Ready) {
	v.timeout, v.at = timeout, c.now
	l.tokens--
	id := c.id()
	l.busy[id] = v
	l.inFlight++
	rd.Visibility = append(rd.Visibility, ChangeVisibility{ID: id, Receipt: v.receipt, Timeout: timeout})
}

// Visibility reports the outcome of the ChangeVisibility action id.
func (c *Core) Visibility(now time.Time, id uint64, receipt string, err error) {
	c.begin(now)
	defer c.end()
	l := &c.vis
	v, ok := l.busy[id]
	if !ok {
		return
	}
	delete(l.busy, id)
	l.inFlight--
	m := v.m
	switch {
	case v.orphan:
		return // its message was received again meanwhile (see orphan)
	case v.rel != nil:
		c.releasedChanged(now, v, receipt, err)
		return
	case m == nil && v.g == nil:
		c.shortened(now, v, err)
		return
	case m == nil || m.gen != v.gen:
		// A settled entry's, or a message's that was settled (or is
		// gone) meanwhile.
		c.settledExtended(now, v, receipt, err)
		return
	}
	m.flags &^= fVisBusy
	if err != nil {
		m.flags |= fLapsed
		if applied(err) {
			m.setVisibleAt(maxTime(m.visibleAt(), now.Add(v.timeout)))
		}
		c.report(Report{Kind: ReportWarn, Msg: "extend visibility failed", Group: m.name, Seq: m.seq, ID: m.id, Err: err})
	} else {
		c.extended(now, m, v, receipt, !m.has(fDelWait|fBackWait) && m.where != wDelete)
	}
	if m.has(fDelWait) {
		// Its delete waited for this change: it goes with the newest
		// receipt.
		m.flags &^= fDelWait
		c.deletes.push(now, m)
	}
	if m.has(fBackWait) {
		m.flags &^= fBackWait
		c.giveBack(now, m) // with the newest receipt
	}
}

// extended records m's new receipt and visibility (v's timeout from now),
// and keeps it alive again (keep) unless a delete or a give-back waits. An
// answer that took long leaves the end known only loosely (fLoose): the
// queue applied the change somewhere between v.at and now.
func (c *Core) extended(now time.Time, m *msg, v visChange, receipt string, keep bool) {
	c.st.Extended++
	if m.receipt != v.receipt || m.where == wGone {
		return
	}
	m.receipt = receipt
	m.setVisibleAt(now.Add(v.timeout))
	m.flags &^= fLapsed | fLoose
	if now.Sub(v.at) > staleMargin/2 {
		m.flags |= fLoose
	}
	c.vis.list.remove(m)
	if keep {
		c.vis.list.push(m)
	}
	c.budget.recharge(m)
}

// orphan detaches the change in flight of m's current receipt from m,
// received again: its answer must not end the wait of a change of the new
// receipt.
func (l *visLane) orphan(m *msg) {
	for id, v := range l.busy {
		if v.m == m && v.gen == m.gen && v.receipt == m.receipt && v.rel == nil {
			v.orphan = true
			l.busy[id] = v
			return
		}
	}
}

// rebind makes the change in flight of a settled entry with m's receipt
// (started for the entry, or for the message it was) m's, made a message
// again. It reports whether there was one.
func (l *visLane) rebind(m *msg) bool {
	for id, v := range l.busy {
		settled := v.g != nil && (v.m == nil || v.m.gen != v.gen)
		if settled && v.rel == nil && v.receipt == m.receipt {
			v.m, v.gen = m, m.gen
			l.busy[id] = v
			return true
		}
	}
	return false
}

// released records that the message released with receipt is the subject
// of the visibility change in flight, if one is: its outcome is the
// message's new receipt and visibility.
func (l *visLane) released(receipt string, e *relEntry) {
	if receipt == "" {
		return
	}
	for id, v := range l.busy {
		if v.receipt == receipt && v.rel == nil && (v.m != nil || v.g != nil) {
			v.rel = e
			l.busy[id] = v
			return
		}
	}
}

// releasedChanged records the outcome of a visibility change of a message
// released meanwhile: its new receipt and time, to count it by and to
// shorten it with.
func (c *Core) releasedChanged(now time.Time, v visChange, receipt string, err error) {
	e := v.rel
	rel := c.budget.released
	if e.index < 0 || e.index >= len(rel) || rel[e.index] != e || e.receipt != v.receipt {
		return // visible again, or received again, meanwhile
	}
	if err != nil {
		if applied(err) && now.Add(v.timeout).After(e.until) {
			// It may have taken effect: counted until its end from now.
			e.until = now.Add(v.timeout)
			rel.fix(e.index)
		}
		return
	}
	c.st.Extended++
	e.receipt, e.until = receipt, now.Add(v.timeout)
	rel.fix(e.index)
	if c.worthShortening(now, e.until) {
		c.vis.shorten(e, c.shortBound())
	}
}

// settledExtended records the outcome of a settled entry's extension: its
// new receipt, and its delete if it waited for this.
func (c *Core) settledExtended(now time.Time, v visChange, receipt string, err error) {
	if err == nil {
		c.st.Extended++
	}
	g := v.g
	if g == nil || g.phase == phEvicted || g.cold() {
		return
	}
	i := g.settledIndex(v.epoch, v.seq, v.receipt)
	if i < 0 {
		return // deleted or released meanwhile
	}
	e := &g.settled[i]
	e.flags &^= fVisBusy
	if err != nil {
		e.flags |= fLapsed
		if applied(err) {
			e.visible = max(e.visible, now.Add(v.timeout).UnixNano())
		}
	} else {
		c.budget.mem += len(receipt) - len(e.receipt)
		e.receipt, e.visible = receipt, now.Add(c.cfg.VisibilityExtend).UnixNano()
		e.flags &^= fLapsed
	}
	if e.flags&fDelWait != 0 {
		d := *e
		g.settled = append(g.settled[:i], g.settled[i+1:]...)
		d.flags &^= fDelWait
		c.queueDelete(now, c.unsettle(now, d))
		return
	}
	c.vis.watch(g, e)
}

// shortened records that a released message comes back sooner.
func (c *Core) shortened(now time.Time, v visChange, err error) {
	l := &c.vis
	e := l.relBy[v.receipt]
	delete(l.relBy, v.receipt)
	rel := c.budget.released
	if err != nil {
		if applied(err) && e != nil && e.index >= 0 && e.index < len(rel) && rel[e.index] == e && now.Add(c.cfg.ShortVisibility).After(e.until) {
			e.until = now.Add(c.cfg.ShortVisibility) // it may have taken effect late
			rel.fix(e.index)
		}
		return
	}
	c.st.Shortened++
	if e != nil && e.index >= 0 && e.index < len(rel) && rel[e.index] == e {
		e.until = now.Add(c.cfg.ShortVisibility)
		rel.fix(e.index)
	}
}
