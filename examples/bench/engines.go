package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/reorder"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
)

// serialLatency is the emulated queue latency of the serial and pipelined
// rows.
const serialLatency = time.Millisecond

// runSerial is the MNS sample's design: for each message, reserve one seq
// (journaling the body, as durable mode does), send the message alone and
// wait for the queue, then mark it sent; then the next.
func runSerial(ctx context.Context, e *environment, sk storeKind, n, size int) (*result, error) {
	od, err := openMemqueue(ctx, e, serialLatency)
	if err != nil {
		return nil, err
	}
	defer od.close()
	ost, err := sk.open(ctx, e)
	if err != nil {
		return nil, err
	}
	defer ost.close()
	s := seqstore.Stream{Queue: e.name("serial"), Group: "g0000"}
	payload := make([]byte, size)
	alloc0, cpu0 := mallocs(), cpuTime()
	start := time.Now()
	for range n {
		rs, err := ost.s.Reserve(ctx, []seqstore.ReserveRequest{{Stream: s, N: 1, Journal: [][]byte{payload}}})
		if err != nil {
			return nil, err
		}
		r := rs[0]
		body := envelope.Append(nil, envelope.Header{Epoch: r.Epoch, Seq: r.First, Group: s.Group}, payload)
		if err := od.q.SendBatch(ctx, [][]byte{body}); err != nil {
			return nil, err
		}
		if err := ost.s.Sent(ctx, []seqstore.SentMark{{Stream: s, Seqs: []uint64{r.First}}}); err != nil {
			return nil, err
		}
	}
	elapsed := time.Since(start)
	return &result{
		Messages:       n,
		Rate:           float64(n) / elapsed.Seconds(),
		ReqsPerMsg:     float64(od.requests()) / float64(n),
		StoreOpsPerMsg: 2,
		AllocsPerMsg:   float64(mallocs()-alloc0) / float64(n),
		CPUPerMsg:      cpuPerMsg(cpuTime()-cpu0, n),
		Notes:          fmt.Sprintf("send only, %v queue latency", serialLatency),
	}, nil
}

// runPipelined sends n messages to one group from one goroutine with
// SendAsync over the same latency as runSerial. p50/p99 are from the call
// to the message's acceptance by the queue.
func runPipelined(ctx context.Context, e *environment, sk storeKind, n, size int) (*result, error) {
	od, err := openMemqueue(ctx, e, serialLatency)
	if err != nil {
		return nil, err
	}
	defer od.close()
	ost, err := sk.open(ctx, e)
	if err != nil {
		return nil, err
	}
	defer ost.close()
	q, err := ordered.New(ctx, od.q, ost.s, &ordered.Options{Name: e.name("pipelined")})
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Close(cctx)
	}()
	payload := make([]byte, size)
	results := make([]*ordered.SendResult, 0, n)
	admitted := make([]time.Duration, 0, n)
	alloc0, cpu0 := mallocs(), cpuTime()
	start := time.Now()
	for range n {
		admitted = append(admitted, time.Since(start))
		r, err := q.SendAsync(ctx, "g0000", payload)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	// Results complete in about admission order; waiting in order measures
	// each one's latency to within the wait of the one before.
	lat := make([]int64, n)
	for i, r := range results {
		if err := r.Wait(ctx); err != nil {
			return nil, err
		}
		lat[i] = int64(time.Since(start) - admitted[i])
	}
	elapsed := time.Since(start)
	allocs, cpu := mallocs()-alloc0, cpuTime()-cpu0
	st := q.Stats()
	slices.Sort(lat)
	return &result{
		Messages:       n,
		Rate:           float64(n) / elapsed.Seconds(),
		ReqsPerMsg:     float64(od.requests()) / float64(n),
		StoreOpsPerMsg: float64(st.Requests.Reserve+st.Requests.Sent) / float64(n),
		P50:            percentile(lat, 0.5),
		P99:            percentile(lat, 0.99),
		AllocsPerMsg:   float64(allocs) / float64(n),
		CPUPerMsg:      cpuPerMsg(cpu, n),
		Notes:          fmt.Sprintf("send only (latency to acceptance), %v queue latency, %.1f msgs/request", serialLatency, float64(n)/float64(st.Requests.Send)),
	}, nil
}

// benchItem stands in for the receive side's per-message record.
type benchItem struct{ body []byte }

