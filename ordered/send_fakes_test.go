package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore"
)

// Test doubles for the send side: a driver whose SendBatch a test scripts,
// and a store that counts and can fail reservations.

var (
	errRetryable = errors.New("fake: transient")
	errPermanent = errors.New("fake: permanent")
)

// sendDriver is a driver.Queue for send tests. SendBatch records what it
// accepted and consults fail (if set) first.
type sendDriver struct {
	limits  driver.Limits
	latency time.Duration

	// fail, if set, decides the outcome of a call: nil accepts every body,
	// a *driver.BatchError accepts the bodies whose entry is nil.
	fail func(call int, bodies [][]byte) error

	// block, if set, makes SendBatch wait until it is closed (or ctx ends).
	block chan struct{}

	calls    atomic.Int64
	inflight atomic.Int64
	peak     atomic.Int64
	partials atomic.Int64 // calls in flight with fewer than MaxBatch bodies
	partPeak atomic.Int64 // the most of them at once

	mu       sync.Mutex
	accepted [][]byte // copies, in acceptance order
	attempts map[string]int
	times    []time.Time // start of every call
	closed   bool
}

func newSendDriver() *sendDriver {
	return &sendDriver{
		limits: driver.Limits{
			MaxBatch: 16, MaxBody: 65536, MaxWait: 30 * time.Second, Visibility: 30 * time.Second,
			MinVisibility: time.Second, MaxVisibility: 12 * time.Hour,
		},
		attempts: make(map[string]int),
	}
}

func (d *sendDriver) Limits() driver.Limits { return d.limits }

func (d *sendDriver) SendBatch(ctx context.Context, bodies [][]byte) error {
	call := int(d.calls.Add(1))
	raise(&d.peak, d.inflight.Add(1))
	defer d.inflight.Add(-1)
	if len(bodies) < d.limits.MaxBatch {
		raise(&d.partPeak, d.partials.Add(1))
		defer d.partials.Add(-1)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return driver.ErrClosed
	}
	d.times = append(d.times, time.Now())
	for _, b := range bodies {
		d.attempts[string(b)]++
	}
	d.mu.Unlock()
	if len(bodies) < 1 || len(bodies) > d.limits.MaxBatch {
		return fmt.Errorf("fake: batch of %d: %w", len(bodies), driver.ErrTooLarge)
	}
	size := 0
	for _, b := range bodies {
		if len(b) > d.limits.MaxBody {
			return fmt.Errorf("fake: body of %d: %w", len(b), driver.ErrTooLarge)
		}
		size += len(b)
	}
	if mb := d.limits.MaxBatchBytes; mb > 0 && size > mb {
		return fmt.Errorf("fake: batch bytes %d: %w", size, driver.ErrTooLarge)
	}
	if d.block != nil {
		select {
		case <-d.block:
		case <-ctx.Done():
			return fmt.Errorf("fake: send: %w", ctx.Err())
		}
	}
	if d.latency > 0 {
		t := time.NewTimer(d.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("fake: send: %w", ctx.Err())
		}
	}
	var err error
	if d.fail != nil {
		err = d.fail(call, bodies)
	}
	var be *driver.BatchError
	if err != nil && !errors.As(err, &be) {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, b := range bodies {
		if be == nil || be.Errs[i] == nil {
			d.accepted = append(d.accepted, slices.Clone(b))
		}
	}
	return err
}

func (d *sendDriver) ReceiveBatch(ctx context.Context, max int, wait time.Duration) ([]*driver.Message, error) {
	return nil, nil
}

func (d *sendDriver) DeleteBatch(ctx context.Context, receipts []string) error { return nil }

func (d *sendDriver) ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) (string, error) {
	return receipt, nil
}

func (d *sendDriver) IsRetryable(err error) bool { return errors.Is(err, errRetryable) }

func (d *sendDriver) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return nil
}

// sentMsg is an accepted body, decoded.
type sentMsg struct {
	envelope.Header
	Payload string
}

// sent decodes every accepted body; it panics on an untagged one.
func (d *sendDriver) sent() []sentMsg {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]sentMsg, 0, len(d.accepted))
	for _, b := range d.accepted {
		h, p, ok := envelope.Parse(b)
		if !ok {
			panic(fmt.Sprintf("untagged body %q", b))
		}
		out = append(out, sentMsg{h, string(p)})
	}
	return out
}

// byGroup returns the accepted messages of each group sorted by seq.
func (d *sendDriver) byGroup() map[string][]sentMsg {
	m := make(map[string][]sentMsg)
	for _, s := range d.sent() {
		m[s.Group] = append(m[s.Group], s)
	}
	for _, msgs := range m {
		slices.SortFunc(msgs, func(a, b sentMsg) int { return int(a.Seq) - int(b.Seq) })
	}
	return m
}

