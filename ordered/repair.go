package ordered

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/inorder/inorder/internal/recvcore"
)

// Repairs: an operator's actions on a group that cannot progress on its
// own (ReceiveStats.Stuck, the status page). Each is decided by the
// receive core like any other event: it is refused unless the group is in
// the state it needs, and once accepted it takes the path its policy
// takes (a repaired group is not special afterwards). None deletes a
// message that was not delivered without a dead-letter copy first.

// Errors of the repairs.
var (
	// ErrNotStuck is returned (wrapped, with the reason) by a repair whose
	// group is not in the state it needs: not in memory (idle, evicted or
	// never seen by this receiver), not stuck, stuck on something else, or
	// busy (DeadLetterHead while its message is with a handler).
	ErrNotStuck = recvcore.ErrNotStuck
	// ErrNoDeadLetter is returned by DeadLetterHead when
	// ReceiveOptions.DeadLetter is not set: the message would be lost.
	ErrNoDeadLetter = recvcore.ErrNoDeadLetter
)

// DeadLetterHead sends the message that group is stuck on (it failed
// MaxAttempts times under PoisonBlock, Hooks.OnStuck) to
// ReceiveOptions.DeadLetter, as PoisonDeadLetter would have, and lets the
// group move on: the copy is sent first; only then does the cursor pass
// the message, and once that is durable it is deleted from the queue. It
// returns once the copy is sent and the cursor past the message is
// durable. Hooks.OnRepair, then Hooks.OnDeadLetter, report it.
//
// It returns an error wrapping ErrNoDeadLetter without a dead-letter
// queue, ErrNotStuck when group is not stuck on a poison message (or its
// message is with a handler now: ask again once it failed), ErrClosed once
// Close began, the send's error when it failed (it is retried: ask again
// to wait for it), or ctx.Err() when ctx ends first. Once accepted, the
// repair goes on whatever the caller does: an error after that says the
// wait ended, not that the repair was undone.
func (q *Queue) DeadLetterHead(ctx context.Context, group string) error {
	return q.repair(ctx, recvcore.ActionDeadLetterHead, group, func(c *recvcore.Core, now time.Time) (recvcore.Ticket, error) {
		return c.DeadLetterHead(now, group)
	})
}

// SkipHole skips, now, the missing seqs that group waits for (a hole under
// GapWait, reported by Hooks.OnGap): as GapSkip would after GapTimeout,
// the group moves on to the lowest seq it holds beyond the hole, and the
// seqs passed over are recorded durably in its cursor as a skipped range.
// A skipped seq that arrives later is a late arrival: reported
// (Hooks.OnLate), then dead-lettered if ReceiveOptions.DeadLetter is set,
// else handed out flagged Unordered; never deleted unseen. With parking,
// the park is read first: a missing seq found there is not skipped. It
// returns once the cursor recording the skip is durable (or, if the
// missing seq turned up meanwhile and nothing was skipped, at once).
// Hooks.OnRepair, then Hooks.OnSkip, report it.
//
// It returns an error wrapping ErrNotStuck when group is not stuck on a
// hole (or no seq beyond it is known to skip to), ErrClosed once Close
// began, or ctx.Err() when ctx ends first (the skip goes on).
func (q *Queue) SkipHole(ctx context.Context, group string) error {
	return q.repair(ctx, recvcore.ActionSkipHole, group, func(c *recvcore.Core, now time.Time) (recvcore.Ticket, error) {
		return c.SkipHole(now, group)
	})
}

// Reread reads the stored cursor of group now: a group stopped by a store
// error (reported stuck, "store"; otherwise read again after Retry.Max),
// re-reading its cursor after a conflict, or loading it, whose reads wait
// out the backoff of failed ones. It returns once the read answered: nil
// when the group took the cursor, or the read's error (the read is
// retried).
//
// It returns an error wrapping ErrNotStuck when group is in none of these
// states, ErrClosed once Close began, or ctx.Err() when ctx ends first.
func (q *Queue) Reread(ctx context.Context, group string) error {
	return q.repair(ctx, recvcore.ActionReread, group, func(c *recvcore.Core, now time.Time) (recvcore.Ticket, error) {
		return c.Reread(now, group)
	})
}

// StartAt starts group, which has no stored cursor (this receiver joined
// its stream while it ran, and under StartFirst waits for a seq 1 long
// gone), at seq of sender epoch: the seqs below are recorded as skipped,
// as StartLowest records them, so that one arriving later is a late
// arrival (reported, dead-lettered or handed out Unordered). Messages of
// an older epoch are late too. It returns once the start is durable.
// Hooks.OnRepair, then Hooks.OnSkip, report it.
//
// It returns an error wrapping ErrNotStuck when group is not in memory or
// has a stored cursor (or has handed out a message), ErrClosed once Close
// began, or ctx.Err() when ctx ends first (the start goes on). seq must be
// at least 1.
func (q *Queue) StartAt(ctx context.Context, group string, epoch, seq uint64) error {
	return q.repair(ctx, recvcore.ActionStartAt, group, func(c *recvcore.Core, now time.Time) (recvcore.Ticket, error) {
		return c.StartAt(now, group, epoch, seq)
	})
}

// repair runs one repair on the receive core and waits for its ticket.
func (q *Queue) repair(ctx context.Context, action, group string, f func(*recvcore.Core, time.Time) (recvcore.Ticket, error)) error {
	err := q.doRepair(ctx, f)
	switch {
	case err == nil:
		q.log.Info("ordered: repair done", "action", action, "group", group)
		return nil
	case errors.Is(err, ErrNotStuck) || errors.Is(err, ErrNoDeadLetter):
		q.log.Info("ordered: repair refused", "action", action, "group", group, "err", err)
	default:
		q.log.Warn("ordered: repair failed", "action", action, "group", group, "err", err)
	}
	return fmt.Errorf("ordered: %s: group %q: %w", action, group, err)
}

func (q *Queue) doRepair(ctx context.Context, f func(*recvcore.Core, time.Time) (recvcore.Ticket, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	r, closed := q.rcv, q.closed
	q.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case r == nil:
		return fmt.Errorf("%w: nothing received yet (the receive side starts with Receive or Run)", ErrNotStuck)
	}
	return r.repair(ctx, f)
}

// repair feeds one repair to the core and waits for its ticket.
func (r *receiver) repair(ctx context.Context, f func(*recvcore.Core, time.Time) (recvcore.Ticket, error)) error {
	var t recvcore.Ticket
	var err error
	var wait chan error
	r.step(func(now time.Time) {
		if r.closing {
			err = ErrClosed
			return
		}
		t, err = f(r.core, now)
		if err == nil {
			wait = make(chan error, 1)
			r.waiters[t] = wait
		}
	})
	if err != nil {
		return repairErr(err)
	}
	select {
	case err := <-wait:
		return repairErr(err)
	case <-ctx.Done():
		r.mu.Lock()
		delete(r.waiters, t)
		r.mu.Unlock()
		return fmt.Errorf("accepted, not done yet (it goes on): %w", ctx.Err())
	}
}

func repairErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, recvcore.ErrClosed):
		return ErrClosed
	case errors.Is(err, recvcore.ErrConflict):
		return ErrConflict
	}
	return err
}
