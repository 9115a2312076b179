package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Receiver is the receive side of the shards, which a Keeper drives. Its
// methods are called from the keeper's goroutine, one at a time, in the
// order the Core decided them; they must not block for long, and they may
// call Keeper.Drained.
type Receiver interface {
	// Start: the receiver may fetch and deliver l's shard, claiming its
	// streams with l.Token.
	Start(l seqstore.Lease)
	// Revoke: the receiver stops fetching shard, lets its open deliveries
	// finish, makes its advances durable, and then calls Keeper.Drained.
	Revoke(shard int)
	// Fence: the receiver stops shard at once, cancels its handlers and
	// drops what it buffered (never deleting it). It must not call
	// Drained for it.
	Fence(shard int)
}

// ErrClosed is returned by Close when the keeper was closed already.
var ErrClosed = errors.New("lease: keeper closed")

// Keeper is the shell around a Core: one goroutine that feeds it the time
// and the outcomes of its store calls, runs each store call in a goroutine
// of its own (bounded by RenewDeadline), and calls the Receiver. When the
// store is a seqstore.LeaseWatcher, one more goroutine feeds it the
// store's wake-ups (Core.Wake).
type Keeper struct {
	store seqstore.Leaser
	ns    string
	self  seqstore.Member
	recv  Receiver
	opts  Options
	core  *Core

	events    chan func(now time.Time) // outcomes of store calls
	drainNews chan struct{}            // Drained or Expired has news; capacity 1
	wakeups   chan struct{}            // the store's wake-ups; capacity 1
	closeCh   chan struct{}            // closed by the first Close
	abortCh   chan struct{}            // closed when a Close's ctx ends
	stopped   chan struct{}            // the loop left; calls stop sending
	done      chan struct{}            // the loop and every call returned

	// grants are, per shard, the lease held and its local deadline, as
	// of the loop's last step (nil: none), for Deadline.
	grants []atomic.Pointer[grant]

	mu        sync.Mutex
	drained   []int            // guarded by mu
	expired   []seqstore.Lease // guarded by mu
	closeOnce sync.Once
	abortOnce sync.Once

	callCtx context.Context // for store calls; canceled when the loop ends
	cancel  context.CancelFunc
	calls   sync.WaitGroup
}

