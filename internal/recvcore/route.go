package recvcore

import (
	"bytes"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/seqstore"
)

// Arrive routes messages the queue returned.
func (c *Core) Arrive(now time.Time, in []Incoming) {
	c.begin(now)
	defer c.end()
	released := c.st.Released
	if len(in) > 0 {
		c.pool.arrived = now
	}
	for i := range in {
		c.arrive(now, &in[i])
	}
	b := &c.budget
	if len(in) > 0 && c.st.Released-released == int64(len(in)) && c.ring.len() == 0 && c.outstanding == 0 {
		// Nothing of the batch could be kept and nothing is being
		// delivered: fetching runs ahead of delivery. Back off (up to
		// maxFetchPause) instead of making the queue invisible; the
		// message everything waits for comes with a later fetch.
		b.useless++
		b.fetchAfter = now.Add(min(c.backoff(b.useless), maxFetchPause))
	} else {
		b.useless = 0
	}
}

// FetchFailed reports that a receive of up to n messages failed. Its
// response may have been lost after the queue made the messages invisible:
// the cap counts n of them, as the queue would, until a visibility timeout
// passes.
func (c *Core) FetchFailed(now time.Time, n int) {
	c.begin(now)
	defer c.end()
	until := now.Add(c.cfg.Visibility)
	for range n {
		c.budget.addReleased(until, "", "")
	}
}

// maxFetchPause caps the pause after useless fetches: long enough to let a
// missing message come through another fetch, short enough not to delay a
// hole's filling much.
const maxFetchPause = 5 * time.Millisecond

func (c *Core) arrive(now time.Time, in *Incoming) {
	c.st.Received++
	m := c.pool.take()
	m.raw, m.id, m.receipt, m.dequeue = in.Body, in.ID, in.Receipt, int32(in.DequeueCount)
	if in.NextVisible.IsZero() {
		m.setVisibleAt(now.Add(c.cfg.Visibility))
	} else {
		m.setVisibleAt(in.NextVisible)
	}
	m.since = now.UnixNano()
	if e := c.budget.receivedAgain(m.id); e != nil {
		c.vis.unshorten(e)
	}
	c.budget.charge(m)
	c.budget.received()
	c.vis.list.push(m)
	c.watchHold(m)
	if c.closing {
		c.giveBack(now, m) // fetched as Close began: not routed
		return
	}
	h, group, payload, ok, why := c.decode(now, in.Body)
	if in.DequeueCount > 1 {
		m.flags |= fRedelivered
		c.st.Redelivered++
		c.report(Report{Kind: ReportRedeliver, Group: string(group), Epoch: h.Epoch, Seq: h.Seq, ID: m.id, DequeueCount: int(m.dequeue)})
	}
	if !ok {
		c.untagged(now, m, why)
		return
	}
	// The group's name is made once, with the group: a lookup by
	// string(group) allocates nothing.
	g := c.groups[string(group)]
	if g == nil {
		g = c.group(now, string(group))
	} else {
		g = c.group(now, g.name)
	}
	m.name, m.epoch, m.seq = g.name, h.Epoch, h.Seq
	m.setBody(in.Body, payload)
	c.routeTagged(now, g, m)
	c.update(g, now)
}

// decode parses a body's header, and checks its MAC (with Config.Keys) and
// that its epoch is not too far ahead: why says why a body that parses is
// untagged.
func (c *Core) decode(now time.Time, body []byte) (envelope.Header, []byte, []byte, bool, error) {
	h, group, payload, ok := envelope.ParseRaw(body, &c.gbuf)
	if !ok {
		return h, group, payload, false, nil
	}
	if len(c.cfg.Keys) > 0 {
		h.Group = string(group)
		if !envelope.Verify(h, payload, c.cfg.Keys...) {
			return h, group, payload, false, ErrBadMAC
		}
	}
	if !h.Legacy && epochAhead(h.Epoch, now, c.cfg.MaxEpochAhead) {
		return h, group, payload, false, ErrFutureEpoch
	}
	return h, group, payload, true, nil
}

// epochAhead reports whether epoch, whose high bits are the wall clock in
// milliseconds (seqstore.NewEpoch), lies more than ahead after now.
func epochAhead(epoch uint64, now time.Time, ahead time.Duration) bool {
	ms := int64(epoch >> 20)
	return ms > now.Add(ahead).UnixMilli()
}

