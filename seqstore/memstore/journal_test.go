package memstore

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestJournalAgainstMap drives a journal and a map with the same adds and
// removes (mostly the oldest but one, which stays as a failed send does,
// some out of order, some twice, some unknown) and checks that they hold
// the same entries, in seq order, and that the journal's slice stays
// within twice its live entries plus 16.
func TestJournalAgainstMap(t *testing.T) {
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var j journal
		model := map[uint64][]byte{}
		next := uint64(1)
		for step := range 3000 {
			switch r := rng.IntN(10); {
			case r < 3:
				for range rng.IntN(3) + 1 {
					body := []byte{byte(next)}
					j.add(next, body)
					model[next] = body
					next++
				}
			case r < 8 && len(model) > 1: // the oldest but one, as sends complete
				seqs := slices.Sorted(maps.Keys(model))
				j.remove(seqs[1])
				delete(model, seqs[1])
			default: // any seq, held or not, sent or not
				seq := rng.Uint64N(next + 2)
				j.remove(seq)
				delete(model, seq)
			}
			got := map[uint64][]byte{}
			var order []uint64
			for seq, body := range j.all() {
				got[seq] = body
				order = append(order, seq)
			}
			if !maps.EqualFunc(got, model, slices.Equal) {
				t.Fatalf("seed %d step %d: journal holds %v, want %v", seed, step, got, model)
			}
			if !slices.IsSorted(order) {
				t.Fatalf("seed %d step %d: journal yields %v, not in seq order", seed, step, order)
			}
			if j.live != len(model) || len(j.entries) > 2*j.live+16 {
				t.Fatalf("seed %d step %d: %d entries for %d live (%d in the model)", seed, step, len(j.entries), j.live, len(model))
			}
		}
	}
}
