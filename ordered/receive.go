package ordered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/ordered/driver"
)

// Receive returns the next message of any group that has one ready, waiting
// until one is or ctx ends. Groups take turns, and a group has at most one
// message out at a time: its next message is handed out only after Ack (or
// after the retry that follows a Nack). The first call starts the receive
// side (fetchers and the goroutines that write cursors, delete and keep
// visibility). It returns ErrClosed once Close began and ctx.Err() when ctx
// ends.
func (q *Queue) Receive(ctx context.Context) (*Message, error) {
	r, err := q.receiver()
	if err != nil {
		return nil, err
	}
	return r.receive(ctx, nil, nil, nil)
}

// Run hands messages to h with up to ReceiveOptions.Concurrency handlers at
// once, never two of one group at a time. A nil result acks the message, an
// error nacks it. Run returns nil when ctx ends, ErrClosed when the Queue
// closes, and an error wrapping ReceiveOptions.Lease's once the lease
// ended; Close waits for the handlers running then.
func (q *Queue) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return errors.New("ordered: run: nil handler")
	}
	r, err := q.receiver()
	if err != nil {
		return err
	}
	n := r.o.Concurrency
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		return ErrClosed
	}
	r.runWG.Add(n)
	r.mu.Unlock()
	var wg sync.WaitGroup
	var closed bool
	var once sync.Once
	for range n {
		wg.Go(func() {
			defer r.runWG.Done()
			w := r.newWaiter()
			if w != nil {
				w.slab = true
			}
			m, err := r.receive(ctx, w, nil, nil)
			for err == nil {
				var serr error
				done := m
				if herr := h(ctx, m); herr != nil {
					serr = m.Nack(ctx, herr)
					m, err = r.receive(ctx, w, nil, nil)
				} else {
					// The ack and the next hand-out take one step:
					// one lock and one look at the core per message.
					m, serr, err = r.ackReceive(ctx, m, w)
				}
				if serr != nil && !errors.Is(serr, ErrClosed) && ctx.Err() == nil && r.fenced.Load() == nil {
					r.log.WarnContext(ctx, "ordered: run: settle message", "group", done.Group, "seq", done.Seq, "err", serr)
				}
			}
			if errors.Is(err, ErrClosed) {
				once.Do(func() { closed = true })
			}
		})
	}
	wg.Wait()
	if p := r.fenced.Load(); p != nil && ctx.Err() == nil {
		return *p
	}
	if closed && ctx.Err() == nil {
		return ErrClosed
	}
	return nil
}

// receiver is the receive side of a Queue: a thin shell over the receive
// core (internal/recvcore), which makes every decision. The shell feeds the
// core its events under mu, takes the actions the core asks for, and
// executes them outside the lock, each in a goroutine it owns; hooks and
// logs run on a goroutine of their own (reporter), in order.
type receiver struct {
	q     *Queue
	o     *ReceiveOptions
	hooks *Hooks
	log   *slog.Logger

	ctx         context.Context // cancelled when the receive side stops for good
	cancel      context.CancelFunc
	fetchCtx    context.Context // cancelled first by close
	fetchCancel context.CancelFunc

	wg    sync.WaitGroup // every goroutine but Run's handlers and the reporter
	runWG sync.WaitGroup // Run's handler goroutines
	rep   reporter

	closingCh chan struct{} // closed when close begins
	fencedCh  chan struct{} // closed when the Lease ended
	fenced    atomic.Pointer[error]
	io        atomic.Pointer[ioShare] // the context I/O calls share (ioCtx)
	avail     chan struct{}           // cap 1: a hand-out may be ready (AtMostOnce receives wait on it; the others are waiters)
	room      chan struct{}           // cap 1: fetch room may be free
	wake      chan struct{}           // cap 1: the keeper must look at the deadline again
	progress  chan struct{}           // cap 1: an action completed (close waits on it)

	mu        sync.Mutex
	core      *recvcore.Core
	closing   bool         // no more hand-outs
	closed    bool         // acks refused
	stopped   bool         // no more I/O goroutines: close waits for those running
	throttled atomic.Int64 // receives the service refused for its rate
	taking    atomic.Int64 // hand-outs not yet taken or given back (take, close waits for them)

	fetching int       // messages the fetchers asked for and did not get yet
	coreRoom int       // the core's fetch room, as of the last step
	keeperAt time.Time // when the keeper wakes up next (zero: never)
	waiters  map[recvcore.Ticket]chan error
	handing  int // AtMostOnce hand-outs whose Receive waits for their commit (close waits for them)
	idle     []*waiter
}

