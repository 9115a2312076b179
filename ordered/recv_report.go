package ordered

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/inorder/inorder/internal/recvcore"
)

// reporter runs the hooks and logs of the core's reports on a goroutine of
// its own, in order, so that no step of the receiver waits for a hook and a
// hook may call Receive, Close or Stats. Reports queue up while a hook runs;
// beyond maxQueuedReports they are dropped (counted, and the first drop
// logged).
type reporter struct {
	out     func(recvcore.Report)
	warn    func(msg string, args ...any)
	mu      sync.Mutex
	q       []recvcore.Report
	wake    chan struct{} // cap 1
	done    chan struct{} // closed when the goroutine ends
	stopped atomic.Bool
	gid     atomic.Uint64 // the goroutine's id: a hook that calls Close
	dropped atomic.Int64
}

// maxQueuedReports bounds the reports waiting for a slow hook.
const maxQueuedReports = 64 << 10

func (p *reporter) start(out func(recvcore.Report), warn func(msg string, args ...any)) {
	p.out, p.warn = out, warn
	p.wake = make(chan struct{}, 1)
	p.done = make(chan struct{})
	go p.loop()
}

// add queues reports.
func (p *reporter) add(reps []recvcore.Report) {
	if len(reps) == 0 {
		return
	}
	p.mu.Lock()
	n := min(len(reps), max(0, maxQueuedReports-len(p.q)))
	p.q = append(p.q, reps[:n]...)
	p.mu.Unlock()
	if d := int64(len(reps) - n); d > 0 && p.dropped.Add(d) == d {
		p.warn("ordered: hooks too slow: events dropped (ReceiveStats.HooksDropped)", "waiting", maxQueuedReports)
	}
	signal(p.wake)
}

func (p *reporter) loop() {
	defer close(p.done)
	p.gid.Store(goid())
	for {
		p.mu.Lock()
		q := p.q
		p.q = nil
		p.mu.Unlock()
		for _, rep := range q {
			p.out(rep)
		}
		if len(q) > 0 {
			continue
		}
		if p.stopped.Load() {
			return
		}
		<-p.wake
	}
}

// stop ends the goroutine once the reports queued are out, and waits for
// that within ctx, so that no hook runs once Close returned. A hook that
// calls Close would wait for itself: called on the goroutine, stop does not
// wait, and the goroutine ends when the hook returns.
func (p *reporter) stop(ctx context.Context) error {
	p.stopped.Store(true)
	signal(p.wake)
	if p.onGoroutine() {
		return nil
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reportOut passes a report of the core to the hooks and the log, with
// stable keys. It runs on the reporter's goroutine: a hook may call
// Queue.Stats, Receive or Close.
func (r *receiver) reportOut(rep recvcore.Report) {
	ev := Event{Group: rep.Group, Epoch: rep.Epoch, Seq: rep.Seq, Last: rep.Last, From: rep.From, ID: rep.ID,
		DequeueCount: rep.DequeueCount, Attempt: rep.Attempt, Age: rep.Age, Err: rep.Err, Action: rep.Action}
	h := r.hooks
	call := func(f func(Event)) {
		if f != nil {
			f(ev)
		}
	}
	attrs := []any{"group", rep.Group, "epoch", rep.Epoch, "seq", rep.Seq}
	if rep.Last != 0 {
		attrs = append(attrs, "last", rep.Last)
	}
	if rep.ID != "" {
		attrs = append(attrs, "id", rep.ID)
	}
	if rep.Attempt != 0 {
		attrs = append(attrs, "attempt", rep.Attempt)
	}
	if rep.Err != nil {
		attrs = append(attrs, "err", rep.Err)
	}
	msg := "ordered: " + rep.Msg
	switch rep.Kind {
	case recvcore.ReportGap:
		call(h.OnGap)
		r.log.Warn(msg, append(attrs, "age", rep.Age)...)
	case recvcore.ReportSkip:
		call(h.OnSkip)
		r.log.Warn(msg, attrs...)
	case recvcore.ReportDuplicate:
		call(h.OnDuplicate)
	case recvcore.ReportRedeliver:
		call(h.OnRedeliver)
	case recvcore.ReportLate:
		call(h.OnLate)
		call(h.OnStale)
		r.log.Warn(msg, attrs...)
	case recvcore.ReportEpoch:
		call(h.OnEpoch)
		r.log.Info(msg, append(attrs, "from", rep.From)...)
	case recvcore.ReportDeadLetter:
		call(h.OnDeadLetter)
		r.log.Warn(msg, attrs...)
	case recvcore.ReportStuck:
		call(h.OnStuck)
		r.log.Warn(msg, attrs...)
	case recvcore.ReportConflict:
		call(h.OnConflict)
		r.log.Error(msg, attrs...)
	case recvcore.ReportUntagged:
		call(h.OnUntagged)
		r.log.Warn(msg, attrs...)
	case recvcore.ReportMismatch:
		call(h.OnMismatch)
		r.log.Warn(msg, attrs...)
	case recvcore.ReportRepair:
		call(h.OnRepair)
		r.log.Info(msg, append(attrs, "action", rep.Action)...)
	default:
		r.log.Warn(msg, attrs...)
	}
}

// onGoroutine reports whether the caller runs on the reporter's goroutine:
// in a hook.
func (p *reporter) onGoroutine() bool {
	g := p.gid.Load()
	return g != 0 && g == goid()
}

// goid returns the calling goroutine's id, read from the first line of its
// stack trace ("goroutine 42 [running]:"). Only onGoroutine and the reporter's
// loop call it: the one question it answers is whether Close was called
// from a hook, which nothing else tells apart from a Close while a hook runs.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, _ = bytes.CutPrefix(b, []byte("goroutine "))
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
