package ordered

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/internal/batcher"
	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/retry"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore"
)

// The send pipeline, in the order a message goes through it:
//
//  1. Validation (check): group and size, before anything is reserved.
//  2. Admission (admit): the message joins its group's pending list, in call
//     order, once the in-flight bounds leave room.
//  3. Reservation (reserveGroups): a group with pending messages is posted
//     to the reservation batcher; a handler takes every group posted
//     meanwhile and reserves seqs for everything pending in each, in one
//     multi-stream store call (which also journals the payloads in durable
//     mode). A group is posted once until its reservation is done, so it is
//     never reserved by two calls at once and seq order is admission order;
//     up to Reservations calls run at once, and the store's group commit
//     batches them.
//  4. Encoding: envelopes of a reservation share one buffer.
//  5. Holding (sendWindow): per group, a message more than MaxDisorder
//     seqs past the group's oldest unfinished one waits in the group's
//     held list; it is released to the send batcher when the oldest finishes.
//  6. Sending (sendBatch): released messages are posted to the send
//     batcher, whose Concurrency handlers take up to MaxBatch messages
//     (MaxBatchBytes) of any groups and send them, so many requests are in
//     flight at once. A request that is not full waits while another such
//     request is in flight (Nagle's rule, batcher.Options.MaxPartial),
//     unless that one has taken four times as long as requests usually do
//     (the median of the last 16, retries included; at least 5 ms; 100 ms
//     before any request ended): it is taken as stuck
//     (batcher.Options.PartialHold). Retryable
//     failures are retried by the same handler after a backoff, only for
//     the entries that failed.
//  7. Completion, by outcome: sent buffers Sent marks, flushed by the
//     marker in multi-stream store calls (durable mode); failed leaves the
//     journal entries for Recover. Both settle: the group's books, the
//     in-flight bounds and the results, and the held messages the window
//     now allows are released (dispatch).

// SendStats counts the send side's work.
type SendStats struct {
	// Sent counts messages the queue accepted, recovered ones included.
	Sent int64
	// Failed counts messages that failed (store or driver errors, Close
	// giving up); in durable mode those that were reserved stay journaled.
	Failed int64
	// Retries counts messages sent again after a retryable error.
	Retries int64
	// Recovered counts journaled messages re-sent by recovery.
	Recovered int64
	// InFlight is the number of messages admitted and not yet completed.
	InFlight int64
	// Unmarked is the number of messages sent whose Sent mark is not yet
	// written to the store (durable mode; see MarkInterval): with the
	// reserved ones among InFlight and those that failed, they are this
	// process's entries in the send journal.
	Unmarked int64
	// Groups is the number of groups with send state in memory: those with
	// messages in flight (a group's state is dropped when it has none).
	Groups int
	// Batches counts send requests made to the driver.
	Batches int64
	// Reservations counts store reservations (each covers a run of
	// consecutive seqs of one group).
	Reservations int64
	// Held counts messages that had to wait for their group's oldest
	// unfinished message before going to the queue (SendOptions.MaxDisorder).
	Held int64
	// Tampered counts journal entries that recovery refused to send, each
	// time it found them: with Options.Key, a seal that does not verify
	// (written by someone without the key, or by a release that did not
	// seal); with or without, an epoch more than a day ahead of the clock.
	// They stay in the journal, logged at level Error.
	Tampered int64
}

// SendResult is the outcome of a message admitted by SendAsync (or of a
// whole batch admitted together). Its methods are safe for concurrent use.
type SendResult struct {
	remaining atomic.Int32 // messages not finished
	failed    atomic.Int32
	held      atomic.Int32 // messages held by the disorder bound right now
	finished  atomic.Bool  // set once err is final
	total     int32
	epoch     atomic.Uint64
	seq       atomic.Uint64

	mu   sync.Mutex
	err  error         // first error; final once finished
	done chan struct{} // made on demand, closed once finished
}

// closedChan is the Done channel of results that finished before anyone
// asked for it.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func newSendResult(n int) *SendResult {
	c := resultSlabs.Get().(*resultSlab)
	if len(c.free) == 0 {
		c.free = make([]SendResult, resultSlabLen)
	}
	r := &c.free[0]
	c.free = c.free[1:]
	resultSlabs.Put(c)
	r.total = int32(n)
	r.remaining.Store(int32(n))
	return r
}

// resultSlabs hands out SendResults resultSlabLen at a time, one
// allocation instead of one per SendAsync (from the slab of the caller's
// P, so senders on several goroutines do not contend). A result its caller
// keeps keeps its slab, about 2.5 KB, alive.
var resultSlabs = sync.Pool{New: func() any { return new(resultSlab) }}

const resultSlabLen = 32

type resultSlab struct{ free []SendResult }

