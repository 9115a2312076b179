package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

const benchCallers = 16

// run16 runs b.N calls of op spread over 16 concurrent callers and reports
// calls per second.
func run16(b *testing.B, op func(worker, i int) error) {
	b.Helper()
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchCallers)
	b.ResetTimer()
	start := time.Now()
	for w := range benchCallers {
		wg.Go(func() {
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				if err := op(w, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}

// BenchmarkReserve16: 16 callers each reserving one journaled 100-byte
// message at a time on its own stream (durable-send mode).
func BenchmarkReserve16(b *testing.B) {
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			db, prefix := be.open(b)
			s := newStore(b, db, be.dialect, prefix)
			body := [][]byte{make([]byte, 100)}
			ctx := context.Background()
			before := s.Stats()
			run16(b, func(w, _ int) error {
				_, err := storetest.ReserveOne(ctx, s, seqstore.Stream{Queue: "bench", Group: fmt.Sprint(w)}, 1, body)
				return err
			})
			reportTx(b, before, s.Stats())
		})
	}
}

// BenchmarkAdvance16: 16 callers each moving its own stream's cursor by
// one, compare-and-set, one call at a time.
func BenchmarkAdvance16(b *testing.B) {
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			db, prefix := be.open(b)
			s := newStore(b, db, be.dialect, prefix)
			ctx := context.Background()
			var cursors [benchCallers]seqstore.Cursor
			before := s.Stats()
			run16(b, func(w, _ int) error {
				from := cursors[w]
				to := seqstore.Cursor{Epoch: 1, Next: from.Next + 1}
				err := s.Advance(ctx, []seqstore.Advance{{Stream: seqstore.Stream{Queue: "bench", Group: fmt.Sprint(w)}, From: from, To: to}})
				cursors[w] = to
				return err
			})
			reportTx(b, before, s.Stats())
		})
	}
}

func reportTx(b *testing.B, before, after Stats) {
	n := float64(b.N)
	b.ReportMetric(float64(after.Transactions-before.Transactions)/n, "tx/op")
	b.ReportMetric(float64(after.Statements-before.Statements)/n, "stmts/op")
}

// BenchmarkPark runs storetest.BenchPark on each backend: batches of 16
// parks, then the Advance that drops them, from GOMAXPROCS goroutines. It
// also reports the transactions and statements per call (Park or Advance).
func BenchmarkPark(b *testing.B) {
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			var s *Store
			storetest.BenchPark(b, storetest.Harness{OpenBench: func(b *testing.B) seqstore.Store {
				db, prefix := be.open(b)
				s = newStore(b, db, be.dialect, prefix)
				return s
			}})
			if st := s.Stats(); st.Ops > 0 {
				b.ReportMetric(float64(st.Transactions)/float64(st.Ops), "tx/call")
				b.ReportMetric(float64(st.Statements)/float64(st.Transactions), "stmts/tx")
			}
		})
	}
}