// routeTagged applies the routing rules of DESIGN.md "Receiving" to one
// tagged arrival of g.
func (c *Core) routeTagged(now time.Time, g *group, m *msg) {
	m.g = g
	switch g.phase {
	case phLoading, phResolving:
		c.holdPending(now, g, m)
	case phFailed:
		c.release(m, now)
	case phFresh:
		c.arriveFresh(now, g, m)
	default:
		switch {
		case m.epoch < g.epoch:
			c.arriveOlder(now, g, m)
		case m.epoch > g.epoch:
			c.arriveNewer(now, g, m)
		default:
			c.arriveCurrent(now, g, m)
		}
	}
}

// sameCopy handles an arrival of a seq already held as h. The same queue
// message delivered again takes the new receipt. Another queue message
// with the same seq (a duplicate send): when h is parked, the copy is
// released (see below); when h was handed out, the copy is a
// duplicate, deleted once the cursor past the seq is durable; when h still
// waits for its turn, the copy is released: it comes back as a duplicate
// once h is handled, or as a late arrival if the seq is skipped. A payload
// that differs is reported.
func (c *Core) sameCopy(now time.Time, g *group, h, m *msg) {
	if h.id == m.id && !h.has(fStored) {
		c.swapReceipt(h, m)
		return
	}
	if h.raw != nil && !bytes.Equal(h.payload(), m.payload()) {
		c.st.Mismatches++
		c.report(Report{Kind: ReportMismatch, Msg: "two messages with the same seq and different payloads: the first is kept",
			Group: g.name, Epoch: m.epoch, Seq: m.seq, ID: m.id, Err: ErrPayloadMismatch})
	}
	switch {
	case h.has(fStored) && h.id == m.id:
		// The parked message itself, received again (its delete after
		// the park failed or was lost).
		m.flags |= fDup
		c.st.Duplicates++
		c.queueDelete(now, m)
	case h.has(fStored):
		// Another message with h's seq: a duplicate send, or the copy a
		// newer owner of the group sent back after it took h from the
		// park (a receiver whose lease ended without its knowing still
		// sees h parked). Released, not deleted: it comes back as a
		// duplicate once the cursor is past h, or to that newer owner.
		c.release(m, now)
	case h.where == wOut:
		c.dup(now, g, m)
	default:
		c.release(m, now)
	}
}

// swapReceipt keeps the newest receipt of a message received twice: the
// older one goes stale.
func (c *Core) swapReceipt(h, m *msg) {
	// Received again: its previous visibility ended, and so did its hold.
	// A change in flight was for the old receipt: the new one has none,
	// and that change's answer is no longer h's.
	if h.has(fVisBusy) {
		c.vis.orphan(h)
	}
	h.receipt, h.visible, h.since, h.dequeue = m.receipt, m.visible, m.since, max(h.dequeue, m.dequeue)
	c.watchHold(h)
	if h.has(fVisBusy) {
		h.flags &^= fVisBusy
		if h.has(fDelWait) {
			h.flags &^= fDelWait
			c.deletes.push(c.now, h)
		}
		if h.has(fBackWait) {
			h.flags &^= fBackWait
			defer c.giveBack(c.now, h)
		}
	}
	h.flags = h.flags&^(fLapsed|fLoose) | fRedelivered
	c.vis.list.remove(h)
	if h.where != wGone && h.where != wDelete {
		c.vis.list.push(h)
	}
	c.budget.recharge(h)
	c.countOnce(m)
}

// holdPending holds an arrival of a group whose cursor is being read.
func (c *Core) holdPending(now time.Time, g *group, m *msg) {
	for _, h := range g.pending {
		if h.epoch == m.epoch && h.seq == m.seq {
			c.sameCopy(now, g, h, m)
			return
		}
	}
	if len(g.pending) >= c.cfg.Window {
		if g.phase == phFresh {
			// StartLowest starts at the lowest seq seen: keep the lowest.
			m = c.swapHighest(g, m)
		}
		c.release(m, now)
		return
	}
	g.pending = append(g.pending, m)
	c.hold(m)
}