// waiter is a Run worker or a Receive caller waiting for a message. The
// step that makes one ready hands it to the waiters itself, oldest first,
// under the lock, as raft's node loop does: one step serves every waiter
// (a fetch of 16 arrivals, 16 hand-outs), where each would otherwise be
// woken in turn to take the lock and ask the core again. In AtMostOnce
// mode nobody waits here: a hand-out waits for its commit first.
type waiter struct {
	ch     chan recvcore.Delivery // cap 1: one hand-out per wait
	queued bool                   // in receiver.idle (under mu)
	// slab: a Run worker's, whose Messages of small bodies (slabBody) are
	// allocated msgSlab at a time: one allocation instead of eight. A
	// Message a handler keeps keeps its slab alive, and the slab its
	// siblings' bodies: at most about 10 KB. Only its goroutine uses msgs.
	slab bool
	msgs []Message
}

// msgSlab is how many Messages a Run worker allocates at a time, and
// slabBody the largest body (header included) whose Message comes from a
// slab: a larger body costs more than the allocation saved (review15: a
// kept Message of a slab of 32 KiB bodies held 7 more).
const (
	msgSlab  = 8
	slabBody = 1 << 10
)

// newWaiter returns a waiter, or nil in AtMostOnce mode.
func (r *receiver) newWaiter() *waiter {
	if r.o.Mode == AtMostOnce {
		return nil
	}
	return &waiter{ch: make(chan recvcore.Delivery, 1)}
}

// serveIdle hands the ready messages to the waiters, oldest first, under
// the lock. Nothing is handed out once the lease ended; a waiter checks the
// lease again as it takes its message (Lease is the application's code:
// it does not run under the lock).
func (r *receiver) serveIdle(now time.Time) {
	if r.closing || r.fenced.Load() != nil {
		return
	}
	for len(r.idle) > 0 && r.core.Available() {
		d, ok := r.core.Next(now)
		if !ok {
			return
		}
		w := r.idle[0]
		n := copy(r.idle, r.idle[1:])
		r.idle[n] = nil
		r.idle = r.idle[:n]
		w.queued = false
		r.taking.Add(1)
		w.ch <- d // cap 1, empty while queued
	}
}

// take checks, as a waiter takes the hand-out d, that it may still go to
// the application: ctx has not ended, Close has not begun and the lease
// holds (asked first: it may take a while). Otherwise d goes back.
func (r *receiver) take(ctx context.Context, d recvcore.Delivery) error {
	defer r.took()
	err := r.leased()
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		select {
		case <-r.closingCh:
			err = ErrClosed
		default:
		}
	}
	if err != nil {
		r.giveBack(d)
	}
	return err
}

// took ends the take of a hand-out counted in taking.
func (r *receiver) took() {
	if r.taking.Add(-1) == 0 {
		select {
		case <-r.closingCh:
			signal(r.progress)
		default:
		}
	}
}

// unqueue takes w out of the waiters. It reports false when a hand-out
// came first: it is in w.ch.
func (r *receiver) unqueue(w *waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !w.queued {
		return false
	}
	w.queued = false
	if i := slices.Index(r.idle, w); i >= 0 {
		r.idle = slices.Delete(r.idle, i, i+1)
	}
	return true
}

