package ordered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Receive returns the next message of any group that has one ready, waiting
// until one is or ctx ends. Groups take turns (a ready ring), and a group
// has at most one message out at a time: its next message is handed out only
// after Ack (or after the retry that follows a Nack). The first call starts
// the receive side (fetchers, committer, reaper, keeper). It returns
// ErrClosed once Close began and ctx.Err() when ctx ends.
func (q *Queue) Receive(ctx context.Context) (*Message, error) {
	r, err := q.receiver()
	if err != nil {
		return nil, err
	}
	return r.receive(ctx)
}

// Run hands messages to h with up to ReceiveOptions.Concurrency handlers at
// once, never two of one group at a time. A nil result acks the message, an
// error nacks it. Run returns nil when ctx ends and ErrClosed when the Queue
// closes; Close waits for the handlers running then.
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
			for {
				m, err := r.receive(ctx)
				if err != nil {
					if errors.Is(err, ErrClosed) {
						once.Do(func() { closed = true })
					}
					return
				}
				if herr := h(ctx, m); herr != nil {
					err = m.Nack(ctx, herr)
				} else {
					err = m.Ack(ctx)
				}
				if err != nil && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
					r.log.WarnContext(ctx, "ordered: run: settle message", "group", m.Group, "seq", m.Seq, "err", err)
				}
			}
		})
	}
	wg.Wait()
	if closed && ctx.Err() == nil {
		return ErrClosed
	}
	return nil
}

// receiver is the receive side of a Queue. All its state is guarded by mu;
// the goroutines it owns are the fetchers, the committer, the reaper and the
// keeper (timers, visibility, eviction).
type receiver struct {
	q     *Queue
	o     *ReceiveOptions
	hooks *Hooks
	log   *slog.Logger

	ctx         context.Context // cancelled when the receive side stops for good
	cancel      context.CancelFunc
	fetchCtx    context.Context // cancelled first by close
	fetchCancel context.CancelFunc

	fetchWG sync.WaitGroup // fetchers
	bgWG    sync.WaitGroup // keeper
	runWG   sync.WaitGroup // Run's handler goroutines

	closingCh   chan struct{} // closed when close begins: no more hand-outs
	commitFlush chan struct{} // closed when the committer must flush and exit
	commitDone  chan struct{}
	reapFlush   chan struct{} // closed when the reaper must flush and exit
	reapDone    chan struct{}

	avail      chan struct{} // cap 1: the ready ring became non-empty
	room       chan struct{} // cap 1: the ready ring dropped below highWater
	commitWake chan struct{} // cap 1
	reapWake   chan struct{} // cap 1
	keeperWake chan struct{} // cap 1

	// Reused by the committer goroutine only.
	cbatch  []seqstore.Advance
	cgroups []*group
	ctaken  [][]*entry

	highWater int // ready groups beyond which fetching pauses
	readyHigh int // deliverable messages beyond which fetching pauses
	holdHigh  int // held messages beyond which fetching pauses while delivery moves

	mu       sync.Mutex
	closing  bool // no more hand-outs
	closed   bool // acks refused
	groups   map[string]*group
	ring     ring
	dirty    []*group
	resolve  []*group // groups in conflict waiting to re-read their cursor
	reapq    []*entry
	timers   timerHeap
	out      map[*entry]struct{} // handed out: the keeper extends their visibility
	shortq   []extension         // not kept: the keeper shortens their visibility
	idle     idleList
	stuck    map[*group]stuckInfo
	tokens   float64 // visibility request budget
	tokensAt time.Time

	bufMsgs  int // messages held and not handed out
	readyMsg int // of which deliverable without waiting for a missing seq (sum of group.run)
	bufBytes int // their bytes
	st       ReceiveStats
}

type stuckInfo struct {
	since  time.Time
	reason string
}

