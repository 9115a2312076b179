package ordered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore"
)

// Queue sends and receives messages with strict per-group order over a
// driver.Queue that does not keep order. One Queue serves both directions,
// like the MNS sample's OrderedQueueWrapper; a Queue that only sends starts no
// receive goroutines, and one that only receives starts no send goroutines.
//
// All methods are safe for concurrent use.
type Queue struct {
	drv    driver.Queue
	groups driver.Grouped // drv, when its service orders each group itself (an MNS FIFO queue); else nil
	store  seqstore.Store
	opts   Options // defaults applied
	log    *slog.Logger
	limits driver.Limits

	// life is cancelled when Close gives up waiting; background goroutines
	// derive their contexts from it.
	life context.Context
	stop context.CancelFunc

	mu     sync.Mutex
	closed bool
	snd    *sender                // nil until the first send or a recovery
	sndp   atomic.Pointer[sender] // snd, for sender's lock-free fast path
	rcv    *receiver              // nil until the first Receive or Run
	done   chan struct{}
	errc   error // Close's result, valid once done is closed

	req requestCounters
}

// New returns a Queue over drv that keeps its sequence state in store. Both
// stay owned by the caller: Close does not close them.
//
// ctx bounds the work New does before it returns: reading the send journal
// of store (in durable-send mode) so that messages reserved but never handed
// to the queue by an earlier process are sent again in the background.
func New(ctx context.Context, drv driver.Queue, store seqstore.Store, opts *Options) (*Queue, error) {
	if drv == nil {
		return nil, errors.New("ordered: nil driver")
	}
	if store == nil {
		return nil, errors.New("ordered: nil store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	limits := drv.Limits()
	groups := grouped(drv)
	if groups != nil && o.Receive.ReapInterval == 0 {
		// The service hands out a group's next message only once this
		// one is deleted: deletes go at once.
		o.Receive.ReapInterval = time.Millisecond
	}
	if groups != nil && o.Receive.CommitInterval == 0 {
		// And a message is deleted once its cursor is durable: a commit
		// delay would bound a hot group to one message per delay.
		o.Receive.CommitInterval = -1
	}
	if err := o.setDefaults(limits); err != nil {
		return nil, err
	}
	if groups != nil && o.Receive.NoPark {
		return nil, errors.New("ordered: options: receive: NoPark on a queue that orders each group itself (an MNS FIFO queue): " +
			"an early arrival must be parked, or the service holds back the seq its group waits for")
	}
	life, stop := context.WithCancel(context.Background())
	q := &Queue{
		drv:    drv,
		groups: groups,
		store:  store,
		opts:   o,
		log:    o.Logger,
		limits: limits,
		life:   life,
		stop:   stop,
		done:   make(chan struct{}),
	}
	if err := q.recoverOnNew(ctx); err != nil {
		stop()
		return nil, err
	}
	return q, nil
}

// Close stops the Queue: it stops admitting sends and deliveries, waits for
// sends in flight, makes acknowledged cursor advances durable and deletes
// their messages from the queue, and waits for every goroutine the Queue
// started. When ctx ends first, Close abandons the remaining work (messages
// not yet deleted come back after their visibility timeout; nothing
// acknowledged is lost, at worst it is delivered again) and returns an error
// wrapping ctx.Err(). A group that a store error stopped and that still owes
// such a write is waited for until its retry (after Retry.Max) writes it:
// refused again, an AtLeastOnce group gives its acknowledged messages back
// (they may be delivered again), while an AtMostOnce skip mark is waited
// for until written or until ctx ends. Close is idempotent: later calls
// wait for the first one and return its result.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		rcv := q.rcv
		q.mu.Unlock()
		if rcv != nil && rcv.rep.onGoroutine() {
			// A hook's Close while another Close runs: that one waits
			// for this hook to return.
			return nil
		}
		select {
		case <-q.done:
			return q.errc
		case <-ctx.Done():
			return fmt.Errorf("ordered: close: %w", ctx.Err())
		}
	}
	q.closed = true
	snd, rcv := q.snd, q.rcv
	q.mu.Unlock()

	var errs []error
	if rcv != nil {
		errs = append(errs, rcv.close(ctx))
	}
	if snd != nil {
		errs = append(errs, snd.close(ctx))
	}
	q.stop()
	q.errc = errors.Join(errs...)
	close(q.done)
	return q.errc
}

// sender returns the send side, starting it on first use. Once started it
// is returned without taking q.mu: the sender itself refuses admissions once
// Close has begun closing it.
func (q *Queue) sender() (*sender, error) {
	if s := q.sndp.Load(); s != nil {
		return s, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	if q.snd == nil {
		q.snd = newSender(q)
		q.sndp.Store(q.snd)
	}
	return q.snd, nil
}

// receiver returns the receive side, starting it on first use.
func (q *Queue) receiver() (*receiver, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	if q.rcv == nil {
		q.rcv = newReceiver(q)
	}
	return q.rcv, nil
}

// stream names a group of this queue in the store.
func (q *Queue) stream(group string) seqstore.Stream {
	return seqstore.Stream{Queue: q.opts.Name, Group: group}
}

// Name returns the queue's name: Options.Name, or its default. Streams are
// (Name, group) in the store; metrics and traces name the queue by it.
func (q *Queue) Name() string { return q.opts.Name }

// Stats returns a snapshot of the Queue's counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	snd, rcv := q.snd, q.rcv
	q.mu.Unlock()
	var s Stats
	if snd != nil {
		s.Send = snd.stats()
	}
	if rcv != nil {
		s.Receive = rcv.stats()
	}
	s.Receive.UndeletedLimit = q.opts.Receive.MaxUndeleted
	s.Requests = q.req.snapshot()
	return s
}