// giveBack returns a hand-out that its waiter will not take: it is next
// in line again, as the same attempt.
func (r *receiver) giveBack(d recvcore.Delivery) {
	r.step(func(now time.Time) { _ = r.core.Return(now, &d) })
}

func newReceiver(q *Queue) *receiver {
	r := &receiver{
		q:         q,
		o:         &q.opts.Receive,
		hooks:     &q.opts.Hooks,
		log:       q.log,
		closingCh: make(chan struct{}),
		fencedCh:  make(chan struct{}),
		avail:     make(chan struct{}, 1),
		room:      make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		progress:  make(chan struct{}, 1),
		waiters:   make(map[recvcore.Ticket]chan error),
	}
	r.log.Info("ordered: receiver starting", "queue", q.opts.Name, "mode", q.opts.Receive.Mode,
		"max_undeleted", q.opts.Receive.MaxUndeleted, "parking", !q.opts.Receive.NoPark)
	core, err := recvcore.New(q.coreConfig())
	if err != nil {
		// The options were validated by New: a failure here is a bug.
		panic(fmt.Sprintf("ordered: receive core: %v", err))
	}
	r.core = core
	r.ctx, r.cancel = context.WithCancel(q.life)
	r.fetchCtx, r.fetchCancel = context.WithCancel(r.ctx)
	r.rep.start(r.reportOut, r.log.Warn)
	r.step(func(time.Time) {}) // the first Ready: the scan of the park, the fetch room
	for range r.o.Fetchers {
		r.wg.Go(r.fetchLoop)
	}
	r.wg.Go(r.keeperLoop)
	return r
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// step runs f on the core under the lock, then executes what the core asks
// for. Every event goes through it.
func (r *receiver) step(f func(now time.Time)) {
	r.mu.Lock()
	now := time.Now()
	f(now)
	r.serveIdle(now)
	rd := r.core.Ready(now)
	var wakeups []wakeup
	for _, res := range rd.Resolved {
		if ch, ok := r.waiters[res.Ticket]; ok {
			delete(r.waiters, res.Ticket)
			wakeups = append(wakeups, wakeup{ch, res.Err})
		}
	}
	r.coreRoom = rd.Room
	avail := rd.Available && r.o.Mode == AtMostOnce // the others are served by serveIdle
	room := rd.Room > r.fetching
	wake := !rd.Wake.IsZero() && (r.keeperAt.IsZero() || rd.Wake.Before(r.keeperAt))
	closing := r.closing
	stopped := r.stopped
	if !stopped {
		r.wg.Add(actions(&rd)) // under mu: close's wg.Wait follows stopped
	}
	r.mu.Unlock()
	for _, w := range wakeups {
		w.ch <- w.err // cap 1, one send per ticket
	}
	if !stopped {
		r.dispatch(rd)
	}
	r.rep.add(rd.Reports)
	if avail {
		signal(r.avail)
	}
	if room {
		signal(r.room)
	}
	if wake {
		signal(r.wake)
	}
	if closing {
		signal(r.progress)
	}
}

type wakeup struct {
	ch  chan error
	err error
}

// actions counts the goroutines dispatch starts for rd.
func actions(rd *recvcore.Ready) int {
	n := len(rd.Reads) + len(rd.Commits) + len(rd.Parks) + len(rd.Unparks) + len(rd.Scans) +
		len(rd.Deletes) + len(rd.DeadLetters) + len(rd.Requeues)
	if len(rd.Visibility) > 0 {
		n++
	}
	return n
}

// dispatch starts the I/O the core asked for, one goroutine per action,
// counted in r.wg by the step (actions).
func (r *receiver) dispatch(rd recvcore.Ready) {
	for _, a := range rd.Reads {
		go r.io1(func() { r.read(a) })
	}
	for _, a := range rd.Commits {
		go func() {
			ev := r.commit(a)
			r.wg.Done()
			// After Done: OnCommit may call Close, which waits for r.wg.
			if f := r.hooks.OnCommit; f != nil {
				f(ev)
			}
		}()
	}
	for _, a := range rd.Parks {
		go r.io1(func() { r.parkEntries(a) })
	}
	for _, a := range rd.Unparks {
		go r.io1(func() { r.unpark(a) })
	}
	for _, a := range rd.Scans {
		go r.io1(func() { r.scanPark(a) })
	}
	for _, a := range rd.Deletes {
		go r.io1(func() { r.delete(a) })
	}
	if len(rd.Visibility) > 0 {
		vs := rd.Visibility
		go r.io1(func() { r.changeVisibility(vs) })
	}
	for _, a := range rd.DeadLetters {
		go r.io1(func() { r.deadLetter(a) })
	}
	for _, a := range rd.Requeues {
		go r.io1(func() { r.requeue(a) })
	}
}

// io1 runs one action dispatched by a step.
func (r *receiver) io1(f func()) {
	defer r.wg.Done()
	f()
}

// ackReceive acks m and hands out the next ready message, in one step when
// the ack does not wait (SyncAck off). It returns the ack's error apart.
func (r *receiver) ackReceive(ctx context.Context, m *Message, w *waiter) (*Message, error, error) {
	if r.o.SyncAck {
		aerr := r.ack(ctx, m)
		next, err := r.receive(ctx, w, nil, nil)
		return next, aerr, err
	}
	var aerr error
	var at time.Time
	acked := false
	next, err := r.receive(ctx, w, func(now time.Time) {
		if !acked {
			acked = true
			if r.closed {
				aerr = ErrClosed
				return
			}
			_, aerr = r.core.Ack(now, &m.d, false)
			at = now
		}
	}, func() {
		if acked && aerr == nil {
			r.settled(m, at, nil)
		}
	})
	if !acked {
		aerr = r.ack(ctx, m) // receive returned before its first step
	}
	return next, settleErr(aerr), err
}

// receive hands out the next ready message. When nothing is ready, it
// waits to be handed one by the step that makes one ready, through w (a
// Run worker's; nil: one of its own, made when it must wait). before, if
// not nil, runs in the first step, ahead of the look for the next message,
// even once Close began; after, if not nil, runs once after that step,
// outside the lock, before any wait.
func (r *receiver) receive(ctx context.Context, w *waiter, before func(now time.Time), after func()) (*Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := r.leased(); err != nil {
			return nil, err
		}
		var d recvcore.Delivery
		var ok, closing bool
		var wait chan error
		r.step(func(now time.Time) {
			if before != nil {
				before(now)
			}
			if closing = r.closing; closing {
				return
			}
			d, ok = r.core.Next(now)
			switch {
			case ok && d.Await != 0:
				wait = make(chan error, 1)
				r.waiters[d.Await] = wait
				r.handing++
			case ok && r.o.Mode != AtMostOnce:
				r.taking.Add(1)
			case !ok && r.o.Mode != AtMostOnce:
				if w == nil {
					w = r.newWaiter()
				}
				w.queued = true
				r.idle = append(r.idle, w)
			}
		})
		before = nil
		if after != nil {
			after()
			after = nil
		}
		if closing {
			return nil, ErrClosed
		}
		if !ok && w != nil {
			select {
			case d := <-w.ch:
				if err := r.take(ctx, d); err != nil {
					return nil, err
				}
				return r.message(d, w), nil
			case <-r.closingCh:
			case <-r.fencedCh:
			case <-ctx.Done():
			}
			if !r.unqueue(w) {
				r.giveBack(<-w.ch)
				r.took()
			}
			continue // the checks above say why it ends
		}
		if !ok {
			select {
			case <-r.avail:
			case <-r.closingCh:
				return nil, ErrClosed
			case <-r.fencedCh:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		if wait == nil {
			if r.o.Mode != AtMostOnce {
				// Checked again right before the application gets it:
				// a pause since the check at the top (a stopped process,
				// a long step) may have outlasted the lease. AtMostOnce
				// hand-outs cannot be given back (Core.Return).
				if err := r.take(ctx, d); err != nil {
					return nil, err
				}
			}
			return r.message(d, w), nil
		}
		// AtMostOnce: the advance past the message (or its delete) must
		// be durable before the application sees it. Close does not end
		// the wait: its flush does, and the message is handed out (or, when
		// the flush gives up, ErrClosed comes).
		select {
		case err := <-wait:
			r.handed()
			switch {
			case err == nil:
				if lerr := r.leased(); lerr != nil {
					// Past the lease: not handed out. Its advance is
					// durable, so it is lost, as in a crash; AtMostOnce
					// allows that, not two receivers on its group.
					return nil, lerr
				}
				return r.message(d, w), nil
			case errors.Is(err, ErrClosed):
				return nil, ErrClosed
			}
			continue // a conflict: the message is not ours to hand out
		case <-ctx.Done():
			r.abandon(&d)
			return nil, ctx.Err()
		}
	}
}

// leased returns nil while the receiver may hand messages out and settle
// them: ReceiveOptions.Lease is unset or returns nil. Once Lease returned
// an error, it returns that error, wrapped, for good; the first time, it
// reports it (Hooks.OnConflict) and wakes the receives waiting for a
// message.
func (r *receiver) leased() error {
	if r.o.Lease == nil {
		return nil
	}
	if p := r.fenced.Load(); p != nil {
		return *p
	}
	cause := r.o.Lease()
	if cause == nil {
		return nil
	}
	err := fmt.Errorf("ordered: the receiver's lease ended: %w", cause)
	if !r.fenced.CompareAndSwap(nil, &err) {
		return *r.fenced.Load()
	}
	close(r.fencedCh)
	r.rep.add([]recvcore.Report{{Kind: recvcore.ReportConflict, Msg: "ordered: the receiver's lease ended: nothing more is handed out or settled", Err: err}})
	return err
}

// disown takes back m, whose Ack or Nack the lease refused: nothing is
// handed out past the lease, and Close gives it back to the queue with a
// short visibility, where it would otherwise stay invisible until its last
// extension ends while its group's next owner waits for it.
func (r *receiver) disown(m *Message) {
	r.step(func(now time.Time) {
		if !r.closed {
			_ = r.core.Disown(now, &m.d)
		}
	})
}

// handed ends an AtMostOnce hand-out's wait.
func (r *receiver) handed() {
	r.mu.Lock()
	r.handing--
	r.mu.Unlock()
	signal(r.progress)
}

// abandon gives back a message whose AtMostOnce wait was given up.
func (r *receiver) abandon(d *recvcore.Delivery) {
	r.step(func(now time.Time) {
		delete(r.waiters, d.Await)
		_ = r.core.Abandon(now, d)
		r.handing--
	})
}

// message makes the Message of hand-out d, from w's slab when w is a Run
// worker's.
func (r *receiver) message(d recvcore.Delivery, w *waiter) *Message {
	plantHandOut()
	var m *Message
	if w != nil && w.slab && len(d.Raw) <= slabBody && len(d.Body) <= slabBody {
		if len(w.msgs) == 0 {
			w.msgs = make([]Message, msgSlab)
		}
		m, w.msgs = &w.msgs[0], w.msgs[1:]
	} else {
		m = new(Message)
	}
	*m = Message{
		Group: d.Group, Epoch: d.Epoch, Seq: d.Seq, Body: d.Body, ID: d.ID, Attempt: d.Attempt,
		Unordered: d.Unordered, Redelivered: d.Redelivered, r: r, d: d,
	}
	if r.hooks.OnSettle != nil {
		m.out = time.Now()
	}
	return m
}

// settled calls Hooks.OnSettle for m, settled at at (Nack: for cause).
func (r *receiver) settled(m *Message, at time.Time, cause error) {
	if f := r.hooks.OnSettle; f != nil {
		f(Event{Group: m.Group, Epoch: m.Epoch, Seq: m.Seq, ID: m.ID, Attempt: m.Attempt, Duration: at.Sub(m.out), Err: cause})
	}
}

// ack implements Message.Ack.
func (r *receiver) ack(ctx context.Context, m *Message) error {
	var err error
	var wait chan error
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := r.leased(); err != nil {
		r.disown(m)
		return err
	}
	var at time.Time
	r.step(func(now time.Time) {
		if r.closed {
			// Close finished its flush while Lease ran: the advance
			// would never be written, nor a ticket resolved.
			err = ErrClosed
			return
		}
		var t recvcore.Ticket
		t, err = r.core.Ack(now, &m.d, r.o.SyncAck)
		at = now
		if t != 0 {
			wait = make(chan error, 1)
			r.waiters[t] = wait
		}
	})
	if err != nil {
		return settleErr(err)
	}
	r.settled(m, at, nil)
	if wait == nil {
		return nil
	}
	select {
	case err := <-wait:
		return settleErr(err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nack implements Message.Nack.
func (r *receiver) nack(ctx context.Context, m *Message, cause error) error {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := r.leased(); err != nil {
		r.disown(m)
		return err
	}
	var err error
	var at time.Time
	r.step(func(now time.Time) {
		if r.closed {
			err = ErrClosed // as in ack
			return
		}
		err, at = r.core.Nack(now, &m.d, cause), now
	})
	if err == nil {
		r.settled(m, at, cause)
	}
	return settleErr(err)
}

func settleErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, recvcore.ErrSettled):
		return ErrAcked
	case errors.Is(err, recvcore.ErrConflict):
		return ErrConflict
	case errors.Is(err, recvcore.ErrClosed):
		return ErrClosed
	}
	return err
}

// fetchLoop long-polls the driver for as many messages as the core has
// room for, and hands them to the core.
func (r *receiver) fetchLoop() {
	ctx := r.fetchCtx
	failures := 0
	for ctx.Err() == nil {
		n := r.takeRoom()
		if n == 0 {
			select {
			case <-r.room:
			case <-ctx.Done():
				return
			}
			continue
		}
		msgs, err := r.q.drvReceive(ctx, n, r.o.Wait)
		switch {
		case err != nil && ctx.Err() == nil:
			// Its response may be lost after the queue made messages
			// invisible: the cap counts them until they are visible again.
			r.step(func(now time.Time) {
				r.fetching -= n
				r.core.FetchFailed(now, n)
			})
		case err != nil || len(msgs) == 0:
			r.mu.Lock()
			r.fetching -= n
			r.mu.Unlock()
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			wait := r.q.opts.Retry.backoff(failures)
			if errors.Is(err, driver.ErrThrottled) {
				// The service refused for its rate (MNS: 429
				// TooManyRequests, 400 QpsLimitExceeded, or its
				// throttling of clients that receive without deleting):
				// back off at least a second.
				r.throttled.Add(1)
				wait = max(wait, time.Second)
			}
			r.log.WarnContext(ctx, "ordered: receive failed", "err", err, "failures", failures, "backoff", wait)
			if !sleepCtx(ctx, wait) {
				return
			}
			continue
		}
		failures = 0
		if len(msgs) == 0 {
			signal(r.room)
			continue
		}
		in := make([]recvcore.Incoming, len(msgs))
		for i, m := range msgs {
			in[i] = recvcore.Incoming{Body: m.Body, ID: m.ID, Receipt: m.Receipt, DequeueCount: m.DequeueCount, NextVisible: m.NextVisible}
		}
		// The reservation ends as the arrivals count in the core, in one
		// step: between the two, another fetcher would see their room
		// free and receive beyond the cap.
		r.step(func(now time.Time) {
			r.fetching -= n
			r.core.Arrive(now, in)
		})
	}
}

// takeRoom reserves fetch room for one receive request: the core's room
// less what other fetchers asked for, so that together they never receive
// beyond the cap.
func (r *receiver) takeRoom() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(r.coreRoom-r.fetching, r.q.limits.MaxBatch)
	if n <= 0 {
		return 0
	}
	r.fetching += n
	return n
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// keeperLoop feeds the core its timers.
func (r *receiver) keeperLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	due := false // the previous wake-up was for a deadline already due
	for {
		r.mu.Lock()
		at, ok := r.core.Deadline()
		wait := time.Hour
		if ok {
			wait = max(time.Until(at), 0)
		}
		if due && wait == 0 {
			// The core promises that a deadline it gives is actionable
			// (the model test checks it); should that ever fail, a
			// millisecond's floor keeps a CPU from spinning.
			wait = time.Millisecond
		}
		due = wait == 0
		r.keeperAt = time.Now().Add(wait)
		r.mu.Unlock()
		t.Reset(wait)
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
			continue
		case <-t.C:
		}
		r.step(func(now time.Time) { r.core.Tick(now) })
	}
}

