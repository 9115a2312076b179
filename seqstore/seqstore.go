// Package seqstore defines where inorder keeps sequence state: the sender's
// counter and journal (outbox) per stream, and the receiver's cursor per
// stream.
//
// A stream is one ordered sequence: a queue name and a message group within
// it. Sequence ids start at 1 and have no holes on the sender. Every stream
// also has an epoch, chosen when its sender state is first created (see
// NewEpoch), so that a receiver can tell "the sender lost its state and began
// again at 1" (a greater epoch) from "this is an old duplicate" (same epoch,
// seq below the cursor).
//
// Implementations live in sub-packages (memstore, filestore, redisstore,
// sqlstore) and all run the conformance suite in storetest.
//
// # Durability and group commit
//
// Reserve and Advance return nil only once their effect is durable as the
// implementation defines it (fsync, Redis write, SQL commit). Concurrent calls
// coalesce: one fsync, round trip or transaction serves every caller waiting
// at that moment, across streams.
//
// # Errors
//
// Failures wrap the sentinels below (ErrConflict, ErrClosed, ...) so callers
// test them with errors.Is. Backend errors stay reachable with errors.As.
package seqstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Sentinel errors.
var (
	// ErrConflict means a compare-and-set Advance found a cursor other than
	// the one it expected: another receiver (or a stale view of this one)
	// moved the stream.
	ErrConflict = errors.New("seqstore: cursor conflict")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("seqstore: store closed")
	// ErrInvalidStream means a stream name breaks the rules of Stream.Validate.
	ErrInvalidStream = errors.New("seqstore: invalid stream")
	// ErrInvalidArgument means a call's arguments are inconsistent (moving a
	// cursor backwards, a journal whose length differs from n, n < 1, ...).
	ErrInvalidArgument = errors.New("seqstore: invalid argument")
	// ErrOverflow means a counter would pass MaxSeq.
	ErrOverflow = errors.New("seqstore: sequence overflow")
	// ErrCorrupt means stored state failed validation (bad checksum in the
	// middle of a log, a foreign or malformed row or key). A store never
	// silently resets corrupt state.
	ErrCorrupt = errors.New("seqstore: corrupt state")
	// ErrLocked means the store's storage is held by another process.
	ErrLocked = errors.New("seqstore: store locked by another process")
)

const (
	// MaxSeq is the largest sequence id and epoch a store accepts, so that
	// both fit a signed 64-bit column.
	MaxSeq = 1<<63 - 1
	// MaxQueueLen is the longest queue name, in bytes.
	MaxQueueLen = 256
	// MaxGroupLen is the longest group name, in bytes.
	MaxGroupLen = 128
	// MaxSkipped is how many skipped ranges a cursor holds. A receiver
	// never merges ranges across a handled seq nor drops one: a group whose
	// cursor is full passes over nothing more (it waits, reported stuck).
	MaxSkipped = 64
	// MaxParkBody is the largest body a Parker accepts, in bytes: more than
	// a queue message can carry (MNS: 64 KiB), small enough for a single
	// store value.
	MaxParkBody = 1 << 20
)

// Stream names one ordered sequence: a queue and a message group within it.
// The empty group is the default group.
type Stream struct {
	Queue string
	Group string
}

// Validate reports whether s is a valid stream: Queue is 1..MaxQueueLen bytes
// and Group 0..MaxGroupLen bytes, both valid UTF-8 without NUL bytes. Any
// other byte is allowed, so stores must treat names as data (quoted
// parameters, escaped keys), never as syntax.
func (s Stream) Validate() error {
	if len(s.Queue) == 0 || len(s.Queue) > MaxQueueLen {
		return fmt.Errorf("%w: queue name must be 1..%d bytes, got %d", ErrInvalidStream, MaxQueueLen, len(s.Queue))
	}
	if len(s.Group) > MaxGroupLen {
		return fmt.Errorf("%w: group must be at most %d bytes, got %d", ErrInvalidStream, MaxGroupLen, len(s.Group))
	}
	for _, part := range [...]string{s.Queue, s.Group} {
		if !utf8.ValidString(part) {
			return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidStream, part)
		}
		if strings.IndexByte(part, 0) >= 0 {
			return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidStream, part)
		}
	}
	return nil
}

