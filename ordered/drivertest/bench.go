package drivertest

import (
	"context"
	"testing"

	"github.com/inorder/inorder/ordered/driver"
)

// RunBenchmarks measures the raw throughput of q: rounds of one SendBatch,
// ReceiveBatch and DeleteBatch of Limits().MaxBatch bodies of 64 bytes, from
// one goroutine ("RoundTrip") and from b.RunParallel's goroutines
// ("Parallel"). Each reports msgs/s, messages sent, received and deleted per
// second of the benchmark. q must be empty; the caller creates and closes it.
func RunBenchmarks(b *testing.B, q driver.Queue) {
	b.Run("RoundTrip", func(b *testing.B) {
		r := newRounder(q)
		b.ReportAllocs()
		for b.Loop() {
			if err := r.round(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(r.batch*b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("Parallel", func(b *testing.B) {
		b.ReportAllocs()
		batch := q.Limits().MaxBatch
		b.RunParallel(func(pb *testing.PB) {
			r := newRounder(q)
			for pb.Next() {
				if err := r.round(context.Background()); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// rounder runs send-receive-delete rounds with buffers of its own.
type rounder struct {
	q        driver.Queue
	batch    int
	bodies   [][]byte
	receipts []string
	owed     int // messages sent by this rounder and not yet received
}

func newRounder(q driver.Queue) *rounder {
	l := q.Limits()
	r := &rounder{q: q, batch: l.MaxBatch, bodies: make([][]byte, l.MaxBatch), receipts: make([]string, 0, l.MaxBatch)}
	for i := range r.bodies {
		r.bodies[i] = make([]byte, min(64, l.MaxBody))
	}
	return r
}

// round sends a batch, then receives and deletes until as many messages as
// it sent came back (from any sender, when rounds run in parallel).
func (r *rounder) round(ctx context.Context) error {
	if err := r.q.SendBatch(ctx, r.bodies); err != nil {
		return err
	}
	r.owed += r.batch
	for r.owed > 0 {
		msgs, err := r.q.ReceiveBatch(ctx, min(r.batch, r.owed), 0)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			// Under RunParallel another goroutine took them: its debt
			// pays for ours.
			return nil
		}
		r.receipts = r.receipts[:0]
		for _, m := range msgs {
			r.receipts = append(r.receipts, m.Receipt)
		}
		if err := r.q.DeleteBatch(ctx, r.receipts); err != nil {
			return err
		}
		r.owed -= len(msgs)
	}
	return nil
}