// close stops the receive side: see Queue.Close.
func (r *receiver) close(ctx context.Context) error {
	r.step(func(now time.Time) {
		r.closing = true
		close(r.closingCh)
		r.core.Close(now)
	})
	r.fetchCancel()
	err := waitCtx(ctx, &r.runWG)
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	// Flush: the acknowledged advances are written and their messages
	// deleted, what the core holds and will not deliver is given back to
	// the queue (to come back within seconds), and the AtMostOnce
	// hand-outs whose Receive waits for their commit are handed out. A
	// receive still in flight (cancelled, but its messages may be taken)
	// is waited for: what it brings is given back too; so is a hand-out
	// on its way to a Receive caller (take), which sees Close and gives
	// it back.
	for err == nil {
		r.mu.Lock()
		done := r.core.Flushed() && r.handing == 0 && r.fetching == 0 && r.taking.Load() == 0
		r.mu.Unlock()
		if done {
			break
		}
		select {
		case <-r.progress:
		case <-time.After(50 * time.Millisecond):
			r.step(func(now time.Time) { r.core.Tick(now) })
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	r.cancel()
	r.mu.Lock()
	r.stopped = true // a step still running (a Run worker past Close's deadline) starts no I/O
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	for t, ch := range r.waiters {
		ch <- ErrClosed
		delete(r.waiters, t)
	}
	r.mu.Unlock()
	if rerr := r.rep.stop(ctx); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("ordered: close: %w", err)
	}
	return nil
}

func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *receiver) stats() ReceiveStats {
	return r.receiveStats(r.coreStats())
}