// Key returns an encoding of s that is unique per stream and uses only the
// bytes [A-Za-z0-9._~-] and one '/' between queue and group; every other byte
// is written as %XX. It suits file names, Redis keys (no braces, so it can sit
// inside a hash tag) and log lines.
func (s Stream) Key() string {
	var b strings.Builder
	b.Grow(len(s.Queue) + len(s.Group) + 1)
	escapeKey(&b, s.Queue)
	b.WriteByte('/')
	escapeKey(&b, s.Group)
	return b.String()
}

// ParseKey is the inverse of Stream.Key.
func ParseKey(key string) (Stream, error) {
	q, g, ok := strings.Cut(key, "/")
	if !ok {
		return Stream{}, fmt.Errorf("%w: key %q has no '/'", ErrCorrupt, key)
	}
	var s Stream
	var err error
	if s.Queue, err = unescapeKey(q); err != nil {
		return Stream{}, err
	}
	if s.Group, err = unescapeKey(g); err != nil {
		return Stream{}, err
	}
	if err := s.Validate(); err != nil {
		return Stream{}, fmt.Errorf("%w: key %q: %v", ErrCorrupt, key, err)
	}
	return s, nil
}

func (s Stream) String() string { return s.Key() }

const hexDigits = "0123456789ABCDEF"

func keySafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '~' || c == '-'
}

func escapeKey(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keySafe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func unescapeKey(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case keySafe(c):
			b.WriteByte(c)
		case c == '%' && i+2 < len(s):
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 || keySafe(hi<<4|lo) {
				// A safe byte is always written as is: one spelling per key.
				return "", fmt.Errorf("%w: bad escape in key %q", ErrCorrupt, s)
			}
			b.WriteByte(hi<<4 | lo)
			i += 2
		default:
			return "", fmt.Errorf("%w: bad byte %q in key %q", ErrCorrupt, c, s)
		}
	}
	return b.String(), nil
}

// NewEpoch returns a fresh epoch for a sender stream created at now: the high
// bits are the wall clock in milliseconds and the low 20 bits are random, so
// an epoch chosen later compares greater (to the millisecond) and two senders
// that start in the same millisecond still differ. The result is in
// 1..MaxSeq.
func NewEpoch(now time.Time) uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	ms := uint64(now.UnixMilli()) & (1<<43 - 1)
	return (ms<<20 | binary.LittleEndian.Uint64(b[:])&(1<<20-1)) & MaxSeq
}

// Reservation is the result of Reserve: the stream's epoch and the first of
// the consecutive seqs allocated.
type Reservation struct {
	Epoch uint64
	First uint64
}

// Entry is a journaled message: reserved in durable-send mode and not yet
// marked sent.
type Entry struct {
	Stream Stream
	Epoch  uint64
	Seq    uint64
	Body   []byte
}

// Range is an inclusive range of seqs of one epoch.
type Range struct {
	Epoch       uint64
	First, Last uint64
}

// Contains reports whether seq of epoch lies in r.
func (r Range) Contains(epoch, seq uint64) bool {
	return r.Epoch == epoch && r.First <= seq && seq <= r.Last
}

// valid reports whether r can be a skipped range: 1 <= First <= Last <=
// MaxSeq and Epoch <= MaxSeq (seq 0 does not exist; Last is MaxSeq when an
// epoch switch skipped the rest of the old epoch).
func (r Range) valid() bool {
	return 1 <= r.First && r.First <= r.Last && r.Last <= MaxSeq && r.Epoch <= MaxSeq
}

// Cursor is a receiver's position in a stream. The zero Cursor means no
// receiver has advanced the stream yet.
type Cursor struct {
	// Epoch is the sender epoch being consumed; 0 before the first advance.
	Epoch uint64
	// Next is the next seq expected (everything below it was handled).
	Next uint64
	// Owner is a fencing token compared by Advance; 0 while unused.
	Owner uint64
	// Skipped lists the ranges of seqs below Next that were passed over
	// (by the gap policy, a start, an epoch switch), not handled: at most
	// MaxSkipped.
	Skipped []Range
}

