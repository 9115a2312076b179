package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Store is an in-memory seqstore.Store. Its zero value is not usable; call
// New.
type Store struct {
	mu      sync.Mutex
	closed  bool
	senders map[seqstore.Stream]*sender
	cursors map[seqstore.Stream]seqstore.Cursor
	now     func() time.Time
}

// sender is the sender state of one stream.
type sender struct {
	epoch   uint64
	next    uint64 // next seq to hand out; MaxSeq+1 once exhausted
	journal map[uint64][]byte
}

var _ seqstore.Store = (*Store)(nil)

// New returns an empty Store.
func New() *Store {
	return &Store{
		senders: make(map[seqstore.Stream]*sender),
		cursors: make(map[seqstore.Stream]seqstore.Cursor),
		now:     time.Now,
	}
}

// lock takes the mutex after checking ctx and that s is open. On error the
// mutex is not held.
func (st *Store) lock(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return fmt.Errorf("memstore: %s: %w", op, seqstore.ErrClosed)
	}
	return nil
}

// Reserve allocates n consecutive seqs of s; see seqstore.Store.
func (st *Store) Reserve(ctx context.Context, s seqstore.Stream, n int, journal [][]byte) (seqstore.Reservation, error) {
	if err := st.lock(ctx, "reserve"); err != nil {
		return seqstore.Reservation{}, err
	}
	defer st.mu.Unlock()
	if err := s.Validate(); err != nil {
		return seqstore.Reservation{}, fmt.Errorf("memstore: reserve: %w", err)
	}
	if n < 1 {
		return seqstore.Reservation{}, fmt.Errorf("memstore: reserve %s: %w: n must be at least 1, got %d", s, seqstore.ErrInvalidArgument, n)
	}
	if journal != nil && len(journal) != n {
		return seqstore.Reservation{}, fmt.Errorf("memstore: reserve %s: %w: %d journal bodies for %d seqs", s, seqstore.ErrInvalidArgument, len(journal), n)
	}
	sd := st.senders[s]
	first := uint64(1)
	if sd != nil {
		first = sd.next
	}
	// first <= MaxSeq+1, so the subtraction cannot wrap.
	if uint64(n) > seqstore.MaxSeq+1-first {
		return seqstore.Reservation{}, fmt.Errorf("memstore: reserve %d seqs of %s from %d: %w", n, s, first, seqstore.ErrOverflow)
	}
	if sd == nil {
		sd = &sender{epoch: seqstore.NewEpoch(st.now()), next: 1}
		st.senders[s] = sd
	}
	for i, body := range journal {
		if sd.journal == nil {
			sd.journal = make(map[uint64][]byte)
		}
		sd.journal[first+uint64(i)] = slices.Clone(body)
	}
	sd.next = first + uint64(n)
	return seqstore.Reservation{Epoch: sd.epoch, First: first}, nil
}

// Sent removes journal entries of s; see seqstore.Store.
func (st *Store) Sent(ctx context.Context, s seqstore.Stream, seqs []uint64) error {
	if err := st.lock(ctx, "sent"); err != nil {
		return err
	}
	defer st.mu.Unlock()
	if err := s.Validate(); err != nil {
		return fmt.Errorf("memstore: sent: %w", err)
	}
	if sd := st.senders[s]; sd != nil {
		for _, seq := range seqs {
			delete(sd.journal, seq)
		}
	}
	return nil
}

// Pending lists the unsent journal entries of queue's streams, ordered by
// stream key and then seq; see seqstore.Store.
func (st *Store) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	if err := st.lock(ctx, "pending"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("memstore: pending: %w", err)
	}
	var out []seqstore.Entry
	for s, sd := range st.senders {
		if s.Queue != queue {
			continue
		}
		for seq, body := range sd.journal {
			out = append(out, seqstore.Entry{Stream: s, Epoch: sd.epoch, Seq: seq, Body: slices.Clone(body)})
		}
	}
	// Keys are unique per stream, so comparing them orders streams totally.
	slices.SortFunc(out, func(a, b seqstore.Entry) int {
		if a.Stream != b.Stream {
			return cmp.Compare(a.Stream.Key(), b.Stream.Key())
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return out, nil
}

// Cursor returns the cursor of s, or the zero Cursor; see seqstore.Store.
func (st *Store) Cursor(ctx context.Context, s seqstore.Stream) (seqstore.Cursor, error) {
	if err := st.lock(ctx, "cursor"); err != nil {
		return seqstore.Cursor{}, err
	}
	defer st.mu.Unlock()
	if err := s.Validate(); err != nil {
		return seqstore.Cursor{}, fmt.Errorf("memstore: cursor: %w", err)
	}
	return cloneCursor(st.cursors[s]), nil
}

// Advance applies a batch of compare-and-set cursor moves, all or none; see
// seqstore.Store.
func (st *Store) Advance(ctx context.Context, batch []seqstore.Advance) error {
	if err := st.lock(ctx, "advance"); err != nil {
		return err
	}
	defer st.mu.Unlock()
	seen := make(map[seqstore.Stream]struct{}, len(batch))
	for _, a := range batch {
		if err := a.Check(); err != nil {
			return fmt.Errorf("memstore: advance: %w", err)
		}
		if _, dup := seen[a.Stream]; dup {
			return fmt.Errorf("memstore: advance: %w: stream %s appears twice in one batch", seqstore.ErrInvalidArgument, a.Stream)
		}
		seen[a.Stream] = struct{}{}
	}
	var conflict []seqstore.Stream
	for _, a := range batch {
		if !st.cursors[a.Stream].Same(a.From) {
			conflict = append(conflict, a.Stream)
		}
	}
	if conflict != nil {
		return &seqstore.ConflictError{Streams: conflict}
	}
	for _, a := range batch {
		st.cursors[a.Stream] = cloneCursor(a.To)
	}
	return nil
}

// Close marks the store closed; later calls return seqstore.ErrClosed.
// Close is idempotent and always returns nil.
func (st *Store) Close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	return nil
}

func cloneCursor(c seqstore.Cursor) seqstore.Cursor {
	c.Skipped = slices.Clone(c.Skipped)
	return c
}
