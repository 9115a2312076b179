package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// link is one receiver's connection to the lease store. Cut, its lease
// calls hang (until the keeper's own deadline ends them), as when the
// receiver's process hangs or a partition separates it from the store; its
// cursor reads and writes still go through, so what the receiver does
// after losing its leases is visible, and refused. The scaleout API has no
// way to stop a receiver without a clean handover: this is how the example
// shows the other way a receiver ends.
type link struct {
	seqstore.Store
	ls seqstore.Leaser

	mu   sync.Mutex
	cut  chan struct{} // non-nil once cut; closed when the process is gone
	gone bool
}

// errGone is what lease calls of a cut link return once the example ends
// the receiver behind it, so that its Run returns without waiting out the
// hung calls.
var errGone = errors.New("the receiver's process is gone")

func newLink(s seqstore.Store) *link {
	return &link{Store: s, ls: s.(seqstore.Leaser)}
}

// sever makes lease calls hang.
func (l *link) sever() {
	l.mu.Lock()
	if l.cut == nil {
		l.cut = make(chan struct{})
	}
	l.mu.Unlock()
}

// end makes the lease calls of a cut link fail at once, hung ones too.
func (l *link) end() {
	l.mu.Lock()
	if l.cut != nil && !l.gone {
		l.gone = true
		close(l.cut)
	}
	l.mu.Unlock()
}

func (l *link) wait(ctx context.Context) error {
	l.mu.Lock()
	cut := l.cut
	l.mu.Unlock()
	if cut == nil {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-cut:
		return errGone
	}
}

func (l *link) Topology(ctx context.Context, ns string, t seqstore.Topology) error {
	if err := l.wait(ctx); err != nil {
		return err
	}
	return l.ls.Topology(ctx, ns, t)
}

func (l *link) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	if err := l.wait(ctx); err != nil {
		return seqstore.View{}, err
	}
	return l.ls.Heartbeat(ctx, ns, m, ttl)
}

func (l *link) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := l.wait(ctx); err != nil {
		return nil, err
	}
	return l.ls.Acquire(ctx, ns, shards, owner, ttl)
}

func (l *link) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := l.wait(ctx); err != nil {
		return nil, err
	}
	return l.ls.Renew(ctx, ns, held, ttl)
}

func (l *link) Release(ctx context.Context, ns string, held []seqstore.Lease) error {
	if err := l.wait(ctx); err != nil {
		return err
	}
	return l.ls.Release(ctx, ns, held)
}

func (l *link) Leave(ctx context.Context, ns string, incarnation string) error {
	if err := l.wait(ctx); err != nil {
		return err
	}
	return l.ls.Leave(ctx, ns, incarnation)
}

func (l *link) Leases(ctx context.Context, ns string) ([]seqstore.Lease, error) {
	if err := l.wait(ctx); err != nil {
		return nil, err
	}
	return l.ls.Leases(ctx, ns)
}

// Close leaves the store open: the example shares it.
func (l *link) Close() error { return nil }

var _ seqstore.Leaser = (*link)(nil)
