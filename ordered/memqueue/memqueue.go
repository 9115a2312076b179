package memqueue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/ordered/driver"
)

// ErrInjected is wrapped by every failure injected by Options.ErrorRate
// and Options.LoseReceive.
// Queue.IsRetryable reports it as retryable.
var ErrInjected = errors.New("memqueue: injected transient error")

// queueTags numbers the queues of the process so that receipt handles and
// message ids of one queue are foreign to every other.
var queueTags atomic.Uint64

// Queue is an in-process driver.Queue. Create it with New; all its methods
// are safe for concurrent use.
type Queue struct {
	opts   Options
	limits driver.Limits
	tag    string // receipt handles are tag + "." + slot + "." + gen
	base   time.Time
	closed atomic.Bool
	done   chan struct{} // closed by Close

	mu     sync.Mutex
	rng    *rand.Rand
	wake   chan struct{} // closed when a waiting receive may find a message; nil when nobody waits
	slots  []slot
	free   []int32
	shards []ring
	heap   []int32 // in-flight slots, min-heap on visibleAt
	serial uint64
	stats  Stats
}

// Slot states.
const (
	stateFree uint8 = iota
	stateVisible
	stateInflight
)

// slot holds one message. Slots are reused through a free list; gen grows on
// every delivery, visibility change and deletion, so a receipt handle names a
// slot and the gen it was issued at, and goes stale as soon as gen moves on.
type slot struct {
	body        []byte
	serial      uint64
	enqueued    int64 // nanoseconds since Queue.base
	nextVisible int64 // as reported to the receiver
	visibleAt   int64 // when it really becomes visible (earlier with Redeliver)
	gen         uint32
	dequeues    int32
	heapIdx     int32
	shard       int32
	state       uint8
}

// ring is a FIFO of slot indices.
type ring struct {
	items []int32
	head  int
}

func (r *ring) len() int { return len(r.items) - r.head }

func (r *ring) push(i int32) {
	if r.head > 0 && r.head == len(r.items) {
		r.items, r.head = r.items[:0], 0
	} else if r.head >= 1024 && r.head*2 >= len(r.items) {
		n := copy(r.items, r.items[r.head:])
		r.items, r.head = r.items[:n], 0
	}
	r.items = append(r.items, i)
}

func (r *ring) pop() int32 {
	i := r.items[r.head]
	r.head++
	if r.head == len(r.items) {
		r.items, r.head = r.items[:0], 0
	}
	return i
}

// New returns an empty queue configured by opts (nil means the defaults).
// It panics if opts is invalid, as a programming error.
func New(opts *Options) *Queue {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		panic(err)
	}
	q := &Queue{
		opts: o,
		limits: driver.Limits{
			MaxBatch:      o.MaxBatch,
			MaxBody:       o.MaxBody,
			MaxBatchBytes: o.MaxBatchBytes,
			MaxWait:       o.MaxWait,
			Visibility:    o.Visibility,
			MinVisibility: o.MinVisibility,
			MaxVisibility: o.MaxVisibility,
		},
		tag:    "mq" + strconv.FormatUint(queueTags.Add(1), 32),
		base:   time.Now(),
		done:   make(chan struct{}),
		rng:    rand.New(rand.NewPCG(uint64(o.Seed), uint64(o.Seed)^0x9e3779b97f4a7c15)),
		shards: make([]ring, o.Shards),
	}
	return q
}

// Limits reports the limits set by the Options.
func (q *Queue) Limits() driver.Limits { return q.limits }

// IsRetryable reports whether err wraps ErrInjected.
func (q *Queue) IsRetryable(err error) bool { return errors.Is(err, ErrInjected) }

// Close makes every later call fail with driver.ErrClosed and wakes waiting
// receives. It is idempotent and always returns nil.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Load() {
		return nil
	}
	q.closed.Store(true)
	close(q.done)
	return nil
}

// now returns the queue's clock: nanoseconds since New, monotonic.
func (q *Queue) now() int64 { return int64(time.Since(q.base)) }

func (q *Queue) at(t int64) time.Time { return q.base.Add(time.Duration(t)) }

