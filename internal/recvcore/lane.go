package recvcore

import "time"

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
// step, and nine calls through an interface were a third of its cost.
// TestLanesDueAsksEveryLane keeps the two lists the same.
func (c *Core) lanesDue(at time.Time) time.Time {
	at = earlier(at, c.reads.due(c))
	at = earlier(at, c.commits.due(c))
	at = earlier(at, c.parks.due(c))
	at = earlier(at, c.unparks.due(c))
	at = earlier(at, c.scans.due(c))
	at = earlier(at, c.vis.due(c))
	at = earlier(at, c.deletes.due(c))
	at = earlier(at, c.deads.due(c))
	at = earlier(at, c.requeues.due(c))
	return at
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
