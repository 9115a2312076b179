package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/recvcore"
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

// coreChunk is how many messages runCore prepares at a time (bodies,
// receipts), outside the measured time.
const coreChunk = 1 << 16

// runCore drives one recvcore.Core from one goroutine through the whole life
// of n messages spread round-robin over groups, as the shell would: they
// arrive in batches of 16, jittered the way a standard queue jitters them
// (each message up to 15 places early or late), and each is handed out
// (Next), acked, its cursor committed and its receipt deleted, every store
// and queue call succeeding at once. Bodies and receipts are made before the
// clock runs, as the driver makes them; the figures cover the Core alone.
func runCore(n, groups int) (*result, error) {
	cfg := recvcore.Config{
		Queue: "bench", GapTimeout: 30 * time.Second, StartSettle: 2 * time.Second, MaxAttempts: 5,
		RetryInitial: 50 * time.Millisecond, RetryMax: 5 * time.Second, Window: 4000, MaxHeld: 4000,
		MaxMemory: 64 << 20, MaxUndeletedRate: 1e9, MaxBatch: 16, MaxAdvances: 4096, MaxParks: 256,
		ReapInterval: 200 * time.Millisecond, Visibility: time.Hour, VisibilityMargin: -1,
		VisibilityExtend: time.Hour, ShortVisibility: time.Second, MaxVisibilityRate: 50, IdleEvict: -1,
		MaxEpochAhead: 24 * time.Hour,
	}
	core, err := recvcore.New(cfg)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]int, coreChunk)
	order := make([]int, coreChunk)
	for i := range order {
		order[i] = i
		keys[i] = i + rng.IntN(16)
	}
	slices.SortStableFunc(order, func(a, b int) int { return keys[a] - keys[b] })
	names := make([]string, groups)
	for g := range names {
		names[g] = groupName(g)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	payload := make([]byte, 100)
	in := make([]recvcore.Incoming, coreChunk)
	delivered, wrong := 0, 0
	next := make([]uint64, groups) // the next seq expected per group
	for g := range next {
		next[g] = 1
	}
	drain := func() {
		for {
			d, ok := core.Next(now)
			if !ok {
				break
			}
			if gi, ok := groupIndex(d.Group, groups); !ok || d.Seq != next[gi] {
				wrong++
			} else {
				next[gi]++
			}
			if _, err := core.Ack(now, &d, false); err == nil {
				delivered++
			}
		}
		rd := core.Ready(now)
		for _, r := range rd.Reads {
			core.Read(now, r.ID, make([]seqstore.Cursor, len(r.Streams)), nil)
		}
		for _, cm := range rd.Commits {
			core.Committed(now, cm.ID, nil)
		}
		for _, p := range rd.Parks {
			core.Parked(now, p.ID, nil)
		}
		for _, d := range rd.Deletes {
			core.Deleted(now, d.ID, make([]recvcore.DeleteResult, len(d.Receipts)))
		}
	}
	var elapsed, cpu time.Duration
	var allocs uint64
	for base := 0; base < n; base += coreChunk {
		m := min(coreChunk, n-base)
		perm := order
		if m < coreChunk { // the last, partial chunk: the same jitter among its own messages
			perm = slices.DeleteFunc(slices.Clone(order), func(k int) bool { return k >= m })
		}
		for i, k := range perm {
			id := base + k
			g := id % groups
			in[i] = recvcore.Incoming{
				Body:    envelope.Append(nil, envelope.Header{Group: names[g], Epoch: 1, Seq: uint64(id/groups) + 1}, payload),
				ID:      strconv.Itoa(id),
				Receipt: "r" + strconv.Itoa(id),
			}
		}
		alloc0, cpu0 := mallocs(), cpuTime()
		start := time.Now()
		for i := 0; i < m; i += 16 {
			core.Arrive(now, in[i:min(i+16, m)])
			drain()
		}
		elapsed += time.Since(start)
		cpu += cpuTime() - cpu0
		allocs += mallocs() - alloc0
	}
	start := time.Now()
	for range 3 { // partial delete batches go out on the reap timer
		now = now.Add(time.Second)
		core.Tick(now)
		drain()
	}
	elapsed += time.Since(start)
	st := core.Stats()
	switch {
	case wrong > 0:
		return nil, fmt.Errorf("ORDER VIOLATED: %d of %d hand-outs out of order", wrong, delivered+wrong)
	case delivered != n:
		return nil, fmt.Errorf("delivered %d of %d messages", delivered, n)
	case st.Held != 0:
		return nil, fmt.Errorf("%d messages left undeleted", st.Held)
	}
	return &result{
		Messages:     n,
		Rate:         float64(n) / elapsed.Seconds(),
		AllocsPerMsg: float64(allocs) / float64(n),
		CPUPerMsg:    cpuPerMsg(cpu, n),
		Notes: fmt.Sprintf("one goroutine, %d group(s), arrivals in 16s jittered by up to 15 places; commits %d, deletes %d",
			groups, st.Commits, st.Deleted),
	}, nil
}

// groupIndex returns the index of a group named by runCore ("g0042"),
// without allocating.
func groupIndex(name string, groups int) (int, bool) {
	if len(name) < 2 || name[0] != 'g' {
		return 0, false
	}
	i := 0
	for _, c := range []byte(name[1:]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, i < groups
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
