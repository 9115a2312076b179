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
	fmt.Fprintf(&b, "live=%d released=%d mem=%d ring=%d delq=%d commit=%v moving=%v\n", c.live, len(c.released), c.mem, c.ring.len(), c.delq.len(), c.commit != nil, c.moving())
	fmt.Fprintf(&b, "timers=%d first=%v reads=%d/%d dirty=%d dirtySince=%v deadq=%d parkq=%d unparkq=%d vis.head=%v tokens=%.2f visAt=%v visBusy=%d shortq=%d idle=%v\n",
		len(c.timers), func() any {
			if len(c.timers) > 0 {
				return c.timers[0]
			}
			return nil
		}(), c.reads.len(), len(c.readBusy), c.dirty.len(), c.dirtySince, len(c.deadq), len(c.parkq), c.unparkq.len(),
		func() any {
			if c.vis.head != nil {
				return fmt.Sprintf("%s/%d where=%d vis=%v", c.vis.head.name, c.vis.head.seq, c.vis.head.where, c.vis.head.visibleAt)
			}
			return nil
		}(), c.visTokens, c.visAt, len(c.visBusy), c.shortq.len(), c.idle.head != nil)
	for _, n := range names {
		g := c.groups[n]
		if g.cold() {
			fmt.Fprintf(&b, "  %s idle (cold) epoch=%d next=%d dur=%d/%d\n", n, g.epoch, g.next, g.dur.Epoch, g.dur.Next)
			continue
		}
		fmt.Fprintf(&b, "  %s %s epoch=%d next=%d dur=%d/%d ack=%d/%d held=%v newer=%d pending=%d settled=%d",
			n, g.phase, g.epoch, g.next, g.dur.Epoch, g.dur.Next, g.ack.Epoch, g.ack.Next, seqs(g.held), len(g.newer), len(g.pending), len(g.settled))
		if g.out != nil {
			fmt.Fprintf(&b, " out=%d(%d)", g.out.seq, g.out.out)
		}
		fmt.Fprintf(&b, " far=%d..%d park=%d probed=%v stuck=%q dirty=%v uncertain=%v writing=%v\n", g.farLow, g.farHigh, g.parkLow, g.probed, g.stuck, g.dirty, g.uncertain != nil, g.writing)
	}
	return b.String()
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
