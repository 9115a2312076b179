package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// hot holds the figures of a hot-group row (one group, a deep or unbounded
// backlog): what the "Hot group" target (docs/PERFORMANCE.md) and
// issue 12 ask about.
type hot struct {
	drain        time.Duration // to the last delivery
	receives     int64         // messages the queue handed out, redeliveries included
	advance      int64         // store Advance calls
	park         int64         // store Park calls
	first        time.Duration // from the start (of the drain, or the first send) to the first delivery
	pause        time.Duration // longest time between two deliveries
	maxUndeleted int           // peak of ReceiveStats.Undeleted
	parked       int64         // ReceiveStats.Parked
	notKept      int64         // ReceiveStats.NotKept
	heapEnd      uint64        // heap in use after the drain, after a GC
	heapStart    uint64        // the same before it (0: not measured)
	ordered      bool          // a row of ordered.Queue, not of the raw driver
}

// apply puts h into r's fields and notes.
func (h *hot) apply(r *result, n int) {
	r.DrainSeconds = h.drain.Seconds()
	r.ReceivesPerMsg = float64(h.receives) / float64(n)
	r.LongestPause = h.pause.Seconds()
	r.HeapInuseMiB = float64(h.heapEnd) / (1 << 20)
	notes := []string{fmt.Sprintf("drain %.2fs", h.drain.Seconds()), fmt.Sprintf("%.3f receives/msg", r.ReceivesPerMsg)}
	if h.ordered {
		r.StoreWritesPerMsg = float64(h.advance+h.park) / float64(n)
		r.MaxUndeleted, r.Parked, r.NotKept = h.maxUndeleted, h.parked, h.notKept
		notes = append(notes,
			fmt.Sprintf("store writes %.4f/msg (advance %.4f, park %.4f)", r.StoreWritesPerMsg, float64(h.advance)/float64(n), float64(h.park)/float64(n)),
			fmt.Sprintf("longest pause %.3fs (first delivery after %.3fs)", h.pause.Seconds(), h.first.Seconds()),
			fmt.Sprintf("peak undeleted %d, parked %d, not kept %d", h.maxUndeleted, h.parked, h.notKept))
	} else {
		notes = append(notes, fmt.Sprintf("longest pause %.3fs (first delivery after %.3fs)", h.pause.Seconds(), h.first.Seconds()))
	}
	heap := fmt.Sprintf("heap in use %.1f MiB at the end", r.HeapInuseMiB)
	if h.heapStart > 0 {
		heap += fmt.Sprintf(" (%.1f MiB before the drain)", float64(h.heapStart)/(1<<20))
	}
	notes = append(notes, heap)
	if r.Notes != "" {
		notes = append(notes, r.Notes)
	}
	r.Notes = joinNotes(notes)
}

// heapInuse returns the heap in use after a collection: what the process
// still holds.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// backlogRun describes a backlog/memqueue row.
type backlogRun struct {
	n           int
	loseReceive float64       // memqueue Options.LoseReceive
	visibility  time.Duration // memqueue Options.Visibility (0: its default, 30 s)
}

