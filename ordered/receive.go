package ordered

import "context"

// ReceiveStats counts the receive side's work.
type ReceiveStats struct{}

// receiver is the receive side of a Queue.
type receiver struct{ q *Queue }

func newReceiver(q *Queue) *receiver { return &receiver{q: q} }

func (r *receiver) close(ctx context.Context) error { return nil }

func (r *receiver) stats() ReceiveStats { return ReceiveStats{} }
