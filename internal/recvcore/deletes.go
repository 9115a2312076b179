package recvcore

import (
	"errors"
	"time"
)

// Limits of the actions the Core asks for.
const (
	maxDeletesInFlight    = 4
	maxVisibilityInFlight = 8
	maxUnparkQueries      = 64
	maxUnparkEntries      = 256
	maxDeadTries          = 5
)

// deleteLane deletes receipts from the queue in batches of the driver's
// size: a full batch at once, a partial one after ReapInterval (at once when
// a hand-out waits for it, or the Core closes).
type deleteLane struct {
	lane
	q      fifo[*msg]
	since  time.Time // the oldest delete waiting
	urgent bool      // a hand-out waits for a delete: send the partial batch now
	busy   map[uint64]delBatch
	spare  []delBatch // recycled lists of Delete actions
}

// delBatch is a Delete in flight: its messages and the receipts the shell
// was given. Both are recycled once Deleted answers.
type delBatch struct {
	ms       []*msg
	receipts []string
}

func (l *deleteLane) init() {
	l.lane = lane{limit: maxDeletesInFlight}
	l.busy = make(map[uint64]delBatch)
}

// push queues m's receipt.
func (l *deleteLane) push(now time.Time, m *msg) {
	if l.q.len() == 0 {
		l.since = now
		l.changed = true // due now (a receipt behind others queued changes nothing)
	}
	l.q.push(m)
}

// pending reports whether ready may have something to do at now: a receipt
// is queued, and the lane changed since dueAt was worked out, a hand-out
// waits for a delete (urgent), the Core closes, a batch is full, or the
// due time came. Otherwise ready would do nothing: dueAt is zero (the
// calls in flight are at the limit) or now is before the backoff or the
// batching window ends.
func (l *deleteLane) pending(c *Core, now time.Time) bool {
	if l.q.len() == 0 {
		return false
	}
	return l.changed || l.urgent || c.closing || l.q.len() >= c.cfg.MaxBatch || !l.dueAt.IsZero() && !now.Before(l.dueAt)
}

func (l *deleteLane) due(c *Core) time.Time {
	if l.q.len() == 0 || l.inFlight >= l.limit {
		return time.Time{}
	}
	if l.urgent {
		return maxTime(c.now, l.after)
	}
	return maxTime(l.since.Add(c.cfg.ReapInterval), l.after)
}

func (l *deleteLane) flushed(c *Core) bool { return l.idle() && l.q.len() == 0 }

func (l *deleteLane) ready(c *Core, now time.Time, rd *Ready) {
	if now.Before(l.after) {
		return // backing off after failed deletes
	}
	full := l.q.len() >= c.cfg.MaxBatch
	due := l.q.len() > 0 && (c.closing || l.urgent || !now.Before(l.since.Add(c.cfg.ReapInterval)))
	wasDue := due
	for l.inFlight < l.limit && (full || due) {
		n := min(l.q.len(), c.cfg.MaxBatch)
		if n == 0 {
			break
		}
		b := l.batch(n, c.cfg.MaxBatch)
		for range n {
			m, _ := l.q.pop()
			if !m.visibleAt().After(now) {
				c.lapsedDelete(now, m)
				continue
			}
			b.ms = append(b.ms, m)
			b.receipts = append(b.receipts, m.receipt)
		}
		if len(b.ms) > 0 {
			id := c.id()
			l.busy[id] = b
			l.inFlight++
			rd.Deletes = append(rd.Deletes, Delete{ID: id, Receipts: b.receipts})
		} else {
			l.spare = append(l.spare, b)
		}
		full = l.q.len() >= c.cfg.MaxBatch
		due = due && l.q.len() > 0
		l.since = now
	}
	// Urgent (a hand-out waits for its delete) until the queue went: at
	// the limit of calls in flight its receipts wait for a slot and go as
	// soon as one frees, not ReapInterval later. (With nothing queued the
	// urgency stays: deleteFirst sets it before a visibility change in
	// flight lets the receipt be queued.)
	if wasDue && l.q.len() == 0 {
		l.urgent = false
	}
}

// batch returns an empty delBatch for n receipts, recycled when one is spare.
func (l *deleteLane) batch(n, size int) delBatch {
	if k := len(l.spare); k > 0 && cap(l.spare[k-1].ms) >= n {
		b := l.spare[k-1]
		l.spare = l.spare[:k-1]
		return b
	}
	return delBatch{ms: make([]*msg, 0, size), receipts: make([]string, 0, size)}
}