// New starts a keeper of self's leases in namespace ns over shards
// shards, driving recv. Close stops it.
func New(store seqstore.Leaser, ns string, self seqstore.Member, shards int, recv Receiver, opts *Options) (*Keeper, error) {
	if err := seqstore.CheckNamespace(ns); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	core, err := NewCore(self, shards, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &Keeper{
		store: store, ns: ns, self: self, recv: recv, opts: core.opts, core: core,
		events:    make(chan func(time.Time)),
		drainNews: make(chan struct{}, 1),
		wakeups:   make(chan struct{}, 1),
		closeCh:   make(chan struct{}),
		abortCh:   make(chan struct{}),
		stopped:   make(chan struct{}),
		done:      make(chan struct{}),
		callCtx:   ctx, cancel: cancel,
		grants: make([]atomic.Pointer[grant], shards),
	}
	if w, ok := store.(seqstore.LeaseWatcher); ok {
		k.calls.Add(1)
		go k.watch(w)
	}
	go k.run()
	return k, nil
}

// watch feeds the store's wake-ups to the loop (Core.Wake) until the
// keeper stops. When the subscription fails or ends, it subscribes again
// RenewEvery later, and the new subscription wakes the keeper once, for
// what it may have missed; meanwhile, and for good when the store says
// seqstore.ErrNotSupported, the keeper polls (a heartbeat every
// RenewEvery), as it always does.
func (k *Keeper) watch(w seqstore.LeaseWatcher) {
	defer k.calls.Done()
	again := false
	for {
		ch, err := w.WatchLeases(k.callCtx, k.ns)
		if errors.Is(err, seqstore.ErrNotSupported) || errors.Is(err, seqstore.ErrClosed) {
			return
		}
		if err == nil {
			if again {
				seqstore.Wake(k.wakeups)
			}
			again = true
			for range ch {
				seqstore.Wake(k.wakeups)
			}
		}
		select {
		case <-k.callCtx.Done():
			return
		case <-time.After(k.opts.RenewEvery):
		}
	}
}

// Drained tells the keeper that the receiver finished revoking shard. It
// never blocks, and may be called from Receiver.Revoke itself.
func (k *Keeper) Drained(shard int) {
	k.mu.Lock()
	k.drained = append(k.drained, shard)
	k.mu.Unlock()
	seqstore.Wake(k.drainNews)
}

// Expired tells the keeper that the receiver found the lease with token on
// shard past its Deadline, and stopped handing out its messages: the
// keeper drops the lease as lost (Core.Expired), so that the shard is
// acquired again rather than held and never served. It never blocks.
func (k *Keeper) Expired(shard int, token uint64) {
	k.mu.Lock()
	k.expired = append(k.expired, seqstore.Lease{Shard: shard, Token: token})
	k.mu.Unlock()
	seqstore.Wake(k.drainNews)
}

// Close revokes every shard, waits for the receiver to drain them (at most
// CloseDrain), releases them and leaves the membership. When ctx ends
// first, it fences what is left, releases nothing, and returns ctx's
// error. It returns once the keeper's goroutines did; a second Close
// returns ErrClosed.
func (k *Keeper) Close(ctx context.Context) error {
	first := false
	k.closeOnce.Do(func() { first = true; close(k.closeCh) })
	if !first {
		<-k.done
		return ErrClosed
	}
	select {
	case <-k.done:
		return nil
	case <-ctx.Done():
		select {
		case <-k.done:
			return nil // done as the context ended
		default:
		}
		k.abortOnce.Do(func() { close(k.abortCh) })
		<-k.done
		return fmt.Errorf("lease: close: %w", ctx.Err())
	}
}

func (k *Keeper) run() {
	defer close(k.done)
	defer k.calls.Wait()
	defer k.cancel()
	defer close(k.stopped)

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	closeCh, abortCh := k.closeCh, k.abortCh
	k.core.Tick(time.Now())
	for {
		k.publish()
		k.act()
		if k.core.Closed() {
			return
		}
		var tick <-chan time.Time
		if next := k.core.Next(); !next.IsZero() {
			timer.Reset(time.Until(next))
			tick = timer.C
		}
		select {
		case now := <-tick:
			k.core.Tick(now)
		case ev := <-k.events:
			ev(time.Now())
		case <-k.wakeups:
			k.core.Wake(time.Now())
		case <-k.drainNews:
			k.mu.Lock()
			drained, expired := k.drained, k.expired
			k.drained, k.expired = nil, nil
			k.mu.Unlock()
			now := time.Now()
			for _, s := range drained {
				k.core.Drained(now, s)
			}
			for _, l := range expired {
				k.core.Expired(now, l.Shard, l.Token)
			}
		case <-closeCh:
			closeCh = nil
			k.core.Close(time.Now())
		case <-abortCh:
			abortCh = nil
			k.core.Abort(time.Now())
		}
		timer.Stop() // since Go 1.23, no stale tick is received after Stop
	}
}

// grant is a lease held and its local deadline.
type grant struct {
	token    uint64
	deadline time.Time
}

// publish makes the leases held and their deadlines visible to Deadline,
// before act tells the receiver to start a shard.
func (k *Keeper) publish() {
	for s := range k.grants {
		l, deadline, ok := k.core.Deadline(s)
		old := k.grants[s].Load()
		switch {
		case !ok:
			if old != nil {
				k.grants[s].Store(nil)
			}
		case old == nil || old.token != l.Token || !old.deadline.Equal(deadline):
			k.grants[s].Store(&grant{token: l.Token, deadline: deadline})
		}
	}
}

// Deadline returns the local deadline of the lease with token on shard:
// the time until which the receiver may hand out its messages, which a
// renewal moves on. It returns the zero time when that lease is no longer
// held (fenced, released, or replaced by another). It is safe to call from
// any goroutine, and cheap: a receiver asks before each hand-out, whether
// or not the keeper's goroutine keeps up.
func (k *Keeper) Deadline(shard int, token uint64) time.Time {
	if shard < 0 || shard >= len(k.grants) {
		return time.Time{}
	}
	g := k.grants[shard].Load()
	if g == nil || g.token != token {
		return time.Time{}
	}
	return g.deadline
}

// act runs the core's actions in order: the receiver's at once, the
// store's in goroutines.
func (k *Keeper) act() {
	for _, a := range k.core.Ready() {
		switch a.Kind {
		case Start:
			k.recv.Start(a.Leases[0])
		case Revoke:
			k.recv.Revoke(a.Shards[0])
		case Fence:
			k.recv.Fence(a.Shards[0])
		default:
			k.call(a)
		}
	}
}

// call runs one store call and sends its outcome back to the loop as an
// event, unless the loop ended.
func (k *Keeper) call(a Action) {
	k.calls.Add(1)
	go func() {
		defer k.calls.Done()
		ctx, cancel := context.WithTimeout(k.callCtx, k.opts.RenewDeadline)
		defer cancel()
		sent := time.Now()
		var ev func(now time.Time)
		var err error
		switch a.Kind {
		case Heartbeat:
			var view seqstore.View
			var live []seqstore.Lease
			view, err = k.store.Heartbeat(ctx, k.ns, k.self, k.opts.TTL)
			if err == nil {
				live, err = k.store.Leases(ctx, k.ns)
			}
			ev = func(now time.Time) { k.core.HeartbeatDone(now, view, live, err, sent) }
		case Acquire:
			var got []seqstore.Lease
			got, err = k.store.Acquire(ctx, k.ns, a.Shards, k.self.Incarnation, k.opts.TTL)
			ev = func(now time.Time) { k.core.AcquireDone(now, got, err, sent) }
		case Renew:
			var lost []seqstore.Lease
			lost, err = k.store.Renew(ctx, k.ns, a.Leases, k.opts.TTL)
			ev = func(now time.Time) { k.core.RenewDone(now, lost, err, sent) }
		case Release:
			err = k.store.Release(ctx, k.ns, a.Leases)
			ev = func(now time.Time) { k.core.ReleaseDone(now, a.Leases, err) }
		case Leave:
			err = k.store.Leave(ctx, k.ns, k.self.Incarnation)
			ev = func(now time.Time) { k.core.LeaveDone(now, err) }
		default:
			return
		}
		if f := k.opts.OnError; f != nil && err != nil {
			f(a.Kind, err)
		}
		select {
		case k.events <- ev:
		case <-k.stopped:
		}
	}()
}
