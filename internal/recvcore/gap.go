package recvcore

import (
	"fmt"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// update puts g in the ready ring if it can hand out; otherwise it checks
// g's hole and epoch switch, asks the park for what comes next, and lets g
// go idle when it holds nothing.
func (c *Core) update(g *group, now time.Time) {
	if g.phase == phEvicted {
		return
	}
	g.wake()
	c.advance(g, now)
	c.relist(g, now)
}

// advance puts g in the ready ring, or moves it on: an epoch switch, a read
// of its park, its hole's timer.
func (c *Core) advance(g *group, now time.Time) {
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
			c.advance(g, now)
			return
		}
		c.checkPark(g)
		c.checkGap(g, now)
	}
}

func (c *Core) clearGap(g *group) {
	g.gapSince, g.gapTold = time.Time{}, false
	c.clearStuck(g, "gap")
	c.endRepairs(g, repairSkip, nil) // the hole is gone before SkipHole skipped it: nothing to skip
}

// checkGap starts, reports or skips a hole: g's next seq is missing while
// later ones are known. The hole ages while the park is read (a read in
// flight does not hide a stuck group); skip reads the park before it skips.
func (c *Core) checkGap(g *group, now time.Time) {
	if !g.waiting() && g.park.parking == 0 || g.park.low == g.next || c.lowestParking(g) == g.next {
		c.clearGap(g)
		return
	}
	if g.gapSince.IsZero() {
		g.gapSince, g.gapTold = now, false
	}
	if c.hasRepair(g, repairSkip) {
		c.skip(g, now) // SkipHole asked, and the park's read it waited for came
		return
	}
	due := g.gapSince.Add(c.cfg.GapTimeout)
	if now.Before(due) {
		if !g.gapTimer {
			g.gapTimer = true
			c.addTimer(timer{at: due, kind: tGap, name: g.name})
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
		c.addTimer(timer{at: now.Add(c.cfg.GapTimeout), kind: tGap, name: g.name})
		c.reads.need(g)
		g.probed = false
	}
}

// skip moves g past its hole, to the lowest seq it knows, and records the
// skipped range in the cursor: under GapSkip, or when SkipHole asked.
func (c *Core) skip(g *group, now time.Time) {
	if c.closing {
		return // nothing is handed out any more: the next receiver decides
	}
	asked := c.hasRepair(g, repairSkip)
	if c.cfg.Park && (!g.probed || g.park.probedAt.Before(g.gapSince)) {
		// Skip only what the park was seen not to hold: read it first.
		g.probed = false
		c.checkPark(g)
		return
	}
	if back := g.farAt.Add(max(c.cfg.Visibility, c.cfg.VisibilityExtend) + c.cfg.GapTimeout); !asked && g.farLow == 0 && g.farHigh >= g.next && now.Before(back) {
		// Seqs from next to farHigh were released (left in the queue:
		// no room, a park limit), the lowest of them no longer known:
		// they are on their way back, not missing, until a visibility
		// timeout after the last release (when the last of them is
		// visible again) and a gap's timeout (to receive it) say
		// otherwise. Counted from the release, not from the hole: a
		// release long ago costs later holes nothing, a recent one is
		// waited for even when the hole is old.
		if !g.gapTimer {
			g.gapTimer = true
			c.addTimer(timer{at: back, kind: tGap, name: g.name})
		}
		return
	}
	target := g.lowestKnown()
	if p := c.lowestParking(g); p != 0 && (target == 0 || p < target) {
		target = p
	}
	next := g.next
	if target <= next {
		if asked {
			// Only seqs released for room are known beyond the hole, the
			// lowest of them not: nothing to skip to.
			c.endRepairs(g, repairSkip, fmt.Errorf("%w: no seq beyond the hole is known to skip to (the next ones were let go for room and come back)", ErrNotStuck))
		}
		return
	}
	r := seqstore.Range{Epoch: g.epoch, First: next, Last: target - 1}
	why := "skipped"
	if asked {
		why = "skipped on request (SkipHole)"
	}
	c.skipped(g, r, now.Sub(g.gapSince), why)
	g.next = target
	g.forgetFar()
	g.passParked()
	g.ack.Epoch, g.ack.Next = g.epoch, target
	if asked {
		c.repairsDurable(g, repairSkip, seqstore.Cursor{Epoch: g.epoch, Next: target})
		c.writeRepair(g)
	} else {
		c.markDirty(g)
	}
	c.clearGap(g)
	c.update(g, now)
}

// checkEpoch switches g to a newer epoch once the old one has nothing out
// and the newer one has waited GapTimeout. Under GapWait it waits as long
// as the old epoch holds anything (a hole is never passed over: it is
// reported); under GapSkip the hole is skipped first. A switch records
// Range{old, next, MaxSeq}: a seq of the old epoch that arrives later is a
// duplicate below next, a late arrival from next on.
func (c *Core) checkEpoch(g *group, now time.Time) {
	if g.newerEpoch == 0 || g.out != nil || c.closing || now.Before(g.newerSince.Add(c.cfg.GapTimeout)) {
		return
	}
	if g.waiting() || g.unparking || g.park.parking > 0 || g.farHigh >= g.next {
		if c.cfg.GapPolicy == GapSkip && !g.unparking && g.park.low != g.next {
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
	c.skipped(g, seqstore.Range{Epoch: from, First: oldNext, Last: seqstore.MaxSeq}, 0, "")
	g.ack.Epoch, g.ack.Next = to, start
	g.epoch, g.next = to, start
	g.farLow, g.farHigh = 0, 0
	g.forgetPark()
	c.clearGap(g)
	take := c.takeNewer(g, now, to)
	c.st.EpochSwitches++
	c.report(Report{Kind: ReportEpoch, Msg: "new sender epoch", Group: g.name, Epoch: to, From: from})
	c.markDirty(g)
	for _, m := range take {
		c.budget.unbuffer(m)
		c.arriveCurrent(now, g, m)
	}
}

// takeNewer takes the messages of epoch out of g.newer, and watches the
// newer epochs left.
func (c *Core) takeNewer(g *group, now time.Time, epoch uint64) []*msg {
	take, keep := []*msg(nil), g.newer[:0]
	for _, m := range g.newer {
		if m.epoch == epoch {
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
		c.addTimer(timer{at: now.Add(c.cfg.GapTimeout), kind: tEpoch, name: g.name})
	}
	return take
}