// begin checks ctx and the closed state, then applies the injected latency.
func (q *Queue) begin(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: %s: %w", op, err)
	}
	if q.closed.Load() {
		return fmt.Errorf("memqueue: %s: %w", op, driver.ErrClosed)
	}
	if q.opts.Latency == 0 && q.opts.LatencyJitter == 0 {
		return nil
	}
	d := q.opts.Latency
	if q.opts.LatencyJitter > 0 {
		q.mu.Lock()
		d += time.Duration(q.rng.Int64N(int64(q.opts.LatencyJitter) + 1))
		q.mu.Unlock()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("memqueue: %s: %w", op, ctx.Err())
	case <-q.done:
		return fmt.Errorf("memqueue: %s: %w", op, driver.ErrClosed)
	}
}

// injectLocked decides whether this call fails (ErrorRate) and, if so,
// whether it fails after taking effect.
func (q *Queue) injectLocked() (fail, after bool) {
	if q.opts.ErrorRate == 0 || q.rng.Float64() >= q.opts.ErrorRate {
		return false, false
	}
	q.stats.Injected++
	return true, q.rng.IntN(2) == 0
}

func injected(op string) error { return fmt.Errorf("memqueue: %s: %w", op, ErrInjected) }

// wakeLocked wakes the receives that are waiting, if any.
func (q *Queue) wakeLocked() {
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
}

// SendBatch enqueues bodies, each on a random shard. It copies the bodies.
func (q *Queue) SendBatch(ctx context.Context, bodies [][]byte) error {
	if len(bodies) > q.opts.MaxBatch {
		return fmt.Errorf("memqueue: send: %d bodies exceed the batch limit %d: %w", len(bodies), q.opts.MaxBatch, driver.ErrTooLarge)
	}
	total := 0
	for i, b := range bodies {
		if len(b) > q.opts.MaxBody {
			return fmt.Errorf("memqueue: send: body %d has %d bytes, more than %d: %w", i, len(b), q.opts.MaxBody, driver.ErrTooLarge)
		}
		total += len(b)
	}
	if q.opts.MaxBatchBytes > 0 && total > q.opts.MaxBatchBytes {
		return fmt.Errorf("memqueue: send: batch of %d bytes exceeds %d: %w", total, q.opts.MaxBatchBytes, driver.ErrTooLarge)
	}
	if err := q.begin(ctx, "send"); err != nil {
		return err
	}
	if len(bodies) == 0 {
		return nil
	}
	// One allocation holds the batch; each slot keeps a capped sub-slice.
	store := make([]byte, total)
	off := 0
	for _, b := range bodies {
		off += copy(store[off:], b)
	}

	q.mu.Lock()
	if q.closed.Load() {
		q.mu.Unlock()
		return fmt.Errorf("memqueue: send: %w", driver.ErrClosed)
	}
	q.stats.SendRequests++
	fail, after := q.injectLocked()
	if fail && !after {
		q.mu.Unlock()
		return injected("send")
	}
	now := q.now()
	off = 0
	for _, b := range bodies {
		body := store[off : off+len(b) : off+len(b)]
		off += len(b)
		q.serial++
		q.stats.Sent++
		if q.opts.Loss > 0 && q.rng.Float64() < q.opts.Loss {
			q.stats.Lost++
			continue
		}
		i := q.allocLocked()
		s := &q.slots[i]
		s.body = body
		s.serial = q.serial
		s.enqueued = now
		s.dequeues = 0
		s.heapIdx = -1
		s.state = stateVisible
		s.shard = 0
		if len(q.shards) > 1 {
			s.shard = int32(q.rng.IntN(len(q.shards)))
		}
		q.shards[s.shard].push(i)
	}
	q.wakeLocked()
	q.mu.Unlock()
	if fail {
		return injected("send")
	}
	return nil
}

func (q *Queue) allocLocked() int32 {
	if n := len(q.free); n > 0 {
		i := q.free[n-1]
		q.free = q.free[:n-1]
		return i
	}
	q.slots = append(q.slots, slot{})
	return int32(len(q.slots) - 1)
}

