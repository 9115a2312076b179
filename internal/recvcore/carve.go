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
// letter, and a seq whose range would split past seqstore.MaxSkipped. A
// late arrival whose group is not active (a conflict being resolved, a
// store error) waits for it.
//
// A group is pinned (group.pinned: neither idle nor quiet, so never
// dropped) from the arrival of such a late message until the application
// settled it or it left. What it carves is in Core.carves, not in the
// group: few groups ever carve, and a group's memory counts (a million
// idle groups fit a modest heap).
//
// Two receivers on one stream by mistake are not told apart by a carve:
// the store's compare-and-set compares the cursor's position and owner,
// not its skipped ranges, so two carves of one seq both succeed (review16).
// With a lease (the shell's ReceiveOptions.Lease) one receiver holds a
// stream at a time.

// carveState is what a pinned group carves.
type carveState struct {
	carving []*msg // carved, waiting for the cursor that holds the carve to be durable
	wait    []*msg // to carve, waiting for the group to be active
	n       int    // late arrivals to carve, carving, or carved and not settled by the application
}

// carveOf returns g's carve state, made if g has none.
func (c *Core) carveOf(g *group) *carveState {
	if cs := c.carves[g]; cs != nil {
		return cs
	}
	if c.carves == nil {
		c.carves = make(map[*group]*carveState)
	}
	cs := &carveState{}
	c.carves[g] = cs
	g.pinned = true
	return cs
}

// pinCarve marks m, a late arrival of g just held, for a carve at its
// hand-out when a skipped range of g's durable cursor makes it late, and
// pins g until then: a group that went idle or was dropped meanwhile
// could not carve it.
func (c *Core) pinCarve(g *group, m *msg) {
	if c.cfg.Mode != AtMostOnce || c.cfg.DeadLetter || m.has(fStored) || m.epoch != g.epoch || g.dur.Epoch != m.epoch ||
		!skippedIn(g.dur, seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}) {
		return
	}
	m.flags |= fCarve
	c.carveOf(g).n++
}

// carvable returns the group whose skipped range holds m, a late arrival
// marked by pinCarve, if its first hand-out carves it out now. While the
// group is not active (its cursor read again after a conflict or a store
// error) m waits for it (carveState.wait, back in line as the group
// becomes active). Otherwise m is unpinned, and handed out as one not
// carved.
func (c *Core) carvable(m *msg) (g *group, wait bool) {
	g = c.groups[m.name]
	if g == nil || g.cold() {
		return nil, false // pinned: not reached
	}
	if g.phase != phActive {
		cs := c.carveOf(g)
		cs.wait = append(cs.wait, m)
		return nil, true
	}
	r := seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}
	if m.epoch == g.epoch && skippedIn(g.dur, r) && skippedIn(g.ack, r) {
		if _, ok := unskipped(g.ack, m.epoch, m.seq); ok {
			return g, false
		}
	}
	c.unpin(g, m)
	return nil, false
}

// carveAgain puts back in line the late arrivals that waited for g to be
// active.
func (c *Core) carveAgain(g *group) {
	cs := c.carveOf(g)
	for _, m := range cs.wait {
		c.ring.push(ringItem{m: m, gen: m.gen})
	}
	clear(cs.wait)
	cs.wait = cs.wait[:0]
}

// carve takes m's seq out of g's skipped ranges; m's hand-out waits for
// that cursor to be durable (carvedDurable).
func (c *Core) carve(g *group, m *msg) {
	g.ack.Skipped, _ = unskipped(g.ack, m.epoch, m.seq)
	m.awaitCommit(c.ticket())
	cs := c.carveOf(g)
	cs.carving = append(cs.carving, m)
	c.markDirty(g)
}

