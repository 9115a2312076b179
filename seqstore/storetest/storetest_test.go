package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// handle is a store opened over shared memstore "storage": closing it leaves
// the storage intact, so a reopened handle sees what earlier ones wrote. It
// lets the suite's reopen tests run against memstore.
type handle struct {
	seqstore.Store // the shared storage

	mu     sync.Mutex
	closed bool
}

func (h *handle) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return seqstore.ErrClosed
	}
	return nil
}

func (h *handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return nil
}

func (h *handle) Reserve(ctx context.Context, s seqstore.Stream, n int, journal [][]byte) (seqstore.Reservation, error) {
	if err := h.check(); err != nil {
		return seqstore.Reservation{}, err
	}
	return h.Store.Reserve(ctx, s, n, journal)
}

func (h *handle) Sent(ctx context.Context, s seqstore.Stream, seqs []uint64) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.Store.Sent(ctx, s, seqs)
}

func (h *handle) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.Store.Pending(ctx, queue)
}

func (h *handle) Cursor(ctx context.Context, s seqstore.Stream) (seqstore.Cursor, error) {
	if err := h.check(); err != nil {
		return seqstore.Cursor{}, err
	}
	return h.Store.Cursor(ctx, s)
}

func (h *handle) Advance(ctx context.Context, batch []seqstore.Advance) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.Store.Advance(ctx, batch)
}

func persistentHarness() storetest.Harness {
	return storetest.Harness{
		Persistent: true,
		Open: func(*testing.T) func(*testing.T) seqstore.Store {
			storage := memstore.New()
			return func(*testing.T) seqstore.Store { return &handle{Store: storage} }
		},
	}
}

// TestPersistentMemstore runs the whole suite, reopen tests included.
func TestPersistentMemstore(t *testing.T) {
	storetest.Run(t, persistentHarness())
}

// mutants are broken stores, each with a subtest of the suite that must
// catch it. The suite runs against each in a child process, which must fail.
var mutants = map[string]struct {
	wrap     func(seqstore.Store) seqstore.Store
	catching string // a subtest expected to fail
}{
	"off-by-one": {
		wrap:     func(s seqstore.Store) seqstore.Store { return offByOne{s} },
		catching: "Reserve/FirstAndConsecutive",
	},
	"non-atomic-advance": {
		wrap:     func(s seqstore.Store) seqstore.Store { return nonAtomic{s} },
		catching: "Advance/AllOrNothing",
	},
	"owner-ignored": {
		wrap:     func(s seqstore.Store) seqstore.Store { return ownerIgnored{s} },
		catching: "Advance/CompareAndSet",
	},
	"context-ignored": {
		wrap:     func(s seqstore.Store) seqstore.Store { return contextIgnored{s} },
		catching: "Context/Cancelled",
	},
	"unsorted-pending": {
		wrap:     func(s seqstore.Store) seqstore.Store { return unsorted{s} },
		catching: "Journal/Pending",
	},
	"close-ignored": {
		wrap:     func(s seqstore.Store) seqstore.Store { return closeIgnored{s} },
		catching: "Closed",
	},
	"skipped-dropped": {
		wrap:     func(s seqstore.Store) seqstore.Store { return skippedDropped{s} },
		catching: "Advance/Skipped",
	},
	"shared-fate": {
		wrap:     func(s seqstore.Store) seqstore.Store { return &sharedFate{Store: s} },
		catching: "Concurrent/IsolatedFailures",
	},
	"forgetful": {
		// Every reopen loses everything; the harness claims persistence.
		wrap:     nil,
		catching: "Reopen/State",
	},
}

const mutantEnv = "STORETEST_MUTANT"

