package batcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrShutdown is returned for items submitted after Shutdown.
var ErrShutdown = errors.New("batcher: shut down")

// Sizer is implemented by items that count against Options.MaxSize by a
// size of their own (bytes, rows: whatever the handler's cost grows with).
type Sizer interface {
	Size() int
}

// Options bounds the batches. The zero value (or a nil *Options) means one
// handler at a time and batches of everything waiting.
type Options struct {
	// MaxHandlers is how many batches may be handled at once. Default 1.
	MaxHandlers int
	// MaxItems is the most items in one batch; 0 means no bound.
	MaxItems int
	// MaxSize bounds the summed Size of one batch's items, for items that
	// implement Sizer; an item larger than the bound is handled alone. 0
	// means no bound.
	MaxSize int
	// Backlog is how many items may wait for the busy handlers before
	// another handler starts (up to MaxHandlers): a larger Backlog trades
	// concurrency for larger batches. Default 0: every waiting item starts
	// a handler while fewer than MaxHandlers run. Not used with MaxPartial.
	Backlog int
	// MaxPartial bounds the batches in flight that are not full (fewer than
	// MaxItems items, and the next waiting item would fit MaxSize). While
	// MaxPartial of them are in flight, items that do not make a full batch
	// wait for one of them to end: under load they go in full batches, and
	// an idle Batcher still hands an item over at once (Nagle's rule;
	// go-cloud's MinBatchSize holds a batch back the same way, by size
	// rather than by the partial batches in flight). A handler holds its
	// batch's place until it returns, retries included, or for its hold
	// when PartialHold is set. After Shutdown a batch that is not full is
	// taken whatever the bound. 0 means no bound;
	// a bound needs MaxItems. With a bound, a handler starts for each full
	// batch waiting and for a partial one the bound lets go, beyond those
	// already starting, up to MaxHandlers.
	MaxPartial int
	// PartialHold bounds how long a batch that is not full holds its place
	// under MaxPartial (its hold): the longer of PartialHold and HoldFactor
	// times the handlers' usual time per batch, the median of the last
	// UsualOf batches that ended (handling time, the handler's retries
	// included: a median, so that a few batches that timed out or retried
	// do not make it long), or FirstHold before any batch ended. The hold
	// is looked at again when it ends, against the usual time then. A batch
	// in flight longer than its hold is taken as stuck (a request lost in
	// the network, a long retry) and no longer holds other partial batches
	// back, so that one stuck batch does not stall every item that does not
	// make a full batch, while a handler that is merely slow (a distant
	// service) keeps Nagle's rule. 0 means as long as it is in flight.
	PartialHold time.Duration
}

// HoldFactor is how many times the handlers' usual time per batch a
// partial batch holds its place at least (see Options.PartialHold).
const HoldFactor = 4

// UsualOf is how many of the last batches the usual time per batch is the
// median of (see Options.PartialHold).
const UsualOf = 16

// FirstHold is how long a partial batch holds its place at least while no
// batch has ended yet: nothing tells a slow batch from a stuck one then.
const FirstHold = 100 * time.Millisecond

func (o *Options) validate() error {
	if o.MaxHandlers < 0 || o.MaxItems < 0 || o.MaxSize < 0 || o.Backlog < 0 || o.MaxPartial < 0 || o.PartialHold < 0 {
		return fmt.Errorf("batcher: options must not be negative: %+v", *o)
	}
	if o.MaxPartial > 0 && o.MaxItems == 0 {
		return fmt.Errorf("batcher: MaxPartial needs MaxItems: %+v", *o)
	}
	return nil
}

// Handler handles one batch. errs has one element per item, all nil on
// entry; the handler sets errs[i] to item i's error. Both slices are the
// Batcher's: the handler may reorder or clear batch's elements, and keeps
// neither slice after it returns.
type Handler[T any] func(batch []T, errs []error)

// Batcher groups submitted items into batches for its Handler. It is safe
// for concurrent use. Create it with New.
type Batcher[T any] struct {
	opts   Options
	handle Handler[T]
	sized  bool // T implements Sizer

	mu       sync.Mutex
	queue    []entry[T] // waiting items from head on, oldest first
	head     int
	headID   uint64 // id of queue[head]
	nextID   uint64 // id of the next item submitted
	handlers int
	starting int                    // handlers started that have not taken a batch yet
	partials int                    // batches not full in flight that hold their place (MaxPartial, PartialHold)
	took     [UsualOf]time.Duration // the time of the last batches, a ring (with PartialHold)
	tookN    int                    // batches that ended (with PartialHold)
	shutdown bool
	drained  chan struct{} // closed when no item waits (Drained); nil until asked for
	wg       sync.WaitGroup
}

type entry[T any] struct {
	item      T
	size      int
	done      chan error // nil when nobody waits for the outcome
	withdrawn bool       // its caller gave up before a handler took it
}

