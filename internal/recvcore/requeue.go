package recvcore

import (
	"errors"
	"time"
)

// requeueLane sends bodies back to the queue: at Close, the AtMostOnce
// messages that no application took and whose only copy is in this Core's
// memory (read back from the park, or an Unordered one deleted before its
// hand-out); and such a message read back from the park whose hand-out a
// store error ended after a commit of unknown outcome (becomeFailed). With the skip mark that Close writes for a tagged one, the
// next receiver hands the copy out (flagged Unordered); nothing the
// cursor passed is lost by a clean Close.
type requeueLane struct {
	lane
	q    []*msg
	busy map[uint64][]*msg
}

func (l *requeueLane) init() {
	l.lane = lane{what: "send back to the queue", limit: 1}
	l.busy = make(map[uint64][]*msg)
}

// pending reports whether a body is queued: without one, ready does
// nothing and due is zero.
func (l *requeueLane) pending() bool { return len(l.q) > 0 }

func (l *requeueLane) due(c *Core) time.Time {
	if len(l.q) > 0 && l.idle() {
		return l.after
	}
	return time.Time{}
}

func (l *requeueLane) flushed(c *Core) bool { return l.idle() && len(l.q) == 0 }

func (l *requeueLane) ready(c *Core, now time.Time, rd *Ready) {
	if !l.open(now) || len(l.q) == 0 {
		return
	}
	n := min(len(l.q), c.cfg.MaxBatch)
	ms := append([]*msg(nil), l.q[:n]...)
	l.q = append(l.q[:0], l.q[n:]...)
	bodies := make([][]byte, n)
	for i, m := range ms {
		bodies[i] = m.raw
	}
	id := c.id()
	l.busy[id] = ms
	l.inFlight++
	rd.Requeues = append(rd.Requeues, Requeue{ID: id, Bodies: bodies})
}

// requeue sends m's body back to the queue: m is out (no application has
// it), and its only copy is here.
func (c *Core) requeue(m *msg) {
	m.requeued()
	c.requeues.q = append(c.requeues.q, m)
}

// Requeued reports the outcome of the Requeue action id, one error per
// body. A failed send is retried after a backoff, for as long as the shell
// keeps the Core (Close's deadline).
func (c *Core) Requeued(now time.Time, id uint64, errs []error) {
	c.begin(now)
	defer c.end()
	l := &c.requeues
	ms, ok := l.busy[id]
	if !ok {
		return
	}
	delete(l.busy, id)
	l.inFlight--
	var failed error
	for i, m := range ms {
		err := errors.New("no result")
		if i < len(errs) {
			err = errs[i]
		}
		if err != nil {
			failed = err
			l.q = append(l.q, m)
			continue
		}
		c.st.Requeued++
		c.report(Report{Kind: ReportWarn, Msg: "sent back to the queue: taken by no application before close", Group: m.name,
			Epoch: m.epoch, Seq: m.seq, ID: m.id})
		m.dropOut()
		c.gone(m)
	}
	if failed != nil {
		c.failed(&l.lane, failed)
	} else {
		l.succeeded()
	}
}
