package recvcore

import (
	"slices"

	"github.com/inorder/inorder/seqstore"
)

// Under AtMostOnce, a late arrival of a seq that a skipped range holds is
// handed out flagged Unordered. The range is what makes a copy of it late:
// left as it is, a later copy (a duplicate send, a copy sent back) would be
// late again at a later receiver, whose set of settled Unordered copies
// starts empty, and be handed out a second time. So its hand-out carves the
// seq out of the range and waits until that cursor is durable, as an
// ordered hand-out waits for its advance: a copy that comes after is below
// the cursor and not skipped, a duplicate, deleted; the Ack deletes the
// message. A carved message that leaves before the application settled it
// (given back at Close, released, sent back) has its seq skipped again,
// owed as skipOwed's are, so that the next receiver hands it out. A crash
// while the carve is durable and the message not handed out loses it, as
// an ordered hand-out's committed advance does.
//
// What is not carved is handed out once per receiver's life, as before: a
// message of an older epoch (late by its epoch, not by a range), a dead
// letter, and a seq whose range would split past seqstore.MaxSkipped, or
// whose group is not active at its hand-out.
//
// A group with carved messages the application has not settled
// (group.carves) is pinned: neither idle nor quiet, so never dropped.

// carvable returns the group whose skipped range holds m, a late arrival,
// if m's hand-out carves it out.
func (c *Core) carvable(m *msg) *group {
	if !m.has(fLate) || c.cfg.DeadLetter {
		return nil
	}
	g := c.groups[m.name]
	if g == nil || g.cold() || g.phase != phActive || g.uncertain != nil || m.epoch != g.epoch || g.dur.Epoch != m.epoch {
		return nil
	}
	r := seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}
	if !skippedIn(g.dur, r) || !skippedIn(g.ack, r) {
		return nil
	}
	if _, ok := unskipped(g.ack, m.epoch, m.seq); !ok {
		return nil
	}
	return g
}

// carve takes m's seq out of g's skipped ranges; m's hand-out waits for
// that cursor to be durable (carvedDurable).
func (c *Core) carve(g *group, m *msg) {
	g.ack.Skipped, _ = unskipped(g.ack, m.epoch, m.seq)
	m.flags |= fCarve
	m.awaitCommit(c.ticket())
	g.carving = append(g.carving, m)
	g.carves++
	c.markDirty(g)
	c.update(g, c.now) // pinned
}

// carvedDurable ends the waits of g's carves that the durable cursor to,
// this Core's own write, holds: handed out, or (their Receive gave up)
// owed.
func (c *Core) carvedDurable(g *group, to seqstore.Cursor) {
	if len(g.carving) == 0 {
		return
	}
	var done []*msg
	g.carving = slices.DeleteFunc(g.carving, func(m *msg) bool {
		if skippedIn(to, seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}) {
			return false
		}
		done = append(done, m)
		return true
	})
	for _, m := range done {
		if m.out == outAbandoned {
			m.ticket = 0
			c.owedUnordered(m)
			continue
		}
		c.resolve(m.ticket, nil)
		m.ticket = 0
		m.handed()
	}
}

// recarve carves again, after g's acknowledged cursor was replaced by one
// read from the store or written by this Core (ours), what waits for its
// carve. When a cursor this Core did not write no longer skips the seq,
// someone else took it: the hand-out is refused (ErrConflict) and the copy
// released (it comes back a duplicate).
func (c *Core) recarve(g *group, ours bool) {
	if len(g.carving) == 0 {
		return
	}
	var drop []*msg
	g.carving = slices.DeleteFunc(g.carving, func(m *msg) bool {
		r := seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}
		switch {
		case skippedIn(g.ack, r):
			if s, ok := unskipped(g.ack, m.epoch, m.seq); ok {
				g.ack.Skipped = s
				c.markDirty(g)
				return false
			}
		case ours:
			return false
		}
		drop = append(drop, m)
		return true
	})
	for _, m := range drop {
		m.flags &^= fCarve
		g.carves--
		if m.out == outCommit {
			c.outstanding-- // the Receive waiting for it drops it
		}
		c.resolve(m.ticket, ErrConflict)
		m.ticket = 0
		c.unord.forget(unorderedKey(m))
		c.release(m, c.now)
	}
	if len(drop) > 0 {
		c.update(g, c.now)
	}
}

// carveSeen records that the application settled m: its seq is handled
// for good.
func (c *Core) carveSeen(m *msg) {
	if !m.has(fCarve) {
		return
	}
	m.flags &^= fCarve
	if g := c.groups[m.name]; g != nil && !g.cold() {
		g.carves--
		c.update(g, c.now)
	}
}

// uncarve skips m's seq again: m, carved, leaves without the application
// having settled it. The mark is owed, as skipOwed's: a conflict carries it
// over to the other receiver's cursor.
func (c *Core) uncarve(m *msg) {
	m.flags &^= fCarve
	g := c.groups[m.name]
	if g == nil || g.cold() {
		return // pinned while it carves: not reached
	}
	g.carves--
	g.carving = slices.DeleteFunc(g.carving, func(x *msg) bool { return x == m })
	r := seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}
	if !below(g.ack, m.epoch, m.seq) || skippedIn(g.ack, r) {
		c.update(g, c.now)
		return
	}
	for _, d := range addSkipped(&g.ack, r) {
		c.report(Report{Kind: ReportWarn, Msg: "skipped range forgotten: the cursor holds 64; a late copy of these seqs will be taken for a duplicate",
			Group: g.name, Epoch: d.Epoch, Seq: d.First, Last: d.Last})
	}
	g.owed = append(g.owed, r)
	c.markDirty(g)
	c.update(g, c.now)
}

// unskipped returns the skipped ranges of cur without seq of epoch, and
// false when no range holds it or taking it out would leave more than
// seqstore.MaxSkipped ranges. cur is not changed.
func unskipped(cur seqstore.Cursor, epoch, seq uint64) ([]seqstore.Range, bool) {
	for i, r := range cur.Skipped {
		if !r.Contains(epoch, seq) {
			continue
		}
		var parts []seqstore.Range
		if r.First < seq {
			parts = append(parts, seqstore.Range{Epoch: epoch, First: r.First, Last: seq - 1})
		}
		if seq < r.Last {
			parts = append(parts, seqstore.Range{Epoch: epoch, First: seq + 1, Last: r.Last})
		}
		if len(cur.Skipped)-1+len(parts) > seqstore.MaxSkipped {
			return nil, false
		}
		s := slices.Replace(slices.Clone(cur.Skipped), i, i+1, parts...)
		if len(s) == 0 {
			s = nil
		}
		return s, true
	}
	return nil, false
}