func (q *Queue) freeLocked(i int32) {
	s := &q.slots[i]
	s.body = nil
	s.state = stateFree
	s.gen++
	q.free = append(q.free, i)
}

// pick is what ReceiveBatch copies out of a slot under the lock, to build
// the messages after releasing it. Stored bodies are never modified, so
// reading them without the lock is safe.
type pick struct {
	body              []byte
	serial            uint64
	enqueued, visible int64
	slot              int32
	gen               uint32
	dequeues          int32
}

// ReceiveBatch returns up to n messages, waiting up to wait (cut to
// MaxWait) for the first. It takes them from one shard, chosen at random with
// a bias to the oldest, then from the others in turn.
func (q *Queue) ReceiveBatch(ctx context.Context, n int, wait time.Duration) ([]*driver.Message, error) {
	if n > q.opts.MaxBatch {
		return nil, fmt.Errorf("memqueue: receive: max %d exceeds the batch limit %d: %w", n, q.opts.MaxBatch, driver.ErrTooLarge)
	}
	if n < 1 {
		return nil, fmt.Errorf("memqueue: receive: max %d is not positive", n)
	}
	wait = min(max(wait, 0), q.opts.MaxWait)
	if err := q.begin(ctx, "receive"); err != nil {
		return nil, err
	}
	var stack [16]pick
	picks := stack[:0]
	if n > len(stack) {
		picks = make([]pick, 0, n)
	}

	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	q.mu.Lock()
	if q.closed.Load() {
		q.mu.Unlock()
		return nil, fmt.Errorf("memqueue: receive: %w", driver.ErrClosed)
	}
	q.stats.ReceiveRequests++
	fail, after := q.injectLocked()
	if fail && !after {
		q.mu.Unlock()
		return nil, injected("receive")
	}
	now := q.now()
	deadline := now + int64(wait)
	for {
		q.expireLocked(now)
		picks = q.takeLocked(now, n, picks)
		if len(picks) > 0 || fail || now >= deadline {
			break
		}
		if q.opts.EarlyEmpty > 0 && q.rng.Float64() < q.opts.EarlyEmpty {
			break
		}
		// Sleep until the wait ends, a message is sent or the earliest
		// in-flight message becomes visible, whichever comes first.
		until := deadline
		if len(q.heap) > 0 {
			until = min(until, q.slots[q.heap[0]].visibleAt)
		}
		if q.wake == nil {
			q.wake = make(chan struct{})
		}
		wake := q.wake
		q.mu.Unlock()
		d := time.Duration(until - now)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("memqueue: receive: %w", ctx.Err())
		case <-q.done:
			return nil, fmt.Errorf("memqueue: receive: %w", driver.ErrClosed)
		}
		q.mu.Lock()
		if q.closed.Load() {
			q.mu.Unlock()
			return nil, fmt.Errorf("memqueue: receive: %w", driver.ErrClosed)
		}
		now = q.now()
	}
	if len(picks) == 0 && !fail {
		q.stats.EmptyReceives++
	}
	if len(picks) > 0 && !fail && q.opts.LoseReceive > 0 && q.rng.Float64() < q.opts.LoseReceive {
		q.stats.LostReceives++
		fail = true
	}
	q.mu.Unlock()
	if fail {
		return nil, injected("receive")
	}
	if len(picks) == 0 {
		return []*driver.Message{}, nil
	}
	return q.build(picks), nil
}