// Same reports whether c and d have the same Epoch, Next and Owner: the
// fields Advance compares.
func (c Cursor) Same(d Cursor) bool {
	return c.Epoch == d.Epoch && c.Next == d.Next && c.Owner == d.Owner
}

// Advance is one compare-and-set of a stream's cursor from From to To.
type Advance struct {
	Stream Stream
	From   Cursor
	To     Cursor
}

// Check validates a: the stream is valid and To does not move backwards from
// From (a lower epoch, or the same epoch with a lower Next).
func (a Advance) Check() error {
	if err := a.Stream.Validate(); err != nil {
		return err
	}
	if a.To.Epoch < a.From.Epoch || a.To.Epoch == a.From.Epoch && a.To.Next < a.From.Next {
		return fmt.Errorf("%w: cursor of %s would move backwards from %d/%d to %d/%d",
			ErrInvalidArgument, a.Stream, a.From.Epoch, a.From.Next, a.To.Epoch, a.To.Next)
	}
	if a.To.Epoch > MaxSeq || a.To.Next > MaxSeq {
		return fmt.Errorf("%w: cursor of %s beyond MaxSeq", ErrOverflow, a.Stream)
	}
	if len(a.To.Skipped) > MaxSkipped {
		return fmt.Errorf("%w: %d skipped ranges, at most %d", ErrInvalidArgument, len(a.To.Skipped), MaxSkipped)
	}
	for _, r := range a.To.Skipped {
		if !r.valid() {
			return fmt.Errorf("%w: skipped range %d:%d..%d of %s", ErrInvalidArgument, r.Epoch, r.First, r.Last, a.Stream)
		}
	}
	return nil
}

// ErrAborted marks a request of an atomic multi-stream call that was not
// applied only because another request of the same call failed. Retrying it
// without the failed requests may succeed.
var ErrAborted = errors.New("seqstore: not applied: another request of the batch failed")

// BatchError reports the outcome of a multi-stream call (Reserve, Cursors,
// Advance) request by request. Errs has one element per request, in order:
// nil means request i took effect (its Reservation or Cursor is valid); an
// error means it did not: its own cause (ErrConflict, ErrInvalidStream,
// ErrOverflow, ErrCorrupt, ...) or ErrAborted when an atomic call refused it
// because of another request.
//
// A multi-stream call that fails with an error that is not a *BatchError
// gives no such knowledge: every request may or may not have taken effect
// (a lost response, an outage part-way), and the caller must find out (read
// the cursors again) or tolerate both.
type BatchError struct {
	Errs []error
}