// Done returns a channel that is closed when the message was accepted by the
// queue or failed.
func (r *SendResult) Done() <-chan struct{} {
	if r.finished.Load() {
		return closedChan
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.doneLocked()
}

func (r *SendResult) doneLocked() chan struct{} {
	if r.done == nil {
		if r.finished.Load() {
			return closedChan
		}
		r.done = make(chan struct{})
	}
	return r.done
}

// Err returns nil if the message was sent, the error if it failed, and nil
// while it is still in flight (see Done).
func (r *SendResult) Err() error {
	if r.finished.Load() {
		return r.err // final: written before finished was set
	}
	return nil
}

// Wait waits until the message was sent or failed and returns Err. If ctx
// ends first it returns an error wrapping ctx.Err(); the message stays
// admitted and may still be sent. The error says when the message was held
// by the disorder bound (SendOptions.MaxDisorder) at that moment: it has its
// seq and is sent once its group's older messages are done.
func (r *SendResult) Wait(ctx context.Context) error {
	if r.finished.Load() {
		return r.err
	}
	r.mu.Lock()
	done := r.doneLocked()
	r.mu.Unlock()
	select {
	case <-done:
		return r.Err()
	case <-ctx.Done():
		if n := r.held.Load(); n > 0 {
			return fmt.Errorf("ordered: send: %d message(s) held behind their group's oldest unfinished send (SendOptions.MaxDisorder), not withdrawn, sent when their turn comes: %w", n, ctx.Err())
		}
		return fmt.Errorf("ordered: send: %w", ctx.Err())
	}
}

// Epoch returns the sender epoch of the message's stream, known once its
// seq is reserved (0 before, and for a message that failed to reserve).
func (r *SendResult) Epoch() uint64 { return r.epoch.Load() }

// Seq returns the message's seq (for a batch, the first one), known once it
// is reserved (0 before, and for a message that failed to reserve).
func (r *SendResult) Seq() uint64 { return r.seq.Load() }

func (r *SendResult) setSeq(epoch, seq uint64) {
	if r.seq.CompareAndSwap(0, seq) {
		r.epoch.Store(epoch)
	}
}

// finish records the outcome of one message of r.
func (r *SendResult) finish(err error) {
	if err != nil {
		r.failed.Add(1)
		r.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		r.mu.Unlock()
	}
	if r.remaining.Add(-1) > 0 {
		return
	}
	r.mu.Lock()
	if f := r.failed.Load(); f > 0 && r.total > 1 {
		r.err = fmt.Errorf("ordered: send: %d of %d messages failed: %w", f, r.total, r.err)
	}
	r.finished.Store(true)
	if r.done != nil {
		close(r.done)
	}
	r.mu.Unlock()
}

// Send sends payload to group and returns when it is safe per
// Options.Send.Mode: accepted by the queue (durable mode additionally
// journaled it before sending). Within a group, seqs follow the order in
// which Send calls were admitted. Send does not keep payload after it
// returns.
//
// Validation errors (ErrInvalidGroup, ErrTooLarge) and ErrClosed mean
// nothing was reserved. Any other error means the message may still reach
// the queue: if ctx ends after the message was admitted, Send returns an
// error wrapping ctx.Err() but the message is not withdrawn; and in durable
// mode a message whose reservation was journaled stays in the journal when
// its send fails, to be sent by Recover (or the next New) under its own seq.
// Sending the payload again instead would deliver it twice, under two seqs.
func (q *Queue) Send(ctx context.Context, group string, payload []byte) error {
	r, err := q.SendAsync(ctx, group, payload)
	if err != nil {
		return err
	}
	return r.Wait(ctx)
}

// SendBatch sends payloads to group under consecutive seqs, with one store
// reservation, and returns when all of them are safe per Options.Send.Mode.
// If some fail, the error counts them and wraps the first failure. An empty
// batch does nothing. ctx behaves as for Send.
func (q *Queue) SendBatch(ctx context.Context, group string, payloads [][]byte) error {
	if len(payloads) == 0 {
		return nil
	}
	if len(payloads) > math.MaxInt32 {
		return fmt.Errorf("%w: a batch of %d messages", ErrTooLarge, len(payloads))
	}
	s, err := q.sender()
	if err != nil {
		return err
	}
	size := 0
	for _, p := range payloads {
		if err := s.check(group, nil, p); err != nil {
			return err
		}
		size += len(p)
	}
	r := newSendResult(len(payloads))
	if err := s.admit(ctx, group, nil, payloads, size, r); err != nil {
		return err
	}
	return r.Wait(ctx)
}

// SendAsync admits payload to group and returns once it is admitted, with a
// handle to wait on. Admission order is seq order within a group, so a
// single goroutine calling SendAsync in a loop keeps many requests in flight
// and its messages in order. It blocks only while Options.Send.MaxInFlight
// (or MaxInFlightBytes) messages are in flight; when ctx ends first, nothing
// is admitted. The payload must not be modified until the result is done.
func (q *Queue) SendAsync(ctx context.Context, group string, payload []byte) (*SendResult, error) {
	return q.sendAsync(ctx, group, payload, nil)
}

// SendWithMetadata is Send with metadata: a few string key/values, such as
// a W3C trace context (see package otelinorder), carried in the message's
// header and returned by Message.Metadata at the receiver. Keys are made of
// A-Z, a-z, 0-9, '.', '_' and '-'; values are any strings. The encoded
// metadata is bounded to 1 KiB: an entry of plain ASCII costs
// len(key)+len(value)+2 bytes, and each byte of a value outside printable
// ASCII (or one of '%', ';', '<', '>', '&') three. A key or size outside
// these bounds, or FormatLegacy (which carries no metadata), fails with an
// error wrapping ErrInvalidMetadata before anything is reserved. With
// Options.Key the metadata is covered by the header's MAC; in durable mode
// it is journaled with the payload, so that recovery sends it again.
//
// A message with metadata is written in a newer header form (v2) that
// receivers of releases before it take for an untagged body: upgrade the
// receivers first. A message without metadata (nil or empty md) is written
// byte for byte as Send writes it.
func (q *Queue) SendWithMetadata(ctx context.Context, group string, payload []byte, md map[string]string) error {
	r, err := q.sendAsync(ctx, group, payload, md)
	if err != nil {
		return err
	}
	return r.Wait(ctx)
}

// SendAsyncWithMetadata is SendAsync with metadata, as for
// SendWithMetadata. md is not kept after it returns.
func (q *Queue) SendAsyncWithMetadata(ctx context.Context, group string, payload []byte, md map[string]string) (*SendResult, error) {
	return q.sendAsync(ctx, group, payload, md)
}

func (q *Queue) sendAsync(ctx context.Context, group string, payload []byte, md map[string]string) (*SendResult, error) {
	s, err := q.sender()
	if err != nil {
		return nil, err
	}
	var meta []byte
	if len(md) > 0 {
		if meta, err = s.metadata(md); err != nil {
			return nil, err
		}
	}
	if err := s.check(group, meta, payload); err != nil {
		return nil, err
	}
	r := newSendResult(1)
	if err := s.admit(ctx, group, meta, [][]byte{payload}, len(meta)+len(payload), r); err != nil {
		return nil, err
	}
	return r, nil
}

// Recover sends again the journaled messages (durable mode) that no process
// handed to the queue: those of an earlier process that crashed, and those of
// this one whose send failed, including one whose reservation failed after
// the store applied it (an answer lost). They keep their epoch and seq, so a
// receiver drops any copy it already had. Messages in flight in this process
// are left alone: where a group's reservation is in progress, Recover waits
// for it to end to tell its entries from the others. Recover returns how many
// messages it sent again, after they were accepted or failed (when ctx ends
// first: how many it had queued, with ctx's error); New runs the same
// recovery in the background. A reservation whose failure comes after
// Recover read the journal (one that timed out and is applied late, or the
// one Recover waited for) is sent by a later Recover, or the next New. In
// fast mode there is no journal and Recover returns 0, nil.
func (q *Queue) Recover(ctx context.Context) (int, error) {
	if q.opts.Send.Mode != SendDurable {
		return 0, nil
	}
	s, err := q.sender()
	if err != nil {
		return 0, err
	}
	return s.recover(ctx)
}

// recoverOnNew starts sending, in the background, the journaled entries that
// an earlier process reserved but never handed to the queue. It reads the
// journal under ctx; a Queue whose journal is empty starts no send side.
func (q *Queue) recoverOnNew(ctx context.Context) error {
	if q.opts.Send.Mode != SendDurable || q.opts.Send.NoRecover {
		return nil
	}
	entries, err := q.store.Pending(ctx, q.opts.Name)
	if err != nil {
		return fmt.Errorf("ordered: recover: read journal: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	s, err := q.sender()
	if err != nil {
		return err
	}
	s.marks.flushMu.Lock()
	n, _, _, _ := s.enqueueRecovered(s.openJournal(entries), false, false) // nothing reserves yet
	s.marks.flushMu.Unlock()
	q.log.Info("ordered: re-sending journaled messages", "count", n)
	return nil
}

// sendItem is one message from admission to completion.
type sendItem struct {
	group   string
	grp     *sendGroup // nil for a recovered entry
	run     *sendRun   // nil for a recovered entry
	payload []byte     // nil once encoded
	meta    []byte     // the encoded metadata block (SendWithMetadata), nil for none
	body    []byte     // the envelope, once reserved
	size    int        // len(payload), for the in-flight bound
	epoch   uint64
	seq     uint64
	pos     uint64      // position in its group's sendWindow
	held    bool        // waiting in its group's held list, counted in res.held
	res     *SendResult // nil if nobody waits (recovery on New)
}

// sendGroup is the send state of one group; it is dropped when the group has
// nothing in flight.
type sendGroup struct {
	pending   *sendRun // admitted, waiting for a reservation; nil if none
	reserving bool     // on the ready list or being reserved
	inReserve bool     // a reserver is in the store call for this group
	inflight  int      // admitted and not completed
	// recovering counts the Recovers waiting for the group's reservation
	// to end: it is kept until they looked again (its seqs tell its
	// reservation's entries from the others).
	recovering int

	// win bounds the group's disorder; held lists the reserved messages it
	// does not let go yet, in seq order (SendOptions.MaxDisorder).
	win  sendWindow
	held fifo

	// Seqs epoch/lo..hi were reserved by this process, but for those in
	// gaps (reservations the store applied and whose answer was lost, or
	// another process's); those whose send did not fail (sender.recovery)
	// are in flight or sent, so recovery leaves them alone.
	epoch, lo, hi uint64
	gaps          [][2]uint64
}

// maxGaps bounds a group's gaps; past it, the group's known seqs start
// again at its latest reservation (recovery may then send a copy of a
// message in flight, which receivers drop).
const maxGaps = 16

// ours reports whether this process reserved epoch/seq of the group.
func (g *sendGroup) ours(epoch, seq uint64) bool {
	if epoch != g.epoch || seq < g.lo || seq > g.hi {
		return false
	}
	for _, gap := range g.gaps {
		if gap[0] <= seq && seq <= gap[1] {
			return false
		}
	}
	return true
}

// sendRun holds the messages of one group admitted between two
// reservations, then their envelopes, until the last one completes; then
// the run and its buffers go back to runPool, so that steady sending
// allocates nothing per message but its SendResult.
type sendRun struct {
	// group, g, res and err are the run's reservation: set when a
	// reservation call takes the run, and its outcome.
	group string
	g     *sendGroup
	res   seqstore.Reservation
	err   error

	items   []sendItem
	buf     []byte   // the envelopes of items
	journal [][]byte // scratch for the store call
	sealed  []byte   // the sealed or framed journal entries of items
	frame   []byte   // scratch: one framed entry before it is sealed
	metas   int      // items with metadata
	ctr     envelope.Counter
	left    atomic.Int32 // items not yet completed
}

// maxPooledRun bounds the runs kept for reuse, so that one huge SendBatch
// does not pin its memory.
const maxPooledRun = 1 << 14

var runPool = sync.Pool{New: func() any { return new(sendRun) }}

func getRun() *sendRun { return runPool.Get().(*sendRun) }

// putRun recycles r once none of its items is referenced any more.
func putRun(r *sendRun) {
	if cap(r.items) > maxPooledRun || cap(r.buf) > maxPooledRun*512 || cap(r.sealed) > maxPooledRun*512 || cap(r.frame) > 64<<10 {
		return
	}
	clear(r.items)
	r.items = r.items[:0]
	r.buf = r.buf[:0]
	r.sealed = r.sealed[:0]
	r.frame = r.frame[:0]
	r.metas = 0
	r.group, r.g, r.res, r.err = "", nil, seqstore.Reservation{}, nil
	runPool.Put(r)
}

type recoverKey struct {
	group string
	epoch uint64
	seq   uint64
}

type recoverState uint8

const (
	recoverUnknown recoverState = iota // not in sender.recovery
	recoverFailed                      // its send failed for good: Recover sends it
	recoverSending                     // Recover sent it, no outcome yet
)

// recoveryBook is what Recover must know beyond the journal. Guarded by
// sender.mu.
type recoveryBook struct {
	// items holds the journal entries this process knows Recover must send
	// (their send failed for good) or is sending. A failed one stays until
	// Recover sent it: the journal holds it anyway.
	items map[recoverKey]recoverState
	// reserved, when Recover waits for a reservation in progress (waiting),
	// is closed and replaced as the next reservation call ends: an entry
	// above its group's known seqs may be that reservation's own, or one
	// of an earlier process, or one of a reservation that failed after
	// the store applied it (an answer lost, a timeout); once the call
	// ended, the group's known seqs tell them apart.
	reserved chan struct{}
	waiting  bool
}

type sendCounters struct {
	sent, failed, retries, recovered, batches, reservations, held, tampered atomic.Int64
}

// sender is the send side of a Queue.
type sender struct {
	q       *Queue
	opts    *SendOptions
	durable bool
	bounded bool // SendOptions.MaxDisorder is on
	env     sendEnv

	// ctx is the context of every store and driver call of the send side. It
	// is cancelled when Close gives up waiting.
	ctx    context.Context
	cancel context.CancelFunc

	// reservations takes the groups ready for a reservation (see
	// reserveGroups); sends takes the released messages and sends them
	// (sendBatch).
	reservations *batcher.Batcher[string]
	sends        *batcher.Batcher[*sendItem]

	mu       sync.Mutex // guards room, groups and recovery
	room     sendRoom
	groups   groupTable
	recovery recoveryBook

	marks sendMarks
	stat  sendCounters
}

// sendEnv is what the sender needs to size, sign and seal envelopes.
type sendEnv struct {
	maxBody  int    // largest envelope the driver takes
	maxBatch int    // driver bound on one request's messages
	maxBytes int    // driver bound on one request's bodies
	limit    uint64 // SendOptions.MaxDisorder, when bounded

	// legacyHeader is the longest legacy header; numbersExtra is how much
	// longer a default header with the largest epoch and seq is than one
	// with epoch 0 and seq 1.
	legacyHeader, numbersExtra int

	// signKey signs headers: Options.Key bound to the MAC context; sealKey
	// seals journal entries: Options.Key itself. Both nil without a key.
	signKey, sealKey []byte
}

// sendRoom is the in-flight bounds (SendOptions.MaxInFlight and
// MaxInFlightBytes) and the admissions waiting for room, guarded by
// sender.mu.
type sendRoom struct {
	closing       bool
	inflight      int
	inflightBytes int
	waiters       []*admitWaiter // admissions waiting for in-flight room, in order
	closed        chan struct{}  // closed when close begins
	idle          chan struct{}  // closed when inflight reaches 0 while closing
}

// groupTable is the send state of the groups with messages in flight, and
// evicted sendGroup structs kept for reuse; guarded by sender.mu.
type groupTable struct {
	live map[string]*sendGroup
	free []*sendGroup
}

// sendMarks buffers the Sent marks of durable mode for the marker
// goroutine, which flushes them MarkInterval after the first one, or as
// soon as markBatch of them wait.
type sendMarks struct {
	mu      sync.Mutex
	pending map[markKey][]uint64 // seqs sent but not yet marked
	count   int
	wake    chan struct{} // kicked by a first mark and by the markBatch-th
	stop    chan struct{}
	done    sync.WaitGroup // the marker
	flushMu sync.Mutex     // one flush (or recovery) at a time
}

// markBatch is the number of buffered Sent marks that triggers a flush
// before MarkInterval has passed.
const markBatch = 1 << 16

func newSender(q *Queue) *sender {
	o := &q.opts.Send
	s := &sender{
		q:       q,
		opts:    o,
		durable: o.Mode == SendDurable,
		bounded: o.MaxDisorder > 0,
		env: sendEnv{
			maxBody:  q.limits.MaxBody,
			maxBatch: q.limits.MaxBatch,
			maxBytes: maxBatchBytes(q.limits),
			limit:    uint64(max(0, o.MaxDisorder)),
			signKey:  q.opts.signingKey(),
			sealKey:  q.opts.Key,
		},
		room:     sendRoom{closed: make(chan struct{})},
		groups:   groupTable{live: make(map[string]*sendGroup)},
		recovery: recoveryBook{items: make(map[recoverKey]recoverState), reserved: make(chan struct{})},
		marks: sendMarks{
			pending: make(map[markKey][]uint64),
			wake:    make(chan struct{}, 1),
			stop:    make(chan struct{}),
		},
	}
	s.env.legacyHeader = envelope.HeaderLen(envelope.Header{Legacy: true, Seq: envelope.MaxNumber})
	s.env.numbersExtra = envelope.HeaderLen(envelope.Header{Epoch: envelope.MaxNumber, Seq: envelope.MaxNumber, Signed: s.signed()}) -
		envelope.HeaderLen(envelope.Header{Seq: 1})
	s.ctx, s.cancel = context.WithCancel(q.life)
	// Another reservation call starts only when more groups wait than one
	// call takes: few calls of many groups each, concurrent only under a
	// backlog (a slow store).
	var err error
	s.reservations, err = batcher.New(&batcher.Options{MaxHandlers: o.Reservations, MaxItems: reserveBatch, Backlog: reserveBatch}, s.reserveGroups)
	if err != nil {
		panic(fmt.Sprintf("ordered: reservation batcher: %v (options are validated)", err))
	}
	// A request that is not full goes at once while no other such request
	// is in flight and not stuck (partialHold): under load, messages wait
	// for one request time and go out in full batches.
	s.sends, err = batcher.New(&batcher.Options{MaxHandlers: o.Concurrency, MaxItems: s.env.maxBatch, MaxSize: s.env.maxBytes, MaxPartial: 1, PartialHold: partialHold}, s.sendBatch)
	if err != nil {
		panic(fmt.Sprintf("ordered: send batcher: %v (options are validated)", err))
	}
	if s.durable {
		s.marks.done.Add(1)
		go s.marker()
	}
	return s
}

// metadata encodes md for SendWithMetadata.
func (s *sender) metadata(md map[string]string) ([]byte, error) {
	if s.opts.Format == FormatLegacy {
		return nil, fmt.Errorf("%w: the legacy format carries no metadata", ErrInvalidMetadata)
	}
	meta, err := envelope.AppendMetadata(nil, md)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidMetadata, err)
	}
	return meta, nil
}

// check validates group, metadata block and payload before anything is
// reserved.
func (s *sender) check(group string, meta, payload []byte) error {
	if err := envelope.ValidateGroup(group); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidGroup, err)
	}
	if g := s.q.groups; g != nil {
		if err := g.CheckGroup(group); err != nil {
			return fmt.Errorf("%w: %q: %w", ErrInvalidGroup, group, err)
		}
	}
	if s.opts.Format == FormatLegacy && group != "" {
		return fmt.Errorf("%w: %q: the legacy format carries only the default group \"\"", ErrInvalidGroup, group)
	}
	hl := s.maxHeader(group, meta)
	if limit := s.maxPayload(); hl+len(payload) > limit {
		return fmt.Errorf("%w: payload of %d bytes plus a header of up to %d bytes exceeds the queue's limit of %d bytes",
			ErrTooLarge, len(payload), hl, limit)
	}
	return nil
}