// takeLocked moves up to limit visible messages in flight and appends what
// build needs to picks.
func (q *Queue) takeLocked(now int64, limit int, picks []pick) []pick {
	n := len(q.shards)
	start := 0
	if n > 1 {
		// Of two random shards, start at the one whose head is older. Pure
		// random choice lets the shards' heads drift apart like a random
		// walk, so the disorder of a deep queue would grow without bound;
		// two choices keep it local, as on MNS.
		start = q.rng.IntN(n)
		if other := q.rng.IntN(n); q.olderHead(other, start) {
			start = other
		}
	}
	for k := 0; k < n && len(picks) < limit; k++ {
		sh := &q.shards[(start+k)%n]
		for sh.len() > 0 && len(picks) < limit {
			i := sh.pop()
			s := &q.slots[i]
			if q.opts.Retention > 0 && now-s.enqueued > int64(q.opts.Retention) {
				q.stats.Lost++
				q.freeLocked(i)
				continue
			}
			s.state = stateInflight
			s.gen++
			s.dequeues++
			s.nextVisible = now + int64(q.opts.Visibility)
			s.visibleAt = s.nextVisible
			if q.opts.Redeliver > 0 && q.rng.Float64() < q.opts.Redeliver {
				s.visibleAt = min(s.visibleAt, now+int64(q.opts.RedeliverAfter))
			}
			q.heapPush(i)
			q.stats.Delivered++
			if s.dequeues > 1 {
				q.stats.Redelivered++
			}
			picks = append(picks, pick{
				body: s.body, serial: s.serial, enqueued: s.enqueued, visible: s.nextVisible,
				slot: i, gen: s.gen, dequeues: s.dequeues,
			})
		}
	}
	return picks
}

// olderHead reports whether shard a's first message was sent before shard
// b's (an empty shard counts as newest).
func (q *Queue) olderHead(a, b int) bool {
	ra, rb := &q.shards[a], &q.shards[b]
	if ra.len() == 0 {
		return false
	}
	if rb.len() == 0 {
		return true
	}
	return q.slots[ra.items[ra.head]].serial < q.slots[rb.items[rb.head]].serial
}

// build makes the messages of one receive with four allocations: the
// messages, the pointers, the bodies and one string holding every id and
// receipt.
func (q *Queue) build(picks []pick) []*driver.Message {
	msgs := make([]driver.Message, len(picks))
	ptrs := make([]*driver.Message, len(picks))
	var sb strings.Builder
	sb.Grow(len(picks) * (2*len(q.tag) + 32))
	var num [16]byte
	var endStack [32]int
	ends := endStack[:0]
	for _, p := range picks {
		sb.WriteString(q.tag)
		sb.WriteByte('-')
		sb.Write(strconv.AppendUint(num[:0], p.serial, 32))
		ends = append(ends, sb.Len())
		q.writeReceipt(&sb, p.slot, p.gen)
		ends = append(ends, sb.Len())
	}
	all := sb.String()
	prev := 0
	for k, p := range picks {
		m := &msgs[k]
		// Each body is an allocation of its own, as a decoded MNS body
		// is: a receiver that keeps one must not keep its batch's others
		// (it charges MaxMemory len(Body), see driver.Message).
		m.Body = make([]byte, len(p.body))
		copy(m.Body, p.body)
		m.ID = all[prev:ends[2*k]]
		m.Receipt = all[ends[2*k]:ends[2*k+1]]
		prev = ends[2*k+1]
		m.DequeueCount = int(p.dequeues)
		m.EnqueueTime = q.at(p.enqueued)
		m.NextVisible = q.at(p.visible)
		ptrs[k] = m
	}
	return ptrs
}

func (q *Queue) writeReceipt(sb *strings.Builder, slot int32, gen uint32) {
	var num [16]byte
	sb.WriteString(q.tag)
	sb.WriteByte('.')
	sb.Write(strconv.AppendUint(num[:0], uint64(slot), 32))
	sb.WriteByte('.')
	sb.Write(strconv.AppendUint(num[:0], uint64(gen), 32))
}

// parseReceipt splits a receipt handle into its slot and gen. It fails with
// ErrBadReceipt for a handle this queue cannot have issued.
func (q *Queue) parseReceipt(r string) (int32, uint32, error) {
	rest, ok := strings.CutPrefix(r, q.tag)
	if ok {
		rest, ok = strings.CutPrefix(rest, ".")
	}
	var a, b string
	if ok {
		a, b, ok = strings.Cut(rest, ".")
	}
	if ok {
		slot, err1 := strconv.ParseUint(a, 32, 31)
		gen, err2 := strconv.ParseUint(b, 32, 32)
		// Only the spelling writeReceipt produces: "00" or "A" would
		// otherwise name an issued handle without being it.
		if err1 == nil && err2 == nil && canonical32(a) && canonical32(b) {
			return int32(slot), uint32(gen), nil
		}
	}
	return 0, 0, fmt.Errorf("receipt %q: %w", r, driver.ErrBadReceipt)
}