// carvedDurable ends the waits of g's carves that the durable cursor to,
// this Core's own write, holds: handed out, or (their Receive gave up)
// owed.
func (c *Core) carvedDurable(g *group, to seqstore.Cursor) {
	cs := c.carves[g]
	if cs == nil || len(cs.carving) == 0 {
		return
	}
	var done []*msg
	cs.carving = slices.DeleteFunc(cs.carving, func(m *msg) bool {
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

// recarve carves again what waits for its carve, after g's acknowledged
// cursor was replaced by, or found behind, cur: a cursor read from the
// store, or (ours) written by this Core. When cur does not skip the seq and
// this Core did not write it, someone else took it (a second receiver's
// carve or hand-out): the hand-out is refused (ErrConflict) and the copy
// released.
func (c *Core) recarve(g *group, cur seqstore.Cursor, ours bool) {
	cs := c.carves[g]
	if cs == nil || len(cs.carving) == 0 {
		return
	}
	var drop []*msg
	cs.carving = slices.DeleteFunc(cs.carving, func(m *msg) bool {
		r := seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}
		switch {
		case skippedIn(cur, r) && !skippedIn(g.ack, r):
			return false // still ours to carve, and carved in g.ack
		case skippedIn(cur, r):
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
		c.dropCarve(g, m, ErrConflict)
	}
}

// dropCarves ends the carves of g, which stops (a store error): their
// hand-outs are refused with err, and the messages go back to the queue
// (late again: the store's cursor still skips them).
func (c *Core) dropCarves(g *group, err error) {
	cs := c.carves[g]
	if cs == nil {
		return
	}
	carving := cs.carving
	cs.carving = nil
	for _, m := range carving {
		c.dropCarve(g, m, err)
	}
}

func (c *Core) dropCarve(g *group, m *msg, err error) {
	c.unpin(g, m)
	if m.out == outCommit {
		c.outstanding-- // the Receive waiting for it drops it
	}
	c.resolve(m.ticket, err)
	m.ticket = 0
	c.unord.forget(unorderedKey(m))
	c.release(m, c.now)
}

// unpin ends m's pin of g; g's last pin ends its carve state.
func (c *Core) unpin(g *group, m *msg) {
	m.flags &^= fCarve
	if cs := c.carves[g]; cs != nil {
		cs.n--
		if cs.n == 0 && len(cs.carving)+len(cs.wait) == 0 {
			delete(c.carves, g)
			g.pinned = false
		}
	}
	c.update(g, c.now)
}

// carveSeen records that the application settled m: its seq is handled
// for good.
func (c *Core) carveSeen(m *msg) {
	if !m.has(fCarve) {
		return
	}
	if g := c.groups[m.name]; g != nil {
		c.unpin(g, m)
	}
}

// uncarve lets go of m, pinned: m leaves before the application settled it.
// Once handed out (out), its seq is carved, or may be: it is skipped again,
// owed as skipOwed's (a conflict carries the mark over to the other
// receiver's cursor), so that the next receiver hands it out.
func (c *Core) uncarve(m *msg, out bool) {
	g := c.groups[m.name]
	if g == nil || g.cold() {
		m.flags &^= fCarve
		return // pinned: not reached
	}
	if cs := c.carves[g]; cs != nil {
		cs.carving = slices.DeleteFunc(cs.carving, func(x *msg) bool { return x == m })
		cs.wait = slices.DeleteFunc(cs.wait, func(x *msg) bool { return x == m })
	}
	r := seqstore.Range{Epoch: m.epoch, First: m.seq, Last: m.seq}
	if out && below(g.ack, m.epoch, m.seq) && !skippedIn(g.ack, r) {
		for _, d := range addSkipped(&g.ack, r) {
			c.report(Report{Kind: ReportWarn, Msg: "skipped range forgotten: the cursor holds 64; a late copy of these seqs will be taken for a duplicate",
				Group: g.name, Epoch: d.Epoch, Seq: d.First, Last: d.Last})
		}
		g.owed = append(g.owed, r)
		c.markDirty(g)
	}
	c.unpin(g, m)
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