// maxHeader returns the length of group's longest header (largest epoch
// and seq) with the metadata block meta: the header with the smallest
// numbers plus the widest numbers' extra length, without counting digits.
func (s *sender) maxHeader(group string, meta []byte) int {
	if s.opts.Format == FormatLegacy {
		return s.env.legacyHeader
	}
	return envelope.HeaderLen(envelope.Header{Group: group, Seq: 1, Meta: meta}) + s.env.numbersExtra
}

// maxPayload is the bound on one envelope: it must fit a body and a request.
func (s *sender) maxPayload() int { return min(s.env.maxBody, s.env.maxBytes) }

// signed reports whether headers carry a MAC (Options.Key).
func (s *sender) signed() bool { return s.env.signKey != nil }

// header returns the wire header of a message, with its metadata block,
// signed over both and payload for the MAC context when Options.Key is set.
// The legacy form carries no metadata: SendWithMetadata refuses it there,
// and a journaled message with metadata recovered after a switch to
// FormatLegacy goes without it rather than not at all.
func (s *sender) header(group string, epoch, seq uint64, meta, payload []byte) envelope.Header {
	if s.opts.Format == FormatLegacy && group == "" {
		return envelope.Header{Legacy: true, Seq: seq}
	}
	h := envelope.Header{Group: group, Epoch: epoch, Seq: seq, Meta: meta}
	if s.signed() {
		h.Signed, h.MAC = true, envelope.Sign(s.env.signKey, h, payload)
	}
	return h
}