// testStore is a small in-memory seqstore.Store that counts Reserve calls
// and can be told to fail them.
type testStore struct {
	mu       sync.Mutex
	streams  map[seqstore.Stream]*testStream
	reserves int
	failNext error // returned (once) by the next Reserve
	delay    time.Duration
	// failGroup makes every Reserve call naming this group fail as an
	// atomic store fails: the group's request with errBadGroup, the others
	// aborted, nothing applied.
	failGroup string
	sizes     []int        // requests per Reserve call
	entered   atomic.Int64 // Reserve calls begun (before the delay)
}

var errBadGroup = errors.New("teststore: this group's state is corrupt")

type testStream struct {
	epoch, next uint64
	journal     map[uint64][]byte
}

func newTestStore() *testStore {
	return &testStore{streams: make(map[seqstore.Stream]*testStream)}
}

var testEpoch atomic.Uint64

func (s *testStore) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("teststore: %w", err)
	}
	if err := seqstore.CheckReserve(reqs); err != nil {
		return nil, err
	}
	s.entered.Add(1)
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserves++
	s.sizes = append(s.sizes, len(reqs))
	if err := s.failNext; err != nil {
		s.failNext = nil
		return nil, err
	}
	if s.failGroup != "" {
		errs := make([]error, len(reqs))
		for i, r := range reqs {
			if r.Stream.Group == s.failGroup {
				errs[i] = errBadGroup
			}
		}
		if err := seqstore.Abort(errs); err != nil {
			return nil, err
		}
	}
	out := make([]seqstore.Reservation, len(reqs))
	for i, r := range reqs {
		ts := s.streams[r.Stream]
		if ts == nil {
			ts = &testStream{epoch: 1000 + testEpoch.Add(1), next: 1, journal: make(map[uint64][]byte)}
			s.streams[r.Stream] = ts
		}
		out[i] = seqstore.Reservation{Epoch: ts.epoch, First: ts.next}
		for k, b := range r.Journal {
			ts.journal[ts.next+uint64(k)] = slices.Clone(b)
		}
		ts.next += uint64(r.N)
	}
	return out, nil
}

func (s *testStore) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range marks {
		if ts := s.streams[m.Stream]; ts != nil {
			for _, q := range m.Seqs {
				delete(ts.journal, q)
			}
		}
	}
	return nil
}

func (s *testStore) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []seqstore.Entry
	for st, ts := range s.streams {
		if st.Queue != queue {
			continue
		}
		for seq, b := range ts.journal {
			out = append(out, seqstore.Entry{Stream: st, Epoch: ts.epoch, Seq: seq, Body: slices.Clone(b)})
		}
	}
	slices.SortFunc(out, func(a, b seqstore.Entry) int {
		if c := cmpString(a.Stream.Key(), b.Stream.Key()); c != 0 {
			return c
		}
		return int(a.Seq) - int(b.Seq)
	})
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *testStore) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	return make([]seqstore.Cursor, len(streams)), nil
}

func (s *testStore) Advance(ctx context.Context, batch []seqstore.Advance) error {
	return errors.New("teststore: Advance not supported")
}

func (s *testStore) Close() error { return nil }

// journalLen counts journal entries of every stream.
func (s *testStore) journalLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ts := range s.streams {
		n += len(ts.journal)
	}
	return n
}

// callSizes returns the number of requests of each Reserve call so far.
func (s *testStore) callSizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sizes)
}

func (s *testStore) reservations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserves
}

// storeCursor reads one stream's cursor from store.
func storeCursor(ctx context.Context, store seqstore.Store, st seqstore.Stream) (seqstore.Cursor, error) {
	cs, err := store.Cursors(ctx, []seqstore.Stream{st})
	if err != nil {
		return seqstore.Cursor{}, err
	}
	return cs[0], nil
}

// storeReserve makes a one-request Reserve call on store.
func storeReserve(ctx context.Context, store seqstore.Store, st seqstore.Stream, n int, journal [][]byte) (seqstore.Reservation, error) {
	rs, err := store.Reserve(ctx, []seqstore.ReserveRequest{{Stream: st, N: n, Journal: journal}})
	if err != nil {
		return seqstore.Reservation{}, err
	}
	return rs[0], nil
}

// The send tests never park.

func (s *testStore) Park(context.Context, []seqstore.Parked) error {
	return errors.New("testStore: no parking")
}

func (s *testStore) Unpark(context.Context, []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	return nil, errors.New("testStore: no parking")
}

func (s *testStore) ParkedStreams(context.Context, string) ([]seqstore.Stream, error) {
	return nil, nil
}

// raise makes peak at least n.
func raise(peak *atomic.Int64, n int64) {
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return
		}
	}
}
