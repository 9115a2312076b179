package memstore

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/inorder/inorder/seqstore"
)

// TestReview7JournalStore drives the Store's Reserve/Sent/Pending/State
// with random batches (several requests per stream per call, fast-mode
// requests between durable ones), out-of-order, double and unknown Sent
// marks, and checks Pending and State against a model; the caller's
// bodies are overwritten after Reserve and Pending's bodies are mutated, to
// catch aliasing; one early entry is never sent and the slice must stay
// bounded.
func TestReview7JournalStore(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(2) {
		rng := rand.New(rand.NewPCG(seed, 7))
		st := New()
		streams := []seqstore.Stream{{Queue: "q", Group: "a"}, {Queue: "q", Group: "b"}, {Queue: "q2", Group: "a"}}
		model := map[seqstore.Stream]map[uint64]string{}
		next := map[seqstore.Stream]uint64{}
		for _, s := range streams {
			model[s] = map[uint64]string{}
			next[s] = 1
		}
		for step := range 1000 {
			switch rng.IntN(4) {
			case 0, 1:
				var reqs []seqstore.ReserveRequest
				for range rng.IntN(4) + 1 {
					s := streams[rng.IntN(len(streams))]
					n := rng.IntN(5) + 1
					var j [][]byte
					if rng.IntN(5) > 0 {
						for range n {
							j = append(j, []byte{byte(rng.IntN(256)), byte(step)})
						}
					}
					reqs = append(reqs, seqstore.ReserveRequest{Stream: s, N: n, Journal: j})
				}
				res, err := st.Reserve(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range reqs {
					if res[i].First != next[r.Stream] {
						t.Fatalf("seed %d step %d: first %d, want %d", seed, step, res[i].First, next[r.Stream])
					}
					for k, b := range r.Journal {
						model[r.Stream][res[i].First+uint64(k)] = string(b)
						b[0]++ // the caller reuses its buffers
					}
					next[r.Stream] += uint64(r.N)
				}
			default:
				var marks []seqstore.SentMark
				for _, s := range streams {
					var seqs []uint64
					for range rng.IntN(6) {
						seq := rng.Uint64N(next[s] + 3) // known, unknown, already sent
						if seq == 1 {
							continue // seq 1 stays: a send that never completes
						}
						seqs = append(seqs, seq)
						delete(model[s], seq)
					}
					marks = append(marks, seqstore.SentMark{Stream: s, Seqs: seqs})
				}
				if err := st.Sent(ctx, marks); err != nil {
					t.Fatal(err)
				}
			}
			for _, q := range []string{"q", "q2"} {
				got, err := st.Pending(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				want := map[seqstore.Stream]map[uint64]string{}
				for _, e := range got {
					if want[e.Stream] == nil {
						want[e.Stream] = map[uint64]string{}
					}
					want[e.Stream][e.Seq] = string(e.Body)
					e.Body[0]++ // the caller mutates what it got
				}
				if !slices.IsSortedFunc(got, func(a, b seqstore.Entry) int {
					if a.Stream != b.Stream {
						if a.Stream.Key() < b.Stream.Key() {
							return -1
						}
						return 1
					}
					return int(a.Seq) - int(b.Seq)
				}) {
					t.Fatalf("seed %d step %d: Pending not sorted", seed, step)
				}
				for _, s := range streams {
					if s.Queue != q {
						continue
					}
					if !maps.Equal(want[s], model[s]) && !(len(want[s]) == 0 && len(model[s]) == 0) {
						t.Fatalf("seed %d step %d: %v pending %v, want %v", seed, step, s, want[s], model[s])
					}
				}
			}
			st.mu.Lock()
			for s, sd := range st.senders {
				if sd.journal.Slots() > 2*sd.journal.Len()+16 || sd.journal.Len() != len(model[s]) {
					t.Fatalf("seed %d step %d: %v: %d entries, %d live, model %d", seed, step, s, sd.journal.Slots(), sd.journal.Len(), len(model[s]))
				}
			}
			st.mu.Unlock()
		}
	}
}