// admitWaiter is an admission waiting for in-flight room.
type admitWaiter struct {
	n, size int
	ready   chan struct{} // closed once the room was taken for it
}

// fitsLocked reports whether n messages of size bytes fit the in-flight
// bounds now. Anything fits when nothing is in flight, so that a batch
// larger than the bounds is admitted alone.
func (s *sender) fitsLocked(n, size int) bool {
	return s.room.inflight == 0 || s.room.inflight+n <= s.opts.MaxInFlight && s.room.inflightBytes+size <= s.opts.MaxInFlightBytes
}

// wakeLocked runs when in-flight room was released. It tells close when
// nothing is left in flight, and admits waiting admissions, in order, while
// they fit: the room is taken for them here, so that a later caller cannot
// overtake them.
func (s *sender) wakeLocked() {
	if s.room.inflight == 0 && s.room.idle != nil {
		close(s.room.idle)
		s.room.idle = nil
	}
	for !s.room.closing && len(s.room.waiters) > 0 && s.fitsLocked(s.room.waiters[0].n, s.room.waiters[0].size) {
		w := s.room.waiters[0]
		s.room.waiters[0] = nil
		s.room.waiters = s.room.waiters[1:]
		s.room.inflight += w.n
		s.room.inflightBytes += w.size
		close(w.ready)
	}
	if len(s.room.waiters) == 0 {
		s.room.waiters = nil
	}
}

// leaveLocked withdraws w, which gave up waiting: the room taken for it if
// it was admitted meanwhile is released, or it leaves the line.
func (s *sender) leaveLocked(w *admitWaiter) {
	select {
	case <-w.ready:
		s.room.inflight -= w.n
		s.room.inflightBytes -= w.size
	default:
		if i := slices.Index(s.room.waiters, w); i >= 0 {
			s.room.waiters = slices.Delete(s.room.waiters, i, i+1)
		}
	}
	s.wakeLocked()
}

// admit appends payloads, each with the metadata block meta (nil: none),
// to group's pending list once the in-flight bounds leave room, and makes
// sure a reserver will take the group. Admissions that wait are served in
// order (first come, first served), so a large batch is not starved by a
// stream of small sends.
func (s *sender) admit(ctx context.Context, group string, meta []byte, payloads [][]byte, size int, r *SendResult) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ordered: send: %w", err)
	}
	n := len(payloads)
	s.mu.Lock()
	if s.room.closing {
		s.mu.Unlock()
		return ErrClosed
	}
	if len(s.room.waiters) == 0 && s.fitsLocked(n, size) {
		s.room.inflight += n
		s.room.inflightBytes += size
	} else {
		w := &admitWaiter{n: n, size: size, ready: make(chan struct{})}
		s.room.waiters = append(s.room.waiters, w)
		s.mu.Unlock()
		var err error
		select {
		case <-w.ready:
		case <-ctx.Done():
			err = fmt.Errorf("ordered: send: waiting for in-flight room: %w", ctx.Err())
		case <-s.room.closed:
			err = ErrClosed
		}
		s.mu.Lock()
		if err == nil && s.room.closing {
			err = ErrClosed
		}
		if err != nil {
			s.leaveLocked(w)
			s.mu.Unlock()
			return err
		}
	}
	g := s.groups.live[group]
	if g == nil {
		if n := len(s.groups.free); n > 0 {
			g = s.groups.free[n-1]
			s.groups.free[n-1] = nil
			s.groups.free = s.groups.free[:n-1]
		} else {
			g = &sendGroup{}
		}
		g.win.limit = s.env.limit
		s.groups.live[group] = g
	}
	run := g.pending
	if run == nil {
		run = getRun()
		g.pending = run
	}
	for _, p := range payloads {
		run.items = append(run.items, sendItem{group: group, grp: g, run: run, payload: p, meta: meta, size: len(meta) + len(p), res: r})
	}
	if meta != nil {
		run.metas += len(payloads)
	}
	g.inflight += n
	if !g.reserving {
		g.reserving = true
		// Not closing, so the batcher is not shut down: Post cannot fail.
		_ = s.reservations.Post(group)
	}
	s.mu.Unlock()
	return nil
}

