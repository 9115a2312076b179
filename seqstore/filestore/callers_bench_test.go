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

// BenchmarkCallers runs N concurrent callers, each waiting on one
// reservation (one seq, a 100-byte journal body, its own stream) at a time,
// never marked sent, and compares their rate with its physical limit, N x
// the rate of small append+fdatasync rounds on the same file system. Both
// are measured in the same run, alternately (callers paused during the raw
// phases), so that they see the same disk and the same load from other
// work on the machine. The store writes its frames over zeros written
// ahead, which spares fdatasync the journal commit of an append, so the run
// also measures small overwrites of a zeroed file and reports the ratio to
// that rate (ratio-overwrite).
//
// Metrics: res/s and fsyncs/s of the store over its phases, res/fsync,
// raw-fsyncs/s and ratio = res/s ÷ (N × raw), raw-overwrite/s and
// ratio-overwrite, and per commit: µs/commit (wall time between commits),
// µs/commit-sync (its fsync), µs/commit-wait (the writer waiting for the
// callers of the previous commit to come back, Stats.WaitTime) and
// timeouts/commit (waits that ended at their bound). µs/commit minus
// µs/commit-sync is the time the disk waits for the writer.
func BenchmarkCallers(b *testing.B) {
	for _, n := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) { benchCallers(b, n, 1) })
	}
}

// BenchmarkMultiStream is BenchmarkCallers/N=64 with the 64 reservations
// made by 4 callers, each reserving one seq of 16 streams per call, as
// the sender does for many groups: the ratio is to 64 x raw fsyncs/s.
func BenchmarkMultiStream(b *testing.B) {
	benchCallers(b, 4, 16)
}

// rawSyncs measures rounds of a 128-byte write and fdatasync on one file:
// appended, or written over zeros already synced.
type rawSyncs struct {
	f      *os.File
	off    int64
	n      int
	d      time.Duration
	append bool
}

func newRawSyncs(b *testing.B, path string, appending bool) *rawSyncs {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if !appending {
		if _, err := f.Write(make([]byte, 64<<20)); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	return &rawSyncs{f: f, append: appending}
}

func (r *rawSyncs) run(b *testing.B, d time.Duration) {
	rec := make([]byte, 128)
	start := time.Now()
	for time.Since(start) < d {
		if !r.append && r.off+int64(len(rec)) > 64<<20 {
			r.off = 0
		}
		if _, err := r.f.WriteAt(rec, r.off); err != nil {
			b.Fatal(err)
		}
		if err := syncData(r.f); err != nil {
			b.Fatal(err)
		}
		r.off += int64(len(rec))
		r.n++
	}
	r.d += time.Since(start)
}

func (r *rawSyncs) rate() float64 { return float64(r.n) / r.d.Seconds() }

// benchCallers runs callers goroutines, each reserving one seq of each
// of its perCall streams per call; b.N counts reservations.
func benchCallers(b *testing.B, callers, perCall int) {
	const phase = 50 * time.Millisecond
	dir := b.TempDir()
	appends := newRawSyncs(b, filepath.Join(dir, "raw-append"), true)
	overwrites := newRawSyncs(b, filepath.Join(dir, "raw-overwrite"), false)
	s, err := Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	var gate sync.RWMutex // held by the raw phases
	var left, done atomic.Int64
	left.Store(int64(b.N))
	finished := make(chan struct{})
	body := make([]byte, 100)
	var wg sync.WaitGroup
	gate.Lock()
	for i := range callers {
		wg.Go(func() {
			reqs := make([]seqstore.ReserveRequest, perCall)
			for j := range reqs {
				reqs[j] = seqstore.ReserveRequest{Stream: seqstore.Stream{Queue: "bench", Group: fmt.Sprint(i, "/", j)}, N: 1, Journal: [][]byte{body}}
			}
			for {
				gate.RLock()
				if left.Add(-int64(perCall)) <= -int64(perCall) {
					gate.RUnlock()
					return
				}
				_, err := s.Reserve(ctx, reqs)
				gate.RUnlock()
				if err != nil {
					b.Error(err)
				}
				if d := done.Add(int64(perCall)); d >= int64(b.N) && d-int64(perCall) < int64(b.N) {
					close(finished) // this call crossed b.N: the run's last
				}
			}
		})
	}
	before := s.Stats()
	var storeTime time.Duration
	b.ResetTimer()
	for round, ended := 0, false; !ended; round++ {
		if round%2 == 0 {
			appends.run(b, phase)
		} else {
			overwrites.run(b, phase)
		}
		start := time.Now()
		gate.Unlock()
		select {
		case <-time.After(phase):
		case <-finished:
			ended = true
		}
		gate.Lock()
		storeTime += time.Since(start)
	}
	b.StopTimer()
	gate.Unlock()
	wg.Wait()
	if overwrites.n == 0 {
		overwrites.run(b, phase)
	}
	after := s.Stats()
	fsyncs := float64(after.Fsyncs - before.Fsyncs)
	commits := float64(after.Commits - before.Commits)
	n := float64(done.Load()) // b.N rounded up to whole calls
	rate := n / storeTime.Seconds()
	b.ReportMetric(rate, "res/s")
	b.ReportMetric(fsyncs/storeTime.Seconds(), "fsyncs/s")
	b.ReportMetric(n/fsyncs, "res/fsync")
	b.ReportMetric(appends.rate(), "raw-fsyncs/s")
	b.ReportMetric(rate/(float64(callers*perCall)*appends.rate()), "ratio")
	b.ReportMetric(overwrites.rate(), "raw-overwrite/s")
	b.ReportMetric(rate/(float64(callers*perCall)*overwrites.rate()), "ratio-overwrite")
	b.ReportMetric(storeTime.Seconds()/commits*1e6, "µs/commit")
	b.ReportMetric((after.SyncTime-before.SyncTime).Seconds()/commits*1e6, "µs/commit-sync")
	b.ReportMetric((after.WaitTime-before.WaitTime).Seconds()/commits*1e6, "µs/commit-wait")
	b.ReportMetric(float64(after.WaitTimeouts-before.WaitTimeouts)/commits, "timeouts/commit")
}