// swapHighest puts m in g.pending instead of the highest message there
// when m is lower, and returns the one left out.
func (c *Core) swapHighest(g *group, m *msg) *msg {
	hi := 0
	for i, h := range g.pending {
		if h.epoch > g.pending[hi].epoch || h.epoch == g.pending[hi].epoch && h.seq > g.pending[hi].seq {
			hi = i
		}
	}
	h := g.pending[hi]
	if m.epoch > h.epoch || m.epoch == h.epoch && m.seq >= h.seq {
		return m
	}
	c.budget.unbuffer(h)
	g.pending[hi] = m
	c.hold(m)
	return h
}

// arriveFresh handles an arrival for a group without a stored cursor.
func (c *Core) arriveFresh(now time.Time, g *group, m *msg) {
	if c.cfg.Start == StartFirst {
		c.becomeActive(g, now)
		g.epoch, g.next = m.epoch, 1
		c.arriveCurrent(now, g, m)
		return
	}
	if g.startAt.IsZero() {
		g.startAt = now.Add(c.cfg.StartSettle)
		c.addTimer(timer{at: g.startAt, kind: tStart, name: g.name})
	}
	c.holdPending(now, g, m)
}

// endSettle ends the StartLowest settle time: the group starts at the
// lowest seq seen of the lowest epoch seen, unless that seq is a lone stale
// copy (see lowestStart). Seqs below the start in its epoch are passed
// over: recorded as skipped and reported (ReportSkip), so that one that
// arrives later is a late arrival, reported and handed out Unordered (or
// dead-lettered), never deleted as a duplicate.
func (c *Core) endSettle(g *group, now time.Time) {
	if g.phase != phFresh || g.startAt.IsZero() || now.Before(g.startAt) {
		return
	}
	g.startAt = time.Time{}
	epoch, first := lowestStart(g.pending, uint64(c.cfg.Window))
	if first == 0 {
		return // nothing held: wait for the next arrival
	}
	if loneRedelivered(g.pending) && g.settleRounds < maxSettleRounds {
		// All it saw is one copy received before: a stale copy left in
		// the queue, or the stream's only message? Settle longer: a
		// second arrival tells.
		g.settleRounds++
		g.startAt = now.Add(c.cfg.StartSettle)
		c.addTimer(timer{at: g.startAt, kind: tStart, name: g.name})
		return
	}
	c.becomeActive(g, now)
	g.epoch, g.next = epoch, first
	g.ack.Epoch, g.ack.Next = epoch, first
	if first > 1 {
		c.skipped(g, seqstore.Range{Epoch: epoch, First: 1, Last: first - 1}, 0, "start: passed over")
	}
	c.markDirty(g)
	c.routePending(now, g)
}

// maxSettleRounds bounds how many times StartLowest settles again while
// all it saw is one copy received before.
const maxSettleRounds = 10

// loneRedelivered reports whether ms is one seq, received before (a
// possible stale copy).
func loneRedelivered(ms []*msg) bool {
	for _, m := range ms {
		if m.epoch != ms[0].epoch || m.seq != ms[0].seq || m.dequeue <= 1 {
			return false
		}
	}
	return len(ms) > 0
}

// lowestStart returns where a group without a cursor starts among the
// arrivals ms: the lowest seq of the lowest epoch, unless that seq is a
// lone stale copy, when it starts at the next one seen. A stale copy is an
// old duplicate left in the queue (its delete failed, or its receiver's
// store was lost): it was received before (its dequeue count is above 1)
// and lies more than window below the next seq seen. A message never
// received before is never passed over, however sparse the first arrivals
// of a shuffled backlog are.
func lowestStart(ms []*msg, window uint64) (epoch, first uint64) {
	for _, m := range ms {
		if epoch == 0 || m.epoch < epoch {
			epoch = m.epoch
		}
	}
	var low *msg
	var second uint64
	for _, m := range ms {
		switch {
		case m.epoch != epoch || low != nil && m.seq == low.seq:
		case low == nil || m.seq < low.seq:
			if low != nil {
				second = low.seq
			}
			low = m
		case second == 0 || m.seq < second:
			second = m.seq
		}
	}
	if low == nil {
		return 0, 0
	}
	if second != 0 && second-low.seq > window && low.dequeue > 1 {
		return epoch, second
	}
	return epoch, low.seq
}

