package recvcore

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// deadLane sends messages to the dead-letter queue: poison messages
// (PoisonDeadLetter), untagged ones (UntaggedDeadLetter) and late arrivals
// when a dead-letter queue is configured. One request at a time.
type deadLane struct {
	lane
	q    []*msg
	busy map[uint64][]*msg
}

func (l *deadLane) init() {
	l.lane = lane{limit: 1}
	l.busy = make(map[uint64][]*msg)
}

// pending reports whether a dead letter is queued: without one, ready
// does nothing and due is zero.
func (l *deadLane) pending() bool { return len(l.q) > 0 }

func (l *deadLane) due(c *Core) time.Time {
	if len(l.q) > 0 && l.idle() {
		return l.after
	}
	return time.Time{}
}

func (l *deadLane) flushed(c *Core) bool { return l.idle() && len(l.q) == 0 }

func (l *deadLane) ready(c *Core, now time.Time, rd *Ready) {
	if !l.open(now) || len(l.q) == 0 {
		return
	}
	n := min(len(l.q), c.cfg.MaxBatch)
	ms := slices.Clone(l.q[:n])
	l.q = slices.Delete(l.q, 0, n)
	bodies := make([][]byte, n)
	for i, m := range ms {
		bodies[i] = m.raw
	}
	id := c.id()
	l.busy[id] = ms
	l.inFlight++
	rd.DeadLetters = append(rd.DeadLetters, DeadLetter{ID: id, Bodies: bodies})
}

// DeadLettered reports the outcome of the DeadLetter action id, one error
// per body.
func (c *Core) DeadLettered(now time.Time, id uint64, errs []error) {
	c.begin(now)
	defer c.end()
	l := &c.deads
	ms, ok := l.busy[id]
	if !ok {
		return
	}
	delete(l.busy, id)
	l.inFlight--
	failed := false
	for i, m := range ms {
		err := errors.New("no result")
		if i < len(errs) {
			err = errs[i]
		}
		if err == nil {
			c.deadLettered(now, m)
			continue
		}
		failed = true
		m.tries++
		if g := m.g; g != nil && g.out == m {
			// DeadLetterHead waits for this send: tell it (the send is
			// retried).
			c.endRepairs(g, repairDead, fmt.Errorf("dead-letter send failed (retried): %w", err))
		}
		if m.g == nil && m.tries >= maxDeadTries {
			c.report(Report{Kind: ReportWarn, Msg: "dead-letter send failed; the message comes back", Group: m.name, Seq: m.seq, ID: m.id, Err: err})
			c.unord.forget(unorderedKey(m))
			c.release(m, now)
			continue
		}
		l.q = append(l.q, m)
	}
	if failed {
		c.failed(&l.lane, nil)
	} else {
		l.succeeded()
	}
}

func (c *Core) deadLettered(now time.Time, m *msg) {
	c.st.DeadLettered++
	var cause error = ErrUntagged
	switch {
	case m.has(fLate):
		cause = ErrLate
	case m.g != nil:
		cause = errors.New("poison message: failed MaxAttempts times")
	}
	c.report(Report{Kind: ReportDeadLetter, Msg: "dead-lettered", Group: m.name, Epoch: m.epoch, Seq: m.seq, ID: m.id,
		DequeueCount: int(m.dequeue), Attempt: int(m.attempt), Err: cause})
	g := m.g
	if g == nil {
		c.unord.remember(c, unorderedKey(m))
		m.requeueHeld()
		c.queueDelete(now, m)
		return
	}
	// A poison message: settled as an Ack would.
	if g.out == m {
		g.out = nil
		// DeadLetterHead waits for the cursor past it.
		c.repairsDurable(g, repairDead, seqstore.Cursor{Epoch: m.epoch, Next: m.seq + 1})
	}
	if c.cfg.Mode == AtMostOnce || below(g.dur, m.epoch, m.seq) {
		c.queueDelete(now, m)
		c.update(g, now)
		return
	}
	if !below(g.ack, m.epoch, m.seq) {
		g.ack.Epoch, g.ack.Next = m.epoch, m.seq+1
	}
	c.settleMsg(g, m)
	c.clearStuck(g, "poison")
	if c.cfg.Mode == ExactlyOnce {
		// No application Ack moves this cursor: write it here.
		c.forceCommit(g)
	} else {
		c.markDirty(g)
	}
	c.update(g, now)
}
