package ordered

import (
	"context"
	"errors"
	"time"

	"github.com/inorder/inorder/ordered/driver"
)

// maxDeleteTries bounds the attempts to delete one message; after them the
// message is left to come back, when it is reaped as a duplicate.
const maxDeleteTries = 5

// reapLoop is the reaper, in the style of River's job cleaner: it wakes on a
// ticker (or as soon as a full batch waits), deletes in batches of the
// driver's MaxBatch with a timeout per request, logs failures and goes on.
// It only ever sees messages whose cursor advance is durable, duplicates
// below the durable cursor, and Unordered messages that were settled.
func (r *receiver) reapLoop() {
	defer close(r.reapDone)
	ctx := r.ctx
	tick := time.NewTicker(r.o.ReapInterval)
	defer tick.Stop()
	flushing := false
	for {
		full := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.reapWake:
			full = true
		case <-r.reapFlush:
			if flushing {
				// Already flushing: wait for the ticker before retrying.
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
			flushing = true
		}
		r.reapOnce(ctx, full && !flushing)
		if flushing {
			r.mu.Lock()
			left := len(r.reapq)
			r.mu.Unlock()
			if left == 0 {
				return
			}
		}
	}
}

// reapOnce deletes the queued messages; with fullOnly it leaves a partial
// last batch for the next tick, so that requests carry full batches.
func (r *receiver) reapOnce(ctx context.Context, fullOnly bool) {
	max := r.q.limits.MaxBatch
	r.mu.Lock()
	n := len(r.reapq)
	if fullOnly {
		n -= n % max
	}
	batch := make([]*entry, n)
	copy(batch, r.reapq)
	rest := copy(r.reapq, r.reapq[n:])
	clear(r.reapq[rest:])
	r.reapq = r.reapq[:rest]
	r.mu.Unlock()

	deleted, stale := 0, 0
	for i := 0; i < len(batch); i += max {
		chunk := batch[i:min(i+max, len(batch))]
		if ctx.Err() != nil {
			r.requeue(chunk)
			continue
		}
		receipts := make([]string, len(chunk))
		r.mu.Lock()
		for j, e := range chunk {
			receipts[j] = e.receipt
		}
		r.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, r.o.ReapTimeout)
		err := r.q.drvDelete(cctx, receipts)
		cancel()
		d, s := r.afterDelete(ctx, chunk, err)
		deleted += d
		stale += s
	}
	if deleted > 0 || stale > 0 {
		r.log.DebugContext(ctx, "ordered: reaper pass", "deleted", deleted, "stale_receipts", stale)
	}
}

func (r *receiver) requeue(es []*entry) {
	r.mu.Lock()
	r.reapq = append(r.reapq, es...)
	r.mu.Unlock()
}

// afterDelete accounts for one delete request. A stale receipt is fine: the
// message comes back and is reaped as a duplicate then.
func (r *receiver) afterDelete(ctx context.Context, chunk []*entry, err error) (deleted, stale int) {
	var be *driver.BatchError
	perEntry := errors.As(err, &be) && len(be.Errs) == len(chunk)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range chunk {
		eerr := err
		if perEntry {
			eerr = be.Errs[i]
		}
		switch {
		case eerr == nil:
			deleted++
			r.st.Deleted++
			if e.dup {
				r.st.DuplicatesReaped++
			}
		case errors.Is(eerr, driver.ErrStaleReceipt) || errors.Is(eerr, driver.ErrBadReceipt):
			stale++
			r.st.StaleReceipts++
		case ctx.Err() != nil:
			r.reapq = append(r.reapq, e)
		default:
			e.retries++
			if e.retries < maxDeleteTries && r.q.drv.IsRetryable(eerr) {
				r.reapq = append(r.reapq, e)
			} else if e.retries == maxDeleteTries || !r.q.drv.IsRetryable(eerr) {
				r.log.WarnContext(ctx, "ordered: delete failed; the message will come back and be reaped then", "id", e.id, "err", eerr)
			}
		}
	}
	return deleted, stale
}