// runReorder drives one reorder.Buffer from one goroutine with arrivals
// jittered the way a standard queue jitters them (each message up to 15
// places early or late), n messages in and out.
func runReorder(n int) (*result, error) {
	const cycle = 1 << 16
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]int, cycle)
	order := make([]uint64, cycle)
	for i := range order {
		order[i] = uint64(i)
		keys[i] = i + rng.IntN(16)
	}
	slices.SortStableFunc(order, func(a, b uint64) int { return keys[a] - keys[b] })
	buf := reorder.New[*benchItem](1, 1024, 1<<30)
	item := &benchItem{body: make([]byte, 100)}
	// Warm up: the ring grows to its working size.
	for i := range uint64(cycle) {
		buf.Insert(1+i, item, len(item.body))
		for buf.Ready() {
			buf.Pop()
		}
	}
	base := uint64(1 + cycle)
	popped := 0
	alloc0, cpu0 := mallocs(), cpuTime()
	start := time.Now()
	for i := 0; i < n; {
		for _, off := range order {
			if r, _ := buf.Insert(base+off, item, len(item.body)); r != reorder.Ready && r != reorder.Buffered {
				return nil, fmt.Errorf("Insert(%d) with Next()=%d: %v", base+off, buf.Next(), r)
			}
			for buf.Ready() {
				buf.Pop()
				popped++
			}
		}
		i += cycle
		base += cycle
	}
	elapsed := time.Since(start)
	if buf.Len() != 0 {
		return nil, fmt.Errorf("%d items left in the buffer", buf.Len())
	}
	return &result{
		Messages:     popped,
		Rate:         float64(popped) / elapsed.Seconds(),
		AllocsPerMsg: float64(mallocs()-alloc0) / float64(popped),
		CPUPerMsg:    cpuPerMsg(cpuTime()-cpu0, popped),
		Notes:        "one goroutine, jitter 16, window 1024",
	}, nil
}

// fsyncRate measures small append+fdatasync rounds per second in dir, the
// same durable write the filestore's commit makes.
func fsyncRate(dir string, d time.Duration) (float64, error) {
	f, err := os.OpenFile(filepath.Join(dir, "raw-fsync"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rec := make([]byte, 128)
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		if _, err := f.Write(rec); err != nil {
			return 0, err
		}
		if err := datasync(f); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// runFilestoreCommit runs callers goroutines, each making one reservation
// (with a journal body) at a time on its own stream, for d, and compares
// the reservations per second with callers x the fsyncs per second measured
// in the same directory just before and just after.
func runFilestoreCommit(ctx context.Context, callers int, d time.Duration) (*result, error) {
	dir, err := os.MkdirTemp("", "inorder-bench-fs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	before, err := fsyncRate(dir, d/3)
	if err != nil {
		return nil, err
	}
	st, err := filestore.Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	body := [][]byte{make([]byte, 100)}
	var done atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	alloc0 := mallocs()
	start := time.Now()
	for i := range callers {
		wg.Go(func() {
			s := seqstore.Stream{Queue: "bench", Group: fmt.Sprintf("g%d", i)}
			for time.Since(start) < d && ctx.Err() == nil {
				if _, err := st.Reserve(ctx, []seqstore.ReserveRequest{{Stream: s, N: 1, Journal: body}}); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	allocs := mallocs() - alloc0
	if p := firstErr.Load(); p != nil {
		return nil, *p
	}
	after, err := fsyncRate(dir, d/3)
	if err != nil {
		return nil, err
	}
	fs := st.Stats()
	perSync := (before + after) / 2
	n := int(done.Load())
	// The disk may be shared with other work, so the rate measured around
	// the run drifts; the time the store's own commit fsyncs took during
	// the run gives a second, in-run figure of the limit.
	inRun := "-"
	if fs.SyncTime > 0 && fs.Commits > 0 {
		limit := float64(callers) * float64(fs.Commits) / fs.SyncTime.Seconds()
		inRun = fmt.Sprintf("%.2f", float64(n)/elapsed.Seconds()/limit)
	}
	return &result{
		Messages:       n,
		Rate:           float64(n) / elapsed.Seconds(),
		StoreOpsPerMsg: 1,
		AllocsPerMsg:   float64(allocs) / float64(n),
		Notes: fmt.Sprintf("%.0f fdatasyncs/s (%.0f before, %.0f after), ratio to the commits' own fsync time %s, %.1f reservations/commit, %.2f fsyncs/reservation",
			perSync, before, after, inRun, float64(fs.Reservations)/float64(fs.Commits), float64(fs.Fsyncs)/float64(n)),
		baseRate: float64(callers) * perSync,
	}, nil
}
