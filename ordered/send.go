package ordered

import "context"

// SendStats counts the send side's work.
type SendStats struct{}

// sender is the send side of a Queue.
type sender struct{ q *Queue }

func newSender(q *Queue) *sender { return &sender{q: q} }

func (s *sender) close(ctx context.Context) error { return nil }

func (s *sender) stats() SendStats { return SendStats{} }

// recoverOnNew re-sends journaled entries that an earlier process reserved
// but never handed to the queue.
func (q *Queue) recoverOnNew(ctx context.Context) error { return nil }