// canonical32 reports whether a number that strconv.ParseUint read in base
// 32 is spelled as strconv.FormatUint writes it: lower case, no leading
// zero. (Formatting it again to compare would allocate per receipt.)
func canonical32(s string) bool {
	if len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// lookupLocked returns the in-flight slot that receipt r designates.
func (q *Queue) lookupLocked(r string) (int32, error) {
	i, gen, err := q.parseReceipt(r)
	if err != nil {
		return 0, err
	}
	if int(i) >= len(q.slots) || gen > q.slots[i].gen || gen == 0 {
		return 0, fmt.Errorf("receipt %q: %w", r, driver.ErrBadReceipt)
	}
	if s := &q.slots[i]; gen < s.gen || s.state != stateInflight {
		return 0, fmt.Errorf("receipt %q: %w", r, driver.ErrStaleReceipt)
	}
	return i, nil
}

// DeleteBatch deletes the messages whose receipts are given.
func (q *Queue) DeleteBatch(ctx context.Context, receipts []string) error {
	if len(receipts) > q.opts.MaxBatch {
		return fmt.Errorf("memqueue: delete: %d receipts exceed the batch limit %d: %w", len(receipts), q.opts.MaxBatch, driver.ErrTooLarge)
	}
	if err := q.begin(ctx, "delete"); err != nil {
		return err
	}
	if len(receipts) == 0 {
		return nil
	}
	q.mu.Lock()
	if q.closed.Load() {
		q.mu.Unlock()
		return fmt.Errorf("memqueue: delete: %w", driver.ErrClosed)
	}
	q.stats.DeleteRequests++
	fail, after := q.injectLocked()
	if fail && !after {
		q.mu.Unlock()
		return injected("delete")
	}
	q.expireLocked(q.now())
	var errs []error
	for k, r := range receipts {
		i, err := q.lookupLocked(r)
		if err != nil {
			if errs == nil {
				errs = make([]error, len(receipts))
			}
			errs[k] = fmt.Errorf("memqueue: delete: %w", err)
			continue
		}
		q.heapRemove(i)
		q.freeLocked(i)
		q.stats.Deleted++
	}
	q.mu.Unlock()
	if fail {
		return injected("delete")
	}
	if errs != nil {
		return &driver.BatchError{Errs: errs}
	}
	return nil
}

// ChangeVisibility makes the message invisible for timeout from now and
// returns its new receipt handle; the old one goes stale.
func (q *Queue) ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) (string, error) {
	if timeout < q.opts.MinVisibility || timeout > q.opts.MaxVisibility {
		return "", fmt.Errorf("memqueue: change visibility: timeout %v out of range %v..%v", timeout, q.opts.MinVisibility, q.opts.MaxVisibility)
	}
	if err := q.begin(ctx, "change visibility"); err != nil {
		return "", err
	}
	q.mu.Lock()
	if q.closed.Load() {
		q.mu.Unlock()
		return "", fmt.Errorf("memqueue: change visibility: %w", driver.ErrClosed)
	}
	q.stats.VisibilityRequests++
	fail, after := q.injectLocked()
	if fail && !after {
		q.mu.Unlock()
		return "", injected("change visibility")
	}
	now := q.now()
	q.expireLocked(now)
	i, err := q.lookupLocked(receipt)
	if err != nil {
		q.mu.Unlock()
		return "", fmt.Errorf("memqueue: change visibility: %w", err)
	}
	s := &q.slots[i]
	s.gen++
	gen := s.gen
	s.nextVisible = now + int64(timeout)
	s.visibleAt = s.nextVisible
	q.heapFix(i)
	q.wakeLocked() // a waiting receive may need an earlier timer
	q.mu.Unlock()
	if fail {
		return "", injected("change visibility")
	}
	var sb strings.Builder
	sb.Grow(len(q.tag) + 16)
	q.writeReceipt(&sb, i, gen)
	return sb.String(), nil
}

