package recvcore

import (
	"math"
	"time"
)

// visLane changes visibility timeouts: it extends the visibility of the
// messages the Core holds before it ends, and shortens that of released
// ones so that they come back soon, within MaxVisibilityRate.
type visLane struct {
	lane
	list   visList // the messages whose visibility is kept alive
	busy   map[uint64]visChange
	shortq fifo[string]         // receipts of released messages to shorten
	relBy  map[string]*relEntry // by receipt, while a shortening is queued
	tokens float64
	at     time.Time
}

type visChange struct {
	m       *msg   // nil for a shortening
	gen     uint32 // m.gen: m may be reused meanwhile (see msgPool)
	receipt string
}

func (l *visLane) init(cfg *Config) {
	l.lane = lane{limit: maxVisibilityInFlight}
	l.busy = make(map[uint64]visChange)
	l.relBy = make(map[string]*relEntry)
	l.tokens = cfg.MaxVisibilityRate
}

// shorten queues the released message e for a short visibility, within a
// bound of queued shortenings.
func (l *visLane) shorten(e *relEntry, maxBatch int) {
	if l.shortq.len() < 64*maxBatch {
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
		at = maxTime(m.visibleAt.Add(-c.cfg.VisibilityMargin), token)
	}
	if l.shortq.len() > 0 && (at.IsZero() || token.Before(at)) {
		at = token
	}
	return at
}

func (l *visLane) flushed(c *Core) bool { return true }

// ready extends the visibility of held messages before it ends, within the
// request budget; a held message it cannot extend is parked when the store
// can, else it is left to come back (its newer receipt then replaces the
// held one). Released messages get a short timeout after that.
func (l *visLane) ready(c *Core, now time.Time, rd *Ready) {
	l.refill(now, c.cfg.MaxVisibilityRate)
	if c.cfg.VisibilityMargin < 0 {
		return
	}
	limit := now.Add(c.cfg.VisibilityMargin)
	for m := l.list.head; m != nil && !m.visibleAt.After(limit); {
		next := m.vnext
		switch {
		case !m.visibleAt.After(now):
			m.flags |= fLapsed
			l.list.remove(m)
		case m.where == wDelete || m.where == wGone:
			l.list.remove(m)
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
	for l.shortq.len() > 0 && l.tokens >= 1 && l.inFlight < l.limit {
		receipt, _ := l.shortq.pop()
		if l.relBy[receipt] == nil {
			continue // visible again already
		}
		l.start(c, visChange{receipt: receipt}, c.cfg.ShortVisibility, rd)
	}
}

// extend asks for m's visibility to be extended.
func (l *visLane) extend(c *Core, m *msg, rd *Ready) {
	l.list.remove(m)
	l.start(c, visChange{m: m, gen: m.gen, receipt: m.receipt}, c.cfg.VisibilityExtend, rd)
}

func (l *visLane) start(c *Core, v visChange, timeout time.Duration, rd *Ready) {
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
	case m == nil:
		c.shortened(now, v, err)
	case m.gen != v.gen:
		// m was settled (and maybe reused) meanwhile: as for a settled
		// one below, its receipt is not updated.
		if err == nil {
			c.st.Extended++
		}
	case err != nil:
		if m.receipt == v.receipt {
			m.flags |= fLapsed
		}
		c.report(Report{Kind: ReportWarn, Msg: "extend visibility failed", Group: m.name, Seq: m.seq, ID: m.id, Err: err})
	default:
		c.extended(now, m, v.receipt, receipt)
	}
}

// extended records m's new receipt and visibility.
func (c *Core) extended(now time.Time, m *msg, old, receipt string) {
	c.st.Extended++
	if m.receipt == old && m.where != wGone && m.where != wDelete {
		m.receipt = receipt
		m.visibleAt = now.Add(c.cfg.VisibilityExtend)
		m.flags &^= fLapsed
		c.vis.list.remove(m)
		c.vis.list.push(m)
		c.budget.recharge(m)
	}
}

// shortened records that a released message comes back sooner.
func (c *Core) shortened(now time.Time, v visChange, err error) {
	l := &c.vis
	e := l.relBy[v.receipt]
	delete(l.relBy, v.receipt)
	if err != nil {
		return
	}
	c.st.Shortened++
	rel := c.budget.released
	if e != nil && e.index >= 0 && e.index < len(rel) && rel[e.index] == e {
		e.until = now.Add(c.cfg.ShortVisibility)
		rel.fix(e.index)
	}
}