// arriveOlder handles an arrival of an epoch older than the group's.
func (c *Core) arriveOlder(now time.Time, g *group, m *msg) {
	if !g.started && g.dur.Next == 0 && g.out == nil && g.ack.Next == 0 {
		// A fresh group adopted the epoch of its first arrival, and an
		// older one shows up before anything was handed out or written
		// (shed pins a group's start before it drops it): start with the
		// older epoch; the newer one follows it.
		c.demote(now, g, m.epoch)
		c.arriveCurrent(now, g, m)
		return
	}
	// A switch to a newer epoch records Range{old, next, MaxSeq}: seqs of
	// the old epoch below next were handled (duplicates), the others are
	// late. Without such a record nothing says the seq was handled: late.
	for _, r := range g.ack.Skipped {
		if r.Contains(m.epoch, m.seq) {
			c.late(now, g, m)
			return
		}
		if r.Epoch == m.epoch && r.Last == seqstore.MaxSeq && m.seq < r.First {
			c.dup(now, g, m)
			return
		}
	}
	c.late(now, g, m)
}

// demote makes a fresh group start with an older epoch: what it holds of
// its current epoch waits as a newer epoch.
func (c *Core) demote(now time.Time, g *group, epoch uint64) {
	if len(g.held) > 0 && (g.newerEpoch == 0 || g.epoch < g.newerEpoch) {
		g.newerEpoch = g.epoch
	}
	g.newer = append(g.newer, g.held...)
	clear(g.held)
	g.held = g.held[:0]
	if len(g.newer) > 0 && g.newerSince.IsZero() {
		g.newerSince = now
		c.addTimer(timer{at: now.Add(c.cfg.GapTimeout), kind: tEpoch, name: g.name})
	}
	g.epoch, g.next = epoch, 1
	g.ack.Epoch, g.ack.Next = 0, 0
	g.farLow, g.farHigh, g.gapSince, g.gapTold = 0, 0, time.Time{}, false
	g.forgetPark()
}

// arriveNewer holds an arrival of a newer epoch until the group switches.
func (c *Core) arriveNewer(now time.Time, g *group, m *msg) {
	for _, h := range g.newer {
		if h.epoch == m.epoch && h.seq == m.seq {
			c.sameCopy(now, g, h, m)
			return
		}
	}
	// Known from now on, even if the message is released: the group
	// switches once its epoch is done.
	if g.newerEpoch == 0 || m.epoch < g.newerEpoch {
		g.newerEpoch = m.epoch
	}
	if g.newerSince.IsZero() {
		g.newerSince = now
		c.addTimer(timer{at: now.Add(c.cfg.GapTimeout), kind: tEpoch, name: g.name})
	}
	if len(g.newer) >= c.cfg.Window {
		c.release(m, now)
		return
	}
	g.newer = append(g.newer, m)
	c.hold(m)
}

// arriveCurrent handles an arrival of the group's current epoch.
func (c *Core) arriveCurrent(now time.Time, g *group, m *msg) {
	for _, r := range g.ack.Skipped {
		if r.Contains(m.epoch, m.seq) {
			c.late(now, g, m)
			return
		}
	}
	if m.seq < g.next {
		if o := g.out; o != nil && o.epoch == m.epoch && o.seq == m.seq {
			c.sameCopy(now, g, o, m)
			return
		}
		if g.pinned {
			key := seenKey{group: g.name, epoch: m.epoch, seq: m.seq}
			if h := c.unord.held[key]; h != nil && h.has(fCarve) {
				// A copy of a late arrival this Core carved and the
				// application has not settled: not a duplicate yet (the
				// same queue message keeps its newest receipt).
				m.g = nil
				c.unorderedArrival(now, m, key, false)
				return
			}
		}
		if plantNoDedup && g.out == nil {
			g.next = m.seq // planted: the copy is handed out again
		} else {
			c.dup(now, g, m)
			return
		}
	}
	i, found := g.heldIndex(m.seq)
	if found {
		c.sameCopy(now, g, g.held[i], m)
		return
	}
	if m.seq-g.next >= uint64(c.cfg.Window) || c.cfg.ParkEarly && m.seq > g.next && c.parkable(g, m) {
		c.tooFar(now, g, m)
		return
	}
	g.held = insertAt(g.held, i, m)
	c.hold(m)
}

// tooFar handles an arrival beyond the group's window: parked when the
// store can, else released (it comes back later).
func (c *Core) tooFar(now time.Time, g *group, m *msg) {
	if c.parkable(g, m) {
		if c.parkFits(g, m) {
			c.toPark(g, m)
			return
		}
		c.parkFull(g, m)
	}
	g.noteFar(m.seq, now)
	c.release(m, now)
}

