package recvcore

import (
	"slices"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// The skipped ranges of a cursor say which seqs below it were passed over,
// not handled: a copy of one that arrives later is a late arrival (handed
// out flagged Unordered, or dead-lettered), never a duplicate. They are
// exact: a range never covers a seq that was handed out (a copy of that one
// is a duplicate, deleted), and none is dropped. A cursor holds at most
// seqstore.MaxSkipped of them; a group whose cursor is full passes over
// nothing more (see Core.skipped).

// addSkipped adds r to the skipped ranges of cur, and reports whether it
// fits. Ranges that touch or overlap in one epoch become one (no seq lies
// between them), and a range that another holds goes; nothing else is
// merged or dropped: when more than seqstore.MaxSkipped ranges would be
// left, cur is unchanged.
func addSkipped(cur *seqstore.Cursor, r seqstore.Range) bool {
	s := append(slices.Clip(cur.Skipped), r)
	slices.SortStableFunc(s, func(a, b seqstore.Range) int {
		if a.Epoch != b.Epoch {
			return cmpUint(a.Epoch, b.Epoch)
		}
		return cmpUint(a.First, b.First)
	})
	out := s[:1]
	for _, x := range s[1:] {
		last := &out[len(out)-1]
		if x.Epoch == last.Epoch && x.First <= last.Last+1 && last.Last != seqstore.MaxSeq || x.Epoch == last.Epoch && last.Last == seqstore.MaxSeq {
			last.Last = max(last.Last, x.Last)
			continue
		}
		out = append(out, x)
	}
	if len(out) > seqstore.MaxSkipped {
		return false
	}
	cur.Skipped = out
	return true
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// skipped passes g over r: recorded in its acknowledged cursor (written by
// the next commit) and reported (msg says why). It reports false, and
// passes over nothing, when the cursor's skipped ranges are full: the
// group is then reported stuck ("skipped") and waits, as under GapWait.
func (c *Core) skipped(g *group, now time.Time, r seqstore.Range, age time.Duration, why string) bool {
	if !addSkipped(&g.ack, r) {
		if g.stuck != "skipped" {
			c.setStuck(g, now, "skipped", errSkippedFull)
			c.report(Report{Kind: ReportStuck, Msg: "cannot pass over a hole: the cursor's skipped ranges are full",
				Group: g.name, Epoch: r.Epoch, Seq: r.First, Last: r.Last, Err: errSkippedFull})
		}
		return false
	}
	c.clearStuck(g, "skipped")
	if r.Last != seqstore.MaxSeq {
		c.st.Skipped += int64(r.Last - r.First + 1)
		c.report(Report{Kind: ReportSkip, Msg: why, Group: g.name, Epoch: r.Epoch, Seq: r.First, Last: r.Last, Age: age})
	}
	return true
}