// New returns a Batcher that hands batches to handle.
func New[T any](opts *Options, handle Handler[T]) (*Batcher[T], error) {
	if handle == nil {
		return nil, errors.New("batcher: nil handler")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.MaxHandlers == 0 {
		o.MaxHandlers = 1
	}
	var zero T
	_, sized := any(zero).(Sizer)
	return &Batcher[T]{opts: o, handle: handle, sized: sized}, nil
}

// Add submits item and waits until it was handled, and returns its error.
// If ctx ends while the item waits for a handler, the item is withdrawn
// (never handled) and Add returns ctx.Err(); if ctx ends while the item's
// batch is being handled, Add returns ctx.Err() as well and the item's
// outcome is unknown to the caller.
func (b *Batcher[T]) Add(ctx context.Context, item T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	id, err := b.enqueue(item, done)
	if err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		b.withdraw(id)
		return ctx.Err()
	}
}

// AddNoWait submits item and returns a channel that receives its error
// once it was handled (ErrShutdown at once after Shutdown). The channel is
// buffered: nobody has to read it.
func (b *Batcher[T]) AddNoWait(item T) <-chan error {
	done := make(chan error, 1)
	if _, err := b.enqueue(item, done); err != nil {
		done <- err
	}
	return done
}

// Post submits item without a way to learn its outcome, for handlers that
// report through the items themselves. It returns ErrShutdown after
// Shutdown.
func (b *Batcher[T]) Post(item T) error {
	_, err := b.enqueue(item, nil)
	return err
}

// PostAll is Post for several items, in order, under one lock. It returns
// ErrShutdown, having submitted none, after Shutdown.
func (b *Batcher[T]) PostAll(items []T) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shutdown {
		return ErrShutdown
	}
	if b.head == len(b.queue) {
		b.headID = b.nextID
	}
	for _, it := range items {
		e := entry[T]{item: it}
		if b.sized {
			e.size = any(it).(Sizer).Size() // cheap for the items posted in bulk
		}
		b.queue = append(b.queue, e)
	}
	b.nextID += uint64(len(items))
	b.startLocked()
	return nil
}

// Shutdown refuses items from now on, waits until every item submitted
// before was handled, and returns. It is idempotent.
func (b *Batcher[T]) Shutdown() {
	b.mu.Lock()
	b.shutdown = true
	b.startLocked() // for a partial batch the bound held back
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *Batcher[T]) enqueue(item T, done chan error) (uint64, error) {
	size := 0
	if b.sized {
		size = any(item).(Sizer).Size()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shutdown {
		return 0, ErrShutdown
	}
	id := b.nextID
	b.nextID++
	if b.head == len(b.queue) {
		b.headID = id
	}
	b.queue = append(b.queue, entry[T]{item: item, size: size, done: done})
	b.startLocked()
	return id, nil
}

// startLocked starts the handlers that the waiting items need beyond those
// running: without MaxPartial, one when none runs or more than Backlog
// items wait; with it, one per full batch waiting and one for a partial
// batch the bound lets go, less those starting (a running handler comes
// back for more by itself).
func (b *Batcher[T]) startLocked() {
	waiting := len(b.queue) - b.head
	want := 0
	switch {
	case b.opts.MaxPartial == 0:
		if b.handlers == 0 || waiting > b.opts.Backlog {
			want = b.starting + 1
		}
	default:
		want = waiting / b.opts.MaxItems
		if waiting%b.opts.MaxItems != 0 && (b.partials < b.opts.MaxPartial || b.shutdown) {
			want++
		}
	}
	for b.starting < want && b.handlers < b.opts.MaxHandlers {
		b.handlers++
		b.starting++
		b.wg.Add(1)
		go b.run()
	}
}

// Drained returns a channel that is closed once no submitted item waits
// for a handler (at once when none does). Items taken by a handler do not
// wait: they are being handled.
func (b *Batcher[T]) Drained() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.head == len(b.queue) {
		return closedChan
	}
	if b.drained == nil {
		b.drained = make(chan struct{})
	}
	return b.drained
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// withdraw marks item id as withdrawn if no handler took it yet.
func (b *Batcher[T]) withdraw(id uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id >= b.headID && b.head < len(b.queue) {
		e := &b.queue[b.head+int(id-b.headID)]
		e.withdrawn = true
		var zero T
		e.item = zero // do not keep what the caller gave up on
	}
}

// held is a handler's partial batch in flight, as MaxPartial counts it.
type held struct {
	holds bool      // counted in Batcher.partials
	since time.Time // taken at (with PartialHold)
	timer *time.Timer
}

// holdLocked counts h's new partial batch, taken at now, against
// MaxPartial; with PartialHold, a timer ends the count if the batch is
// still in flight after its hold.
func (b *Batcher[T]) holdLocked(h *held, now time.Time) {
	b.partials++
	h.holds = true
	if b.opts.PartialHold <= 0 {
		return
	}
	h.since = now
	hold := b.holdTimeLocked()
	if h.timer == nil {
		h.timer = time.AfterFunc(hold, func() { b.expire(h) })
	} else {
		h.timer.Reset(hold)
	}
}

// holdTimeLocked returns how long a partial batch holds its place, by the
// batches that ended so far (see Options.PartialHold).
func (b *Batcher[T]) holdTimeLocked() time.Duration {
	n := min(b.tookN, UsualOf)
	if n == 0 {
		return max(b.opts.PartialHold, FirstHold)
	}
	last := b.took
	slices.Sort(last[:n])
	return max(b.opts.PartialHold, HoldFactor*last[n/2])
}

// tookLocked records the time a batch took.
func (b *Batcher[T]) tookLocked(d time.Duration) {
	b.took[b.tookN%UsualOf] = d
	b.tookN++
}

// releaseLocked ends h's count, if it still holds.
func (b *Batcher[T]) releaseLocked(h *held) {
	if h.holds {
		h.holds = false
		b.partials--
	}
}

// expire ends the count of a partial batch in flight for its hold, and
// lets a waiting partial batch go in its place. The hold is looked at
// again, against the batches that ended meanwhile: a batch younger than
// its hold now waits for the rest of it. (A timer that fires late for an
// earlier batch of the same handler finds the current one younger than its
// hold, and sets the timer for the current one, as its own would.)
func (b *Batcher[T]) expire(h *held) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !h.holds {
		return
	}
	if age, hold := time.Since(h.since), b.holdTimeLocked(); age < hold {
		h.timer.Reset(hold - age)
		return
	}
	b.releaseLocked(h)
	b.startLocked() // h's handler is in flight: b.wg is not zero
}

