package memqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/inorder/inorder/ordered/memqueue"
)

// BenchmarkRoundTrip16 measures one send, receive and delete of a 16-message
// batch of 64-byte bodies with no chaos; msgs/s is per core.
func BenchmarkRoundTrip16(b *testing.B) {
	ctx := context.Background()
	q := memqueue.New(nil)
	defer q.Close()
	bodies := make([][]byte, 16)
	for i := range bodies {
		bodies[i] = make([]byte, 64)
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

// BenchmarkRoundTrip16Deep is BenchmarkRoundTrip16 on a queue holding 100,000
// other messages, 10,000 of them in flight.
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

// BenchmarkRoundTrip16Parallel runs BenchmarkRoundTrip16's loop from
// GOMAXPROCS goroutines on one queue.
func BenchmarkRoundTrip16Parallel(b *testing.B) {
	ctx := context.Background()
	q := memqueue.New(nil)
	defer q.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		bodies := make([][]byte, 16)
		for i := range bodies {
			bodies[i] = make([]byte, 64)
		}
		receipts := make([]string, 0, 16)
		for pb.Next() {
			if err := q.SendBatch(ctx, bodies); err != nil {
				b.Error(err)
				return
			}
			msgs, err := q.ReceiveBatch(ctx, 16, 0)
			if err != nil {
				b.Error(err)
				return
			}
			if len(msgs) == 0 {
				continue
			}
			receipts = receipts[:0]
			for _, m := range msgs {
				receipts = append(receipts, m.Receipt)
			}
			if err := q.DeleteBatch(ctx, receipts); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
