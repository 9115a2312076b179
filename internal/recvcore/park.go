package recvcore

import (
	"errors"
	"math"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/seqstore"
)

// Parking: early arrivals beyond a group's window (or the cap) are parked
// in the store and deleted from the queue (parkLane), read back in order
// when their turn comes (unparkLane), and found again after a restart by
// listing the park's streams (scanLane).

// parkLane writes parked bodies, one store write at a time.
type parkLane struct {
	lane
	q    []*msg
	busy map[uint64][]*msg
}

func (l *parkLane) init() {
	l.lane = lane{what: "park", limit: 1}
	l.busy = make(map[uint64][]*msg)
}

// pending reports whether a park is queued: without one, ready does
// nothing and due is zero.
func (l *parkLane) pending() bool { return len(l.q) > 0 }

func (l *parkLane) due(c *Core) time.Time {
	if !l.idle() {
		return time.Time{}
	}
	for _, m := range l.q { // the first one, unless its group is being pinned
		if m.stored() {
			return l.after
		}
	}
	return time.Time{}
}

func (l *parkLane) flushed(c *Core) bool { return l.idle() && len(l.q) == 0 }

// canPark reports whether m, held for g, may be parked: the store can,
// m is of g's current epoch, beyond its next seq, and its body fits a park
// entry (a larger one would be refused on every retry). In ExactlyOnce, g
// must have a stored cursor (see toPark): the Core pins one only with
// ParkEarly and nothing out (see pin), or it would refuse the
// application's own advance of what is out.
func (c *Core) canPark(g *group, m *msg) bool {
	return c.parkable(g, m) && c.parkFits(g, m)
}

// parkable is canPark without the park limits (see parkFits).
func (c *Core) parkable(g *group, m *msg) bool {
	return c.cfg.Park && g != nil && g.phase == phActive && m.epoch == g.epoch && m.seq > g.next &&
		!m.has(fStored|fNoPark) && !c.closing && len(m.raw) <= seqstore.MaxParkBody &&
		(g.hasCursor() || c.cfg.Mode != ExactlyOnce || c.cfg.ParkEarly && g.out == nil)
}

// stored reports whether m's group has a stored cursor. A park waits for
// it: without one, a restart would not know the group's epoch, and a newer
// epoch's first advance would drop what is parked (toPark pins it).
func (m *msg) stored() bool { return m.g.hasCursor() }

// hasCursor reports whether g has a stored cursor: any but the zero
// Cursor (a legacy #seq# stream's is of epoch 0).
func (g *group) hasCursor() bool { return g.dur.Epoch != 0 || g.dur.Next != 0 }

func (l *parkLane) ready(c *Core, now time.Time, rd *Ready) {
	if !l.open(now) || len(l.q) == 0 {
		return
	}
	// Two copies of one seq (a redelivery, a duplicate send) never go in
	// one call, which a store refuses whole: the second waits for the
	// next call, where it replaces the first's body.
	type seqKey struct {
		g          *group
		epoch, seq uint64
	}
	var ms []*msg
	seen := make(map[seqKey]struct{}, min(len(l.q), c.cfg.MaxParks))
	rest := l.q[:0]
	for _, m := range l.q {
		k := seqKey{m.g, m.epoch, m.seq}
		if _, dup := seen[k]; dup || len(ms) == c.cfg.MaxParks || !m.stored() {
			rest = append(rest, m)
			continue
		}
		seen[k] = struct{}{}
		ms = append(ms, m)
	}
	clear(l.q[len(rest):])
	l.q = rest
	if len(ms) == 0 {
		return // every group's cursor is being pinned
	}
	entries := make([]seqstore.Parked, len(ms))
	for i, m := range ms {
		entries[i] = seqstore.Parked{Stream: c.stream(m.g.name), Epoch: m.epoch, Seq: m.seq, Body: m.raw}
	}
	id := c.id()
	l.busy[id] = ms
	l.inFlight++
	rd.Parks = append(rd.Parks, Park{ID: id, Entries: entries})
}

