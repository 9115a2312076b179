package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore/memstore"
)

// discardDriver accepts every body and keeps nothing: the send side's own
// cost shows without a queue's.
type discardDriver struct {
	calls, bodies atomic.Int64
}

func (d *discardDriver) Limits() driver.Limits {
	return driver.Limits{MaxBatch: 16, MaxBody: 65536, MaxWait: time.Second, Visibility: 30 * time.Second,
		MinVisibility: time.Second, MaxVisibility: time.Hour}
}

func (d *discardDriver) SendBatch(ctx context.Context, bodies [][]byte) error {
	d.calls.Add(1)
	d.bodies.Add(int64(len(bodies)))
	return nil
}

func (d *discardDriver) ReceiveBatch(ctx context.Context, max int, wait time.Duration) ([]*driver.Message, error) {
	return nil, nil
}

func (d *discardDriver) DeleteBatch(ctx context.Context, receipts []string) error { return nil }

func (d *discardDriver) ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) (string, error) {
	return receipt, nil
}

func (d *discardDriver) IsRetryable(err error) bool { return false }

func (d *discardDriver) Close() error { return nil }

// cpuTime is the CPU time (user and system) the process used so far.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSendOverhead measures the send side alone: a driver that drops
// every body and memstore. cpu-ns/op is the process's CPU time per message
// (every goroutine, GC included), which a loaded machine disturbs less than
// ns/op. producers goroutines call SendAsync (or Send with sync).
func BenchmarkSendOverhead(b *testing.B) {
	for _, groups := range []int{1, 1000} {
		for _, mode := range []ordered.SendMode{ordered.SendDurable, ordered.SendFast} {
			for _, producers := range []int{1, 16} {
				b.Run(fmt.Sprintf("groups=%d/mode=%s/producers=%d", groups, mode, producers), func(b *testing.B) {
					benchOverhead(b, groups, mode, producers)
				})
			}
		}
	}
}

func benchOverhead(b *testing.B, groups int, mode ordered.SendMode, producers int) {
	drv := &discardDriver{}
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{Send: ordered.SendOptions{Mode: mode}})
	require.NoError(b, err)
	names := make([]string, groups)
	for i := range names {
		names[i] = fmt.Sprintf("group-%d", i)
	}
	payload := []byte("payload of about forty bytes, like a key")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	var wg sync.WaitGroup
	var failMu sync.Mutex
	var failed error
	fail := func(err error) {
		failMu.Lock()
		if failed == nil {
			failed = err
		}
		failMu.Unlock()
	}
	per := (b.N + producers - 1) / producers
	for p := range producers {
		count := max(0, min(per, b.N-p*per))
		wg.Go(func() {
			results := make(chan *ordered.SendResult, 1024)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for r := range results {
					if err := r.Wait(ctx); err != nil {
						fail(err)
					}
				}
			}()
			for i := range count {
				r, err := q.SendAsync(ctx, names[(p*per+i)%groups], payload)
				if err != nil {
					fail(err)
					break
				}
				results <- r
			}
			close(results)
			<-done
		})
	}
	wg.Wait()
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	require.NoError(b, q.Close(context.Background()))
	require.NoError(b, failed)
	st := q.Stats()
	if sent := drv.bodies.Load(); sent < int64(b.N) {
		b.Fatal(errors.New("fewer bodies reached the driver than were sent"))
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(drv.bodies.Load())/float64(drv.calls.Load()), "msgs/request")
	b.ReportMetric(float64(b.N)/float64(st.Send.Reservations), "msgs/reserve")
	b.ReportMetric(float64(b.N)/float64(max(1, st.Requests.Sent)), "msgs/mark")
}
