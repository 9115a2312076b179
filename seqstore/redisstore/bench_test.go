package redisstore

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
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			c, prefix := be.open(b)
			s := newStore(b, c, prefix)
			body := [][]byte{make([]byte, 100)}
			ctx := context.Background()
			before := s.Stats()
			run16(b, func(w, _ int) error {
				_, err := storetest.ReserveOne(ctx, s, seqstore.Stream{Queue: "bench", Group: fmt.Sprint(w)}, 1, body)
				return err
			})
			reportTrips(b, before, s.Stats())
		})
	}
}

// BenchmarkAdvance16: 16 callers each moving its own stream's cursor by
// one, compare-and-set, one call at a time.
func BenchmarkAdvance16(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			c, prefix := be.open(b)
			s := newStore(b, c, prefix)
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
			reportTrips(b, before, s.Stats())
		})
	}
}

func reportTrips(b *testing.B, before, after Stats) {
	b.ReportMetric(float64(after.RoundTrips-before.RoundTrips)/float64(b.N), "roundtrips/op")
}

func benchBackends(b *testing.B) []backend {
	bs := backends(b)
	if cb, ok := clusterBackend(b); ok {
		bs = append(bs, cb)
	}
	return bs
}

// BenchmarkPark runs storetest.BenchPark (each op: a Park of 16 streams'
// 1 KiB bodies, then the Advance that hands them out and drops them) and
// reports round trips per op (two calls).
func BenchmarkPark(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			var s *Store
			storetest.BenchPark(b, storetest.Harness{OpenBench: func(b *testing.B) seqstore.Store {
				c, prefix := be.open(b)
				s = newStore(b, c, prefix)
				return s
			}})
			if s != nil {
				b.ReportMetric(float64(s.Stats().RoundTrips)/float64(b.N), "roundtrips/op")
			}
		})
	}
}
