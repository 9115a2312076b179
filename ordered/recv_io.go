package ordered

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/ordered/driver"
)

// The I/O the receive core asks for. Each runs in a goroutine of its own
// (the core bounds how many are in flight), bounded by the receive side's
// life and a timeout, and reports its outcome to the core. Nothing here
// decides: retries, backoff and what an error means are the core's.

// ioTimeout bounds one store or queue call of the receive side.
func (r *receiver) ioTimeout() time.Duration { return r.o.ReapTimeout }

// ioCtx returns the context of one store or queue call: the receive
// side's life, bounded by ioTimeout. The calls started within a tenth of
// the timeout share one context, one timer rather than one per call: each
// call is given the timeout at least, and a tenth more at most. Contexts
// past their share end with their deadline, or with the receive side.
func (r *receiver) ioCtx() context.Context {
	now := time.Now()
	if s := r.io.Load(); s != nil && now.Before(s.until) {
		return s.ctx
	}
	t := r.ioTimeout()
	until := now.Add(t / 10)
	ctx, cancel := context.WithDeadline(r.ctx, until.Add(t))
	r.io.Store(&ioShare{ctx: ctx, cancel: cancel, until: until})
	return ctx
}

// ioShare is a context that the calls started until until share.
type ioShare struct {
	ctx    context.Context
	cancel context.CancelFunc // called by nobody: the deadline or the receive side's end releases it
	until  time.Time
}

func (r *receiver) read(a recvcore.Read) {
	ctx := r.ioCtx()
	curs, err := r.q.storeCursors(ctx, a.Streams)
	r.step(func(now time.Time) { r.core.Read(now, a.ID, curs, err) })
}

// commit writes a's advances, and returns what OnCommit reports.
func (r *receiver) commit(a recvcore.Commit) Event {
	ctx := r.ioCtx()
	start := time.Now()
	err := r.q.storeAdvance(ctx, a.Advances)
	took := time.Since(start)
	r.step(func(now time.Time) { r.core.Committed(now, a.ID, err) })
	return Event{Duration: took, Err: err}
}

func (r *receiver) parkEntries(a recvcore.Park) {
	ctx := r.ioCtx()
	r.q.req.park.Add(1)
	err := r.q.store.Park(ctx, a.Entries)
	r.step(func(now time.Time) { r.core.Parked(now, a.ID, err) })
}

func (r *receiver) unpark(a recvcore.Unpark) {
	ctx := r.ioCtx()
	r.q.req.unpark.Add(1)
	res, err := r.q.store.Unpark(ctx, a.Queries)
	r.step(func(now time.Time) { r.core.Unparked(now, a.ID, res, err) })
}

func (r *receiver) scanPark(a recvcore.Scan) {
	ctx := r.ioCtx()
	streams, err := r.q.store.ParkedStreams(ctx, r.q.opts.Name)
	groups := make([]string, len(streams))
	for i, s := range streams {
		groups[i] = s.Group
	}
	r.step(func(now time.Time) { r.core.Scanned(now, a.ID, groups, err) })
}

func (r *receiver) delete(a recvcore.Delete) {
	ctx := r.ioCtx()
	err := r.q.drvDelete(ctx, a.Receipts)
	if err == nil {
		r.step(func(now time.Time) { r.core.Deleted(now, a.ID, nil) })
		return
	}
	res := make([]recvcore.DeleteResult, len(a.Receipts))
	var be *driver.BatchError
	perEntry := errors.As(err, &be) && len(be.Errs) == len(a.Receipts)
	for i := range res {
		e := err
		if perEntry {
			e = be.Errs[i]
		}
		if e != nil {
			res[i] = recvcore.DeleteResult{
				Err:   e,
				Stale: errors.Is(e, driver.ErrStaleReceipt) || errors.Is(e, driver.ErrBadReceipt),
				Retry: r.q.drv.IsRetryable(e) || ctx.Err() != nil && r.ctx.Err() == nil,
			}
		}
	}
	r.step(func(now time.Time) { r.core.Deleted(now, a.ID, res) })
}

// changeVisibility makes a few requests at a time.
func (r *receiver) changeVisibility(vs []recvcore.ChangeVisibility) {
	const parallel = 8
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, v := range vs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx := r.ioCtx()
			receipt, err := r.q.drvChangeVisibility(ctx, v.Receipt, v.Timeout)
			if errors.Is(err, driver.ErrStaleReceipt) || errors.Is(err, driver.ErrBadReceipt) {
				err = recvcore.NotApplied(err)
			}
			r.step(func(now time.Time) { r.core.Visibility(now, v.ID, receipt, err) })
		})
	}
	wg.Wait()
}

// deadLetter sends the bodies to ReceiveOptions.DeadLetter.
func (r *receiver) deadLetter(a recvcore.DeadLetter) {
	ctx := r.ioCtx()
	err := sendTo(ctx, r.o.DeadLetter, a.Bodies)
	r.step(func(now time.Time) { r.core.DeadLettered(now, a.ID, perBody(err, len(a.Bodies))) })
}

// requeue sends bodies back to the queue (see recvcore.Core.Close).
func (r *receiver) requeue(a recvcore.Requeue) {
	ctx := r.ioCtx()
	err := r.q.drvSend(ctx, a.Bodies, nil)
	r.step(func(now time.Time) { r.core.Requeued(now, a.ID, perBody(err, len(a.Bodies))) })
}

// perBody spreads the outcome of a batch send over its bodies.
func perBody(err error, n int) []error {
	errs := make([]error, n)
	var be *driver.BatchError
	perEntry := errors.As(err, &be) && len(be.Errs) == n
	for i := range errs {
		if perEntry {
			errs[i] = be.Errs[i]
		} else {
			errs[i] = err
		}
	}
	return errs
}