// Stats is a snapshot of a Queue's counters, from Queue.Stats.
type Stats struct {
	Send     SendStats
	Receive  ReceiveStats
	Requests RequestStats
}

// RequestStats counts the requests the Queue made to its driver and store.
type RequestStats struct {
	Send, Receive, Delete, ChangeVisibility int64 // driver calls by kind
	EmptyReceive                            int64 // receives that returned nothing
	Reserve, Sent, Advance, Cursor          int64 // store calls by kind
	Park, Unpark                            int64
}

type requestCounters struct {
	send, receive, emptyReceive, delete, changeVisibility atomic.Int64
	reserve, sent, advance, cursor, park, unpark          atomic.Int64
}

func (c *requestCounters) snapshot() RequestStats {
	return RequestStats{
		Send: c.send.Load(), Receive: c.receive.Load(), Delete: c.delete.Load(),
		ChangeVisibility: c.changeVisibility.Load(), EmptyReceive: c.emptyReceive.Load(),
		Reserve: c.reserve.Load(), Sent: c.sent.Load(), Advance: c.advance.Load(), Cursor: c.cursor.Load(),
		Park: c.park.Load(), Unpark: c.unpark.Load(),
	}
}

// Driver and store calls go through these wrappers so that every request is
// counted in Stats.

// drvSend sends bodies; groups[i] is the group of bodies[i], which a
// queue that orders groups itself (driver.Grouped) needs (nil: read from
// the bodies' headers).
func (q *Queue) drvSend(ctx context.Context, bodies [][]byte, groups []string) error {
	q.req.send.Add(1)
	if q.groups == nil {
		return q.drv.SendBatch(ctx, bodies)
	}
	if groups == nil {
		groups = bodyGroups(q.groups, bodies)
	}
	return q.groups.SendGroups(ctx, bodies, groups)
}

// sendTo sends bodies to drv, another queue than q's (the dead-letter
// queue), each in the group its header names when drv needs groups.
func sendTo(ctx context.Context, drv driver.Queue, bodies [][]byte) error {
	if g := grouped(drv); g != nil {
		return g.SendGroups(ctx, bodies, bodyGroups(g, bodies))
	}
	return drv.SendBatch(ctx, bodies)
}

// grouped returns drv as a driver.Grouped when its service orders each
// group itself, else nil.
func grouped(drv driver.Queue) driver.Grouped {
	if g, ok := drv.(driver.Grouped); ok && g.Grouped() {
		return g
	}
	return nil
}

// bodyGroups returns the group of each body from its header, for drv, a
// queue that orders groups itself; a body without a valid header (an
// untagged message sent to the dead-letter queue), or whose group drv
// refuses, goes in UntaggedGroup: a dead letter or a requeue must not fail
// for its group.
func bodyGroups(drv driver.Grouped, bodies [][]byte) []string {
	groups := make([]string, len(bodies))
	for i, b := range bodies {
		groups[i] = UntaggedGroup
		if h, _, ok := envelope.Parse(b); ok && !h.Legacy && drv.CheckGroup(h.Group) == nil {
			groups[i] = h.Group
		}
	}
	return groups
}

// UntaggedGroup is the message group of a body without a valid header
// (untagged, or from the MNS sample's format) sent to a queue that needs a
// group for every message (an MNS FIFO dead-letter queue).
const UntaggedGroup = "inorder-untagged"

func (q *Queue) drvReceive(ctx context.Context, max int, wait time.Duration) ([]*driver.Message, error) {
	q.req.receive.Add(1)
	msgs, err := q.drv.ReceiveBatch(ctx, max, wait)
	if err == nil && len(msgs) == 0 {
		q.req.emptyReceive.Add(1)
	}
	return msgs, err
}

func (q *Queue) drvDelete(ctx context.Context, receipts []string) error {
	q.req.delete.Add(1)
	return q.drv.DeleteBatch(ctx, receipts)
}

func (q *Queue) drvChangeVisibility(ctx context.Context, receipt string, d time.Duration) (string, error) {
	q.req.changeVisibility.Add(1)
	return q.drv.ChangeVisibility(ctx, receipt, d)
}

func (q *Queue) storeReserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	q.req.reserve.Add(1)
	return q.store.Reserve(ctx, reqs)
}

func (q *Queue) storeSent(ctx context.Context, marks []seqstore.SentMark) error {
	q.req.sent.Add(1)
	return q.store.Sent(ctx, marks)
}

func (q *Queue) storeCursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	q.req.cursor.Add(1)
	return q.store.Cursors(ctx, streams)
}

func (q *Queue) storeAdvance(ctx context.Context, batch []seqstore.Advance) error {
	q.req.advance.Add(1)
	return q.store.Advance(ctx, batch)
}
