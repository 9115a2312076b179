package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
)

// runError collects the first error of a run's goroutines and cancels it.
type runError struct {
	mu     sync.Mutex
	err    error
	cancel context.CancelFunc
}

func (r *runError) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
		r.cancel()
	}
}

func (r *runError) get() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// retry calls f until it succeeds, fails for good or ctx ends, as a careful
// user of a plain queue does.
func retry(ctx context.Context, drv driver.Queue, f func() error) error {
	for {
		err := f()
		if err == nil || !drv.IsRetryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// cpuPerMsg returns d per message in microseconds.
func cpuPerMsg(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Microsecond) / float64(n)
}

// mallocs returns the process's heap allocations so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// waitDelivered waits until chk saw every message, ctx ended or the run
// failed, and says which.
func waitDelivered(ctx context.Context, chk *checker, runCtx context.Context, re *runError) error {
	select {
	case <-chk.done:
		return nil
	case <-runCtx.Done():
		if err := re.get(); err != nil {
			return err
		}
		return fmt.Errorf("delivered %d of %d messages: %w", chk.delivered.Load(), chk.n, ctx.Err())
	}
}

// rawRun describes a raw row (or, with floor, a floor row).
type rawRun struct {
	driver driverKind
	groups int
	n      int
	// unbounded: the producers never wait (no backlog bound), and the row
	// reports the figures of a hot group (see hot).
	unbounded bool
	// floor, if set, adds ordering's unavoidable work to each message.
	floor *floorWork
}

// runRaw sends n messages through the driver alone: SendBatch of MaxBatch
// from the producers, ReceiveBatch of MaxBatch and DeleteBatch from the
// consumers, concurrently, until every message was received once. groups
// sets the backlog bound, as for the ordered run it is the base of (and,
// over a FIFO queue, the message groups sent, see below);
// with unbounded the producers never wait, and the row reports the figures
// of a hot group (see hot).
//
// Over a queue that orders each group itself (a FIFO queue, see
// driver.Grouped) each message is sent with SendGroups in its group, and
// the consumers check what the service promises: each message comes back
// in the group it was sent to, and each producer's messages to a group in
// the order it sent them (the order of different producers' sends to one
// group is their arrival order, which the bench does not know).
//
// With floor set, each message also carries an envelope header encoded at
// send, decoded and checked at receive, and each received batch ends with
// one cursor write (see floorWork).
func runRaw(ctx context.Context, c *config, e *environment, rr rawRun) (*result, error) {
	dk, groups, n, unbounded, fw := rr.driver, rr.groups, rr.n, rr.unbounded, rr.floor
	od, err := dk.open(ctx, e, 0)
	if err != nil {
		return nil, err
	}
	defer od.close()
	drv := od.q
	gq, _ := drv.(driver.Grouped)
	if gq != nil && !gq.Grouped() {
		gq = nil
	}
	lim := drv.Limits()
	wait := min(time.Second, lim.MaxWait)
	chk := e.track(newChecker(n, groups, c.producers))
	if !unbounded {
		chk.setBacklog(c.backlog)
	}
	pl := newPayloads(n, c.size)
	batches := make([][][]byte, c.producers)
	for p := range batches {
		batches[p] = make([][]byte, 0, lim.MaxBatch)
	}
	var groupBatches [][]string // the groups of batches[p], for SendGroups
	var counts [][]uint64       // per producer and group: messages sent
	if gq != nil {
		groupBatches, counts = make([][]string, c.producers), make([][]uint64, c.producers)
		for p := range groupBatches {
			groupBatches[p], counts[p] = make([]string, 0, lim.MaxBatch), make([]uint64, groups)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	re := &runError{cancel: cancel}
	var wg sync.WaitGroup
	req0 := od.requests()
	var kinds0 reqKinds // read after the total, before the allocations
	if od.byKind != nil {
		kinds0 = od.byKind()
	}
	alloc0, cpu0 := mallocs(), cpuTime()
	var rcv0 int64
	if unbounded {
		rcv0 = od.received()
	}
	chk.begin()
	for p := range c.producers {
		wg.Go(func() {
			lo, hi := producerRange(n, c.producers, p)
			var count uint64
			batch := batches[p]
			var gbatch []string
			if gq != nil {
				gbatch = groupBatches[p]
			}
			for id := lo; id < hi; {
				batch, gbatch = batch[:0], gbatch[:0]
				for ; id < hi && len(batch) < lim.MaxBatch; id++ {
					if err := chk.admit(runCtx); err != nil {
						return
					}
					body := pl.get(id)
					g := id % groups
					count++
					cnt := count
					if gq != nil {
						counts[p][g]++
						cnt = counts[p][g]
						gbatch = append(gbatch, chk.names[g])
					}
					stamp{admit: chk.now(), id: uint64(id), group: uint32(g), producer: uint32(p), count: cnt}.put(body)
					if fw != nil {
						body = fw.encode(id, g, body)
					}
					batch = append(batch, body)
				}
				send := func() error { return drv.SendBatch(runCtx, batch) }
				if gq != nil {
					send = func() error { return gq.SendGroups(runCtx, batch, gbatch) }
				}
				if err := retry(runCtx, drv, send); err != nil {
					re.set(fmt.Errorf("raw send: %w", err))
					return
				}
			}
		})
	}
	for i := range c.consumers {
		var fc *floorConsumer
		if fw != nil {
			fc = fw.consumer(i)
		}
		wg.Go(func() {
			receipts := make([]string, 0, lim.MaxBatch)
			for runCtx.Err() == nil {
				msgs, err := drv.ReceiveBatch(runCtx, lim.MaxBatch, wait)
				if err != nil {
					if runCtx.Err() == nil && !drv.IsRetryable(err) {
						re.set(fmt.Errorf("raw receive: %w", err))
					}
					continue
				}
				receipts = receipts[:0]
				for _, m := range msgs {
					switch {
					case gq != nil:
						chk.grouped(m.Group, m.Body)
					case fc != nil:
						payload, err := fc.decode(m.Body)
						if err != nil {
							re.set(err)
							return
						}
						chk.raw(payload)
					default:
						chk.raw(m.Body)
					}
					receipts = append(receipts, m.Receipt)
				}
				if fc != nil {
					if err := fc.commit(runCtx); err != nil {
						if runCtx.Err() == nil {
							re.set(fmt.Errorf("floor: cursor write: %w", err))
						}
						return
					}
				}
				if len(receipts) > 0 {
					// A failed delete only brings the message back, which
					// the checker counts as a duplicate.
					_ = drv.DeleteBatch(runCtx, receipts)
				}
			}
		})
	}
	werr := waitDelivered(ctx, chk, runCtx, re)
	alloc1, cpu1 := mallocs(), cpuTime()
	var h *hot
	if unbounded && werr == nil {
		h = &hot{receives: od.received() - rcv0, heapEnd: heapInuse()}
	}
	cancel()
	wg.Wait()
	if werr != nil {
		return nil, werr
	}
	if err := chk.err(); err != nil {
		return nil, err
	}
	r := &result{Messages: n, Rate: float64(n) / chk.elapsed().Seconds()}
	if od.byKind != nil {
		// Read before the total: requests cut short at the end still reach
		// the server, and the kinds must not count one the total missed.
		r.ReqsByKind = od.byKind().perMsg(kinds0, n)
	}
	r.ReqsPerMsg = float64(od.requests()-req0) / float64(n)
	r.AllocsPerMsg = float64(alloc1-alloc0) / float64(n)
	r.CPUPerMsg = cpuPerMsg(cpu1-cpu0, n)
	r.P50, r.P99 = chk.latencies()
	var notes []string
	if gq != nil {
		// A disorder fails the row (chk.err above); a row that passed says
		// that it was checked.
		notes = append(notes, fmt.Sprintf("%d of %d deliveries out of per-group order (each producer's sends to a group)", chk.violations.Load(), n))
	}
	if r.ReqsByKind != nil {
		notes = append(notes, r.ReqsByKind.String())
	}
	if d := chk.dups.Load(); d > 0 {
		notes = append(notes, fmt.Sprintf("%d duplicate deliveries", d))
	}
	r.Notes = joinNotes(notes)
	if h != nil {
		h.drain = chk.elapsed()
		h.first, h.pause = chk.pauses(0)
		h.apply(r, n)
	}
	return r, nil
}

// orderedRun describes one ordered scenario.
type orderedRun struct {
	driver driverKind
	store  storeKind
	mode   ordered.SendMode
	groups int
	n      int
	// hot: the producers never wait (no backlog bound), and the row
	// reports the figures of a hot group (see hot).
	hot bool
}

// runOrdered sends n messages over groups with ordered.Queue.SendAsync from
// the producers while Queue.Run hands them to a checking handler, until
// every message was delivered.
func runOrdered(ctx context.Context, c *config, e *environment, or orderedRun) (*result, error) {
	od, err := or.driver.open(ctx, e, 0)
	if err != nil {
		return nil, err
	}
	defer od.close()
	ost, err := or.store.open(ctx, e)
	if err != nil {
		return nil, err
	}
	defer ost.close()
	q, err := ordered.New(ctx, od.q, ost.s, &ordered.Options{
		Name:    e.name("bench"),
		Send:    ordered.SendOptions{Mode: or.mode},
		Receive: ordered.ReceiveOptions{Fetchers: c.consumers, Window: c.window, CommitInterval: c.commitInterval},
	})
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = q.Close(cctx)
		}
	}()

	n := or.n
	chk := e.track(newChecker(n, or.groups, c.producers))
	if !or.hot {
		chk.setBacklog(c.backlog)
	}
	pl := newPayloads(n, c.size)
	results := make([][]*ordered.SendResult, c.producers)
	counts := make([][]uint64, c.producers)
	for p := range c.producers {
		lo, hi := producerRange(n, c.producers, p)
		results[p] = make([]*ordered.SendResult, 0, hi-lo)
		counts[p] = make([]uint64, or.groups)
	}
	handler := func(_ context.Context, m *ordered.Message) error {
		chk.ordered(m.Group, m.Seq, m.Unordered, m.Body)
		return nil
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	re := &runError{cancel: cancel}
	var runWG, sendWG sync.WaitGroup
	req0 := od.requests()
	var kinds0 reqKinds // read after the total, before the allocations
	if od.byKind != nil {
		kinds0 = od.byKind()
	}
	alloc0, cpu0 := mallocs(), cpuTime()
	var rcv0 int64
	if or.hot {
		rcv0 = od.received()
	}
	chk.begin()
	runWG.Go(func() {
		if err := q.Run(runCtx, handler); err != nil && !errors.Is(err, context.Canceled) {
			re.set(fmt.Errorf("run: %w", err))
		}
	})
	for p := range c.producers {
		sendWG.Go(func() {
			lo, hi := producerRange(n, c.producers, p)
			for id := lo; id < hi; id++ {
				if err := chk.admit(runCtx); err != nil {
					return
				}
				g := id % or.groups
				counts[p][g]++
				body := pl.get(id)
				stamp{admit: chk.now(), id: uint64(id), group: uint32(g), producer: uint32(p), count: counts[p][g]}.put(body)
				res, err := q.SendAsync(runCtx, chk.names[g], body)
				if err != nil {
					re.set(fmt.Errorf("SendAsync: %w", err))
					return
				}
				results[p] = append(results[p], res)
			}
			for _, res := range results[p] {
				if err := res.Wait(runCtx); err != nil {
					re.set(fmt.Errorf("send: %w", err))
					return
				}
			}
		})
	}
	werr := waitDelivered(ctx, chk, runCtx, re)
	alloc1, cpu1 := mallocs(), cpuTime()
	if werr != nil {
		st := q.Stats()
		werr = fmt.Errorf("%w (sent %d, failed %d; received %d, delivered %d, buffered %d, undeleted %d, parked %d, unparked %d, not kept %d, shortened %d, groups %d, stuck %d)", werr,
			st.Send.Sent, st.Send.Failed, st.Receive.Received, st.Receive.Delivered, st.Receive.Buffered, st.Receive.Undeleted,
			st.Receive.Parked, st.Receive.Unparked, st.Receive.NotKept, st.Receive.Shortened, st.Receive.Groups, len(st.Receive.Stuck))
		if len(st.Receive.Stuck) > 0 {
			sg := st.Receive.Stuck[0]
			werr = fmt.Errorf("%w; group %q stuck since %v: %s", werr, sg.Group, time.Since(sg.Since).Round(time.Millisecond), sg.Reason)
		}
	}
	var h *hot
	if or.hot && werr == nil {
		st := q.Stats()
		h = &hot{ordered: true, receives: od.received() - rcv0, heapEnd: heapInuse(),
			advance: st.Requests.Advance, park: st.Requests.Park,
			maxUndeleted: st.Receive.MaxUndeleted, parked: st.Receive.Parked, notKept: st.Receive.NotKept}
	}
	cancel()
	sendWG.Wait()
	runWG.Wait()
	if werr != nil {
		return nil, werr
	}
	closeStart := time.Now()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = q.Close(cctx)
	ccancel()
	closed = true
	if err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	closeTime := time.Since(closeStart)
	if err := chk.err(); err != nil {
		return nil, err
	}
	st := q.Stats()
	r := &result{Messages: n, Rate: float64(n) / chk.elapsed().Seconds()}
	if od.byKind != nil {
		// Read before the total: requests cut short at the end still reach
		// the server, and the kinds must not count one the total missed.
		r.ReqsByKind = od.byKind().perMsg(kinds0, n)
	}
	r.ReqsPerMsg = float64(od.requests()-req0) / float64(n)
	r.StoreOpsPerMsg = float64(st.Requests.Reserve+st.Requests.Sent+st.Requests.Advance) / float64(n)
	r.AllocsPerMsg = float64(alloc1-alloc0) / float64(n)
	r.CPUPerMsg = cpuPerMsg(cpu1-cpu0, n)
	r.P50, r.P99 = chk.latencies()
	r.PeakBuffered = st.Receive.MaxBuffered
	notes := []string{fmt.Sprintf("reserve/sent/advance per msg %.3f/%.3f/%.3f",
		float64(st.Requests.Reserve)/float64(n), float64(st.Requests.Sent)/float64(n), float64(st.Requests.Advance)/float64(n))}
	if ost.notes != nil {
		notes = append(notes, ost.notes(n))
	}
	if r.ReqsByKind != nil {
		notes = append(notes, r.ReqsByKind.String())
	}
	if d := chk.dups.Load(); d > 0 {
		notes = append(notes, fmt.Sprintf("%d duplicate deliveries", d))
	}
	if st.Receive.NotKept > 0 && !or.hot {
		notes = append(notes, fmt.Sprintf("%d arrivals not kept", st.Receive.NotKept))
	}
	notes = append(notes, fmt.Sprintf("close %.2fs", closeTime.Seconds()))
	r.Notes = joinNotes(notes)
	if h != nil {
		h.drain = chk.elapsed()
		h.first, h.pause = chk.pauses(0)
		h.apply(r, n)
	}
	return r, nil
}

func joinNotes(notes []string) string {
	s := ""
	for i, n := range notes {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}