func (e *BatchError) Error() string {
	n := 0
	var first error
	for _, err := range e.Errs {
		if err != nil && !errors.Is(err, ErrAborted) {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if first == nil {
		return fmt.Sprintf("seqstore: %d of %d requests not applied", len(e.Errs), len(e.Errs))
	}
	return fmt.Sprintf("seqstore: %d of %d requests failed (first: %v)", n, len(e.Errs), first)
}

// Unwrap returns the requests' errors, so that errors.Is finds a sentinel
// (ErrConflict, ...) that any request's error wraps.
func (e *BatchError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Failed returns the error of request i of a multi-stream call that
// returned err: nil when it took effect, the request's own error or
// ErrAborted when err is a *BatchError of n requests, and err itself
// otherwise (the outcome is unknown).
func Failed(err error, i, n int) error {
	if err == nil {
		return nil
	}
	var be *BatchError
	if errors.As(err, &be) && len(be.Errs) == n {
		return be.Errs[i]
	}
	return err
}

// Abort returns the outcome of an atomic multi-stream call whose requests at
// fault have a non-nil error in errs: nil when there is none, else a
// *BatchError in which every other request fails with ErrAborted. It fills
// errs in place and keeps it as the BatchError's Errs.
func Abort(errs []error) error {
	if !slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		return nil
	}
	for i, err := range errs {
		if err == nil {
			errs[i] = ErrAborted
		}
	}
	return &BatchError{Errs: errs}
}

// CheckReserve validates the requests of a Reserve call (see
// ReserveRequest.Check): nil when all are valid, else the call's
// *BatchError (see Abort).
func CheckReserve(reqs []ReserveRequest) error {
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		errs[i] = r.Check()
	}
	return Abort(errs)
}

// CheckAdvance validates an Advance batch: each move (see Advance.Check),
// and no stream twice (the second one is at fault). It returns nil or the
// call's *BatchError (see Abort).
func CheckAdvance(batch []Advance) error {
	errs := make([]error, len(batch))
	seen := make(map[Stream]struct{}, len(batch))
	for i, a := range batch {
		if errs[i] = a.Check(); errs[i] != nil {
			continue
		}
		if _, dup := seen[a.Stream]; dup {
			errs[i] = fmt.Errorf("%w: stream %s appears twice in one batch", ErrInvalidArgument, a.Stream)
		}
		seen[a.Stream] = struct{}{}
	}
	return Abort(errs)
}

// CheckSent validates the streams of a Sent call: nil when all are valid,
// else a *BatchError naming the invalid ones (the others ErrAborted).
func CheckSent(marks []SentMark) error {
	errs := make([]error, len(marks))
	for i, m := range marks {
		errs[i] = m.Stream.Validate()
	}
	return Abort(errs)
}

// Split sorts the outcome err of a multi-stream call of n requests into
// what is known and what is worth retrying: it calls done(i, e) for every
// request whose outcome is final (e nil: it took effect; else its own
// error, or err itself when err is not a *BatchError and the outcome is
// unknown), and returns, in order, the indexes of the requests aborted
// only because another one failed (ErrAborted), which a call without the
// failed ones may apply.
func Split(err error, n int, done func(i int, err error)) (aborted []int) {
	for i := range n {
		e := Failed(err, i, n)
		if errors.Is(e, ErrAborted) && e != err {
			aborted = append(aborted, i)
			continue
		}
		done(i, e)
	}
	return aborted
}

// ReserveRequest asks Reserve for N consecutive seqs of Stream.
type ReserveRequest struct {
	Stream Stream
	// N is how many seqs to allocate, >= 1.
	N int
	// Journal is nil (fast mode: only the counter is stored) or holds N
	// bodies, stored in the same durable write keyed by seq until marked by
	// Sent (durable-send mode).
	Journal [][]byte
}

// Check validates r: a valid stream, N >= 1, and a Journal that is nil or
// holds N bodies. N > MaxSeq is left to the store, which reports it as
// ErrOverflow.
func (r ReserveRequest) Check() error {
	if err := r.Stream.Validate(); err != nil {
		return err
	}
	if r.N < 1 {
		return fmt.Errorf("%w: reserve on %s: n must be at least 1, got %d", ErrInvalidArgument, r.Stream, r.N)
	}
	if r.Journal != nil && len(r.Journal) != r.N {
		return fmt.Errorf("%w: reserve on %s: %d journal bodies for n=%d", ErrInvalidArgument, r.Stream, len(r.Journal), r.N)
	}
	return nil
}

// SentMark names journal entries of one stream that were handed to the
// queue.
type SentMark struct {
	Stream Stream
	Seqs   []uint64
}

// Store keeps sender counters, the send journal and receiver cursors. All
// methods are safe for concurrent use; concurrent calls coalesce into shared
// writes (group commit), and every multi-stream call is one write: one log
// frame and fsync, one Redis script or pipeline, one SQL transaction.
//
// Reserve and Advance are atomic: they apply all their requests or none,
// and a request at fault fails the call with a *BatchError naming it (the
// others fail with ErrAborted). An implementation that cannot be atomic
// across some streams (Redis Cluster across hash slots) documents it and
// reports exactly which requests took effect in its *BatchError; its
// Reserve then returns the Reservations of those requests with the error.
type Store interface {
	// Reserve durably allocates, for each request, N consecutive seqs of
	// its stream and returns one Reservation per request, in order: the
	// stream's epoch and the first seq. The first Reserve of a stream
	// creates its sender state with NewEpoch and first seq 1. A stream may
	// appear in several requests of one call: they get consecutive ranges
	// in request order.
	Reserve(ctx context.Context, reqs []ReserveRequest) ([]Reservation, error)

	// Sent marks journal entries as handed to the queue, so Pending no
	// longer lists them. It may return before the marks are durable: a lost
	// mark only makes recovery send a duplicate, which receivers drop.
	// Unknown seqs and streams are ignored. A mark with an invalid stream
	// fails the call before anything is marked, with a *BatchError naming
	// it.
	Sent(ctx context.Context, marks []SentMark) error

	// Pending lists the journal entries of streams of queue that are not
	// marked sent, ordered by stream key and then seq.
	Pending(ctx context.Context, queue string) ([]Entry, error)

	// Cursors returns the receiver cursor of each stream, in order: the
	// zero Cursor for a stream whose cursor was never stored. A stream
	// whose stored state is corrupt or whose name is invalid fails alone:
	// the error is a *BatchError and the other cursors are valid.
	Cursors(ctx context.Context, streams []Stream) ([]Cursor, error)

	// Advance applies a batch of compare-and-set cursor moves atomically.
	// If the stored Epoch, Next or Owner of a stream differs from its From
	// (a missing cursor equals the zero Cursor), nothing is applied and the
	// error is a *BatchError whose entry for that stream wraps ErrConflict.
	// A stream may appear at most once per batch. To's Skipped list
	// replaces the stored one. It also drops the parked entries of each
	// stream below its new cursor: up to a bounded chunk in the same
	// atomic write, the rest before it returns (see Parker).
	Advance(ctx context.Context, batch []Advance) error

	// Parker parks messages for a receiver: every store does (it is part
	// of the contract, not found by a type assertion, so that a store
	// wrapped for metrics or logging keeps it).
	Parker

	// Close releases the store. It waits for writes in progress; later calls
	// return ErrClosed. Close is idempotent.
	Close() error
}

// Parked is a message body parked in a store: a message that arrived long
// before its turn, kept durably by the receiver so that it can be deleted
// from the queue (see Parker).
type Parked struct {
	Stream Stream
	Epoch  uint64
	Seq    uint64
	Body   []byte
}

// Check validates p: a valid stream, a seq in 1..MaxSeq, an epoch up to
// MaxSeq, and a body of at most MaxParkBody bytes.
func (p Parked) Check() error {
	if err := p.Stream.Validate(); err != nil {
		return err
	}
	if p.Seq < 1 || p.Seq > MaxSeq || p.Epoch > MaxSeq {
		return fmt.Errorf("%w: park of %s: epoch %d seq %d out of range", ErrInvalidArgument, p.Stream, p.Epoch, p.Seq)
	}
	if len(p.Body) > MaxParkBody {
		return fmt.Errorf("%w: park of %s seq %d: body of %d bytes, at most %d", ErrInvalidArgument, p.Stream, p.Seq, len(p.Body), MaxParkBody)
	}
	return nil
}

// CheckPark validates the entries of a Park call (see Parked.Check), and
// that no stream, epoch and seq appears twice (the second one is at
// fault). It returns nil or the call's *BatchError (see Abort).
func CheckPark(entries []Parked) error {
	type key struct {
		s          Stream
		epoch, seq uint64
	}
	errs := make([]error, len(entries))
	seen := make(map[key]struct{}, len(entries))
	for i, p := range entries {
		if errs[i] = p.Check(); errs[i] != nil {
			continue
		}
		k := key{p.Stream, p.Epoch, p.Seq}
		if _, dup := seen[k]; dup {
			errs[i] = fmt.Errorf("%w: %s %d/%d parked twice in one call", ErrInvalidArgument, p.Stream, p.Epoch, p.Seq)
		}
		seen[k] = struct{}{}
	}
	return Abort(errs)
}

// Below reports whether seq of epoch is already handled by a cursor c: an
// older epoch, or the same epoch and a seq below c.Next. A Parker refuses
// to park such an entry, never returns it from Unpark once c is stored,
// and drops it from the park (see Parker).
func (c Cursor) Below(epoch, seq uint64) bool {
	return epoch < c.Epoch || epoch == c.Epoch && seq < c.Next
}

// ParkQuery asks for up to Max parked entries of Stream with Epoch and a seq
// of at least From.
type ParkQuery struct {
	Stream Stream
	Epoch  uint64
	From   uint64
	Max    int
}

// Check validates q: a valid stream and Max >= 1.
func (q ParkQuery) Check() error {
	if err := q.Stream.Validate(); err != nil {
		return err
	}
	if q.Max < 1 {
		return fmt.Errorf("%w: unpark of %s: max must be at least 1, got %d", ErrInvalidArgument, q.Stream, q.Max)
	}
	return nil
}

// Parker is the part of a Store that parks messages for a receiver (the
// resequencer's persistent store). A receiver holds at most a capped number
// of messages received and not deleted; early arrivals beyond it are
// parked, deleted from the queue, and read back in order when their turn
// comes. Every Store implements it (storetest.Run checks it); a receiver
// that should not park says so (ordered.ReceiveOptions.NoPark).
//
// A Parker's Advance also drops the parked entries that each stream's new
// cursor passed (Cursor.Below: older epochs, and seqs below Next), in
// bounded steps, so that no single write (a Redis script, a transaction, a
// mutex hold) grows with the size of a park:
//
//   - The cursor write and the drop of a first chunk of at most a bound of
//     the store's (1,000 entries per stream or per statement in this
//     module's stores) are one atomic write. Handing out a parked message
//     and removing it from the park are one step whenever the new cursors
//     pass no more than that. A store whose drop costs the same whatever
//     the park's size (memstore forgetting a stream's whole park) may drop
//     everything in that write.
//   - The rest is dropped eventually, by later writes of at most one chunk
//     each, each of which drops only what the stream's stored cursor has
//     passed at that moment (a cursor never moves back, so what it passed
//     stays passed, and nothing at or above it is ever dropped). Advance
//     makes them before it returns, unless its ctx ends, the store closes
//     or a write fails first (its cursors moved all the same: it returns
//     nil); sqlstore's AdvanceTx, which drops its first chunk in
//     the caller's transaction and cannot write after it commits, leaves
//     them to the stream's next Advance or AdvanceTx (each drops at least
//     a chunk) and to ParkedStreams.
//   - Until then, and after a crash or an error between chunks, the passed
//     entries left are invisible: Unpark never returns an entry that its
//     stream's stored cursor passed, whatever the query's Epoch and From,
//     and ParkedStreams never lists a stream whose every entry was passed
//     (it may drop them).
//
// A receiver, which unparks from its cursor (its Epoch, From at least
// Next), sees no difference: a park is handed out once, and a passed entry
// never again.
type Parker interface {
	// Park durably stores entries, all or none, in one write. Parking an
	// entry again replaces its body. An entry at or below its stream's
	// cursor (already handled) is refused: the call then fails with a
	// *BatchError whose entry for it wraps ErrConflict.
	Park(ctx context.Context, entries []Parked) error

	// Unpark returns, for each query in order, the parked entries of its
	// stream with its epoch and a seq of at least From, in seq order, at
	// most Max of them, leaving out every entry the stream's stored cursor
	// passed (even one not dropped yet). It removes nothing: Advance does.
	Unpark(ctx context.Context, queries []ParkQuery) ([][]Parked, error)

	// ParkedStreams lists the streams of queue that have parked entries
	// their stored cursor has not passed, ordered by stream key: a receiver
	// that starts reads their parks even when none of their messages is
	// left in the queue. It may drop passed entries it finds (see above).
	ParkedStreams(ctx context.Context, queue string) ([]Stream, error)
}
