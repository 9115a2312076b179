package ordered

import (
	"context"
	"errors"
	"time"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore"
)

// deadSendTries bounds the attempts of one dead-letter send.
const deadSendTries = 3

// deadLetter sends the original bodies of items to ReceiveOptions.DeadLetter
// and then settles each: a late arrival or untagged message is deleted, a
// poison message moves its group's cursor as an Ack would. A failed send
// leaves the message where it was: it comes back, or is retried.
func (r *receiver) deadLetter(ctx context.Context, items []deadItem) {
	dlq := r.o.DeadLetter
	if dlq == nil {
		return
	}
	max := max(dlq.Limits().MaxBatch, 1)
	for i := 0; i < len(items); i += max {
		chunk := items[i:min(i+max, len(items))]
		bodies := make([][]byte, len(chunk))
		for j, it := range chunk {
			bodies[j] = it.e.body
		}
		errs := r.sendDead(ctx, dlq, bodies)
		for j, it := range chunk {
			r.afterDead(ctx, it, errs[j])
		}
	}
}

// sendDead sends bodies with a few retries and returns one error per body.
func (r *receiver) sendDead(ctx context.Context, dlq driver.Queue, bodies [][]byte) []error {
	errs := make([]error, len(bodies))
	idx := make([]int, len(bodies))
	for i := range idx {
		idx[i] = i
	}
	for attempt := 1; len(idx) > 0; attempt++ {
		batch := make([][]byte, len(idx))
		for k, i := range idx {
			batch[k] = bodies[i]
		}
		err := dlq.SendBatch(ctx, batch)
		var be *driver.BatchError
		var retry []int
		for k, i := range idx {
			e := err
			if errors.As(err, &be) && len(be.Errs) == len(idx) {
				e = be.Errs[k]
			}
			errs[i] = e
			if e != nil && dlq.IsRetryable(e) {
				retry = append(retry, i)
			}
		}
		if len(retry) == 0 || attempt == deadSendTries || !sleepCtx(ctx, r.q.opts.Retry.backoff(attempt)) {
			break
		}
		idx = retry
	}
	return errs
}

func (r *receiver) afterDead(ctx context.Context, it deadItem, err error) {
	e := it.e
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	g := e.g
	if err != nil {
		r.log.WarnContext(ctx, "ordered: dead-letter send failed", "group", it.group, "seq", e.seq, "err", err)
		if it.poison && g != nil && g.out == e {
			g.clear(gAwait)
			r.scheduleRetryLocked(e, now)
		}
		return
	}
	r.st.DeadLettered++
	if r.hooks.OnDeadLetter != nil {
		r.hooks.OnDeadLetter(Event{Group: it.group, Epoch: e.epoch, Seq: e.seq, ID: e.id, DequeueCount: e.dequeue, Attempt: e.attempt, Err: it.reason})
	}
	r.log.WarnContext(ctx, "ordered: dead-lettered", "group", it.group, "epoch", e.epoch, "seq", e.seq, "err", it.reason)
	switch {
	case it.settled:
		// AtMostOnce: its cursor is already durable and its delete queued.
	case !it.poison || g == nil:
		delete(r.out, e)
		r.reapLocked(e)
	case g.out != e:
		// The group moved on meanwhile (a conflict): nothing to settle.
	case r.o.Mode == ExactlyOnce:
		r.mu.Unlock()
		r.advanceDeadExactly(ctx, g, e)
		r.mu.Lock()
	default:
		delete(r.out, e)
		r.advanceLocked(g, e)
		r.releaseLocked(g, now)
	}
}

// advanceDeadExactly moves the cursor past a dead-lettered message in
// ExactlyOnce mode, where no Ack of the application will.
func (r *receiver) advanceDeadExactly(ctx context.Context, g *group, e *entry) {
	r.mu.Lock()
	to := cloneCursor(g.ack)
	to.Epoch, to.Next = e.epoch, e.seq+1
	adv := seqstore.Advance{Stream: r.streamOf(g), From: cloneCursor(g.dur), To: to}
	r.mu.Unlock()
	err := r.advance(ctx, []seqstore.Advance{adv})
	r.mu.Lock()
	defer r.mu.Unlock()
	if g.out != e {
		return
	}
	now := time.Now()
	switch {
	case err == nil:
		g.dur, g.ack = to, cloneCursor(to)
		delete(r.out, e)
		r.reapLocked(e)
		r.flushUnflushedLocked(g)
		r.releaseLocked(g, now)
	case errors.Is(err, seqstore.ErrConflict):
		delete(r.out, e)
		g.clear(gAwait)
		r.conflictLocked(g, err)
	default:
		g.clear(gAwait)
		r.scheduleRetryLocked(e, now)
	}
}
