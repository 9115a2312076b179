package journal

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestJournalAgainstMap drives a journal and a map with the same adds and
// removes (mostly the oldest but one, which stays as a failed send does,
// some out of order, some twice, some unknown; a few adds out of order) and checks that they hold
// the same entries, in seq order, and that the journal's slice stays
// within twice its live entries plus 16.
func TestJournalAgainstMap(t *testing.T) {
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var j Journal
		model := map[uint64][]byte{}
		next := uint64(1)
		for step := range 3000 {
			switch r := rng.IntN(10); {
			case r < 3:
				for range rng.IntN(3) + 1 {
					body := []byte{byte(next)}
					j.Add(next, body)
					model[next] = body
					next++
				}
			case r < 8 && len(model) > 1: // the oldest but one, as sends complete
				seqs := slices.Sorted(maps.Keys(model))
				j.Remove(seqs[1])
				delete(model, seqs[1])
			case r == 8 && step%7 == 0: // out of order: a seq held, sent or never added
				seq := rng.Uint64N(next) + 1
				body := []byte{byte(seq), 1}
				j.Add(seq, body)
				model[seq] = body
				if seq == next {
					next++
				}
			default: // any seq, held or not, sent or not
				seq := rng.Uint64N(next + 2)
				j.Remove(seq)
				delete(model, seq)
			}
			got := map[uint64][]byte{}
			var order []uint64
			for seq, body := range j.All() {
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

// TestJournalOneStuckEntryLargeBatches: one entry never sent and
// large batches marked sent in order: the journal's slice (and what it
// pins) stays small.
func TestJournalOneStuckEntryLargeBatches(t *testing.T) {
	var j Journal
	seq := uint64(1)
	j.Add(seq, []byte("stuck"))
	seq++
	for range 50 {
		first := seq
		block := make([]byte, 100000)
		for k := range 100000 {
			j.Add(seq, block[k:k+1:k+1])
			seq++
		}
		for s := first; s < seq; s++ {
			j.Remove(s)
		}
		if j.live != 1 || len(j.entries) > 18 {
			t.Fatalf("%d live, %d entries", j.live, len(j.entries))
		}
	}
	if cap(j.entries) > 1<<18 {
		t.Fatalf("cap %d after batches of 100000", cap(j.entries))
	}
	for _, e := range j.entries[len(j.entries):cap(j.entries)] {
		if e.body != nil {
			t.Fatal("the slice's spare capacity pins a body")
		}
	}
}