// reserveBatch bounds the groups of one reservation call.
const reserveBatch = 256

// partialHold is the least time a send request that is not full holds the
// next one back (Nagle's rule): the batcher holds it for four times the
// usual request time when that is longer (batcher.HoldFactor). A request
// slower than its hold (stuck in the network, in a long retry) no longer
// holds the next one back, so that it does not stall the sends of every
// group. A variable for tests.
var partialHold = 5 * time.Millisecond

// reserveLinger bounds how long a reservation waits for the sends (see
// awaitSends).
const reserveLinger = time.Millisecond

// awaitSends waits, before a reservation, while released messages wait for
// a send (the send batcher holds back batches that are not full while
// MaxPartial of them are in flight), for reserveLinger at most: what the
// reservation would release could only wait behind them. Meanwhile the
// groups' pending runs, and the groups posted, grow: one store call
// reserves for more messages, however fast the store answers. The bound
// keeps a reservation that would make a full batch from waiting long
// behind a partial one.
func (s *sender) awaitSends() {
	drained := s.sends.Drained()
	select {
	case <-drained:
		return
	default:
	}
	t := time.NewTimer(reserveLinger)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	case <-s.ctx.Done():
	}
}

// reserveGroups is the reservation batcher's handler: it takes what is
// pending in each group, reserves seqs for all of it in one store call,
// encodes the envelopes and hands them to the send batcher. A group that
// received more meanwhile is posted again, behind the others.
func (s *sender) reserveGroups(groups []string, _ []error) {
	s.awaitSends()
	batch := make([]*sendRun, len(groups))
	s.mu.Lock()
	for i, group := range groups {
		g := s.groups.live[group]
		run := g.pending
		run.group, run.g = group, g
		batch[i] = run
		g.pending = nil
		g.inReserve = true
	}
	s.mu.Unlock()

	s.reserve(batch)

	var orphans, failed []*sendRun
	var out []*sendItem // released to the send batcher
	s.mu.Lock()
	for _, r := range batch {
		g := r.g
		g.inReserve = false
		// Once the lock is released, another goroutine may release held
		// messages of a run that was reserved, send them, and recycle the
		// run: read it only here.
		if r.err != nil {
			failed = append(failed, r)
		} else {
			// Before the messages are pushed: a send that fails must
			// find its seq in the group's range to be recorded.
			switch {
			case g.epoch == r.res.Epoch && g.hi+1 == r.res.First:
			case g.epoch == r.res.Epoch && g.hi < r.res.First && len(g.gaps) < maxGaps:
				g.gaps = append(g.gaps, [2]uint64{g.hi + 1, r.res.First - 1})
			default:
				g.epoch, g.lo, g.gaps = r.res.Epoch, r.res.First, g.gaps[:0]
			}
			g.hi = r.res.First + uint64(len(r.items)) - 1
			out = s.holdLocked(g, r.items, out)
		}
		switch {
		case g.pending == nil:
			g.reserving = false
			if g.inflight == 0 {
				s.evictLocked(r.group, g)
			}
		case s.reservations.Post(r.group) != nil:
			// Close gave up and shut the batcher down: nobody will
			// reserve what was admitted just before.
			orphans = append(orphans, g.pending)
			g.pending, g.reserving = nil, false
		}
	}
	if s.recovery.waiting {
		close(s.recovery.reserved)
		s.recovery.reserved, s.recovery.waiting = make(chan struct{}), false
	}
	s.mu.Unlock()
	s.pushReserved(failed, out)
	for _, run := range orphans {
		run.left.Store(int32(len(run.items)))
		err := fmt.Errorf("ordered: send: %w", ErrClosed)
		s.failed(itemPtrs(run.items), err)
	}
}

// reserve reserves seqs for the runs of batch (journaling them in durable
// mode) in one store call and encodes their envelopes. Requests that the
// store aborted because another one failed are reserved again without it.
func (s *sender) reserve(batch []*sendRun) {
	reqs := make([]seqstore.ReserveRequest, len(batch))
	for i := range batch {
		r := batch[i]
		items := r.items
		r.left.Store(int32(len(items)))
		stream := s.q.stream(r.group)
		var journal [][]byte
		if s.durable {
			journal = s.journal(r, stream)
		}
		reqs[i] = seqstore.ReserveRequest{Stream: stream, N: len(items), Journal: journal}
	}
	s.stat.reservations.Add(int64(len(batch)))
	todo := make([]int, len(batch)) // indexes into batch of the next call
	for i := range todo {
		todo[i] = i
	}
	for len(todo) > 0 {
		call := make([]seqstore.ReserveRequest, len(todo))
		for k, i := range todo {
			call[k] = reqs[i]
		}
		rs, err := s.q.storeReserve(s.ctx, call)
		aborted := seqstore.Split(err, len(call), func(k int, err error) {
			r := batch[todo[k]]
			if err != nil {
				r.err = s.reserveError(r, err)
				return
			}
			if last := rs[k].First + uint64(len(r.items)) - 1; last > envelope.MaxNumber {
				// The store allows one more seq than a header carries.
				r.err = s.reserveError(r, fmt.Errorf("%w: seq %d beyond %d", seqstore.ErrOverflow, last, uint64(envelope.MaxNumber)))
				return
			}
			if epochAhead(rs[k].Epoch, time.Now()) {
				r.err = s.reserveError(r, fmt.Errorf("%w: epoch %d", ErrEpochAhead, rs[k].Epoch))
				return
			}
			r.res = rs[k]
			s.encode(r)
		})
		if len(aborted) == len(todo) { // a store that aborts everything: give up
			for _, k := range aborted {
				r := batch[todo[k]]
				r.err = s.reserveError(r, err)
			}
			break
		}
		for k, a := range aborted {
			aborted[k] = todo[a]
		}
		todo = aborted
	}
	for i := range batch {
		clear(batch[i].journal)
	}
}

// journal returns the journal entries of run's items for the store call:
// their payloads, framed with their metadata (see send_journal.go) when
// they have some, and sealed under Options.Key when it is set. The slices
// live in run until it is recycled.
func (s *sender) journal(run *sendRun, stream seqstore.Stream) [][]byte {
	items := run.items
	journal := run.journal[:0]
	size := 0
	for i := range items {
		it := &items[i]
		switch {
		case s.env.sealKey != nil:
			size += sealLen + entryLen(it.meta, it.payload)
		case framed(it.meta, it.payload):
			size += entryLen(it.meta, it.payload)
		}
	}
	if size == 0 {
		for i := range items {
			journal = append(journal, items[i].payload)
		}
		run.journal = journal
		return journal
	}
	buf := run.sealed[:0]
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	for i := range items {
		it := &items[i]
		start := len(buf)
		switch {
		case s.env.sealKey != nil && !framed(it.meta, it.payload):
			buf = appendSealed(buf, s.env.sealKey, stream, it.payload)
		case s.env.sealKey != nil:
			run.frame = appendEntry(run.frame[:0], it.meta, it.payload)
			buf = appendSealed(buf, s.env.sealKey, stream, run.frame)
		case framed(it.meta, it.payload):
			buf = appendEntry(buf, it.meta, it.payload)
		default:
			journal = append(journal, it.payload)
			continue
		}
		journal = append(journal, buf[start:len(buf):len(buf)])
	}
	run.sealed, run.journal = buf, journal
	return journal
}

