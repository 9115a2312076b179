package storetest

import (
	"context"
	"sync"

	"github.com/inorder/inorder/seqstore"
)

// Share returns a new instance over storage: a Store whose calls go to
// storage and whose Close closes only the instance (later calls return
// seqstore.ErrClosed), leaving storage open for the other instances. It
// lets a store whose instances share nothing, such as memstore, run the
// suite's reopen and cross-instance tests:
//
//	Open: func(t *testing.T) func(*testing.T) seqstore.Store {
//		storage := memstore.New()
//		t.Cleanup(func() { storage.Close() })
//		return func(*testing.T) seqstore.Store { return storetest.Share(storage) }
//	},
func Share(storage seqstore.Store) seqstore.Store {
	return &instance{storage: storage}
}

type instance struct {
	storage seqstore.Store

	mu     sync.Mutex
	closed bool
}

func (h *instance) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return seqstore.ErrClosed
	}
	return nil
}

func (h *instance) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return nil
}

func (h *instance) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.storage.Reserve(ctx, reqs)
}

func (h *instance) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.storage.Sent(ctx, marks)
}

func (h *instance) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.storage.Pending(ctx, queue)
}

func (h *instance) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.storage.Cursors(ctx, streams)
}

func (h *instance) Advance(ctx context.Context, batch []seqstore.Advance) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.storage.Advance(ctx, batch)
}
