package recvcore

import (
	"fmt"
	"time"
)

// lane is what every kind of I/O the Core asks for shares: how many of its
// calls are in flight and how many may be, and the backoff after failed
// ones. Each kind has a lane type of its own (readLane, commitLane, ...)
// that embeds a lane and owns its queue and the calls in flight; the Core's
// Ready, Deadline and Flushed go over them.
type lane struct {
	what     string // names the call in the report of a failure ("" none)
	limit    int    // calls in flight at most
	inFlight int
	after    time.Time // no call starts before: the backoff after failed ones
	fails    int       // consecutive failed calls

	// The lanes that have work on most steps (commits, deletes) keep
	// their due time between steps, so that Ready and Deadline do not
	// work it out again on every step (see Core.Ready): dueAt is due's
	// answer as of the last Deadline, and changed says that something
	// due depends on changed since (a call queued, started or ended, a
	// backoff), so that dueAt must be worked out again and ready must
	// look. Every change of what due reads sets changed.
	changed bool
	dueAt   time.Time
}

// open reports whether a call may start at now.
func (l *lane) open(now time.Time) bool { return l.inFlight < l.limit && !now.Before(l.after) }

// idle reports whether no call is in flight.
func (l *lane) idle() bool { return l.inFlight == 0 }

// succeeded ends the run of failures.
func (l *lane) succeeded() { l.fails = 0 }

// failed backs the lane off after a failed call, and reports the first
// failure of a run and every tenth.
func (c *Core) failed(l *lane, err error) {
	l.fails++
	l.after = c.now.Add(c.backoff(l.fails))
	l.changed = true
	if l.what != "" && (l.fails == 1 || l.fails%10 == 0) {
		c.report(Report{Kind: ReportWarn, Msg: l.what + " failed", Attempt: l.fails, Err: err})
	}
}

// lanes lists the Core's lanes, for what goes over all of them.
func (c *Core) lanes() [9]ioLane {
	return [9]ioLane{&c.reads, &c.commits, &c.parks, &c.unparks, &c.scans, &c.vis, &c.deletes, &c.deads, &c.requeues}
}

// lanesDue returns the earliest of at and the lanes' due times. It asks
// each lane of lanes directly, not through ioLane: Ready calls it on every
// step, and nine calls through an interface were a third of its cost. A
// lane with nothing queued is not asked (its due is zero), and the commit
// and delete lanes answer from dueAt unless they changed (see lane).
// TestLanesDueAsksEveryLane keeps the two lists the same.
func (c *Core) lanesDue(at time.Time) time.Time {
	if c.reads.pending() {
		at = earlier(at, c.reads.due(c))
	}
	if c.commits.changed {
		c.commits.dueAt, c.commits.changed = c.commits.due(c), false
	}
	at = earlier(at, c.commits.dueAt)
	if c.parks.pending() {
		at = earlier(at, c.parks.due(c))
	}
	if c.unparks.pending() {
		at = earlier(at, c.unparks.due(c))
	}
	if c.scans.pending() {
		at = earlier(at, c.scans.due(c))
	}
	at = earlier(at, c.vis.due(c))
	if c.deletes.changed || c.deletes.urgent {
		// (An urgent delete is due at c.now: worked out every time.)
		c.deletes.dueAt, c.deletes.changed = c.deletes.due(c), false
	}
	at = earlier(at, c.deletes.dueAt)
	if c.deads.pending() {
		at = earlier(at, c.deads.due(c))
	}
	if c.requeues.pending() {
		at = earlier(at, c.requeues.due(c))
	}
	if checkDues {
		c.verifyDues()
	}
	return at
}

// checkDues makes every Deadline check that the due times the commit and
// delete lanes keep are what due answers now, and every Ready that the
// lanes it skipped had nothing to do (verifySkipped). The package's tests
// turn it on: a change that did not set changed, or a pending that says
// false too soon, panics at the next step.
var checkDues = false

// verifyDues panics when a lane's kept due time is stale.
func (c *Core) verifyDues() {
	for _, l := range [...]struct {
		name string
		l    *lane
		due  time.Time
	}{{"commits", &c.commits.lane, c.commits.due(c)}, {"deletes", &c.deletes.lane, c.deletes.due(c)}} {
		if !l.l.dueAt.Equal(l.due) {
			panic(fmt.Sprintf("recvcore: the %s lane keeps due %v, its due is %v: a change did not set changed", l.name, l.l.dueAt, l.due))
		}
	}
}

// ioLane is what Deadline and Flushed ask of each lane. Each also has
// ready(c, now, rd), which adds the lane's actions due at now to rd; Ready
// calls them in the order of lanes.
type ioLane interface {
	// due returns when the lane has something to start, zero if nothing.
	due(c *Core) time.Time
	// flushed reports whether nothing the lane must finish before the
	// Core closes is queued or in flight.
	flushed(c *Core) bool
}
