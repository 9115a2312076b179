package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.LeaseWatcher = (*Store)(nil)

// subscribeTimeout bounds WatchLeases's wait for the server to confirm the
// subscription.
const subscribeTimeout = 10 * time.Second

// wakeChannel is ns's Pub/Sub channel. It carries the namespace's hash tag:
// a *redis.Ring subscribes on the shard that holds the namespace's keys
// (where the scripts PUBLISH), and a cluster on the node of its slot
// (classic PUBLISH reaches every node of a cluster).
func (s *Store) wakeChannel(ns string) string {
	return s.prefix + "lease:{" + queueKey(ns) + "}:wake"
}

// WatchLeases implements seqstore.LeaseWatcher with Redis Pub/Sub: the
// scripts of Release, Leave and a Heartbeat that changed the view PUBLISH
// on ns's channel (wakeChannel) in the script itself, so the message leaves
// the server after the change. It returns once the server confirmed the
// SUBSCRIBE. The client's PubSub reconnects on its own (with a health-check
// PING) and subscribes again; every confirmation after the first is a
// wake-up, since messages published while it was away are lost. The
// channel closes when ctx ends, when the store is closed, or when the
// client is closed; one goroutine per watch forwards the messages, and
// Close waits for it.
func (s *Store) WatchLeases(ctx context.Context, ns string) (<-chan struct{}, error) {
	if err := seqstore.CheckLease(ns); err != nil {
		return nil, fmt.Errorf("redisstore: watch leases: %w", err)
	}
	if err := s.leaseReady(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: watch leases of %q: %w", ns, err)
	}
	ps := s.client.Subscribe(ctx, s.wakeChannel(ns))
	subCtx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	_, err := ps.Receive(subCtx) // the confirmation, or an error
	cancel()
	if err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("redisstore: watch leases of %q: subscribe: %w", ns, mapErr(err))
	}
	msgs := ps.ChannelWithSubscriptions()
	out := make(chan struct{}, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ps.Close()
		return nil, fmt.Errorf("redisstore: watch leases of %q: %w", ns, seqstore.ErrClosed)
	}
	s.watches.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.watches.Done()
		defer close(out)
		defer func() { _ = ps.Close() }()
		for {
			select {
			case _, ok := <-msgs:
				if !ok {
					return // the client was closed
				}
				// A *redis.Message, or a *redis.Subscription confirmed
				// again after a reconnection: both wake.
				seqstore.Wake(out)
			case <-ctx.Done():
				return
			case <-s.closing:
				return
			}
		}
	}()
	return out, nil
}
