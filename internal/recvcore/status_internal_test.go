package recvcore

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestSeqRangesProperty: seqRanges finds the same runs as a walk over every
// seq, up to MaxStatusRanges of them, and says when more follow.
func TestSeqRangesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		set := rapid.SliceOfDistinct(rapid.Uint64Range(1, 200), func(s uint64) uint64 { return s }).Draw(t, "seqs")
		slices.Sort(set)
		var want []SeqRange
		for _, s := range set {
			if n := len(want); n > 0 && want[n-1].Last+1 == s {
				want[n-1].Last = s
			} else {
				want = append(want, SeqRange{s, s})
			}
		}
		got, more := seqRanges(len(set), func(i int) uint64 { return set[i] })
		if len(want) > MaxStatusRanges {
			if !more || !slices.Equal(got, want[:MaxStatusRanges]) {
				t.Fatalf("seqs %v: got %v more %v, want %v (first %d) more", set, got, more, want, MaxStatusRanges)
			}
			return
		}
		if more || !slices.Equal(got, want) {
			t.Fatalf("seqs %v: got %v more %v, want %v", set, got, more, want)
		}
	})
}