func (s *sender) reserveError(r *sendRun, err error) error {
	err = fmt.Errorf("ordered: send: reserve %d seqs of group %q: %w", len(r.items), r.group, err)
	s.q.log.Warn("ordered: reservation failed", "group", r.group, "count", len(r.items), "err", err)
	if s.ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// encode writes the envelopes of r's run, reserved at r.res, into one
// buffer sized for the longest header the group can have. The buffer is
// reused with the run: the driver keeps no body.
func (s *sender) encode(r *sendRun) {
	items := r.items
	total := len(items) * s.maxHeader(r.group, nil)
	for i := range items {
		total += len(items[i].payload)
		if m := items[i].meta; m != nil {
			total += s.maxHeader(r.group, m) - s.maxHeader(r.group, nil)
		}
	}
	buf := r.buf[:0]
	if cap(buf) < total {
		buf = make([]byte, 0, total)
	}
	// Unsigned headers of one run without metadata differ only in their
	// seq: the counter encodes the first and counts the others up in place.
	count := !s.signed() && len(items) > 1 && r.metas == 0
	if count {
		r.ctr.Reset(s.header(r.group, r.res.Epoch, r.res.First, nil, nil))
	}
	for i := range items {
		it := &items[i]
		it.epoch, it.seq = r.res.Epoch, r.res.First+uint64(i)
		start := len(buf)
		if count {
			buf = r.ctr.Append(buf, it.payload)
		} else {
			buf = envelope.Append(buf, s.header(r.group, it.epoch, it.seq, it.meta, it.payload), it.payload)
		}
		it.body = buf[start:len(buf):len(buf)]
		it.payload, it.meta = nil, nil
		if it.res != nil {
			it.res.setSeq(it.epoch, it.seq)
		}
	}
	r.buf = buf
}

// holdLocked puts the reserved items of one run of g in g's window and
// appends to out those that may go to the send batcher now (older held ones of g
// first); the others wait in g.held. Without a bound, all of them go.
func (s *sender) holdLocked(g *sendGroup, items []sendItem, out []*sendItem) []*sendItem {
	if !s.bounded {
		for i := range items {
			out = append(out, &items[i])
		}
		return out
	}
	first := g.win.reserve(len(items))
	for i := range items {
		items[i].pos = first + uint64(i)
		g.held.push(&items[i])
	}
	out = s.releaseLocked(g, out)
	// The run is at the tail of the held list: what is still held of it.
	n := min(g.held.len(), len(items))
	for i := len(items) - n; i < len(items); i++ {
		it := &items[i]
		it.held = true
		if it.res != nil {
			it.res.held.Add(1)
		}
	}
	if n > 0 {
		s.stat.held.Add(int64(n))
	}
	return out
}

// releaseLocked appends to out the held messages of g that its window lets
// go now, in seq order.
func (s *sender) releaseLocked(g *sendGroup, out []*sendItem) []*sendItem {
	for n := g.win.release(); n > 0; n-- {
		it := g.held.peek()
		g.held.pop()
		if it.held {
			it.held = false
			if it.res != nil {
				it.res.held.Add(-1)
			}
		}
		out = append(out, it)
	}
	return out
}

// pushReserved hands the released messages of a reservation call to the
// send batcher and fails the runs whose reservation failed.
func (s *sender) pushReserved(failed []*sendRun, released []*sendItem) {
	s.dispatch(released)
	for _, r := range failed {
		s.failed(itemPtrs(r.items), r.err)
	}
}

// dispatch posts released messages to the send batcher in one critical
// section, or fails them if it is shut down (Close). Failing them releases
// the next held messages of their groups, which are failed in turn, in a
// loop rather than by recursion.
func (s *sender) dispatch(items []*sendItem) {
	for len(items) > 0 {
		if s.sends.PostAll(items) == nil {
			return
		}
		err := fmt.Errorf("ordered: send: %w", ErrClosed)
		items = s.settle(items, err)
	}
}

func itemPtrs(items []sendItem) []*sendItem {
	ptrs := make([]*sendItem, len(items))
	for i := range items {
		ptrs[i] = &items[i]
	}
	return ptrs
}

// push hands encoded recovered messages to the send batcher, or fails them
// if it is shut down (Close). They are not held: they
// belong to no group's window.
func (s *sender) push(items []sendItem) {
	s.dispatch(itemPtrs(items))
}

// Size implements batcher.Sizer: the envelope's bytes count against the
// driver's bound on one request.
func (it *sendItem) Size() int { return len(it.body) }

// bodiesPool holds the send handlers' scratch: a request's bodies.
var bodiesPool = sync.Pool{New: func() any { return new([][]byte) }}

// sendBatch is the send batcher's handler: one request and its retries.
func (s *sender) sendBatch(batch []*sendItem, _ []error) {
	bodies := bodiesPool.Get().(*[][]byte)
	*bodies = s.send(batch, (*bodies)[:0])
	bodiesPool.Put(bodies)
}

// send sends batch, retrying the entries that fail with retryable errors up
// to MaxAttempts, and completes every entry. bodies is scratch space. A
// batch that is not full keeps its place among MaxPartial through its
// retries, as any batch keeps its handler, for its hold at most (see
// partialHold).
func (s *sender) send(batch []*sendItem, bodies [][]byte) [][]byte {
	for attempt := 1; ; attempt++ {
		if err := s.ctx.Err(); err != nil {
			s.failed(batch, fmt.Errorf("ordered: send: %w: %w", ErrClosed, err))
			return bodies
		}
		bodies = bodies[:0]
		var groups []string
		for _, it := range batch {
			bodies = append(bodies, it.body)
		}
		if s.q.groups != nil {
			groups = make([]string, len(batch))
			for i, it := range batch {
				groups[i] = it.group
			}
		}
		s.stat.batches.Add(1)
		err := s.q.drvSend(s.ctx, bodies, groups)
		clear(bodies)
		if err == nil {
			s.sent(batch)
			return bodies
		}
		retry := s.q.drv.IsRetryable(err) && s.ctx.Err() == nil && attempt < s.opts.MaxAttempts
		var be *driver.BatchError
		if !errors.As(err, &be) || len(be.Errs) != len(batch) {
			if retry {
				s.retryWait(batch, attempt, err)
				continue
			}
			s.failed(batch, s.sendError(err, attempt))
			return bodies
		}
		// Partial failure: complete the entries that succeeded or failed
		// for good (each with its own error); keep the retryable ones, in
		// order, at the front.
		keep := 0
		var ok []*sendItem
		for i, it := range batch {
			switch e := be.Errs[i]; {
			case e == nil:
				ok = append(ok, it)
			case s.q.drv.IsRetryable(e) && s.ctx.Err() == nil && attempt < s.opts.MaxAttempts:
				batch[keep] = it
				keep++
			default:
				s.failed([]*sendItem{it}, s.sendError(e, attempt))
			}
		}
		if len(ok) > 0 {
			s.sent(ok)
		}
		clear(batch[keep:])
		batch = batch[:keep]
		if keep == 0 {
			return bodies
		}
		s.retryWait(batch, attempt, err)
	}
}

func (s *sender) sendError(err error, attempts int) error {
	if s.ctx.Err() != nil {
		return fmt.Errorf("ordered: send: %w: %w", ErrClosed, err)
	}
	return fmt.Errorf("ordered: send: after %d attempt(s): %w", attempts, err)
}

// retryWait waits the backoff before attempt+1 of batch.
func (s *sender) retryWait(batch []*sendItem, attempt int, err error) {
	s.stat.retries.Add(int64(len(batch)))
	d := s.q.opts.Retry.backoff(attempt)
	s.q.log.Debug("ordered: retrying send", "count", len(batch), "attempt", attempt, "backoff", d, "err", err)
	_ = retry.Sleep(s.ctx, d) // a cancelled ctx ends the sends at the next attempt
}

// sent completes items the queue accepted: their Sent marks are buffered
// (durable mode), then they settle.
func (s *sender) sent(items []*sendItem) {
	if s.durable {
		s.marks.add(items)
	}
	s.dispatch(s.settle(items, nil))
}

// failed completes items that failed for good with err. In durable mode
// the reserved ones stay journaled, and settle records their seqs as
// failed, so that Recover sends them.
func (s *sender) failed(items []*sendItem, err error) {
	s.dispatch(s.settle(items, err))
}

// settle ends items with err (nil: sent): it updates their groups' books,
// releases the in-flight bounds, finishes their results and recycles their
// runs. It returns the held messages that the groups' windows now let go,
// for dispatch.
func (s *sender) settle(items []*sendItem, err error) (released []*sendItem) {
	// The group's books first (failed seqs, in-flight counts), then the
	// results: a caller that saw its send fail can count on Recover to
	// find the message, and one that saw it succeed on Close's accounts.
	bytes := 0
	s.mu.Lock()
	for _, it := range items {
		bytes += it.size
		if g := it.grp; g != nil {
			g.inflight--
			if s.durable && it.seq != 0 && err != nil {
				s.recovery.items[recoverKey{it.group, it.epoch, it.seq}] = recoverFailed
			}
			// Reserved items (seq != 0) are in the window; those whose
			// reservation failed or never happened are not.
			if s.bounded && it.seq != 0 && g.win.finish(it.pos) {
				released = s.releaseLocked(g, released)
			}
			if g.inflight == 0 {
				s.evictLocked(it.group, g)
			}
		} else if err != nil {
			s.recovery.items[recoverKey{it.group, it.epoch, it.seq}] = recoverFailed // again
		} else {
			delete(s.recovery.items, recoverKey{it.group, it.epoch, it.seq})
		}
	}
	s.room.inflight -= len(items)
	s.room.inflightBytes -= bytes
	s.wakeLocked()
	s.mu.Unlock()

	if err != nil {
		s.stat.failed.Add(int64(len(items)))
	} else {
		recovered := 0
		for _, it := range items {
			if it.grp == nil {
				recovered++
			}
		}
		s.stat.sent.Add(int64(len(items)))
		s.stat.recovered.Add(int64(recovered))
	}
	for _, it := range items {
		if err != nil && it.seq != 0 {
			s.q.log.Warn("ordered: send failed", "group", it.group, "epoch", it.epoch, "seq", it.seq, "err", err)
		}
		if it.res != nil {
			it.res.finish(err)
		}
	}

	// Nothing refers to an item once it is completed: the run that held
	// the last one goes back to the pool.
	for _, it := range items {
		if run := it.run; run != nil && run.left.Add(-1) == 0 {
			putRun(run)
		}
	}
	return released
}

// evictLocked drops g's state once it has nothing in flight.
// Nothing refers to an evicted group, so its struct is kept for the next
// new one (many groups with a message each come and go all the time).
func (s *sender) evictLocked(group string, g *sendGroup) {
	if g.inflight == 0 && !g.reserving && g.recovering == 0 && s.groups.live[group] == g {
		delete(s.groups.live, group)
		if len(s.groups.free) < maxFreeGroups {
			// Small window rings and held lists are kept with the struct.
			win, held := g.win, g.held.items
			*g = sendGroup{}
			if len(win.done) <= maxFreeRing {
				win.reset(0)
				g.win = win
			}
			if cap(held) <= maxFreeHeld {
				g.held.items = held[:0]
			}
			s.groups.free = append(s.groups.free, g)
		}
	}
}

// maxFreeGroups bounds the evicted group structs kept for reuse;
// maxFreeRing (words) and maxFreeHeld (pointers) bound the window ring and
// held list kept with each.
const (
	maxFreeGroups = 1024
	maxFreeRing   = 32
	maxFreeHeld   = 256
)

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// marker flushes Sent marks: MarkInterval after the first buffered mark, or
// as soon as markBatch of them are buffered.
func (s *sender) marker() {
	defer s.marks.done.Done()
	for {
		select {
		case <-s.marks.wake:
		case <-s.marks.stop:
			return
		}
		if s.opts.MarkInterval > 0 && !s.marks.full() {
			t := time.NewTimer(s.opts.MarkInterval)
		wait:
			for {
				select {
				case <-t.C:
					break wait
				case <-s.marks.wake:
					if s.marks.full() {
						break wait
					}
				case <-s.marks.stop:
					t.Stop()
					return
				}
			}
			t.Stop()
		}
		s.flushMarks(s.ctx)
	}
}

// add buffers the Sent marks of items and wakes the marker for the first
// mark and for the markBatch-th.
func (m *sendMarks) add(items []*sendItem) {
	m.mu.Lock()
	before := m.count
	for _, it := range items {
		if it.seq != 0 {
			k := markKey{it.group, it.epoch}
			m.pending[k] = append(m.pending[k], it.seq)
			m.count++
		}
	}
	count := m.count
	m.mu.Unlock()
	if before == 0 && count > 0 || before < markBatch && count >= markBatch {
		kick(m.wake)
	}
}

// markKey is a group's sender epoch: the marks of each are kept apart,
// so that Recover tells this process's seqs from an earlier epoch's.
type markKey struct {
	group string
	epoch uint64
}

// sent returns the seqs whose Sent marks wait for a flush.
func (m *sendMarks) sent() map[recoverKey]struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := make(map[recoverKey]struct{}, m.count)
	for k, seqs := range m.pending {
		for _, seq := range seqs {
			set[recoverKey{k.group, k.epoch, seq}] = struct{}{}
		}
	}
	return set
}

