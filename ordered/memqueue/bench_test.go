package memqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/inorder/inorder/ordered/drivertest"
	"github.com/inorder/inorder/ordered/memqueue"
)

// BenchmarkDriver runs the drivertest benchmarks: rounds of send, receive
// and delete of 16 messages of 64 bytes with no chaos; msgs/s is per
// benchmark second.
func BenchmarkDriver(b *testing.B) {
	q := memqueue.New(nil)
	defer q.Close()
	drivertest.RunBenchmarks(b, q)
}

// BenchmarkRoundTrip16Deep is BenchmarkDriver/RoundTrip on a queue holding
// 100,000 other messages, 10,000 of them in flight.
func BenchmarkRoundTrip16Deep(b *testing.B) {
	ctx := context.Background()
	q := memqueue.New(&memqueue.Options{Visibility: time.Hour})
	defer q.Close()
	bodies := make([][]byte, 16)
	for i := range bodies {
		bodies[i] = make([]byte, 64)
	}
	for range 110000 / 16 {
		if err := q.SendBatch(ctx, bodies); err != nil {
			b.Fatal(err)
		}
	}
	for range 10000 / 16 {
		if _, err := q.ReceiveBatch(ctx, 16, 0); err != nil {
			b.Fatal(err)
		}
	}
	receipts := make([]string, 16)
	b.ReportAllocs()
	for b.Loop() {
		if err := q.SendBatch(ctx, bodies); err != nil {
			b.Fatal(err)
		}
		msgs, err := q.ReceiveBatch(ctx, 16, 0)
		if err != nil || len(msgs) != 16 {
			b.Fatalf("ReceiveBatch: want 16 messages, got %d (%v)", len(msgs), err)
		}
		for i, m := range msgs {
			receipts[i] = m.Receipt
		}
		if err := q.DeleteBatch(ctx, receipts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
