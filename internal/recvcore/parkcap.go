package recvcore

import (
	"cmp"
	"slices"
	"time"
)

// Park limits: what this Core parks is counted, per group and in all,
// from the moment a park is queued until the group's durable cursor passes
// it (the store then drops it). An arrival that would take a count past
// its limit is not parked: it is left to come back from the queue, as with
// parking off, and counted in Stats.ParkFull. A sender that invents
// groups, or a hole that never fills, thus cannot fill the store.
//
// The counts cover this Core's life: parks left by an earlier receiver are
// not counted (a restart starts from zero). The count is kept outside the
// memory budget (parks cannot be shed to make room): a record per park and
// an entry per group that has one, bounded by ParkLimits.Messages. With no
// limit set nothing is counted.

// ParkLimits bounds what a Core parks; 0 or less: no limit.
type ParkLimits struct {
	Messages, Bytes           int64 // over all groups
	GroupMessages, GroupBytes int64 // per group
}

// parkUse counts the parks of each group that its durable cursor has not
// passed.
type parkUse struct {
	groups   map[string]*groupParks
	n, bytes int64
	warnedAt time.Time // the last "park limit reached" report (one a minute at most)
}

// groupParks is one group's parks, in (epoch, seq) order.
type groupParks struct {
	recs  []parkRec
	bytes int64
}

// parkRec is one parked seq; copies counts the copies of it parked or on
// their way (a second copy replaces the first's body in the store, and one
// refused for good must not take the other's count away).
type parkRec struct {
	epoch, seq uint64
	size       int64
	copies     int32
}

// parkFits reports whether m, of g, fits the park limits.
func (c *Core) parkFits(g *group, m *msg) bool {
	lim, u := c.cfg.ParkLimits, &c.pu
	addN, addB := int64(1), int64(len(m.raw))
	var gn, gb int64
	if gp := u.groups[g.name]; gp != nil {
		gn, gb = int64(len(gp.recs)), gp.bytes
		if i, ok := gp.find(m.epoch, m.seq); ok { // parked again: replaces
			addN, addB = 0, addB-gp.recs[i].size
		}
	}
	over := func(limit, have, add int64) bool { return limit > 0 && add > 0 && have+add > limit }
	return !over(lim.Messages, u.n, addN) && !over(lim.Bytes, u.bytes, addB) &&
		!over(lim.GroupMessages, gn, addN) && !over(lim.GroupBytes, gb, addB)
}

// parkFull counts an arrival that a park limit kept out of the park and
// reports it, once a minute at most.
func (c *Core) parkFull(g *group, m *msg) {
	c.st.ParkFull++
	if u := &c.pu; u.warnedAt.IsZero() || c.now.Sub(u.warnedAt) >= time.Minute {
		u.warnedAt = c.now
		c.report(Report{Kind: ReportWarn, Group: g.name, Epoch: m.epoch, Seq: m.seq,
			Msg: "park limit reached: early arrivals are left in the queue to come back (see ReceiveOptions.ParkLimits; reported once a minute at most, ParkFull counts them)"})
	}
}

func (gp *groupParks) find(epoch, seq uint64) (int, bool) {
	return slices.BinarySearchFunc(gp.recs, parkRec{epoch: epoch, seq: seq}, func(r, t parkRec) int {
		return cmp.Or(cmp.Compare(r.epoch, t.epoch), cmp.Compare(r.seq, t.seq))
	})
}

// countPark counts m, on its way to the park.
func (c *Core) countPark(m *msg) {
	u := &c.pu
	if c.cfg.ParkLimits == (ParkLimits{}) {
		return
	}
	if u.groups == nil {
		u.groups = make(map[string]*groupParks)
	}
	gp := u.groups[m.g.name]
	if gp == nil {
		gp = &groupParks{}
		u.groups[m.g.name] = gp
	}
	size := int64(len(m.raw))
	i, ok := gp.find(m.epoch, m.seq)
	if ok {
		u.bytes += size - gp.recs[i].size
		gp.bytes += size - gp.recs[i].size
		gp.recs[i].size = size
		gp.recs[i].copies++
		return
	}
	gp.recs = slices.Insert(gp.recs, i, parkRec{m.epoch, m.seq, size, 1})
	gp.bytes += size
	u.n++
	u.bytes += size
}

// uncountPark takes back the count of a park that did not happen.
func (c *Core) uncountPark(m *msg) {
	u := &c.pu
	gp := u.groups[m.g.name]
	if gp == nil {
		return
	}
	if i, ok := gp.find(m.epoch, m.seq); ok && gp.recs[i].copies > 1 {
		gp.recs[i].copies-- // another copy is parked or on its way
	} else if ok {
		gp.bytes -= gp.recs[i].size
		u.bytes -= gp.recs[i].size
		u.n--
		gp.recs = slices.Delete(gp.recs, i, i+1)
	}
	if len(gp.recs) == 0 {
		delete(u.groups, m.g.name)
	}
}

// passParks forgets the parks of g that its durable cursor passed: the
// store dropped them with the cursor's write.
func (c *Core) passParks(g *group) {
	u := &c.pu
	gp := u.groups[g.name]
	if gp == nil || !g.hasCursor() {
		return
	}
	k := 0
	for k < len(gp.recs) && g.dur.Below(gp.recs[k].epoch, gp.recs[k].seq) {
		gp.bytes -= gp.recs[k].size
		u.bytes -= gp.recs[k].size
		k++
	}
	if k == 0 {
		return
	}
	u.n -= int64(k)
	if k == len(gp.recs) {
		delete(u.groups, g.name)
		return
	}
	gp.recs = slices.Delete(gp.recs, 0, k)
}
