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
// is a duplicate, deleted). A cursor holds at most seqstore.MaxSkipped of
// them: beyond, the oldest (lowest) go, reported, so that a group skips on
// for its whole life; a copy of a seq of a range that went is then taken
// for a duplicate. Reported, that is the one way the receiver may drop a
// message, and only one so old that 64 later holes were skipped since.

// addSkipped adds r to the skipped ranges of cur. Ranges that touch or
// overlap in one epoch become one (no seq lies between them), and a range
// that another holds goes; nothing is merged across a seq that is not
// skipped. When more than seqstore.MaxSkipped ranges are left, the lowest
// ones other than r go: addSkipped returns them.
func addSkipped(cur *seqstore.Cursor, r seqstore.Range) []seqstore.Range {
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
	var dropped []seqstore.Range
	for len(out) > seqstore.MaxSkipped {
		i := 0
		if out[0].Epoch == r.Epoch && out[0].First <= r.First && r.Last <= out[0].Last {
			i = 1 // r itself (or what holds it) stays
		}
		dropped = append(dropped, out[i])
		out = slices.Delete(out, i, i+1)
	}
	cur.Skipped = out
	return dropped
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
// the next commit) and reported (msg says why; an epoch switch's range is
// reported as the switch). Ranges the cursor cannot hold any more are
// reported as forgotten.
// skippedIn reports whether cur marks every seq of r skipped.
func skippedIn(cur seqstore.Cursor, r seqstore.Range) bool {
	for _, s := range cur.Skipped {
		if s.Epoch == r.Epoch && s.First <= r.First && r.Last <= s.Last {
			return true
		}
	}
	return false
}

func (c *Core) skipped(g *group, r seqstore.Range, age time.Duration, why string) {
	for _, d := range addSkipped(&g.ack, r) {
		c.report(Report{Kind: ReportWarn, Msg: "skipped range forgotten: the cursor holds 64; a late copy of these seqs will be taken for a duplicate",
			Group: g.name, Epoch: d.Epoch, Seq: d.First, Last: d.Last})
	}
	if r.Last != seqstore.MaxSeq {
		c.st.Skipped += int64(r.Last - r.First + 1)
		c.report(Report{Kind: ReportSkip, Msg: why, Group: g.name, Epoch: r.Epoch, Seq: r.First, Last: r.Last, Age: age})
	}
}