// Parked reports the outcome of the Park action id. A park refused with
// seqstore.ErrConflict means its seq is below the stored cursor: handled.
func (c *Core) Parked(now time.Time, id uint64, err error) {
	c.begin(now)
	defer c.end()
	l := &c.parks
	ms, ok := l.busy[id]
	if !ok {
		return
	}
	delete(l.busy, id)
	l.inFlight--
	failed := false
	gs := make([]*group, len(ms))
	for i, m := range ms {
		gs[i] = m.g // m may be recycled below
		if c.parkedOne(now, m, seqstore.Failed(err, i, len(ms)), err) {
			failed = true
		}
	}
	if failed {
		c.failed(&l.lane, err)
	} else {
		l.succeeded()
	}
	for _, g := range gs {
		c.update(g, now)
	}
}

// parkedOne applies the outcome e of m's park (err is the call's), and
// reports whether it was a transient failure.
func (c *Core) parkedOne(now time.Time, m *msg, e, err error) bool {
	g := m.g
	conflict := e != nil && !errors.Is(e, seqstore.ErrAborted) && errors.Is(e, seqstore.ErrConflict)
	if e == nil || conflict {
		g.park.parking-- // no longer on its way
	}
	switch {
	case e == nil:
		c.st.Parked++
		if g.phase != phEvicted && m.epoch == g.epoch {
			g.knowParked(m.seq)
			g.park.gen++
		}
		c.queueDelete(now, m)
	case conflict:
		// Below the stored cursor: a duplicate or a late arrival if this
		// Core's cursor says so too; else someone else moved the cursor.
		c.uncountPark(m)
		m.requeueHeld()
		if g.phase == phActive && m.epoch == g.epoch && m.seq < g.next {
			c.arriveCurrent(now, g, m)
		} else {
			c.release(m, now)
			c.conflicted(g, e)
		}
	case errors.Is(e, seqstore.ErrAborted):
		c.parks.q = append(c.parks.q, m)
	case e != err && permanent(e):
		// The store refuses this entry for good: it goes back to the
		// queue and is held, not parked, when it comes back.
		g.park.parking--
		c.uncountPark(m)
		m.flags |= fNoPark
		m.requeueHeld()
		c.report(Report{Kind: ReportWarn, Msg: "park refused: held in memory instead", Group: g.name, Epoch: m.epoch, Seq: m.seq, Err: e})
		c.release(m, now)
	default:
		c.parks.q = append(c.parks.q, m)
		return true
	}
	return false
}

// lowestParking returns the lowest seq of g on its way to the park (queued
// or in flight, not yet durable), 0 if none: a hole is never skipped over
// it, and the park is not read for it before it is durable.
func (c *Core) lowestParking(g *group) uint64 {
	if g.park.parking == 0 {
		return 0
	}
	low := uint64(0)
	see := func(m *msg) {
		if m.g == g && m.epoch == g.epoch && (low == 0 || m.seq < low) {
			low = m.seq
		}
	}
	for _, m := range c.parks.q {
		see(m)
	}
	for _, ms := range c.parks.busy {
		for _, m := range ms {
			see(m)
		}
	}
	return low
}

// scanLane lists the streams that have parked entries
// (seqstore.Parker.ParkedStreams), once when the Core starts (a receiver
// that crashed after parking leaves messages no longer in the queue), and
// again after groups with parked messages were shed: such a group may have
// nothing left in the queue to load it again. The groups listed are loaded
// as memory allows (names); the next listing waits until they all were,
// and then a backoff that doubles while shedding goes on (never a fixed
// loop: an idle receiver over its budget does not read every shed group
// again and again).
type scanLane struct {
	lane
	done   bool     // the park's streams were listed
	busy   uint64   // the scan in flight
	names  []string // groups listed and not loaded yet
	rescan bool     // groups with parked messages were shed since the last listing
	delay  time.Duration
}

// Backoff of the rescans.
const (
	rescanInterval = time.Second
	maxRescan      = 5 * time.Minute
)

func (l *scanLane) init() { l.lane, l.delay = lane{limit: 1}, rescanInterval }

// again asks for another scan, not before at.
func (l *scanLane) again(at time.Time) {
	l.done = false
	l.after = at
}

