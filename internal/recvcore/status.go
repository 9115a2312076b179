package recvcore

import (
	"container/heap"
	"slices"
	"sort"
	"time"
)

// Read-only queries for a status page: what a group waits on and holds, and
// which groups are stuck. They change nothing (no begin or end, no wake),
// and their cost is bounded whatever the Core holds: at most limit groups
// are described, each with at most MaxStatusRanges ranges of seqs, each
// range found by a binary search. Selecting the worst stuck groups walks the
// stuck set once, as Stats does.

// MaxStatusRanges bounds the ranges of seqs a GroupStatus lists, held and
// parked each.
const MaxStatusRanges = 16

// SeqRange is a run of consecutive seqs, First..Last.
type SeqRange struct {
	First, Last uint64
}

// GroupStatus describes one group in memory: its place in its stream, what
// it holds, and why it is stuck if it is. From Core.GroupStatus and
// Core.StuckStatus.
type GroupStatus struct {
	Group string
	Phase string // loading, fresh, active, resolving, failed

	// Reason says why the group is stuck, as in StuckGroup ("": it is not):
	// "gap", "poison", "conflict" or "store". Since is when it got stuck,
	// Err the cause ("store", "poison").
	Reason string
	Since  time.Time
	Err    error

	// Epoch is the sender epoch the group hands out. Next is the seq it
	// waits on: the message out (with the application, or waiting for
	// its retry: a poison message), else the next seq to hand out (the
	// first missing seq of a hole).
	Epoch, Next uint64
	// Out reports that Next is out; Attempt is its hand-outs so far.
	Out     bool
	Attempt int
	// Unstarted reports that the group has no stored cursor and has handed
	// out and acknowledged nothing since it found none: StartAt applies.
	Unstarted bool
	// Acked is the last seq of Epoch the acknowledged cursor passed
	// (handled, dead-lettered or skipped); Durable the durable cursor's
	// next seq, of DurableEpoch. Zero: none.
	Acked                 uint64
	Durable, DurableEpoch uint64

	// Held counts the messages of Epoch held in memory, waiting for their
	// turn; HeldRanges are their seqs, the lowest MaxStatusRanges runs,
	// HeldMore set when more follow. Newer counts the messages of newer
	// epochs held, Pending those that arrived while the group's cursor is
	// read (not routed yet).
	Held       int
	HeldRanges []SeqRange
	HeldMore   bool
	Newer      int
	Pending    int

	// Parked counts the group's messages this Core parked that its durable
	// cursor has not passed (counted only with Config.ParkLimits, as
	// Stats.ParkedNow); ParkedRanges and ParkedMore are the seqs of Epoch
	// among them, as HeldRanges.
	Parked       int
	ParkedRanges []SeqRange
	ParkedMore   bool
}

// GroupStatus describes the group named name, if it is in memory.
func (c *Core) GroupStatus(name string) (GroupStatus, bool) {
	g := c.groups[name]
	if g == nil {
		return GroupStatus{}, false
	}
	return c.groupStatus(g), true
}

// StuckStatus describes the stuck groups, at most limit of them, the
// longest stuck first (then by name), and returns how many are stuck in
// all.
func (c *Core) StuckStatus(limit int) (worst []GroupStatus, total int) {
	if limit <= 0 {
		return nil, len(c.stuck)
	}
	// A max-heap of the limit worst seen so far: its top is the least bad
	// of them, replaced by any worse one.
	top := make(stuckHeap, 0, min(limit, len(c.stuck)))
	for g := range c.stuck {
		switch {
		case len(top) < limit:
			heap.Push(&top, g)
		case worse(g, top[0]):
			top[0] = g
			heap.Fix(&top, 0)
		}
	}
	slices.SortFunc(top, func(a, b *group) int {
		if worse(a, b) {
			return -1
		}
		return 1 // names are distinct: never equal
	})
	worst = make([]GroupStatus, len(top))
	for i, g := range top {
		worst[i] = c.groupStatus(g)
	}
	return worst, len(c.stuck)
}

// worse reports whether stuck group a is in worse trouble than b: stuck
// for longer, or, stuck since the same time, first by name.
func worse(a, b *group) bool {
	if !a.since.Equal(b.since) {
		return a.since.Before(b.since)
	}
	return a.name < b.name
}

// stuckHeap is a max-heap by worse: its top is the least bad.
type stuckHeap []*group

func (h stuckHeap) Len() int           { return len(h) }
func (h stuckHeap) Less(i, j int) bool { return worse(h[j], h[i]) }
func (h stuckHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *stuckHeap) Push(x any)        { *h = append(*h, x.(*group)) }
func (h *stuckHeap) Pop() any {
	old := *h
	g := old[len(old)-1]
	*h = old[:len(old)-1]
	return g
}

func (c *Core) groupStatus(g *group) GroupStatus {
	s := GroupStatus{
		Group: g.name, Phase: g.phase.String(),
		Epoch: g.epoch, Next: g.next,
		Durable: g.dur.Next, DurableEpoch: g.dur.Epoch,
		Held: len(g.held), Unstarted: unstarted(g),
	}
	if g.ack.Epoch == g.epoch && g.ack.Next > 1 {
		s.Acked = g.ack.Next - 1
	}
	if m := g.out; m != nil && m.epoch == g.epoch {
		s.Next, s.Out, s.Attempt = m.seq, true, int(m.attempt)
	}
	s.HeldRanges, s.HeldMore = seqRanges(len(g.held), func(i int) uint64 { return g.held[i].seq })
	if !g.cold() { // an idle group holds nothing, and is stuck on nothing
		s.Reason, s.Err = g.stuck, g.stuckErr
		s.Newer, s.Pending = len(g.newer), len(g.pending)
		if g.stuck != "" {
			s.Since = g.since
		}
	}
	if gp := c.pu.groups[g.name]; gp != nil {
		s.Parked = len(gp.recs)
		// recs are in (epoch, seq) order: those of g.epoch are one run.
		lo := sort.Search(len(gp.recs), func(i int) bool { return gp.recs[i].epoch >= g.epoch })
		hi := sort.Search(len(gp.recs), func(i int) bool { return gp.recs[i].epoch > g.epoch })
		recs := gp.recs[lo:hi]
		s.ParkedRanges, s.ParkedMore = seqRanges(len(recs), func(i int) uint64 { return recs[i].seq })
	}
	return s
}

// seqRanges returns the runs of consecutive seqs among n sorted, distinct
// seqs (seq(i) for i in 0..n-1), the first MaxStatusRanges of them, and
// whether more follow. In sorted, distinct seqs, i..j is a run exactly
// when seq(j)-seq(i) == j-i, so each run's end is found by a binary
// search: O(MaxStatusRanges log n), however many seqs there are.
func seqRanges(n int, seq func(int) uint64) ([]SeqRange, bool) {
	var rs []SeqRange
	for i := 0; i < n; {
		if len(rs) == MaxStatusRanges {
			return rs, true
		}
		first := seq(i)
		end := i + sort.Search(n-i, func(k int) bool { return seq(i+k)-first != uint64(k) })
		rs = append(rs, SeqRange{First: first, Last: seq(end - 1)})
		i = end
	}
	return rs, false
}
