package recvcore

import (
	"fmt"
	"time"
)

// Review 12: the Ready and Deadline of before 7c3a69e (every lane's ready
// on every step, every lane's due worked out afresh), as the oracle of the
// differential tests in review12_test.go. Neither reads or writes
// lane.dueAt; OldReady leaves both kept lanes marked changed, so that the
// Core stays usable with the new Deadline too.

// OldReady is Ready as it was before 7c3a69e.
func OldReady(c *Core, now time.Time) Ready {
	c.now = now
	c.budget.refill(now, &c.cfg)
	var rd Ready
	c.reads.ready(c, now, &rd)
	c.commits.ready(c, now, &rd)
	c.parks.ready(c, now, &rd)
	c.unparks.ready(c, now, &rd)
	c.scans.ready(c, now, &rd)
	c.vis.ready(c, now, &rd)
	c.deletes.ready(c, now, &rd)
	c.deads.ready(c, now, &rd)
	c.requeues.ready(c, now, &rd)
	c.commits.changed, c.deletes.changed = true, true
	rd.Reports, c.out.reports = c.out.reports, nil
	rd.Resolved, c.out.resolved = c.out.resolved, nil
	rd.Available = c.Available()
	rd.Room = c.Room(now)
	rd.Wake, _ = OldDeadline(c)
	return rd
}

// OldDeadline is Deadline as it was before 7c3a69e: every lane's due
// worked out afresh. It changes nothing in c.
func OldDeadline(c *Core) (time.Time, bool) {
	var at time.Time
	if len(c.timers) > 0 {
		at = earlier(at, c.timers[0].at)
	}
	at = earlier(at, c.reads.due(c))
	at = earlier(at, c.commits.due(c))
	at = earlier(at, c.parks.due(c))
	at = earlier(at, c.unparks.due(c))
	at = earlier(at, c.scans.due(c))
	at = earlier(at, c.vis.due(c))
	at = earlier(at, c.deletes.due(c))
	at = earlier(at, c.deads.due(c))
	at = earlier(at, c.requeues.due(c))
	if b := &c.budget; b.fetchAfter.After(c.now) {
		at = earlier(at, b.fetchAfter)
	}
	if b := &c.budget; len(b.released) > 0 && !c.closing && c.cfg.MaxHeld-b.live-len(b.released) < c.reserve() {
		at = earlier(at, b.released[0].until)
	}
	if it, ok := c.compactq.peek(); ok {
		at = earlier(at, it.at.Add(compactDelay))
	}
	if g := c.idle.head; g != nil && c.cfg.IdleEvict >= 0 {
		at = earlier(at, g.idleSince.Add(c.cfg.IdleEvict))
	}
	return at, !at.IsZero()
}

// KeptDues returns the commit and delete lanes' kept due times and
// changed marks (for the messages of review 12's tests).
func KeptDues(c *Core) (commitDue time.Time, commitChanged bool, deleteDue time.Time, deleteChanged bool) {
	return c.commits.dueAt, c.commits.changed, c.deletes.dueAt, c.deletes.changed
}

// DueParts names what Deadline is made of (for the messages of review 12's
// tests).
func DueParts(c *Core) string {
	s := fmt.Sprintf("now %v", c.now.Format("05.000000"))
	add := func(name string, t time.Time) {
		if !t.IsZero() {
			s += fmt.Sprintf(" %s=%v", name, t.Format("05.000000"))
		}
	}
	if len(c.timers) > 0 {
		add("timer", c.timers[0].at)
	}
	add("reads", c.reads.due(c))
	add("commits", c.commits.due(c))
	add("parks", c.parks.due(c))
	add("unparks", c.unparks.due(c))
	add("scans", c.scans.due(c))
	add("vis", c.vis.due(c))
	add("deletes", c.deletes.due(c))
	add("deads", c.deads.due(c))
	add("requeues", c.requeues.due(c))
	if b := &c.budget; b.fetchAfter.After(c.now) {
		add("fetchAfter", b.fetchAfter)
	}
	if b := &c.budget; len(b.released) > 0 && !c.closing && c.cfg.MaxHeld-b.live-len(b.released) < c.reserve() {
		add("released", b.released[0].until)
	}
	if it, ok := c.compactq.peek(); ok {
		add("compact", it.at.Add(compactDelay))
	}
	if g := c.idle.head; g != nil && c.cfg.IdleEvict >= 0 {
		add("idle", g.idleSince.Add(c.cfg.IdleEvict))
	}
	return s
}
