package scaleout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/inorder/inorder/internal/lease"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/seqstore"
)

// Options configure a Receiver.
type Options struct {
	// Queue are the options of the ordered.Queue the Receiver runs over
	// each shard it owns. Queue.Name names the logical queue: the
	// namespace of the leases and the streams' queue name, as the senders'
	// (required). Queue.Send.NoRecover is always set: a receiver never
	// sends the senders' journal.
	Queue ordered.Options
	// Member is this receiver's name, stable across restarts (a host or pod
	// name): shards are assigned by it, so a restarted receiver gets its
	// shards back. Two receivers running at once need distinct names.
	// Default: the host name.
	Member string
	// Standby makes a receiver that is assigned no shard while another
	// member is not on standby; it takes over shards that stay without an
	// owner (2 x Lease.TTL).
	Standby bool
	// Lease sets the timings of leases. Zero fields mean the defaults: a
	// TTL of 15 s, renewed every 5 s, fenced locally 10 s after the last
	// good renewal was sent, a rebalance 3 s after the membership changed,
	// and at most 30 s for Close to drain.
	Lease LeaseOptions
	// DrainTimeout bounds how long a shard handed over on purpose waits
	// for its handlers and its last commits (ordered.Queue.Close) before
	// their ctx is cancelled (its lease is released only once they
	// returned), and how long a lost shard keeps the messages out to its
	// handlers invisible after cancelling their ctx: a handler that ignores
	// the cancel for longer may overlap the next owner's. Default 10 s.
	DrainTimeout time.Duration
	// OnChange, when set, reports each change of the shards this receiver
	// owns. It runs on the receiver's goroutines and must not block.
	OnChange func(Change)
}

// LeaseOptions are the timings of a Receiver's leases, and how shards are
// spread. A lease is renewed every RenewEvery (retried every RetryPeriod
// after an error); a receiver stops a shard RenewDeadline after the last
// good renewal was sent, before the store lets another take it over (TTL,
// counted by the store's clock); a shard that another member should own is
// handed over RebalanceDelay after the membership changed; Close waits at
// most CloseDrain for its shards to drain. RenewEvery < RenewDeadline < TTL.
type LeaseOptions struct {
	TTL, RenewEvery, RetryPeriod, RenewDeadline, RebalanceDelay, CloseDrain time.Duration
	// Balance, when at least 1, caps each member's shards at Balance times
	// its fair share (1.25 spreads well and moves few shards); 0 is plain
	// rendezvous hashing, which moves the fewest shards when members come
	// and go but can leave a member with few or none when shards are few.
	Balance float64
}

// Change is a change of the shards a Receiver owns.
type Change struct {
	// Kind is "start" (the shard was acquired and is being received),
	// "revoke" (handed over on purpose: drained, then released), "drained"
	// (the revoked shard's lease is released), "fence" (lost: a renewal
	// failed until its deadline, the lease was taken over, or a cursor
	// showed a newer owner) or "error" (a call to the lease store failed;
	// Shard is -1: the keeper retries on its own).
	Kind  string
	Shard int
	// Token is the lease's fencing token.
	Token uint64
	// Err says why a shard was fenced.
	Err error
}

// Receiver receives a logical queue's shards that this process owns.
type Receiver struct {
	shards []Shard
	store  seqstore.Store
	ls     seqstore.Leaser
	opts   Options
	self   seqstore.Member
	log    *slog.Logger

	mu      sync.Mutex
	handler ordered.Handler
	ctx     context.Context // the Receiver's life, for the shards' Queues
	keeper  *lease.Keeper
	running map[int]*shardRun
	wg      sync.WaitGroup
	closed  bool
}

