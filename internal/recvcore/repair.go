package recvcore

import (
	"errors"
	"fmt"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Repairs: an operator's actions on a group that cannot progress on its
// own. Each is an event like any other: it is refused unless the group is
// in the state it needs (ErrNotStuck), and once accepted it is reported
// (ReportRepair) and goes the way the matching policy goes, so that no
// repair has a path of its own to the queue or the store:
//
//   - DeadLetterHead: the poison message a group retries (PoisonBlock) goes
//     to the dead-letter lane, as PoisonDeadLetter sends it; deleted once
//     the copy is sent and the cursor past it is durable, as a dead letter
//     always is.
//   - SkipHole: the hole of a group waiting on it (GapWait) is skipped as
//     GapSkip skips it: recorded in the cursor as a skipped range (a copy
//     that arrives later is late: reported, handed out Unordered or
//     dead-lettered, never deleted unseen), after a read of the park.
//   - Reread: the cursor of a group re-reading it after a conflict, failed
//     by a store error, or loading, is read now.
//   - StartAt: a group with no stored cursor starts at a seq, the seqs
//     below recorded as skipped, as StartLowest starts one.
//
// Each returns a Ticket that resolves once the repair's effect is durable
// (the cursor that records it is written; for DeadLetterHead, the copy is
// sent and the cursor past it written), or with the error that stopped
// it. A ticket that fails does not undo the repair: what was decided goes
// on (a dead letter is retried, a skip is written by the next commit).

// Errors of the repairs.
var (
	// ErrNotStuck: the group is not in the state the repair needs (not in
	// memory, not stuck, stuck on something else, or busy).
	ErrNotStuck = errors.New("group not in the state the repair needs")
	// ErrNoDeadLetter: DeadLetterHead without a dead-letter queue.
	ErrNoDeadLetter = errors.New("no dead-letter queue configured")
)

// Repair actions, as named in reports (Report.Action).
const (
	ActionDeadLetterHead = "dead-letter-head"
	ActionSkipHole       = "skip-hole"
	ActionReread         = "reread"
	ActionStartAt        = "start-at"
)

// repairKind says what a repair's ticket waits for before it waits for a
// durable cursor.
type repairKind uint8

const (
	repairSkip repairKind = iota + 1 // the skip, made once the park was read
	repairDead                       // the dead-letter copy
	repairRead                       // the cursor read
)

// repairWait is a repair's ticket waiting for an event of its group.
type repairWait struct {
	g    *group
	kind repairKind
	t    Ticket
}

// repairCost is what a repairWait costs in Core.repairs.
const repairCost = 32

// notStuck says why g (nil: not in memory) cannot take a repair that
// needs what.
func notStuck(g *group, what string) error {
	switch {
	case g == nil || g.cold():
		return fmt.Errorf("%w: not in memory (idle, evicted or never seen), not %s", ErrNotStuck, what)
	case g.stuck != "":
		return fmt.Errorf("%w: %s, stuck on %q, not %s", ErrNotStuck, g.phase, g.stuck, what)
	}
	return fmt.Errorf("%w: %s and not stuck, not %s", ErrNotStuck, g.phase, what)
}

// DeadLetterHead dead-letters the message that group, stuck on it
// (PoisonBlock), retries: it goes to the dead-letter queue as under
// PoisonDeadLetter, and the group moves on past it. The ticket resolves
// once the copy is sent and the cursor past the message is durable (a
// failed send resolves it with the error; the send is retried).
func (c *Core) DeadLetterHead(now time.Time, group string) (Ticket, error) {
	c.begin(now)
	defer c.end()
	if c.closing {
		return 0, ErrClosed
	}
	if !c.cfg.DeadLetter {
		return 0, ErrNoDeadLetter
	}
	g := c.groups[group]
	if g == nil || g.cold() || g.phase != phActive || g.stuck != "poison" || g.out == nil {
		return 0, notStuck(g, "stuck on a poison message")
	}
	m := g.out
	switch {
	case m.waitsFor(outDead):
		// On its way already (asked before): wait for the same send.
	case m.waitsForAny(outRetry, outReady):
		m.deadOut()
		c.queueDead(m)
	default:
		return 0, fmt.Errorf("%w: its poison message (seq %d) is with a handler now; ask again once it failed", ErrNotStuck, m.seq)
	}
	t := c.ticket()
	c.addRepair(g, repairDead, t)
	c.report(Report{Kind: ReportRepair, Action: ActionDeadLetterHead, Msg: "repair: dead-letter the poison message",
		Group: g.name, Epoch: m.epoch, Seq: m.seq, ID: m.id, Attempt: int(m.attempt), Err: g.stuckErr})
	c.update(g, now)
	return t, nil
}

// SkipHole skips the hole group waits on (GapWait, reported stuck on a
// gap) now, as GapSkip would after GapTimeout: the missing seqs, up to the
// lowest one known beyond them, are recorded in the cursor as a skipped
// range, so that one arriving later is late (reported, dead-lettered or
// handed out Unordered). With parking, the park is read first: what it
// holds is not missing. The ticket resolves once the cursor that records
// the skip is durable; or at once, without error, if the missing seq
// turns up meanwhile (nothing is skipped then).
func (c *Core) SkipHole(now time.Time, group string) (Ticket, error) {
	c.begin(now)
	defer c.end()
	if c.closing {
		return 0, ErrClosed
	}
	g := c.groups[group]
	if g == nil || g.cold() || g.phase != phActive || g.stuck != "gap" || g.out != nil {
		return 0, notStuck(g, "stuck on a hole")
	}
	t := c.ticket()
	c.addRepair(g, repairSkip, t)
	var last uint64
	if low := g.lowestKnown(); low > g.next {
		last = low - 1
	}
	c.report(Report{Kind: ReportRepair, Action: ActionSkipHole, Msg: "repair: skip the hole",
		Group: g.name, Epoch: g.epoch, Seq: g.next, Last: last, Age: now.Sub(g.gapSince)})
	c.skip(g, now)
	c.update(g, now)
	return t, nil
}

// Reread reads the cursor of group now: a group re-reading it after a
// conflict (its read may wait for the lane's backoff), stopped by a store
// error (read again after RetryMax otherwise), or loading. The ticket
// resolves once the read answered: nil when the group took the cursor, or
// the read's error (a failed read is retried).
func (c *Core) Reread(now time.Time, group string) (Ticket, error) {
	c.begin(now)
	defer c.end()
	if c.closing {
		return 0, ErrClosed
	}
	g := c.groups[group]
	if g == nil || g.cold() || g.phase != phResolving && g.phase != phFailed && g.phase != phLoading {
		return 0, notStuck(g, "stuck on a conflict or a store error")
	}
	t := c.ticket()
	c.addRepair(g, repairRead, t)
	c.reads.need(g)
	c.reads.after = now // an operator asked: no backoff
	c.report(Report{Kind: ReportRepair, Action: ActionReread, Msg: "repair: read the cursor again",
		Group: g.name, Epoch: g.dur.Epoch, Seq: g.dur.Next, Err: g.stuckErr})
	return t, nil
}

// StartAt starts group, which has no stored cursor and has handed out and
// acknowledged nothing, at seq of epoch: the seqs below are recorded as
// skipped, as StartLowest records them, so that one arriving later is a
// late arrival; what the group holds is routed again from the new start
// (below it: released, to come back late once the start is durable). The
// ticket resolves once the start cursor is durable.
func (c *Core) StartAt(now time.Time, group string, epoch, seq uint64) (Ticket, error) {
	c.begin(now)
	defer c.end()
	if c.closing {
		return 0, ErrClosed
	}
	if seq == 0 || seq > seqstore.MaxSeq {
		return 0, fmt.Errorf("start at seq %d: %w (want 1..%d)", seq, seqstore.ErrInvalidArgument, uint64(seqstore.MaxSeq))
	}
	g := c.groups[group]
	if g == nil || g.cold() || !unstarted(g) {
		if g != nil && !g.cold() && (g.hasCursor() || g.ack.Next != 0 || g.started) {
			return 0, fmt.Errorf("%w: it has a cursor (durable %d/%d, acknowledged %d/%d) or handed out a message: StartAt is for a group with none",
				ErrNotStuck, g.dur.Epoch, g.dur.Next, g.ack.Epoch, g.ack.Next)
		}
		return 0, notStuck(g, "without a stored cursor")
	}
	c.report(Report{Kind: ReportRepair, Action: ActionStartAt, Msg: "repair: start at a seq", Group: g.name, Epoch: epoch, Seq: seq})
	g.startAt, g.settleRounds = time.Time{}, 0
	c.becomeActive(g, now)
	// A SkipHole waiting on the group's hole is superseded: the start moves
	// the cursor itself, and the hole it waited on may no longer be one.
	// It fails rather than report as durable a skip that was never made.
	c.endRepairs(g, repairSkip, fmt.Errorf("%w: a StartAt of the group superseded the skip", ErrNotStuck))
	c.clearGap(g)
	var again []*msg
	c.dropHeld(g, func(m *msg) { again = append(again, m) })
	g.forgetPark()
	g.epoch, g.next = epoch, seq
	g.ack = seqstore.Cursor{Epoch: epoch, Next: seq, Owner: g.dur.Owner} // the stored Owner stays (a fencing token)
	if seq > 1 {
		c.skipped(g, seqstore.Range{Epoch: epoch, First: 1, Last: seq - 1}, 0, "start: passed over (StartAt)")
	}
	c.recarve(g, g.ack, false)
	c.writeRepair(g)
	for _, m := range again {
		if m.where == wSettled {
			c.release(m, now)
			continue
		}
		c.routeTagged(now, g, m)
	}
	t := c.ticket()
	g.tickets = append(g.tickets, syncWait{target: seqstore.Cursor{Epoch: epoch, Next: seq}, t: t})
	c.update(g, now)
	return t, nil
}

// unstarted reports whether g has no stored cursor and nothing handed out
// or acknowledged since it found none: where it starts is still open.
func unstarted(g *group) bool {
	return (g.phase == phFresh || g.phase == phActive) && !g.hasCursor() && g.ack.Epoch == 0 && g.ack.Next == 0 &&
		!g.started && g.out == nil && !g.writing && g.uncertain == nil && !g.forced
}

// writeRepair queues the cursor a repair moved for the next commit; in
// ExactlyOnce mode, where the application writes the cursors past what it
// handles, the Core writes this one itself (and hands nothing of the
// group out until it is durable).
func (c *Core) writeRepair(g *group) {
	if c.cfg.Mode == ExactlyOnce {
		c.forceCommit(g)
		return
	}
	c.markDirty(g)
}

func (c *Core) addRepair(g *group, kind repairKind, t Ticket) {
	c.repairs = append(c.repairs, repairWait{g: g, kind: kind, t: t})
	c.budget.mem += repairCost
	g.repairing = true
}

// hasRepair reports whether a repair of kind waits on g.
func (c *Core) hasRepair(g *group, kind repairKind) bool {
	if !g.repairing {
		return false
	}
	for _, w := range c.repairs {
		if w.g == g && w.kind == kind {
			return true
		}
	}
	return false
}

// endRepairs resolves the repairs of kind waiting on g with err (nil: done).
func (c *Core) endRepairs(g *group, kind repairKind, err error) {
	if !g.repairing {
		return // the common case, on every hand-out (clearGap): no closure
	}
	c.takeRepairs(g, kind, func(t Ticket) { c.resolve(t, err) })
}

// repairsDurable makes the repairs of kind waiting on g wait for the
// durable cursor to reach target.
func (c *Core) repairsDurable(g *group, kind repairKind, target seqstore.Cursor) {
	if !g.repairing {
		return
	}
	c.takeRepairs(g, kind, func(t Ticket) {
		if behind(g.dur, target) {
			g.tickets = append(g.tickets, syncWait{target: target, t: t})
		} else {
			c.resolve(t, nil)
		}
	})
}

// takeRepairs takes the repairs of kind waiting on g out of c.repairs, and
// passes each ticket to fn.
func (c *Core) takeRepairs(g *group, kind repairKind, fn func(Ticket)) {
	if !g.repairing {
		return
	}
	keep := c.repairs[:0]
	left := false
	for _, w := range c.repairs {
		switch {
		case w.g != g:
			keep = append(keep, w)
		case w.kind == kind:
			c.budget.mem -= repairCost
			fn(w.t)
		default:
			keep = append(keep, w)
			left = true
		}
	}
	clear(c.repairs[len(keep):])
	c.repairs = keep
	g.repairing = left
}
