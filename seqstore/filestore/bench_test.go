package filestore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// rawSyncRate measures small append+fdatasync rounds per second on a file
// in dir: the physical limit a group-committing store is compared with.
func rawSyncRate(tb testing.TB, dir string, d time.Duration) float64 {
	f, err := os.OpenFile(filepath.Join(dir, "raw-fsync"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rec := make([]byte, 128)
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		if _, err := f.Write(rec); err != nil {
			tb.Fatal(err)
		}
		if err := syncData(f); err != nil {
			tb.Fatal(err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkFsync measures the raw rate of a small append followed by the
// same sync call the store uses, on the same disk.
func BenchmarkFsync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rec := make([]byte, 128)
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := syncData(f); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
}

// BenchmarkReserve16 runs 16 concurrent callers, each making one
// reservation with a 100-byte journal body at a time. Besides
// reservations/s and fsyncs/reservation it measures the raw fsync rate in
// the same directory before and after and reports the ratio
// reservations/s ÷ (16 × fsyncs/s): 1.0 would mean every fsync served all
// 16 callers with no time lost between commits. On a disk shared with other
// work the raw rate drifts, so it also reports ratio-in-run, computed from
// the time the store's own commit fsyncs took during the run.
func BenchmarkReserve16(b *testing.B) {
	benchReserve(b, 16)
}

// BenchmarkReserve1 is the serial baseline: one caller, one fsync per
// reservation.
func BenchmarkReserve1(b *testing.B) {
	benchReserve(b, 1)
}

func benchReserve(b *testing.B, callers int) {
	dir := b.TempDir()
	rawBefore := rawSyncRate(b, dir, 300*time.Millisecond)
	opts := &Options{}
	// FS_WAIT sets Options.CommitWait, e.g. FS_WAIT=-1ns to compare
	// without the wait for returning callers.
	if w := os.Getenv("FS_WAIT"); w != "" {
		opts.CommitWait, _ = time.ParseDuration(w)
	}
	s, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := make([]byte, 100)
	before := s.Stats()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range callers {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "bench", Group: fmt.Sprint(i)}
			journal := [][]byte{body}
			for left.Add(-1) >= 0 {
				if _, err := reserve(ctx, s, st, 1, journal); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	after := s.Stats()
	raw := (rawBefore + rawSyncRate(b, dir, 300*time.Millisecond)) / 2
	rate := float64(b.N) / b.Elapsed().Seconds()
	commits := after.Commits - before.Commits
	inRun := float64(commits) / (after.SyncTime - before.SyncTime).Seconds()
	b.ReportMetric(rate, "reservations/s")
	b.ReportMetric(float64(after.Fsyncs-before.Fsyncs)/float64(b.N), "fsyncs/reservation")
	b.ReportMetric(raw, "raw-fsyncs/s")
	b.ReportMetric(rate/(float64(callers)*raw), "ratio")
	// The same ratio against the fsync rate of the store's own commits
	// during the run, which does not drift with a shared disk's load.
	b.ReportMetric(inRun, "commit-fsyncs/s")
	b.ReportMetric(rate/(float64(callers)*inRun), "ratio-in-run")
}

// BenchmarkReserveBatch16 is BenchmarkReserve16 with 16 seqs (and bodies)
// per call, as SendBatch makes them: seqs per fsync grow with the batch.
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
