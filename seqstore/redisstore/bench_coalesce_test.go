package redisstore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// BenchmarkCoalesce measures the group commit: callers goroutines each make
// one Reserve (with a 100-byte journal body) or one Advance at a time on
// their own stream, against miniredis and, when INORDER_TEST_REDIS_ADDR is
// set, a real Redis. One op is one call. round-trips/op falls below 1 as
// concurrent calls share pipelines; calls/s is the throughput.
func BenchmarkCoalesce(b *testing.B) {
	for _, be := range backends(b) {
		for _, op := range []string{"reserve", "advance"} {
			for _, callers := range []int{1, 16, 64} {
				b.Run(fmt.Sprintf("%s/%s/callers=%d", be.name, op, callers), func(b *testing.B) {
					client, prefix := be.open(b)
					st, err := New(client, &Options{Prefix: prefix})
					if err != nil {
						b.Fatal(err)
					}
					defer st.Close()
					journal := [][]byte{make([]byte, 100)}
					var next atomic.Int64
					var wg sync.WaitGroup
					b.ReportAllocs()
					b.ResetTimer()
					for i := range callers {
						wg.Go(func() {
							s := seqstore.Stream{Queue: "bench", Group: fmt.Sprintf("g%d", i)}
							var from seqstore.Cursor
							for next.Add(1) <= int64(b.N) {
								if op == "reserve" {
									if _, err := storetest.ReserveOne(b.Context(), st, s, 1, journal); err != nil {
										b.Error(err)
										return
									}
									continue
								}
								to := seqstore.Cursor{Epoch: 1, Next: from.Next + 1}
								if err := st.Advance(b.Context(), []seqstore.Advance{{Stream: s, From: from, To: to}}); err != nil {
									b.Error(err)
									return
								}
								from = to
							}
						})
					}
					wg.Wait()
					b.StopTimer()
					stats := st.Stats()
					b.ReportMetric(float64(stats.RoundTrips)/float64(b.N), "round-trips/op")
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
				})
			}
		}
	}
}
