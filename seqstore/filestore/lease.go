package filestore

import (
	"context"
	"fmt"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// filestore implements seqstore.Leaser only to say that it cannot: its
// directory belongs to one process on one host, so there is nobody to share
// shards with. Every method validates its arguments, then fails with
// seqstore.ErrClosed after Close, the context's error when it ended, and
// otherwise an error wrapping seqstore.ErrNotSupported.

var _ seqstore.Leaser = (*Store)(nil)

// Topology implements seqstore.Leaser: ErrNotSupported.
func (s *Store) Topology(ctx context.Context, ns string, t seqstore.Topology) error {
	return s.notSupported(ctx, "topology", ns, t.Check())
}

// Heartbeat implements seqstore.Leaser: ErrNotSupported.
func (s *Store) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	return seqstore.View{}, s.notSupported(ctx, "heartbeat", ns, seqstore.CheckMember(m), seqstore.CheckTTL(ttl))
}

// Acquire implements seqstore.Leaser: ErrNotSupported.
func (s *Store) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	return nil, s.notSupported(ctx, "acquire", ns, seqstore.CheckShards(shards), seqstore.CheckOwner(owner), seqstore.CheckTTL(ttl))
}

// Renew implements seqstore.Leaser: ErrNotSupported.
func (s *Store) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	return nil, s.notSupported(ctx, "renew", ns, seqstore.CheckLeases(held), seqstore.CheckTTL(ttl))
}

// Release implements seqstore.Leaser: ErrNotSupported.
func (s *Store) Release(ctx context.Context, ns string, held []seqstore.Lease) error {
	return s.notSupported(ctx, "release", ns, seqstore.CheckLeases(held))
}

// Leave implements seqstore.Leaser: ErrNotSupported.
func (s *Store) Leave(ctx context.Context, ns string, incarnation string) error {
	return s.notSupported(ctx, "leave", ns, seqstore.CheckOwner(incarnation))
}

// Leases implements seqstore.Leaser: ErrNotSupported.
func (s *Store) Leases(ctx context.Context, ns string) ([]seqstore.Lease, error) {
	return nil, s.notSupported(ctx, "leases", ns)
}

// notSupported returns the error of a lease call: the first of ns's check
// and errs that failed, ErrClosed, ctx's error, or ErrNotSupported.
func (s *Store) notSupported(ctx context.Context, op, ns string, errs ...error) error {
	err := seqstore.CheckNamespace(ns)
	for _, e := range errs {
		if err == nil {
			err = e
		}
	}
	if err == nil {
		err = s.checkOpen()
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = fmt.Errorf("%w: leases need a store that several hosts share (redisstore, sqlstore)", seqstore.ErrNotSupported)
	}
	return fmt.Errorf("filestore: %s: %w", op, err)
}