// shardRun is an owned shard: its Queue and the Run over it.
type shardRun struct {
	lease  seqstore.Lease
	q      *ordered.Queue
	cancel context.CancelFunc // ends the Run: no more hand-outs, handlers' ctx cancelled
	done   chan struct{}      // closed when the Run returned
	over   chan struct{}      // closed when the run left Receiver.running (under its mu)
	ending bool               // revoked or fenced
	fenced bool               // fenced: the keeper expects no Drained for it
	// lost is why the shard was fenced: from then on, its Queue hands out
	// and settles nothing (ordered.ReceiveOptions.Lease).
	lost atomic.Pointer[error]
}

// leaseCheck is the shard's ordered.ReceiveOptions.Lease: the Queue hands
// out and settles only while the lease is held and its local deadline has
// not passed, whether or not the keeper's goroutine kept up (a process
// paused, a slow OnChange), and never after the shard was fenced.
func (r *Receiver) leaseCheck(run *shardRun, k *lease.Keeper, also func() error) func() error {
	l := run.lease
	return func() error {
		if p := run.lost.Load(); p != nil {
			return *p
		}
		if deadline := k.Deadline(l.Shard, l.Token); !time.Now().Before(deadline) {
			// The Queue hands out nothing more: the keeper must drop the
			// lease too, or it would renew a shard nobody serves (its
			// clock may not have seen the deadline pass yet).
			k.Expired(l.Shard, l.Token)
			return fmt.Errorf("%w: the lease on shard %d (token %d) is past its local deadline, or no longer held", seqstore.ErrFenced, l.Shard, l.Token)
		}
		if also != nil {
			return also()
		}
		return nil
	}
}

// NewReceiver returns a receiver of the logical queue opts.Queue.Name over
// shards, with its leases in store, which must implement seqstore.Leaser
// (memstore, redisstore, sqlstore). It stores the topology, or checks it
// against the stored one (seqstore.ErrTopology). Run starts it.
func NewReceiver(ctx context.Context, shards []Shard, store seqstore.Store, opts *Options) (*Receiver, error) {
	if err := checkShards(shards); err != nil {
		return nil, err
	}
	if opts == nil || opts.Queue.Name == "" {
		return nil, fmt.Errorf("scaleout: %w: Options.Queue.Name names the logical queue and must be set", seqstore.ErrInvalidArgument)
	}
	ls, ok := store.(seqstore.Leaser)
	if !ok {
		return nil, fmt.Errorf("scaleout: %w: the store (%T) holds no leases: use redisstore or sqlstore", seqstore.ErrNotSupported, store)
	}
	o := *opts
	o.Queue.Send.NoRecover = true
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 10 * time.Second
	}
	if o.Member == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return nil, fmt.Errorf("scaleout: %w: Options.Member is not set and the host has no name", seqstore.ErrInvalidArgument)
		}
		o.Member = host
	}
	var inc [8]byte
	_, _ = rand.Read(inc[:])
	self := seqstore.Member{Name: o.Member, Incarnation: hex.EncodeToString(inc[:]) + "#" + prefixUTF8(o.Member, seqstore.MaxNameLen-17), Weight: 1}
	if o.Standby {
		self.Weight = 0
	}
	if err := seqstore.CheckMember(self); err != nil {
		return nil, fmt.Errorf("scaleout: %w", err)
	}
	r := &Receiver{opts: o}
	if _, err := lease.NewCore(self, len(shards), r.leaseOptions()); err != nil {
		return nil, fmt.Errorf("scaleout: Options.Lease: %w", err)
	}
	// The options of the shards' Queues: refused now rather than by every
	// Start, which would hold leases and deliver nothing.
	q, err := ordered.New(ctx, shards[0].Queue, store, &o.Queue)
	if err != nil {
		return nil, fmt.Errorf("scaleout: Options.Queue: %w", err)
	}
	if err := q.Close(ctx); err != nil {
		return nil, fmt.Errorf("scaleout: Options.Queue: %w", err)
	}
	if err := checkTopology(ctx, ls, o.Queue.Name, shards); err != nil {
		return nil, err
	}
	log := o.Queue.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Receiver{shards: shards, store: store, ls: ls, opts: o, self: self, log: log, running: map[int]*shardRun{}}, nil
}