func newReceiver(q *Queue) *receiver {
	r := &receiver{
		q:           q,
		o:           &q.opts.Receive,
		hooks:       &q.opts.Hooks,
		log:         q.log,
		closingCh:   make(chan struct{}),
		commitFlush: make(chan struct{}),
		commitDone:  make(chan struct{}),
		reapFlush:   make(chan struct{}),
		reapDone:    make(chan struct{}),
		avail:       make(chan struct{}, 1),
		room:        make(chan struct{}, 1),
		commitWake:  make(chan struct{}, 1),
		reapWake:    make(chan struct{}, 1),
		keeperWake:  make(chan struct{}, 1),
		groups:      make(map[string]*group),
		out:         make(map[*entry]struct{}),
		stuck:       make(map[*group]stuckInfo),
	}
	r.highWater = max(64, 4*r.o.Concurrency, 2*r.o.Fetchers*r.q.limits.MaxBatch)
	r.readyHigh = max(256, 4*r.o.Fetchers*r.q.limits.MaxBatch)
	r.holdHigh = max(r.readyHigh, r.o.Window/2)
	r.ctx, r.cancel = context.WithCancel(q.life)
	r.fetchCtx, r.fetchCancel = context.WithCancel(r.ctx)
	r.tokens = r.o.MaxVisibilityRate
	r.tokensAt = time.Now()
	for range r.o.Fetchers {
		r.fetchWG.Go(r.fetchLoop)
	}
	go r.commitLoop()
	go r.reapLoop()
	r.bgWG.Go(r.keeperLoop)
	return r
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// receive hands out the next ready message.
func (r *receiver) receive(ctx context.Context) (*Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.mu.Lock()
		if r.closing {
			r.mu.Unlock()
			return nil, ErrClosed
		}
		m, wait := r.handOutLocked()
		more := r.ring.len() > 0
		r.mu.Unlock()
		if more {
			signal(r.avail)
		}
		if m != nil {
			if wait == nil {
				return m, nil
			}
			// AtMostOnce: the advance past m must be durable first.
			if err := r.awaitDurable(ctx, wait); err != nil {
				r.requeueUnseen(m)
				if errors.Is(err, ErrClosed) || ctx.Err() != nil {
					return nil, err
				}
				continue
			}
			r.markHanded(m)
			return m, nil
		}
		select {
		case <-r.avail:
		case <-r.closingCh:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// close stops the receive side: see Queue.Close.
func (r *receiver) close(ctx context.Context) error {
	r.mu.Lock()
	r.closing = true
	close(r.closingCh)
	r.mu.Unlock()

	r.fetchCancel()
	r.fetchWG.Wait() // drivers honour ctx: this is prompt
	err := waitCtx(ctx, &r.runWG)
	r.mu.Lock()
	r.closed = true
	// Messages held in memory are simply forgotten: they are not deleted and
	// come back after their visibility timeout.
	r.mu.Unlock()

	if err == nil {
		close(r.commitFlush)
		err = waitChan(ctx, r.commitDone)
	}
	if err == nil {
		close(r.reapFlush)
		err = waitChan(ctx, r.reapDone)
	}
	r.cancel()
	<-r.commitDone
	<-r.reapDone
	r.bgWG.Wait()
	r.mu.Lock()
	r.failWaitersLocked(ErrClosed)
	r.mu.Unlock()
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
	return waitChan(ctx, done)
}

func waitChan(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReceiveStats counts the receive side's work.
type ReceiveStats struct {
	Received         int64 // messages returned by the driver
	Delivered        int64 // hand-outs, retries included
	Acked            int64
	Nacked           int64
	Duplicates       int64 // arrivals of an already delivered seq
	DuplicatesReaped int64 // duplicates deleted from the queue
	Redelivered      int64 // arrivals the queue delivered again
	NotKept          int64 // arrivals beyond the window or the byte bound, left to come back
	Stale            int64 // late arrivals (older epoch, skipped seq)
	Untagged         int64
	Skipped          int64 // seqs skipped by the gap policy
	Gaps             int64 // holes reported by OnGap
	EpochSwitches    int64
	DeadLettered     int64
	Conflicts        int64
	Commits          int64 // store Advance calls that succeeded
	Committed        int64 // cursor advances made durable (one per group per commit)
	Deleted          int64 // messages deleted from the queue
	StaleReceipts    int64 // deletes refused because the receipt went stale (the message comes back)
	Extended         int64 // visibility extensions
	Shortened        int64 // visibility shortened for messages not kept
	Evicted          int64 // idle groups dropped from memory
	Buffered         int   // messages held and not handed out
	BufferedBytes    int
	MaxBuffered      int // peak of Buffered
	Groups           int // groups in memory
	Stuck            []StuckGroup
}

// StuckGroup is a group that cannot progress: a hole under GapWait, a
// message that failed MaxAttempts under PoisonBlock, or a cursor conflict.
type StuckGroup struct {
	Group  string
	Reason string
	Since  time.Time
}

func (r *receiver) stats() ReceiveStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.st
	s.Buffered = r.bufMsgs
	s.BufferedBytes = r.bufBytes
	s.Groups = len(r.groups)
	for g, info := range r.stuck {
		s.Stuck = append(s.Stuck, StuckGroup{Group: g.name, Reason: info.reason, Since: info.since})
	}
	return s
}

// streamOf names group g of this queue in the store.
func (r *receiver) streamOf(g *group) seqstore.Stream { return r.q.stream(g.name) }
