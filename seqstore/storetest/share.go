package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// OpenShared returns a Harness.Open for a store whose instances share
// nothing (memstore): each test's storage is one store from newStorage,
// closed when the test ends, and each opening is a Share of it. Use it with
// Persistent and Shared set.
func OpenShared(newStorage func() seqstore.Store) func(t *testing.T) func(*testing.T) seqstore.Store {
	return func(t *testing.T) func(*testing.T) seqstore.Store {
		storage := newStorage()
		t.Cleanup(func() { _ = storage.Close() })
		return func(*testing.T) seqstore.Store { return Share(storage) }
	}
}

// ReserveOne makes a Reserve call of one request and returns its
// Reservation, or the request's own error (see seqstore.Failed).
func ReserveOne(ctx context.Context, st seqstore.Store, s seqstore.Stream, n int, journal [][]byte) (seqstore.Reservation, error) {
	rs, err := st.Reserve(ctx, []seqstore.ReserveRequest{{Stream: s, N: n, Journal: journal}})
	if err != nil {
		return seqstore.Reservation{}, seqstore.Failed(err, 0, 1)
	}
	if len(rs) != 1 {
		return seqstore.Reservation{}, fmt.Errorf("storetest: Reserve of one request returned %d reservations", len(rs))
	}
	return rs[0], nil
}

// CursorOne makes a Cursors call of one stream and returns its Cursor, or
// the stream's own error (see seqstore.Failed).
func CursorOne(ctx context.Context, st seqstore.Store, s seqstore.Stream) (seqstore.Cursor, error) {
	cs, err := st.Cursors(ctx, []seqstore.Stream{s})
	if err != nil {
		return seqstore.Cursor{}, seqstore.Failed(err, 0, 1)
	}
	if len(cs) != 1 {
		return seqstore.Cursor{}, fmt.Errorf("storetest: Cursors of one stream returned %d cursors", len(cs))
	}
	return cs[0], nil
}

// Share returns a new instance over storage: a Store whose calls go to
// storage and whose Close closes only the instance (later calls return
// seqstore.ErrClosed), leaving storage open for the other instances. It
// lets a store whose instances share nothing, such as memstore, run the
// suite's reopen and cross-instance tests (see OpenShared).
// The instance implements seqstore.Lister and seqstore.Leaser when storage
// does; a leasing instance implements seqstore.LeaseWatcher too, whose
// WatchLeases returns seqstore.ErrNotSupported when storage has none, and
// whose channels close when the instance does.
func Share(storage seqstore.Store) seqstore.Store {
	in := &instance{storage: storage}
	in.life, in.end = context.WithCancel(context.Background())
	lister, isLister := storage.(seqstore.Lister)
	leaser, isLeaser := storage.(seqstore.Leaser)
	switch {
	case isLister && isLeaser:
		return &listingLeasingInstance{listingInstance{instance: in, lister: lister}, leasingPart{in, leaser}}
	case isLister:
		return &listingInstance{instance: in, lister: lister}
	case isLeaser:
		return &leasingInstance{in, leasingPart{in, leaser}}
	}
	return in
}

type leasingInstance struct {
	*instance
	leasingPart
}

type listingLeasingInstance struct {
	listingInstance
	leasingPart
}

// leasingPart forwards the seqstore.Leaser methods of an instance.
type leasingPart struct {
	in     *instance
	leaser seqstore.Leaser
}

func (p leasingPart) Topology(ctx context.Context, ns string, t seqstore.Topology) error {
	if err := p.in.check(); err != nil {
		return err
	}
	return p.leaser.Topology(ctx, ns, t)
}

func (p leasingPart) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	if err := p.in.check(); err != nil {
		return seqstore.View{}, err
	}
	return p.leaser.Heartbeat(ctx, ns, m, ttl)
}

func (p leasingPart) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := p.in.check(); err != nil {
		return nil, err
	}
	return p.leaser.Acquire(ctx, ns, shards, owner, ttl)
}

func (p leasingPart) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := p.in.check(); err != nil {
		return nil, err
	}
	return p.leaser.Renew(ctx, ns, held, ttl)
}

func (p leasingPart) Release(ctx context.Context, ns string, held []seqstore.Lease) error {
	if err := p.in.check(); err != nil {
		return err
	}
	return p.leaser.Release(ctx, ns, held)
}

func (p leasingPart) Leave(ctx context.Context, ns string, incarnation string) error {
	if err := p.in.check(); err != nil {
		return err
	}
	return p.leaser.Leave(ctx, ns, incarnation)
}

func (p leasingPart) WatchLeases(ctx context.Context, ns string) (<-chan struct{}, error) {
	if err := p.in.check(); err != nil {
		return nil, err
	}
	w, ok := p.leaser.(seqstore.LeaseWatcher)
	if !ok {
		return nil, fmt.Errorf("storetest: watch leases: %w", seqstore.ErrNotSupported)
	}
	// The watch ends with ctx or with the instance.
	ctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(p.in.life, cancel)
	ch, err := w.WatchLeases(ctx, ns)
	if err != nil {
		cancel()
	}
	return ch, err
}

func (p leasingPart) Leases(ctx context.Context, ns string) ([]seqstore.Lease, error) {
	if err := p.in.check(); err != nil {
		return nil, err
	}
	return p.leaser.Leases(ctx, ns)
}

// listingInstance is an instance over storage that implements
// seqstore.Lister.
type listingInstance struct {
	*instance
	lister seqstore.Lister
}

func (h *listingInstance) Streams(ctx context.Context, queue string) ([]seqstore.StreamState, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.lister.Streams(ctx, queue)
}

func (h *listingInstance) State(ctx context.Context, s seqstore.Stream) (seqstore.StreamState, error) {
	if err := h.check(); err != nil {
		return seqstore.StreamState{}, err
	}
	return h.lister.State(ctx, s)
}

type instance struct {
	storage seqstore.Store
	// life ends with Close, and with it the instance's watches.
	life context.Context
	end  context.CancelFunc

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
	h.end()
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

func (h *instance) Park(ctx context.Context, entries []seqstore.Parked) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.storage.Park(ctx, entries)
}

func (h *instance) Unpark(ctx context.Context, queries []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.storage.Unpark(ctx, queries)
}

func (h *instance) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.storage.ParkedStreams(ctx, queue)
}