// Member returns this receiver's membership: its Name, the Incarnation
// that holds its leases, and its Weight.
func (r *Receiver) Member() seqstore.Member { return r.self }

// Run joins the membership and runs h over the messages of the shards this
// receiver owns, as ordered.Queue.Run does over one queue (one message at a
// time per group, groups in parallel), until ctx ends. It then hands its
// shards over: their handlers finish, their advances are made durable,
// their leases are released, and it leaves the membership; it returns once
// that is done: within Lease.CloseDrain plus DrainTimeout, unless a handler
// ignores its cancelled ctx, which Run waits for. A handler's ctx carries
// its shard's fencing token (Token), and is cancelled when the shard is
// lost, or when its lease's local deadline passes without a renewal.
func (r *Receiver) Run(ctx context.Context, h ordered.Handler) error {
	r.mu.Lock()
	if r.handler != nil || r.closed {
		r.mu.Unlock()
		return errors.New("scaleout: Run called twice")
	}
	r.handler = h
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	r.ctx = life
	k, err := lease.New(r.ls, r.opts.Queue.Name, r.self, len(r.shards), r, r.leaseOptions())
	if err != nil {
		r.mu.Unlock()
		return fmt.Errorf("scaleout: %w", err)
	}
	r.keeper = k
	r.mu.Unlock()

	<-ctx.Done()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.leaseOptions().CloseDrain+r.opts.DrainTimeout+time.Second)
	defer cancel()
	err = k.Close(closeCtx)
	r.mu.Lock()
	r.closed = true
	var changes []Change
	for s := range r.running {
		changes = append(changes, r.fenceLocked(s, errors.New("scaleout: closing"))...)
	}
	r.mu.Unlock()
	r.report(changes...)
	r.wg.Wait()
	return err
}

func (r *Receiver) leaseOptions() *lease.Options {
	l := r.opts.Lease
	return &lease.Options{TTL: l.TTL, RenewEvery: l.RenewEvery, RetryPeriod: l.RetryPeriod,
		RenewDeadline: l.RenewDeadline, RebalanceDelay: l.RebalanceDelay, CloseDrain: l.CloseDrain, Balance: l.Balance,
		OnError: func(kind lease.Kind, err error) {
			r.report(Change{Kind: "error", Shard: -1, Err: fmt.Errorf("lease %s: %w", kind, err)})
		}}
}

// Owned returns the shards this receiver runs now, with their tokens.
func (r *Receiver) Owned() map[int]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int]uint64, len(r.running))
	for s, run := range r.running {
		if !run.ending {
			out[s] = run.lease.Token
		}
	}
	return out
}

// Stats returns the stats of the Queue of each shard this receiver runs.
func (r *Receiver) Stats() map[int]ordered.Stats {
	r.mu.Lock()
	runs := make(map[int]*shardRun, len(r.running))
	for s, run := range r.running {
		runs[s] = run
	}
	r.mu.Unlock()
	out := make(map[int]ordered.Stats, len(runs))
	for s, run := range runs {
		out[s] = run.q.Stats()
	}
	return out
}

type tokenKey struct{}

// Token returns the fencing token of the shard whose message a handler
// run by Receiver.Run is handling: a handler writing elsewhere can store
// it with its writes and refuse writes carrying a lower one.
func Token(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(tokenKey{}).(uint64)
	return t, ok
}

// report logs changes and hands them to OnChange; it is never called with
// r.mu held, so that OnChange may call Owned or Stats.
func (r *Receiver) report(changes ...Change) {
	for _, c := range changes {
		if c.Kind == "error" {
			r.log.Warn("scaleout: lease store", "queue", r.opts.Queue.Name, "member", r.self.Name, "err", c.Err)
		} else {
			r.log.Info("scaleout: shard "+c.Kind, "queue", r.opts.Queue.Name, "shard", c.Shard, "token", c.Token, "member", r.self.Name, "err", c.Err)
		}
		if f := r.opts.OnChange; f != nil {
			f(c)
		}
	}
}