// putBack buffers again marks whose store call failed: Recover still
// knows them as sent, and the next flush writes them.
func (m *sendMarks) putBack(keys []markKey, batch []seqstore.SentMark) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, k := range keys {
		m.pending[k] = append(m.pending[k], batch[i].Seqs...)
		m.count += len(batch[i].Seqs)
	}
}

// full reports whether markBatch marks wait.
func (m *sendMarks) full() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count >= markBatch
}

// flushMarks writes the buffered Sent marks to the store.
func (s *sender) flushMarks(ctx context.Context) {
	s.marks.flushMu.Lock()
	defer s.marks.flushMu.Unlock()
	s.flushMarksLocked(ctx)
}

func (s *sender) flushMarksLocked(ctx context.Context) {
	s.marks.mu.Lock()
	marks := s.marks.pending
	if s.marks.count == 0 {
		s.marks.mu.Unlock()
		return
	}
	s.marks.pending = make(map[markKey][]uint64, len(marks))
	s.marks.count = 0
	s.marks.mu.Unlock()
	// One store call per markChunk groups. The marks of a call that failed
	// are buffered again (a mark lost would make Recover send a copy,
	// which receivers drop): log and go on.
	batch := make([]seqstore.SentMark, 0, min(len(marks), markChunk))
	keys := make([]markKey, 0, cap(batch))
	flush := func() {
		if err := s.q.storeSent(ctx, batch); err != nil {
			s.q.log.Warn("ordered: marking messages sent failed", "groups", len(batch), "err", err)
			s.marks.putBack(keys, batch)
		}
		batch, keys = batch[:0], keys[:0]
	}
	for k, seqs := range marks {
		batch = append(batch, seqstore.SentMark{Stream: s.q.stream(k.group), Seqs: seqs})
		keys = append(keys, k)
		if len(batch) == markChunk {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// markChunk bounds the groups of one Sent call.
const markChunk = 256

// recover re-sends the journaled entries not in flight in this process and
// waits for them.
func (s *sender) recover(ctx context.Context) (int, error) {
	s.marks.flushMu.Lock()
	// Marks of messages already sent go first, so that the journal lists
	// only what was never sent (or is in flight).
	s.flushMarksLocked(ctx)
	entries, err := s.q.store.Pending(ctx, s.q.opts.Name)
	if err != nil {
		s.marks.flushMu.Unlock()
		return 0, fmt.Errorf("ordered: recover: read journal: %w", err)
	}
	entries = s.openJournal(entries)
	n := 0
	var results []*SendResult
	for pinned := false; ; pinned = true {
		k, r, later, reserved := s.enqueueRecovered(entries, true, pinned)
		if k < 0 {
			s.marks.flushMu.Unlock()
			return n, ErrClosed
		}
		n += k
		if r != nil {
			results = append(results, r)
		}
		if entries = later; len(entries) == 0 {
			break
		}
		// Not holding flushMu: the marker goes on flushing Sent marks,
		// another Recover may start (what they send does not change what
		// this one decides: its own, in flight, or sent).
		s.marks.flushMu.Unlock()
		select {
		case <-reserved:
		case <-ctx.Done():
			s.mu.Lock()
			s.unpinLocked(entries)
			s.mu.Unlock()
			return n, fmt.Errorf("ordered: recover: waiting for a reservation in progress: %w", ctx.Err())
		}
		s.marks.flushMu.Lock()
	}
	s.marks.flushMu.Unlock()
	for _, r := range results {
		if err := r.Wait(ctx); err != nil {
			return n, fmt.Errorf("ordered: recover: %w", err)
		}
	}
	return n, nil
}

// enqueueRecovered queues for sending the entries that are not in flight in
// this process and returns how many, or -1 if the sender is closing. With
// wait, the result finishes when all of them did (nil when there are none),
// and the entries of a group whose reservation is in progress that may be
// that reservation's are returned in later, their groups pinned, to be
// passed again (pinned) once reserved is closed (the call ended).
func (s *sender) enqueueRecovered(entries []seqstore.Entry, wait, pinned bool) (n int, r *SendResult, later []seqstore.Entry, reserved <-chan struct{}) {
	s.mu.Lock()
	if s.room.closing {
		if pinned {
			s.unpinLocked(entries)
		}
		s.mu.Unlock()
		return -1, nil, nil, nil
	}
	var items []sendItem
	size := 0
	var sent map[recoverKey]struct{} // the marks buffered, once asked
	for _, e := range entries {
		meta, payload := openEntry(e.Body)
		if err := s.header(e.Stream.Group, e.Epoch, e.Seq, meta, payload).Validate(); err != nil {
			s.q.log.Error("ordered: recover: skipping journal entry", "group", e.Stream.Group, "epoch", e.Epoch, "seq", e.Seq, "err", err)
			continue
		}
		key := recoverKey{e.Stream.Group, e.Epoch, e.Seq}
		switch s.recovery.items[key] {
		case recoverSending:
			continue
		case recoverFailed:
			// This process's send of it failed: it goes, whatever its
			// group is doing now.
		default:
			switch g := s.groups.live[e.Stream.Group]; {
			case g != nil && g.ours(e.Epoch, e.Seq):
				continue // in flight or sent by this process
			case s.markedSent(&sent, key):
				// Sent by this process since the journal was read (its
				// Sent mark waits for the next flush), its group since
				// dropped from the books or restarted at a later seq.
				continue
			case wait && g != nil && g.inReserve && (g.epoch != e.Epoch || e.Seq > g.hi):
				// The reservation in progress's own, or not (an earlier
				// process's, or a failed reservation's that the store
				// applied): its end tells.
				if len(later) == 0 || later[len(later)-1].Stream.Group != e.Stream.Group {
					g.recovering++ // entries come sorted by group: once each
				}
				later = append(later, e)
				continue
			}
		}
		s.recovery.items[key] = recoverSending
		items = append(items, sendItem{group: e.Stream.Group, payload: payload, meta: meta, size: len(meta) + len(payload), epoch: e.Epoch, seq: e.Seq})
		size += len(meta) + len(payload)
	}
	if len(later) > 0 {
		s.recovery.waiting = true
		reserved = s.recovery.reserved
	}
	if pinned {
		s.unpinLocked(entries) // after the look
	}
	s.room.inflight += len(items)
	s.room.inflightBytes += size
	s.mu.Unlock()
	if len(items) == 0 {
		return 0, nil, later, reserved
	}
	if wait {
		r = newSendResult(len(items))
	}
	for i := range items {
		it := &items[i]
		it.res = r
		it.body = envelope.Append(nil, s.header(it.group, it.epoch, it.seq, it.meta, it.payload), it.payload)
		it.payload, it.meta = nil, nil
	}
	s.push(items)
	return len(items), r, later, reserved
}

// markedSent reports whether key's Sent mark is buffered, reading the
// buffer into *sent the first time. A send that completes after that
// read still counts its message in its group (settle waits for s.mu,
// which the caller holds), so ours sees it.
func (s *sender) markedSent(sent *map[recoverKey]struct{}, key recoverKey) bool {
	if *sent == nil {
		*sent = s.marks.sent()
	}
	_, ok := (*sent)[key]
	return ok
}

// unpinLocked undoes the pins enqueueRecovered took for the entries it
// returned in later: once per run of one group's entries.
func (s *sender) unpinLocked(later []seqstore.Entry) {
	for i, e := range later {
		if i > 0 && later[i-1].Stream.Group == e.Stream.Group {
			continue
		}
		if g := s.groups.live[e.Stream.Group]; g != nil {
			g.recovering--
			s.evictLocked(e.Stream.Group, g)
		}
	}
}

// close stops admitting, waits for the messages in flight (or gives up when
// ctx ends), flushes Sent marks and stops the send goroutines.
func (s *sender) close(ctx context.Context) error {
	s.mu.Lock()
	s.room.closing = true
	close(s.room.closed)
	var idle chan struct{}
	if s.room.inflight > 0 {
		s.room.idle = make(chan struct{})
		idle = s.room.idle
	}
	s.mu.Unlock()

	var err error
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			s.mu.Lock()
			n := s.room.inflight
			s.mu.Unlock()
			err = fmt.Errorf("ordered: close: gave up on %d message(s) in flight: %w", n, ctx.Err())
			s.cancel()
		}
	}
	s.reservations.Shutdown()
	s.sends.Shutdown()
	close(s.marks.stop)
	s.marks.done.Wait()
	if s.durable {
		s.flushMarks(ctx)
	}
	s.cancel()
	return err
}

func (s *sender) stats() SendStats {
	s.mu.Lock()
	inflight, groups := s.room.inflight, len(s.groups.live)
	s.mu.Unlock()
	s.marks.mu.Lock()
	unmarked := s.marks.count
	s.marks.mu.Unlock()
	return SendStats{
		Unmarked:     int64(unmarked),
		Sent:         s.stat.sent.Load(),
		Failed:       s.stat.failed.Load(),
		Retries:      s.stat.retries.Load(),
		Recovered:    s.stat.recovered.Load(),
		Tampered:     s.stat.tampered.Load(),
		InFlight:     int64(inflight),
		Groups:       groups,
		Batches:      s.stat.batches.Load(),
		Reservations: s.stat.reservations.Load(),
		Held:         s.stat.held.Load(),
	}
}

// fifo is a queue of messages: a group's held list.
type fifo struct {
	items []*sendItem
	head  int
}

func (f *fifo) len() int { return len(f.items) - f.head }

func (f *fifo) push(it *sendItem) {
	if f.head > 0 && f.head == len(f.items) {
		f.items = f.items[:0]
		f.head = 0
	} else if f.head > 1024 && f.head*2 >= len(f.items) {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items = f.items[:n]
		f.head = 0
	}
	f.items = append(f.items, it)
}

func (f *fifo) peek() *sendItem { return f.items[f.head] }

func (f *fifo) pop() {
	f.items[f.head] = nil
	f.head++
}
