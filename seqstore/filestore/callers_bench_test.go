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
// reservation (one seq, a 100-byte journal body, its own stream) at a
// time, and compares their rate with its physical limit, N x the rate of
// small append+fdatasync rounds on the same file system. The two are
// measured in the same run, alternately, 50ms each (callers paused during
// the raw phases), so that both see the same disk and the same load from
// other work on the machine. Metrics: res/s and fsyncs/s of the store (over
// its phases), res/fsync, raw-fsyncs/s, and ratio = res/s ÷ (N × raw).
func BenchmarkCallers(b *testing.B) {
	for _, n := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) { benchCallers(b, n) })
	}
}

func benchCallers(b *testing.B, callers int) {
	const phase = 50 * time.Millisecond
	dir := b.TempDir()
	raw, err := os.OpenFile(filepath.Join(dir, "raw-fsync"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	rec := make([]byte, 128)
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
			st := seqstore.Stream{Queue: "bench", Group: fmt.Sprint(i)}
			journal := [][]byte{body}
			for {
				gate.RLock()
				if left.Add(-1) < 0 {
					gate.RUnlock()
					return
				}
				_, err := s.Reserve(ctx, []seqstore.ReserveRequest{{Stream: st, N: 1, Journal: journal}})
				gate.RUnlock()
				if err != nil {
					b.Error(err)
				}
				if done.Add(1) == int64(b.N) {
					close(finished)
				}
			}
		})
	}
	before := s.Stats()
	var storeTime, rawTime time.Duration
	rawSyncs := 0
	b.ResetTimer()
	for ended := false; !ended; {
		start := time.Now()
		for time.Since(start) < phase {
			if _, err := raw.Write(rec); err != nil {
				b.Fatal(err)
			}
			if err := syncData(raw); err != nil {
				b.Fatal(err)
			}
			rawSyncs++
		}
		rawTime += time.Since(start)
		start = time.Now()
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
	after := s.Stats()
	fsyncs := float64(after.Fsyncs - before.Fsyncs)
	rate := float64(b.N) / storeTime.Seconds()
	rawRate := float64(rawSyncs) / rawTime.Seconds()
	b.ReportMetric(rate, "res/s")
	b.ReportMetric(fsyncs/storeTime.Seconds(), "fsyncs/s")
	b.ReportMetric(float64(b.N)/fsyncs, "res/fsync")
	b.ReportMetric(rawRate, "raw-fsyncs/s")
	b.ReportMetric(rate/(float64(callers)*rawRate), "ratio")
	commits := float64(after.Commits - before.Commits)
	b.ReportMetric((after.SyncTime-before.SyncTime).Seconds()/commits*1e6, "µs/commit-sync")
	b.ReportMetric(storeTime.Seconds()/commits*1e6, "µs/commit")
	b.ReportMetric(rawTime.Seconds()/float64(rawSyncs)*1e6, "µs/raw")
}
