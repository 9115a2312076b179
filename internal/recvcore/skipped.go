package recvcore

import "github.com/inorder/inorder/seqstore"

// addSkipped adds r to the skipped ranges of cur. When more than
// seqstore.MaxSkipped would be needed, the two closest ranges of one epoch
// are merged into one that covers what lies between them: a seq delivered
// in between that arrives again is then reported late (and handed out
// flagged Unordered or dead-lettered) instead of deleted as a duplicate.
// Nothing late is ever taken for a duplicate.
func addSkipped(cur *seqstore.Cursor, r seqstore.Range) {
	s := append(cur.Skipped[:len(cur.Skipped):len(cur.Skipped)], r)
	for len(s) > seqstore.MaxSkipped {
		bi, bj := -1, -1
		var gap uint64
		for i := range s {
			for j := range s {
				if i == j || s[i].Epoch != s[j].Epoch || s[i].First > s[j].First {
					continue
				}
				var d uint64
				if s[j].First > s[i].Last {
					d = s[j].First - s[i].Last
				}
				if bi < 0 || d < gap {
					bi, bj, gap = i, j, d
				}
			}
		}
		if bi < 0 {
			// Every range has its own epoch: drop the oldest epoch's. Its
			// seqs are then late by default (an older epoch with no
			// record), never duplicates.
			oldest := 0
			for i := range s {
				if s[i].Epoch < s[oldest].Epoch {
					oldest = i
				}
			}
			s = append(s[:oldest], s[oldest+1:]...)
			continue
		}
		merged := seqstore.Range{Epoch: s[bi].Epoch, First: s[bi].First, Last: max(s[bi].Last, s[bj].Last)}
		s[bi] = merged
		s = append(s[:bj], s[bj+1:]...)
	}
	cur.Skipped = s
}