// expireLocked makes visible again the in-flight messages whose time came.
func (q *Queue) expireLocked(now int64) {
	for len(q.heap) > 0 {
		i := q.heap[0]
		s := &q.slots[i]
		if s.visibleAt > now {
			return
		}
		q.heapRemove(i)
		s.state = stateVisible
		q.shards[s.shard].push(i)
	}
}

// Len reports how many messages are visible and how many are in flight,
// after applying visibility and retention as of now.
func (q *Queue) Len() (visible, inflight int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	q.expireLocked(now)
	for k := range q.shards {
		sh := &q.shards[k]
		if q.opts.Retention > 0 {
			kept := sh.items[:sh.head]
			for _, i := range sh.items[sh.head:] {
				if now-q.slots[i].enqueued > int64(q.opts.Retention) {
					q.stats.Lost++
					q.freeLocked(i)
					continue
				}
				kept = append(kept, i)
			}
			sh.items = kept
			if sh.head == len(sh.items) {
				sh.items, sh.head = sh.items[:0], 0
			}
		}
		visible += sh.len()
	}
	return visible, len(q.heap)
}

// Stats counts requests and messages since New.
type Stats struct {
	// Requests by kind, including those that failed.
	SendRequests, ReceiveRequests, DeleteRequests, VisibilityRequests int64
	// EmptyReceives counts receives that returned no message and no error.
	EmptyReceives int64
	// Injected counts failures injected by Options.ErrorRate.
	Injected int64
	// Sent counts messages enqueued by SendBatch, including those dropped
	// by Options.Loss and those of calls that then reported an injected
	// failure.
	Sent int64
	// Delivered counts messages returned by ReceiveBatch, each delivery
	// once; Redelivered counts those among them with DequeueCount > 1.
	Delivered, Redelivered int64
	// Deleted counts messages deleted.
	Deleted int64
	// Lost counts messages dropped by Options.Loss or Options.Retention.
	Lost int64
	// LostReceives counts receive responses lost by Options.LoseReceive.
	LostReceives int64
}

// Stats returns a snapshot of the counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}

// The in-flight heap: a binary min-heap of slot indices on visibleAt, each
// slot knowing its position so that delete and visibility changes are
// O(log n).

func (q *Queue) heapLess(a, b int) bool {
	return q.slots[q.heap[a]].visibleAt < q.slots[q.heap[b]].visibleAt
}

func (q *Queue) heapSwap(a, b int) {
	h := q.heap
	h[a], h[b] = h[b], h[a]
	q.slots[h[a]].heapIdx = int32(a)
	q.slots[h[b]].heapIdx = int32(b)
}

func (q *Queue) heapUp(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !q.heapLess(j, p) {
			return
		}
		q.heapSwap(j, p)
		j = p
	}
}

func (q *Queue) heapDown(j int) bool {
	start := j
	n := len(q.heap)
	for {
		l := 2*j + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && q.heapLess(r, l) {
			c = r
		}
		if !q.heapLess(c, j) {
			break
		}
		q.heapSwap(j, c)
		j = c
	}
	return j > start
}

func (q *Queue) heapPush(i int32) {
	q.slots[i].heapIdx = int32(len(q.heap))
	q.heap = append(q.heap, i)
	q.heapUp(len(q.heap) - 1)
}

func (q *Queue) heapRemove(i int32) {
	j := int(q.slots[i].heapIdx)
	last := len(q.heap) - 1
	if j != last {
		q.heapSwap(j, last)
	}
	q.heap = q.heap[:last]
	q.slots[i].heapIdx = -1
	if j != last {
		if !q.heapDown(j) {
			q.heapUp(j)
		}
	}
}

func (q *Queue) heapFix(i int32) {
	j := int(q.slots[i].heapIdx)
	if !q.heapDown(j) {
		q.heapUp(j)
	}
}