// loadScanned loads the groups listed by the last scan while memory is
// under three quarters of the budget, and asks for the next scan when they
// all were and groups with parks were shed meanwhile.
func (c *Core) loadScanned(now time.Time) {
	l := &c.scans
	for len(l.names) > 0 && c.budget.mem < c.cfg.MaxMemory*3/4 {
		name := l.names[0]
		l.names = l.names[1:]
		if c.groups[name] == nil {
			c.update(c.group(now, name), now)
		}
	}
	if len(l.names) == 0 && l.rescan && l.done && !c.closing {
		l.rescan = false
		l.again(now.Add(l.delay))
		l.delay = min(2*l.delay, maxRescan)
	}
}

// pending reports whether a scan is wanted: once one was listed, ready
// does nothing and due is zero.
func (l *scanLane) pending() bool { return !l.done }

func (l *scanLane) due(c *Core) time.Time {
	if c.cfg.Park && !l.done && l.idle() && !c.closing {
		return l.after
	}
	return time.Time{}
}

func (l *scanLane) flushed(c *Core) bool { return true }

func (l *scanLane) ready(c *Core, now time.Time, rd *Ready) {
	if !c.cfg.Park || l.done || !l.open(now) || c.closing {
		return
	}
	l.busy = c.id()
	l.inFlight++
	rd.Scans = append(rd.Scans, Scan{ID: l.busy})
}

// Scanned reports the outcome of the Scan action id: the groups with parked
// entries. Each is loaded, and reads its park once its cursor is known.
func (c *Core) Scanned(now time.Time, id uint64, groups []string, err error) {
	c.begin(now)
	defer c.end()
	l := &c.scans
	if id != l.busy || l.busy == 0 {
		return
	}
	l.busy = 0
	l.inFlight--
	if err != nil {
		l.fails++
		l.after = now.Add(c.backoff(l.fails))
		c.report(Report{Kind: ReportWarn, Msg: "list parked streams failed", Attempt: l.fails, Err: err})
		return
	}
	l.done = true
	l.names = groups
	if len(groups) == 0 {
		l.delay = rescanInterval
	}
	c.loadScanned(now)
}

// checkPark asks the park for g's next messages when g's next seq is not in
// memory: when g parked it, or when g never looked since its cursor was
// read (a parking receiver may have crashed after deleting it from the
// queue).
func (c *Core) checkPark(g *group) {
	if !c.cfg.Park {
		g.probed = true
		return
	}
	if g.unparking || g.out != nil || g.phase != phActive || c.closing {
		return
	}
	if len(g.held) > 0 && g.held[0].seq == g.next {
		return
	}
	if g.park.low != g.next && g.probed {
		return
	}
	g.unparking = true
	c.unparks.q.push(g)
}

// unparkLane reads parked entries back, one query per group, one call at a
// time.
type unparkLane struct {
	lane
	q    fifo[*group]
	busy map[uint64][]*group
}

func (l *unparkLane) init() {
	l.lane = lane{what: "read parked messages", limit: 1}
	l.busy = make(map[uint64][]*group)
}

// pending reports whether a group is queued: without one, ready does
// nothing and due is zero.
func (l *unparkLane) pending() bool { return l.q.len() > 0 }

func (l *unparkLane) due(c *Core) time.Time {
	if l.q.len() > 0 && l.idle() {
		return l.after
	}
	return time.Time{}
}

func (l *unparkLane) flushed(c *Core) bool { return true }

func (l *unparkLane) ready(c *Core, now time.Time, rd *Ready) {
	if !l.open(now) || l.q.len() == 0 {
		return
	}
	var gs []*group
	var qs []seqstore.ParkQuery
	for l.q.len() > 0 && len(gs) < maxUnparkQueries {
		g, _ := l.q.pop()
		if g.phase != phActive {
			g.unparking = false
			continue
		}
		g.park.unparkGen = g.park.gen
		gs = append(gs, g)
		qs = append(qs, seqstore.ParkQuery{Stream: c.stream(g.name), Epoch: g.epoch, From: g.next, Max: min(maxUnparkEntries, c.cfg.Window)})
	}
	if len(gs) == 0 {
		return
	}
	id := c.id()
	l.busy[id] = gs
	l.inFlight++
	rd.Unparks = append(rd.Unparks, Unpark{ID: id, Queries: qs})
}