// Start runs the shard of l (lease.Receiver).
func (r *Receiver) Start(l seqstore.Lease) {
	var changes []Change
	defer func() { r.report(changes...) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if old := r.running[l.Shard]; old != nil {
		// Still ending from an earlier lease: fence it now.
		changes = append(changes, r.fenceLocked(l.Shard, errors.New("scaleout: replaced by a new lease"))...)
	}
	s := l.Shard
	if k := r.keeper; !time.Now().Before(k.Deadline(s, l.Token)) {
		// Decided before the keeper was held up (a batch of actions it
		// resumes), for a lease past its local deadline: another member
		// may hold the shard by now.
		k.Expired(s, l.Token)
		changes = append(changes, Change{Kind: "fence", Shard: s, Token: l.Token,
			Err: fmt.Errorf("%w: the lease on shard %d (token %d) was past its local deadline when it was to start", seqstore.ErrFenced, s, l.Token)})
		return
	}
	run := &shardRun{lease: l, done: make(chan struct{}), over: make(chan struct{})}
	fs := &fencedStore{Store: r.store, shard: s, shards: len(r.shards), token: l.Token}
	fs.onFence = func(err error) { r.fenceRun(run, err) }
	qo := r.opts.Queue
	qo.Receive.Lease = r.leaseCheck(run, r.keeper, qo.Receive.Lease)
	q, err := ordered.New(r.ctx, r.shards[s].Queue, fs, &qo)
	if err != nil { // NewReceiver tried these options: the driver or the store failed
		changes = append(changes, Change{Kind: "fence", Shard: s, Token: l.Token, Err: err})
		return
	}
	// The handlers' ctx ends only when the shard is lost (or the Receiver
	// stops): a handover on purpose lets them finish.
	runCtx, cancel := context.WithCancel(context.WithValue(r.ctx, tokenKey{}, l.Token))
	run.q, run.cancel = q, cancel
	r.running[s] = run
	h, k := r.handler, r.keeper
	r.wg.Go(func() {
		defer close(run.done)
		err := q.Run(runCtx, h)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ordered.ErrClosed) {
			// The Queue's lease check failed (scaleout's, or the
			// application's own Lease): it hands out nothing more. The
			// keeper must drop the lease, which nobody serves now, and
			// the Queue must close to give back what it holds.
			k.Expired(l.Shard, l.Token)
			r.fenceRun(run, err)
		}
	})
	r.wg.Go(func() { r.watch(run, k) })
	changes = append(changes, Change{Kind: "start", Shard: s, Token: l.Token})
}

// Revoke hands the shard over (lease.Receiver): the Queue closes, which
// stops its hand-outs, waits for its handlers, makes its advances durable
// and gives back what it held; then the keeper releases the lease. Past
// DrainTimeout the handlers' ctx is cancelled, and the lease is released
// only once they returned.
func (r *Receiver) Revoke(s int) {
	r.mu.Lock()
	run := r.running[s]
	k := r.keeper
	if run == nil || run.ending {
		r.mu.Unlock()
		if run == nil && k != nil {
			k.Drained(s)
		}
		return
	}
	run.ending = true
	r.mu.Unlock()
	r.report(Change{Kind: "revoke", Shard: s, Token: run.lease.Token})
	r.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.opts.DrainTimeout)
		err := run.q.Close(ctx)
		cancel()
		run.cancel() // Run has returned, or its handlers are past DrainTimeout
		<-run.done
		r.mu.Lock()
		r.drop(run)
		fenced := run.fenced
		r.mu.Unlock()
		if fenced {
			// Lost while draining: the keeper no longer holds this lease,
			// and a Drained now would release the shard's next one.
			return
		}
		if err != nil {
			r.log.Warn("scaleout: shard not drained in time", "shard", s, "err", err)
		}
		r.report(Change{Kind: "drained", Shard: s, Token: run.lease.Token, Err: err})
		k.Drained(s)
	})
}