// run handles batches until no item waits (that it may take).
func (b *Batcher[T]) run() {
	defer b.wg.Done()
	var batch []entry[T]
	var items []T
	var errs []error
	var h held
	b.mu.Lock()
	b.starting--
	for {
		b.releaseLocked(&h)
		var partial bool
		batch, partial = b.takeLocked(batch[:0])
		if len(batch) == 0 {
			b.handlers--
			b.mu.Unlock()
			if h.timer != nil {
				h.timer.Stop()
			}
			return
		}
		var start time.Time
		if b.opts.PartialHold > 0 {
			start = time.Now()
		}
		if partial {
			b.holdLocked(&h, start)
		}
		if b.opts.MaxPartial > 0 {
			b.startLocked() // more for another handler
		}
		b.mu.Unlock()
		items = items[:0]
		for _, e := range batch {
			items = append(items, e.item)
		}
		errs = append(errs[:0], make([]error, len(batch))...)
		b.handle(items, errs)
		for i, e := range batch {
			if e.done != nil {
				e.done <- errs[i]
			}
		}
		clear(items)
		clear(batch)
		clear(errs)
		b.mu.Lock()
		if b.opts.PartialHold > 0 {
			b.tookLocked(time.Since(start))
		}
	}
}

// takeLocked moves the next batch from the queue to batch and reports
// whether it is partial (not full). Under MaxPartial, a partial batch is
// left waiting while the bound is reached.
func (b *Batcher[T]) takeLocked(batch []entry[T]) (_ []entry[T], partial bool) {
	if b.opts.MaxPartial > 0 && b.partials >= b.opts.MaxPartial && !b.shutdown && !b.fullLocked() {
		return batch, false
	}
	size := 0
	full := false
	for b.head < len(b.queue) {
		e := &b.queue[b.head]
		if !e.withdrawn {
			if b.opts.MaxItems > 0 && len(batch) == b.opts.MaxItems ||
				b.opts.MaxSize > 0 && len(batch) > 0 && size+e.size > b.opts.MaxSize {
				full = true
				break
			}
			batch = append(batch, *e)
			size += e.size
		}
		*e = entry[T]{}
		b.head++
		b.headID++
	}
	switch {
	case b.head == len(b.queue):
		b.queue, b.head = b.queue[:0], 0
		if b.drained != nil {
			close(b.drained)
			b.drained = nil
		}
	case b.head > 1024 && 2*b.head >= len(b.queue):
		// Under constant load the queue never empties: move the waiting
		// items down instead of growing the array forever.
		n := copy(b.queue, b.queue[b.head:])
		clear(b.queue[n:])
		b.queue, b.head = b.queue[:n], 0
	}
	return batch, b.opts.MaxPartial > 0 && !full && len(batch) < b.opts.MaxItems
}

// fullLocked reports whether the waiting items make a full batch, by the
// same bounds as takeLocked.
func (b *Batcher[T]) fullLocked() bool {
	n, size := 0, 0
	for i := b.head; i < len(b.queue); i++ {
		e := &b.queue[i]
		if e.withdrawn {
			continue
		}
		if n == b.opts.MaxItems || b.opts.MaxSize > 0 && n > 0 && size+e.size > b.opts.MaxSize {
			return true
		}
		n++
		size += e.size
	}
	return n == b.opts.MaxItems
}
