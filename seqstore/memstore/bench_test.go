package memstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// BenchmarkReserve measures Reserve of one seq from parallel goroutines,
// each on its own stream; in journal mode each reservation is then marked
// sent.
func BenchmarkReserve(b *testing.B) {
	body := make([]byte, 256)
	for _, mode := range []string{"fast", "journal"} {
		b.Run(mode, func(b *testing.B) {
			st := memstore.New()
			defer st.Close()
			var journal [][]byte
			if mode == "journal" {
				journal = [][]byte{body}
			}
			var id atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				s := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("g%d", id.Add(1))}
				for pb.Next() {
					rs, err := st.Reserve(b.Context(), []seqstore.ReserveRequest{{Stream: s, N: 1, Journal: journal}})
					if err != nil {
						b.Fatal(err)
					}
					if journal != nil { // a journal entry lives until it is sent
						if err := st.Sent(b.Context(), []seqstore.SentMark{{Stream: s, Seqs: []uint64{rs[0].First}}}); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		})
	}
}

func BenchmarkAdvance(b *testing.B) {
	st := memstore.New()
	defer st.Close()
	var id atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("g%d", id.Add(1))}
		var from seqstore.Cursor
		for pb.Next() {
			to := seqstore.Cursor{Epoch: 1, Next: from.Next + 1}
			if err := st.Advance(b.Context(), []seqstore.Advance{{Stream: s, From: from, To: to}}); err != nil {
				b.Fatal(err)
			}
			from = to
		}
	})
}

// BenchmarkPark runs storetest.BenchPark: Park of 16-entry batches over
// many streams, each followed by the Advance that drops them.
func BenchmarkPark(b *testing.B) {
	storetest.BenchPark(b, storetest.Harness{OpenBench: func(*testing.B) seqstore.Store { return memstore.New() }})
}