// coreStats returns the core's counters. (The lock is deferred: a panic in
// a caller's Stats that the caller recovers, as net/http does, must not
// leave the receiver locked.)
func (r *receiver) coreStats() recvcore.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.core.Stats()
}

// receiveStats converts the core's counters.
func (r *receiver) receiveStats(c recvcore.Stats) ReceiveStats {
	s := ReceiveStats{
		Received: c.Received, Delivered: c.Delivered, Acked: c.Acked, Nacked: c.Nacked,
		Duplicates: c.Duplicates, DuplicatesReaped: c.DuplicatesReaped, Redelivered: c.Redelivered,
		NotKept: c.Released, Late: c.Late, Stale: c.Late, Untagged: c.Untagged, Skipped: c.Skipped, Gaps: c.Gaps,
		EpochSwitches: c.EpochSwitches, DeadLettered: c.DeadLettered, Conflicts: c.Conflicts, Mismatches: c.Mismatches,
		Commits: c.Commits, Committed: c.Committed, CommitFailures: c.CommitFailures,
		Deleted: c.Deleted, StaleReceipts: c.StaleReceipts, Extended: c.Extended, Shortened: c.Shortened,
		Parked: c.Parked, Unparked: c.Unparked, ParkFull: c.ParkFull, ParkedNow: c.ParkedNow, ParkedBytes: c.ParkedBytes, Evicted: c.Evicted, Forgotten: c.Forgotten,
		Buffered: c.Buffered, BufferedBytes: c.BufferedBytes, MaxBuffered: c.MaxBuffered,
		Undeleted: c.Held, MaxUndeleted: c.MaxHeld, Memory: c.Memory, Groups: c.Groups,
		Throttled: r.throttled.Load(), HooksDropped: r.rep.dropped.Load(),
		Requeued: c.Requeued, GivenBack: c.GivenBack,
	}
	for _, g := range c.Stuck {
		s.Stuck = append(s.Stuck, StuckGroup{Group: g.Group, Reason: g.Reason, Since: g.Since, Err: g.Err})
	}
	return s
}

