package filestore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/inorder/inorder/seqstore"
)

// BenchmarkReserveBatch16 is BenchmarkCallers/N=16 with 16 seqs (and
// bodies) per call, as SendBatch makes them: seqs per fsync grow with the batch.
// One op is one seq.
func BenchmarkReserveBatch16(b *testing.B) {
	const callers, per = 16, 16
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	journal := make([][]byte, per)
	for i := range journal {
		journal[i] = make([]byte, 100)
	}
	before := s.Stats()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range callers {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "bench", Group: fmt.Sprint(i)}
			for left.Add(-per) > -per {
				if _, err := reserve(ctx, s, st, per, journal); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	after := s.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "seqs/s")
	b.ReportMetric(float64(b.N)/float64(after.Fsyncs-before.Fsyncs), "seqs/fsync")
}

// BenchmarkParkCallers is 16 callers each parking 16 entries of 1 KiB per
// call in a loop: it reports entries/s and how many Park calls share one
// fsync. One op is one entry.
func BenchmarkParkCallers(b *testing.B) {
	const callers, per = 16, 16
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := make([]byte, 1024)
	before := s.Stats()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range callers {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "bench", Group: fmt.Sprint(i)}
			entries := make([]seqstore.Parked, per)
			for seq := uint64(1); left.Add(-per) > -per; {
				for k := range entries {
					entries[k] = seqstore.Parked{Stream: st, Epoch: 1, Seq: seq, Body: body}
					seq++
				}
				if err := s.Park(ctx, entries); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	after := s.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(after.Parks-before.Parks)/float64(after.Commits-before.Commits), "parks/commit")
	b.ReportMetric(float64(after.Fsyncs-before.Fsyncs)/float64(after.Parks-before.Parks), "fsyncs/park")
}
