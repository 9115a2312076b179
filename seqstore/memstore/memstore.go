package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/inorder/inorder/internal/journal"
	"github.com/inorder/inorder/seqstore"
)

// Store is an in-memory seqstore.Store. Its zero value is not usable; call
// New.
type Store struct {
	mu      sync.Mutex
	closed  bool
	senders map[seqstore.Stream]*sender
	cursors map[seqstore.Stream]seqstore.Cursor
	// parks holds each stream's parked entries, ordered by epoch and seq;
	// a stream without any has no key.
	parks map[seqstore.Stream]*parkList
	// spaces holds the lease state of each namespace (lease.go).
	spaces map[string]*space
	// watchers holds each namespace's WatchLeases subscriptions (watch.go).
	watchers map[string]map[*watcher]struct{}
	// now is the clock of epochs and of lease and heartbeat expiries;
	// time.Now's monotonic reading keeps expiries right across wall-clock
	// steps.
	now func() time.Time
	// onDrop, when set (tests), is told how many parked entries one mutex
	// hold dropped one by one.
	onDrop func(n int)
}

// sender is the sender state of one stream.
type sender struct {
	epoch   uint64
	next    uint64 // next seq to hand out; MaxSeq+1 once exhausted
	journal journal.Journal
}

var _ seqstore.Store = (*Store)(nil)

// New returns an empty Store.
func New() *Store {
	return &Store{
		senders: make(map[seqstore.Stream]*sender),
		cursors: make(map[seqstore.Stream]seqstore.Cursor),
		parks:   make(map[seqstore.Stream]*parkList),
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

// Reserve allocates consecutive seqs for each request, all or none; see
// seqstore.Store.
func (st *Store) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if err := st.lock(ctx, "reserve"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	if err := seqstore.CheckReserve(reqs); err != nil {
		return nil, fmt.Errorf("memstore: reserve: %w", err)
	}
	// Plan every request first (a stream's later requests continue its
	// earlier ones), so that a request at fault leaves everything as it was.
	out := make([]seqstore.Reservation, len(reqs))
	next := make(map[seqstore.Stream]uint64, len(reqs))
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		first, ok := next[r.Stream]
		if !ok {
			first = 1
			if sd := st.senders[r.Stream]; sd != nil {
				first = sd.next
			}
		}
		// first <= MaxSeq+1, so the subtraction cannot wrap.
		if uint64(r.N) > seqstore.MaxSeq+1-first {
			errs[i] = fmt.Errorf("%w: %d seqs of %s from %d", seqstore.ErrOverflow, r.N, r.Stream, first)
			continue
		}
		out[i].First = first
		next[r.Stream] = first + uint64(r.N)
	}
	if err := seqstore.Abort(errs); err != nil {
		return nil, fmt.Errorf("memstore: reserve: %w", err)
	}
	// The call's journal bodies are copied into one block: one allocation
	// per call, not per body. A block lives until its last entry is marked
	// sent.
	size := 0
	for _, r := range reqs {
		for _, body := range r.Journal {
			size += len(body)
		}
	}
	block := make([]byte, 0, size)
	for i, r := range reqs {
		sd := st.senders[r.Stream]
		if sd == nil {
			sd = &sender{epoch: seqstore.NewEpoch(st.now())}
			st.senders[r.Stream] = sd
		}
		out[i].Epoch = sd.epoch
		for k, body := range r.Journal {
			start := len(block)
			block = append(block, body...)
			sd.journal.Add(out[i].First+uint64(k), block[start:len(block):len(block)])
		}
		sd.next = out[i].First + uint64(r.N)
	}
	return out, nil
}

// Sent removes journal entries; see seqstore.Store.
func (st *Store) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	if err := st.lock(ctx, "sent"); err != nil {
		return err
	}
	defer st.mu.Unlock()
	if err := seqstore.CheckSent(marks); err != nil {
		return fmt.Errorf("memstore: sent: %w", err)
	}
	for _, m := range marks {
		if sd := st.senders[m.Stream]; sd != nil {
			for _, seq := range m.Seqs {
				sd.journal.Remove(seq)
			}
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
		for seq, body := range sd.journal.All() {
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

// Cursors returns the cursor of each stream, the zero Cursor when none was
// stored; see seqstore.Store.
func (st *Store) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	if err := st.lock(ctx, "cursors"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	out := make([]seqstore.Cursor, len(streams))
	errs := make([]error, len(streams))
	failed := false
	for i, s := range streams {
		if errs[i] = s.Validate(); errs[i] != nil {
			failed = true
			continue
		}
		out[i] = cloneCursor(st.cursors[s])
	}
	if failed {
		return out, fmt.Errorf("memstore: cursors: %w", &seqstore.BatchError{Errs: errs})
	}
	return out, nil
}

// Advance applies a batch of compare-and-set cursor moves, all or none, and
// drops the parked entries the new cursors passed; see seqstore.Store and
// seqstore.Parker.
func (st *Store) Advance(ctx context.Context, batch []seqstore.Advance) error {
	more, err := st.advance(ctx, batch)
	for _, s := range more {
		st.dropPassed(s)
	}
	return err
}

// advance applies batch under one mutex hold, with the first drop chunk of
// each stream, and returns the streams that may have passed entries left.
func (st *Store) advance(ctx context.Context, batch []seqstore.Advance) (more []seqstore.Stream, err error) {
	if err := st.lock(ctx, "advance"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	if err := seqstore.CheckAdvance(batch); err != nil {
		return nil, fmt.Errorf("memstore: advance: %w", err)
	}
	errs := make([]error, len(batch))
	for i, a := range batch {
		if cur := st.cursors[a.Stream]; !cur.Same(a.From) {
			errs[i] = fmt.Errorf("%w: %s is at %d/%d owner %d", seqstore.ErrConflict, a.Stream, cur.Epoch, cur.Next, cur.Owner)
		}
	}
	if err := seqstore.Abort(errs); err != nil {
		return nil, fmt.Errorf("memstore: advance: %w", err)
	}
	for _, a := range batch {
		st.cursors[a.Stream] = cloneCursor(a.To)
		if st.dropParked(a.Stream, a.To) {
			more = append(more, a.Stream)
		}
	}
	return more, nil
}

// Close marks the store closed; later calls return seqstore.ErrClosed.
// Close is idempotent and always returns nil.
func (st *Store) Close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	st.closeWatchers()
	return nil
}

func cloneCursor(c seqstore.Cursor) seqstore.Cursor {
	c.Skipped = slices.Clone(c.Skipped)
	return c
}