// ReceiveStats counts the receive side's work.
type ReceiveStats struct {
	Received         int64 // messages returned by the driver
	Delivered        int64 // hand-outs, retries included
	Acked            int64
	Nacked           int64
	Duplicates       int64 // arrivals of an already handled seq
	DuplicatesReaped int64 // duplicates deleted from the queue
	Redelivered      int64 // arrivals the queue delivered again
	NotKept          int64 // arrivals given back to the queue (no parking, or a group that cannot take them)
	Late             int64 // late arrivals (older epoch, skipped seq)
	// Stale is the former name of Late.
	//
	// Deprecated: use Late.
	Stale          int64
	Untagged       int64
	Skipped        int64 // seqs skipped by the gap policy
	Gaps           int64 // holes reported by OnGap
	EpochSwitches  int64
	DeadLettered   int64
	Conflicts      int64 // cursors found moved by someone else
	Mismatches     int64 // one seq arrived with two payloads
	Commits        int64 // store Advance calls that succeeded
	Committed      int64 // cursor advances made durable (one per group per commit)
	CommitFailures int64 // store Advance calls that failed
	Deleted        int64 // messages deleted from the queue
	StaleReceipts  int64 // deletes refused because the receipt went stale (the message comes back)
	Extended       int64 // visibility extensions
	Shortened      int64 // visibility shortened for messages given back
	Parked         int64 // early arrivals parked in the store
	Unparked       int64 // parked messages read back
	ParkFull       int64 // early arrivals left in the queue because a park limit was reached (ReceiveOptions.ParkLimits)
	ParkedNow      int64 // messages this receiver parked that no durable cursor has passed yet (counted against ParkLimits)
	ParkedBytes    int64 // their body bytes
	Evicted        int64 // idle groups dropped from memory
	Forgotten      int64 // handed-out Unordered copies forgotten to stay within MaxMemory: a later copy may be handed out again
	Throttled      int64 // receives the service refused for its rate (driver.ErrThrottled): backed off
	HooksDropped   int64 // events whose hooks and log lines were dropped: the hooks were too slow (see Hooks)
	GivenBack      int64 // messages Close gave back to the queue, their visibility shortened to come back soon
	Requeued       int64 // AtMostOnce messages Close sent back to the queue: their only copy was in memory (see Queue.Close)
	Buffered       int   // messages waiting for their turn in memory
	BufferedBytes  int
	MaxBuffered    int // peak of Buffered
	Undeleted      int // messages received and not deleted (ReceiveOptions.MaxUndeleted)
	MaxUndeleted   int // peak of Undeleted
	UndeletedLimit int // the cap on Undeleted: ReceiveOptions.MaxUndeleted, default applied
	Memory         int // bytes charged to ReceiveOptions.MaxMemory
	Groups         int // groups in memory
	Stuck          []StuckGroup
}

// StuckGroup is a group that cannot progress: a hole under GapWait
// ("gap"), a message that failed MaxAttempts times under PoisonBlock
// ("poison"), a cursor being re-read after a conflict ("conflict"), or a
// store error that retrying soon cannot fix ("store", Err says which).
type StuckGroup struct {
	Group  string
	Reason string
	Since  time.Time
	Err    error
}
