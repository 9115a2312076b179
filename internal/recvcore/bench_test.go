package recvcore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// BenchmarkCore drives one Core through the whole life of each message on
// one goroutine: arrival (batches of 16, shuffled within windows of 64),
// hand-out, Ack, the commit of its cursor and its delete. It reports
// messages per second and allocations per message; the bodies and the
// Incoming structs (the driver's) are made before the timer.
func BenchmarkCore(b *testing.B) {
	for _, groups := range []int{1, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			cfg := recvcore.Config{
				Queue: "q", GapTimeout: 30 * time.Second, StartSettle: 2 * time.Second, MaxAttempts: 5,
				RetryInitial: 50 * time.Millisecond, RetryMax: 5 * time.Second, Window: 4000, MaxHeld: 4000,
				MaxMemory: 64 << 20, MaxUndeletedRate: 1e9, MaxBatch: 16, MaxAdvances: 4096, MaxParks: 256,
				ReapInterval: 200 * time.Millisecond, Visibility: time.Hour, VisibilityMargin: -1,
				VisibilityExtend: time.Hour, ShortVisibility: time.Second, MaxVisibilityRate: 50, IdleEvict: -1,
				MaxEpochAhead: 24 * time.Hour,
			}
			c, err := recvcore.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			n := b.N
			in := make([]recvcore.Incoming, n)
			next := make([]uint64, groups)
			for i := range in {
				g := i % groups
				next[g]++
				body := envelope.Append(nil, envelope.Header{Group: fmt.Sprintf("g%d", g), Epoch: 1, Seq: next[g]}, []byte("payload"))
				in[i] = recvcore.Incoming{Body: body, ID: fmt.Sprintf("m%d", i), Receipt: fmt.Sprintf("r%d", i)}
			}
			for w := 0; w+64 <= n; w += 64 { // local disorder
				for k := 0; k < 32; k++ {
					in[w+k], in[w+63-k] = in[w+63-k], in[w+k]
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			done := 0
			drain := func() {
				for {
					d, ok := c.Next(now)
					if !ok {
						break
					}
					if _, err := c.Ack(now, &d, false); err != nil {
						b.Fatal(err)
					}
					done++
				}
				rd := c.Ready(now)
				for _, r := range rd.Reads {
					c.Read(now, r.ID, make([]seqstore.Cursor, len(r.Streams)), nil)
				}
				for _, cm := range rd.Commits {
					c.Committed(now, cm.ID, nil)
				}
				for _, d := range rd.Deletes {
					c.Deleted(now, d.ID, make([]recvcore.DeleteResult, len(d.Receipts)))
				}
			}
			for i := 0; i < n; i += 16 {
				c.Arrive(now, in[i:min(i+16, n)])
				drain()
			}
			for range 3 {
				now = now.Add(time.Second)
				c.Tick(now)
				drain()
			}
			b.StopTimer()
			if done != n {
				b.Fatalf("delivered %d of %d", done, n)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
