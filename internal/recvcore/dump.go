package recvcore

import (
	"fmt"
	"sort"
	"strings"
)

// Dump describes the Core's groups, for test failures.
func (c *Core) Dump() string {
	var names []string
	for n := range c.groups {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	bu := &c.budget
	fmt.Fprintf(&b, "live=%d released=%d mem=%d ring=%d delq=%d/%d commit=%v/%d moving=%v outstanding=%d holders=%d\n",
		bu.live, len(bu.released), bu.mem, c.ring.len(), c.deletes.q.len(), c.deletes.inFlight, c.commits.batch != nil, c.commits.dirty.len(),
		c.moving(), c.outstanding, len(bu.holders))
	fmt.Fprintf(&b, "timers=%d first=%v reads=%d/%d dirty=%d dirtySince=%v deadq=%d parkq=%d unparkq=%d vis.head=%v tokens=%.2f visAt=%v visBusy=%d shortq=%d idle=%v\n",
		len(c.timers), c.firstTimer(), c.reads.q.len(), len(c.reads.busy), c.commits.dirty.len(), c.commits.since,
		len(c.deads.q), len(c.parks.q), c.unparks.q.len(), c.visHead(), c.vis.tokens, c.vis.at, len(c.vis.busy),
		c.vis.shortq.len(), c.idle.head != nil)
	for _, n := range names {
		dumpGroup(&b, c.groups[n])
	}
	return b.String()
}

func (c *Core) firstTimer() any {
	if len(c.timers) > 0 {
		return c.timers[0]
	}
	return nil
}

func (c *Core) visHead() any {
	if m := c.vis.list.head; m != nil {
		return fmt.Sprintf("%s/%d where=%d vis=%v", m.name, m.seq, m.where, m.visibleAt())
	}
	return nil
}

func dumpGroup(b *strings.Builder, g *group) {
	if g.cold() {
		fmt.Fprintf(b, "  %s idle (cold) epoch=%d next=%d dur=%d/%d\n", g.name, g.epoch, g.next, g.dur.Epoch, g.dur.Next)
		return
	}
	fmt.Fprintf(b, "  %s %s epoch=%d next=%d dur=%d/%d ack=%d/%d held=%v newer=%d pending=%d settled=%d",
		g.name, g.phase, g.epoch, g.next, g.dur.Epoch, g.dur.Next, g.ack.Epoch, g.ack.Next, seqs(g.held), len(g.newer), len(g.pending), len(g.settled))
	if g.out != nil {
		fmt.Fprintf(b, " out=%d(%d)", g.out.seq, g.out.out)
	}
	fmt.Fprintf(b, " far=%d..%d park=%d probed=%v stuck=%q dirty=%v uncertain=%v writing=%v\n",
		g.farLow, g.farHigh, g.park.low, g.probed, g.stuck, g.dirty, g.uncertain != nil, g.writing)
}

func seqs(ms []*msg) []uint64 {
	var s []uint64
	for _, m := range ms {
		s = append(s, m.seq)
	}
	return s
}

// Invariants checks what must hold between any two events, cheaply enough
// for a test to call after each: an active group never waits for a seq
// below its durable cursor (it would wait forever for a seq already
// handled).
func (c *Core) Invariants() error {
	for name, g := range c.groups {
		if g.phase == phActive && g.epoch == g.dur.Epoch && g.next < g.dur.Next {
			return fmt.Errorf("group %s waits for %d/%d, below its durable cursor %d/%d", name, g.epoch, g.next, g.dur.Epoch, g.dur.Next)
		}
	}
	return nil
}