// runBacklog puts n messages of one group into a memqueue in a fully
// shuffled order (raw SendBatch of envelopes, seqs 1..n), then drains them
// with an ordered receiver on default options over memstore: the hot group
// of issue 12. Requests, receives and CPU are those of the drain alone.
func runBacklog(ctx context.Context, c *config, e *environment, br backlogRun) (*result, error) {
	n := br.n
	od := openMemqueueWith(&memqueue.Options{Seed: 1, LoseReceive: br.loseReceive, Visibility: br.visibility})
	defer od.close()
	mq := od.q.(*memqueue.Queue)
	st := memstore.New()
	defer st.Close()
	chk := e.track(newChecker(n, 1, 1))

	if err := sendShuffled(ctx, mq, n, c.size, chk.names[0]); err != nil {
		return nil, err
	}

	// A legitimate backlog behind a hole parks what it needs: the default
	// park limit (100,000 messages) is below the full run's 200,000, and
	// beyond it a backlog drains in repeated passes over the queue (README,
	// "Park limits").
	q, err := ordered.New(ctx, mq, st, &ordered.Options{Name: e.name("backlog"),
		Receive: ordered.ReceiveOptions{ParkLimits: ordered.ParkLimits{Messages: int64(2 * n)}}})
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
	h := &hot{ordered: true, heapStart: heapInuse()}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	re := &runError{cancel: cancel}
	var wg sync.WaitGroup
	req0, rcv0, alloc0, cpu0 := od.requests(), od.received(), mallocs(), cpuTime()
	chk.begin()
	wg.Go(func() {
		err := q.Run(runCtx, func(_ context.Context, m *ordered.Message) error {
			chk.ordered(m.Group, m.Seq, m.Unordered, m.Body)
			return nil
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			re.set(fmt.Errorf("run: %w", err))
		}
	})
	werr := waitDelivered(ctx, chk, runCtx, re)
	alloc1, cpu1 := mallocs(), cpuTime()
	req1, rcv1 := od.requests(), od.received()
	qs := q.Stats()
	if werr != nil {
		werr = fmt.Errorf("%w (received %d, delivered %d, buffered %d, undeleted %d, parked %d, unparked %d, not kept %d, stuck %d)", werr,
			qs.Receive.Received, qs.Receive.Delivered, qs.Receive.Buffered, qs.Receive.Undeleted, qs.Receive.Parked,
			qs.Receive.Unparked, qs.Receive.NotKept, len(qs.Receive.Stuck))
		if len(qs.Receive.Stuck) > 0 {
			sg := qs.Receive.Stuck[0]
			werr = fmt.Errorf("%w; group %q stuck since %v: %s", werr, sg.Group, time.Since(sg.Since).Round(time.Millisecond), sg.Reason)
		}
	}
	h.heapEnd = heapInuse()
	cancel()
	wg.Wait()
	if werr != nil {
		return nil, werr
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = q.Close(cctx)
	ccancel()
	closed = true
	if err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	if err := chk.err(); err != nil {
		return nil, err
	}
	h.drain = chk.elapsed()
	h.first, h.pause = chk.pauses(0)
	h.receives = rcv1 - rcv0
	h.advance, h.park = qs.Requests.Advance, qs.Requests.Park
	h.maxUndeleted, h.parked, h.notKept = qs.Receive.MaxUndeleted, qs.Receive.Parked, qs.Receive.NotKept
	r := &result{Messages: n, Rate: float64(n) / h.drain.Seconds()}
	r.ReqsPerMsg = float64(req1-req0) / float64(n)
	r.StoreOpsPerMsg = float64(qs.Requests.Advance+qs.Requests.Park+qs.Requests.Unpark+qs.Requests.Cursor) / float64(n)
	r.AllocsPerMsg = float64(alloc1-alloc0) / float64(n)
	r.CPUPerMsg = cpuPerMsg(cpu1-cpu0, n)
	r.PeakBuffered = qs.Receive.MaxBuffered
	var notes []string
	if br.visibility > 0 {
		notes = append(notes, fmt.Sprintf("visibility timeout %v", br.visibility))
	}
	if br.loseReceive > 0 {
		notes = append(notes, fmt.Sprintf("%d receive responses lost (LoseReceive %g)", mq.Stats().LostReceives, br.loseReceive))
	}
	if d := chk.dups.Load(); d > 0 {
		notes = append(notes, fmt.Sprintf("%d duplicate deliveries", d))
	}
	notes = append(notes, fmt.Sprintf("queue requests of the drain; %d unparks", qs.Requests.Unpark))
	r.Notes = joinNotes(notes)
	h.apply(r, n)
	return r, nil
}

// sendShuffled sends envelopes of group's seqs 1..n, as the sender makes
// them, in a fully shuffled order with raw SendBatch. Each payload carries
// the checker's stamp (seq k is the one producer's k-th message).
func sendShuffled(ctx context.Context, mq *memqueue.Queue, n, size int, group string) error {
	bodies := make([][]byte, n)
	payload := make([]byte, size)
	for id := range n {
		stamp{id: uint64(id), count: uint64(id + 1)}.put(payload)
		bodies[id] = envelope.Append(nil, envelope.Header{Group: group, Epoch: 1, Seq: uint64(id + 1)}, payload)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
	max := mq.Limits().MaxBatch
	for i := 0; i < n; i += max {
		batch := bodies[i:min(i+max, n)]
		if err := retry(ctx, mq, func() error { return mq.SendBatch(ctx, batch) }); err != nil {
			return fmt.Errorf("backlog send: %w", err)
		}
	}
	return nil
}