// Deleted reports the outcome of the Delete action id, one result per
// receipt; nil results mean every receipt was deleted.
func (c *Core) Deleted(now time.Time, id uint64, res []DeleteResult) {
	c.begin(now)
	defer c.end()
	l := &c.deletes
	b, ok := l.busy[id]
	if !ok {
		return
	}
	delete(l.busy, id)
	l.inFlight--
	l.changed = true
	failed := false
	for i, m := range b.ms {
		var r DeleteResult
		switch {
		case res == nil:
		case i < len(res):
			r = res[i]
		default:
			r = DeleteResult{Err: errors.New("no result"), Retry: true}
		}
		if r.Err != nil && b.receipts[i] != m.receipt && m.receipt != "" {
			// Received again while the delete was on its way (its
			// copy's receipt replaced the one sent): the failure was
			// the old receipt's, and the new one is ours to delete.
			c.deletes.push(now, m)
			continue
		}
		if m.waitsForAny(outDelete, outAbandoned) {
			failed = c.deletedBeforeHandOut(now, m, r) || failed
			continue
		}
		failed = c.deletedOne(now, m, r) || failed
	}
	if failed {
		c.failed(&l.lane, nil)
	} else {
		l.succeeded()
	}
	if len(l.spare) < maxDeletesInFlight {
		clear(b.ms)
		clear(b.receipts)
		l.spare = append(l.spare, delBatch{ms: b.ms[:0], receipts: b.receipts[:0]})
	}
}

// lapsedDelete drops the delete of m, whose visibility ended while it
// waited (for a retry, or its batch): its receipt is stale, and the queue
// delivers it again (deleted then, as a duplicate).
func (c *Core) lapsedDelete(now time.Time, m *msg) {
	if m.waitsForAny(outDelete, outAbandoned) {
		c.deletedBeforeHandOut(now, m, DeleteResult{Err: errLapsed})
		return
	}
	c.report(Report{Kind: ReportWarn, Msg: "delete failed; the message comes back and is deleted then", ID: m.id, Err: errLapsed})
	c.gone(m)
}

// staleMargin is how long before the end of its visibility a message's
// receipt is taken to be still its own: a stale receipt earlier than that
// means the message was deleted, not received by another.
const staleMargin = time.Second

var errLapsed = errors.New("recvcore: the visibility ended before the delete could go: the receipt is stale")

// deletedOne applies the outcome r of m's delete. A delete that failed is
// retried, after the lane's backoff, for as long as m's receipt is valid
// (its visibility lasts); the queue counts m received and not deleted
// until then, and so does the Core.
func (c *Core) deletedOne(now time.Time, m *msg, r DeleteResult) bool {
	switch {
	case r.Err == nil:
		c.st.Deleted++
		if m.has(fDup) {
			c.st.DuplicatesReaped++
		}
		c.budget.undelTokens++
		c.gone(m)
	case r.Stale:
		c.st.StaleReceipts++
		if m.has(fLapsed) {
			// An extension whose answer was lost may have rotated the
			// receipt: the queue may hold the message until its end,
			// under a receipt the Core does not know.
			m.receipt = ""
			c.countUntilVisible(now, m, false)
		}
		c.gone(m)
	case r.Retry && m.visibleAt().After(now):
		m.tries++
		c.deletes.push(now, m)
		return true
	default:
		if m.tries == 0 || !r.Retry {
			c.report(Report{Kind: ReportWarn, Msg: "delete failed; the message comes back and is deleted then", ID: m.id, Err: r.Err})
		}
		c.countUntilVisible(now, m, false)
		c.gone(m)
	}
	return false
}

// deletedBeforeHandOut completes an AtMostOnce Unordered hand-out, which
// waits for its delete. A retry that finds the receipt stale although the
// message was still invisible to others when the answer came (by a margin:
// the service handled the request before that) follows an attempt that
// took effect: the message is ours, deleted. Not after a lost extension
// answer (that extension may have made the receipt stale), nor after a late
// one (the visibility may have ended up to its delay sooner).
func (c *Core) deletedBeforeHandOut(now time.Time, m *msg, r DeleteResult) bool {
	ownDelete := r.Stale && m.tries > 0 && !m.has(fLapsed|fLoose) && m.visibleAt().Sub(now) > staleMargin
	switch {
	case r.Err == nil || ownDelete:
		c.st.Deleted++
		c.deletedFirst(m)
		c.resolve(m.ticket, nil)
		m.ticket = 0
		if m.out == outAbandoned {
			c.owedUnordered(m)
		} else {
			m.handed()
		}
	case r.Retry && m.visibleAt().After(now):
		// Retried while the receipt lasts (the lane backs off): given
		// up earlier, an attempt that took effect unseen would leave
		// the message deleted and never handed out.
		m.tries++
		c.deletes.push(now, m)
		return true
	default:
		// Someone else may hold it now: do not hand it out.
		if m.out == outDelete {
			c.outstanding-- // the Receive waiting for it drops it
		}
		c.resolve(m.ticket, r.Err)
		m.ticket = 0
		c.unord.forget(unorderedKey(m))
		c.countUntilVisible(now, m, c.closing)
		c.gone(m)
	}
	return false
}