// Unparked reports the outcome of the Unpark action id: for each query, the
// entries read.
func (c *Core) Unparked(now time.Time, id uint64, res [][]seqstore.Parked, err error) {
	c.begin(now)
	defer c.end()
	l := &c.unparks
	gs, ok := l.busy[id]
	if !ok {
		return
	}
	delete(l.busy, id)
	l.inFlight--
	failed := false
	for i, g := range gs {
		g.unparking = false
		if g.phase == phEvicted {
			continue
		}
		if e := seqstore.Failed(err, i, len(gs)); e != nil || i >= len(res) {
			failed = true
			g.unparking = true // look again after a backoff
			l.q.push(g)
			continue
		}
		c.unparkedGroup(now, g, res[i])
	}
	if failed {
		c.failed(&l.lane, err)
	} else {
		l.succeeded()
	}
}

func (c *Core) unparkedGroup(now time.Time, g *group, entries []seqstore.Parked) {
	if g.phase != phActive {
		return
	}
	// What the read leaves in the park: from the first entry not loaded
	// on; with a full answer, maybe more beyond the last.
	var low, high uint64
	if len(entries) >= min(maxUnparkEntries, c.cfg.Window) {
		low, high = entries[len(entries)-1].Seq+1, math.MaxUint64
	}
	for _, e := range entries {
		if e.Epoch != g.epoch || e.Seq < g.next {
			continue
		}
		// Over the memory budget, only the seq the group waits for is
		// taken: it leaves again as it is handed out, and without it the
		// group would read its park again and again.
		if e.Seq-g.next >= uint64(c.cfg.Window) || c.budget.mem >= c.cfg.MaxMemory && e.Seq != g.next {
			low, high = e.Seq, math.MaxUint64
			break
		}
		c.unparkedEntry(now, g, e)
	}
	g.park.probedAt = now
	if g.park.gen == g.park.unparkGen {
		g.park.low, g.park.high = low, high
		g.probed = true
	} else {
		// Parks became durable while the read was in flight: keep what
		// they taught, and read again when next is missing.
		if low != 0 {
			g.knowParked(low)
			g.park.high = max(g.park.high, high)
		}
		g.probed = false
	}
	c.update(g, now)
}

// parkedInvalid handles a parked body that does not decode, or does not
// verify under Config.Keys, as an untagged body: reported, then by the
// untagged policy handed out flagged Unordered, dead-lettered, or (reject)
// left in the park, never handed out as the group's seq.
func (c *Core) parkedInvalid(now time.Time, g *group, e seqstore.Parked, why error) {
	c.st.Untagged++
	c.report(Report{Kind: ReportUntagged, Msg: "parked body refused", Group: g.name, Epoch: e.Epoch, Seq: e.Seq, Err: why})
	if c.cfg.Untagged == UntaggedReject {
		return
	}
	m := &msg{name: g.name, epoch: e.Epoch, seq: e.Seq, raw: e.Body, flags: fStored | fLate}
	c.budget.charge(m)
	c.unorderedArrival(now, m, unorderedKey(m), c.cfg.Untagged == UntaggedDeadLetter)
}

// unparkedEntry holds a parked entry read back for g.
func (c *Core) unparkedEntry(now time.Time, g *group, e seqstore.Parked) {
	c.st.Unparked++
	h, payload, ok := envelope.Parse(e.Body)
	var why error
	switch {
	case !ok || h.Seq != e.Seq || h.Epoch != e.Epoch || h.Group != g.name:
		why = errors.New("parked body does not decode as what was parked")
	case len(c.cfg.Keys) > 0 && !envelope.Verify(h, payload, c.cfg.Keys...):
		why = ErrBadMAC // swapped in the store: it is checked as an arrival is
	}
	if why != nil {
		c.parkedInvalid(now, g, e, why)
		return
	}
	m := &msg{g: g, name: g.name, epoch: e.Epoch, seq: e.Seq, flags: fStored}
	m.setBody(e.Body, payload)
	c.budget.charge(m)
	i, found := g.heldIndex(e.Seq)
	if found {
		c.gone(m) // a copy from the queue is held: keep it
		return
	}
	g.held = insertAt(g.held, i, m)
	c.hold(m)
}