// Fence stops the shard at once (lease.Receiver): its lease could not be
// renewed before its deadline, or was taken over.
func (r *Receiver) Fence(s int) {
	r.fence(s, errors.New("scaleout: the lease was lost (not renewed in time, or taken over)"))
}

// fence stops the shard at once: the handlers' ctx is cancelled, nothing
// more is handed out, and the Queue closes with a short deadline, giving
// back what it held.
func (r *Receiver) fence(s int, why error) {
	r.mu.Lock()
	changes := r.fenceLocked(s, why)
	r.mu.Unlock()
	r.report(changes...)
}

// fenceRun stops run if it is still its shard's current run: a late
// ErrFenced of an earlier lease's Queue must not stop the next one.
func (r *Receiver) fenceRun(run *shardRun, why error) {
	r.mu.Lock()
	var changes []Change
	if r.running[run.lease.Shard] == run {
		changes = r.fenceLocked(run.lease.Shard, why)
	}
	r.mu.Unlock()
	r.report(changes...)
}

// fenceLocked stops shard s and returns the change to report once r.mu is
// released. The handlers' ctx is cancelled at once; the Queue keeps the
// messages out to them invisible until they return (at most DrainTimeout),
// so that the next owner does not hand them out meanwhile, then closes with
// a short deadline, giving back what it held (its advances are refused by
// the store once the next owner claimed the streams).
func (r *Receiver) fenceLocked(s int, why error) []Change {
	run := r.running[s]
	if run == nil {
		return nil
	}
	r.drop(run)
	run.fenced = true
	if !errors.Is(why, seqstore.ErrFenced) {
		why = fmt.Errorf("%w: %w", seqstore.ErrFenced, why)
	}
	run.lost.CompareAndSwap(nil, &why)
	// Reported even when the shard was being handed over (revoked): its
	// "drained" will not come.
	run.ending = true
	changes := []Change{{Kind: "fence", Shard: s, Token: run.lease.Token, Err: why}}
	r.wg.Go(func() {
		run.cancel()
		select {
		case <-run.done:
		case <-time.After(r.opts.DrainTimeout):
			r.log.Warn("scaleout: a fenced shard's handlers did not return within DrainTimeout", "shard", s)
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), time.Second)
		defer cancel()
		_ = run.q.Close(ctx)
		<-run.done
	})
	return changes
}

// drop takes run out of r.running, if it is still its shard's run. r.mu
// is held.
func (r *Receiver) drop(run *shardRun) {
	if r.running[run.lease.Shard] == run {
		delete(r.running, run.lease.Shard)
		close(run.over)
	}
}

// watch fences run when its lease's local deadline passes without a
// renewal. The keeper fences such a lease itself, but only when its
// goroutine runs: held up (a slow OnChange, a paused process, a store call
// that does not return), it would leave the shard's handlers running with
// their ctx alive, and its Queue fetching and keeping messages invisible,
// after the store lets another member take the shard over. The Queue's
// lease check stops its hand-outs and settles at the deadline; this stops
// the rest.
func (r *Receiver) watch(run *shardRun, k *lease.Keeper) {
	l := run.lease
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		wait := time.Until(k.Deadline(l.Shard, l.Token))
		if wait <= 0 {
			break
		}
		t.Reset(wait)
		select {
		case <-run.over:
			return
		case <-t.C:
		}
	}
	r.mu.Lock()
	current := r.running[l.Shard] == run
	r.mu.Unlock()
	if current {
		k.Expired(l.Shard, l.Token)
		r.fenceRun(run, fmt.Errorf("%w: the lease on shard %d (token %d) passed its local deadline without a renewal", seqstore.ErrFenced, l.Shard, l.Token))
	}
}

// prefixUTF8 returns the longest prefix of s of at most n bytes that ends
// on a rune boundary.
func prefixUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
