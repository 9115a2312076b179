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
	for _, n := range names {
		g := c.groups[n]
		fmt.Fprintf(&b, "  %s %s epoch=%d next=%d dur=%d/%d ack=%d/%d held=%v newer=%d pending=%d settled=%d",
			n, g.phase, g.epoch, g.next, g.dur.Epoch, g.dur.Next, g.ack.Epoch, g.ack.Next, seqs(g.held), len(g.newer), len(g.pending), len(g.settled))
		if g.out != nil {
			fmt.Fprintf(&b, " out=%d(%d)", g.out.seq, g.out.out)
		}
		fmt.Fprintf(&b, " far=%d..%d park=%d probed=%v stuck=%q dirty=%v uncertain=%v writing=%v\n", g.farLow, g.farHigh, g.parkLow, g.probed, g.stuck, g.dirty, g.uncertain != nil, g.writing != nil)
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