// TestMutant runs the suite against the mutant named by STORETEST_MUTANT; it
// is the child process of TestSuiteCatchesMutants and skips otherwise.
func TestMutant(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip(mutantEnv + " not set: run only as a child of TestSuiteCatchesMutants")
	}
	m, ok := mutants[name]
	require.True(t, ok, "unknown mutant %q", name)
	h := persistentHarness()
	if m.wrap == nil {
		h.Open = func(*testing.T) func(*testing.T) seqstore.Store {
			return func(*testing.T) seqstore.Store { return memstore.New() }
		}
	} else {
		open := h.Open
		h.Open = func(t *testing.T) func(*testing.T) seqstore.Store {
			fn := open(t)
			return func(t *testing.T) seqstore.Store { return m.wrap(fn(t)) }
		}
	}
	storetest.Run(t, h)
}

// TestSuiteCatchesMutants proves the suite can fail: each broken store must
// fail the subtest aimed at its bug.
func TestSuiteCatchesMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for name, m := range mutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestMutant$", "-test.v")
			cmd.Env = append(os.Environ(), mutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed a store with bug %q:\n%s", name, out)
			assert.Contains(t, string(out), "--- FAIL: TestMutant/"+m.catching+" ",
				"bug %q must fail subtest %s; output:\n%s", name, m.catching, out)
		})
	}
}

type offByOne struct{ seqstore.Store }

func (s offByOne) Reserve(ctx context.Context, st seqstore.Stream, n int, j [][]byte) (seqstore.Reservation, error) {
	r, err := s.Store.Reserve(ctx, st, n, j)
	if r.First > 1 {
		r.First++
	}
	return r, err
}

// nonAtomic applies each move of a batch on its own.
type nonAtomic struct{ seqstore.Store }

func (s nonAtomic) Advance(ctx context.Context, batch []seqstore.Advance) error {
	var conflict []seqstore.Stream
	for _, a := range batch {
		if err := s.Store.Advance(ctx, []seqstore.Advance{a}); err != nil {
			conflict = append(conflict, a.Stream)
		}
	}
	if conflict != nil {
		return &seqstore.ConflictError{Streams: conflict}
	}
	return nil
}

// ownerIgnored compares Epoch and Next but not Owner.
type ownerIgnored struct{ seqstore.Store }

func (s ownerIgnored) Advance(ctx context.Context, batch []seqstore.Advance) error {
	batch = slices.Clone(batch)
	for i := range batch {
		if c, err := s.Cursor(ctx, batch[i].Stream); err == nil {
			batch[i].From.Owner = c.Owner
		}
	}
	return s.Store.Advance(ctx, batch)
}

type contextIgnored struct{ seqstore.Store }

func (s contextIgnored) Reserve(_ context.Context, st seqstore.Stream, n int, j [][]byte) (seqstore.Reservation, error) {
	return s.Store.Reserve(context.Background(), st, n, j)
}

type unsorted struct{ seqstore.Store }

func (s unsorted) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	es, err := s.Store.Pending(ctx, queue)
	slices.Reverse(es)
	return es, err
}

type closeIgnored struct{ seqstore.Store }

func (closeIgnored) Close() error { return nil }

// skippedDropped loses To.Skipped.
type skippedDropped struct{ seqstore.Store }

func (s skippedDropped) Advance(ctx context.Context, batch []seqstore.Advance) error {
	batch = slices.Clone(batch)
	for i := range batch {
		batch[i].To.Skipped = nil
	}
	return s.Store.Advance(ctx, batch)
}

// sharedFate fails the call after a failed one, as a group commit that
// fails every caller of a batch for one bad member would.
type sharedFate struct {
	seqstore.Store
	failed atomic.Pointer[error]
}

func (s *sharedFate) Reserve(ctx context.Context, st seqstore.Stream, n int, j [][]byte) (seqstore.Reservation, error) {
	if err := s.failed.Swap(nil); err != nil {
		return seqstore.Reservation{}, *err
	}
	r, err := s.Store.Reserve(ctx, st, n, j)
	if err != nil {
		s.failed.Store(&err)
	}
	return r, err
}