// dup handles a copy of a message already handed out: it is deleted once
// the cursor past it is durable, and never delivered again.
func (c *Core) dup(now time.Time, g *group, m *msg) {
	m.flags |= fDup
	c.st.Duplicates++
	c.report(Report{Kind: ReportDuplicate, Group: g.name, Epoch: m.epoch, Seq: m.seq, ID: m.id, DequeueCount: int(m.dequeue)})
	m.raw = nil
	c.budget.recharge(m)
	if below(g.dur, m.epoch, m.seq) && g.uncertain == nil {
		c.queueDelete(now, m)
		return
	}
	c.settleMsg(g, m)
	c.markDirty(g)
}

// late handles a late arrival (an older epoch, or a seq the group skipped):
// reported, then dead-lettered if a dead-letter queue is configured, else
// handed out flagged Unordered. Never deleted unseen.
//
// The verdict must be durable first: while the newer epoch or the skipped
// range that makes m late is only in memory, a restart may begin the
// group where m is not late at all (an epoch adopted from the first
// arrival, a start chosen after StartSettle), and m, consumed as late,
// would be a hole there that nothing fills. Until the commit that records
// it is durable, m is released: it comes back, and is late then.
func (c *Core) late(now time.Time, g *group, m *msg) {
	if !durablyLate(g, m) {
		c.markDirty(g)
		c.release(m, now)
		return
	}
	c.st.Late++
	m.flags |= fLate
	c.report(Report{Kind: ReportLate, Msg: "late arrival", Group: g.name, Epoch: m.epoch, Seq: m.seq, ID: m.id, DequeueCount: int(m.dequeue)})
	m.g = nil
	key := seenKey{group: g.name, epoch: m.epoch, seq: m.seq}
	if c.cfg.DeadLetter {
		c.unorderedArrival(now, m, key, true)
		return
	}
	if c.unorderedArrival(now, m, key, false) {
		c.pinCarve(g, m)
	}
}

// durablyLate reports whether the durable cursor of g says that m is late:
// its epoch is older than the cursor's, or a skipped range holds it.
func durablyLate(g *group, m *msg) bool {
	if g.dur.Epoch > m.epoch {
		return true
	}
	for _, r := range g.dur.Skipped {
		if r.Contains(m.epoch, m.seq) {
			return true
		}
	}
	return false
}

// untagged applies the untagged policy to a body without a valid header.
func (c *Core) untagged(now time.Time, m *msg, why error) {
	c.st.Untagged++
	if why == nil {
		why = ErrUntagged
	}
	m.flags |= fUntagged
	key := seenKey{id: m.id}
	if !c.unord.settled(key) {
		c.report(Report{Kind: ReportUntagged, Msg: "untagged body", ID: m.id, DequeueCount: int(m.dequeue), Err: why})
	}
	switch c.cfg.Untagged {
	case UntaggedDeliver:
		c.unorderedArrival(now, m, key, false)
	case UntaggedDeadLetter:
		c.unorderedArrival(now, m, key, true)
	case UntaggedReject:
		// Left in the queue: it comes back after its visibility timeout.
		c.unord.remember(c, key)
		c.release(m, now)
	}
}

// unorderedArrival holds an Unordered message (untagged, or late) for
// hand-out or dead-lettering, once per key in this Core's life: a copy of
// one already settled is deleted, a copy of one held or out is a duplicate
// of it (its receipt replaces the held one when it is the same queue
// message; another message is released and deleted when it comes back
// after the first is settled).
func (c *Core) unorderedArrival(now time.Time, m *msg, key seenKey, dead bool) (held bool) {
	if c.unord.settled(key) {
		c.st.Duplicates++
		c.report(Report{Kind: ReportDuplicate, Msg: "copy of a settled unordered message", Group: key.group, Epoch: m.epoch, Seq: m.seq, ID: m.id})
		c.queueDelete(now, m)
		return false
	}
	if h, ok := c.unord.held[key]; ok {
		if h.id == m.id && h.where != wGone {
			c.swapReceipt(h, m)
		} else {
			c.release(m, now)
		}
		return false
	}
	c.unord.held[key] = m
	if dead {
		c.queueDead(m)
		return false
	}
	c.hold(m)
	m.clearOut()
	c.ring.push(ringItem{m: m, gen: m.gen})
	return true
}
