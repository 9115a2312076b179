package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

func persistentHarness() storetest.Harness {
	return storetest.Harness{
		Persistent: true,
		Shared:     true,
		Open:       storetest.OpenShared(func() seqstore.Store { return memstore.New() }),
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
	"non-atomic-reserve": {
		wrap:     func(s seqstore.Store) seqstore.Store { return nonAtomicReserve{s} },
		catching: "Reserve/Atomic",
	},
	"same-stream-overlap": {
		wrap:     func(s seqstore.Store) seqstore.Store { return sameStreamOverlap{s} },
		catching: "Reserve/SameStreamTwice",
	},
	"cursors-fail-together": {
		wrap:     func(s seqstore.Store) seqstore.Store { return cursorsFailTogether{s} },
		catching: "Cursor/InvalidFailsAlone",
	},
	"conflict-misnamed": {
		wrap:     func(s seqstore.Store) seqstore.Store { return conflictMisnamed{s} },
		catching: "Advance/AllOrNothing",
	},
	"lost-update": {
		// Compare, then write without holding anything: what a SQL store
		// without its row lock does across processes.
		wrap:     func(s seqstore.Store) seqstore.Store { return lostUpdate{s} },
		catching: "CrossInstance/Race",
	},
	"unpark-unsorted": {
		wrap:     func(s seqstore.Store) seqstore.Store { return unparkUnsorted{s.(parkerStore)} },
		catching: "Park/Unpark",
	},
	"unpark-max-ignored": {
		wrap:     func(s seqstore.Store) seqstore.Store { return unparkMaxIgnored{s.(parkerStore)} },
		catching: "Park/Unpark",
	},
	"park-not-atomic": {
		wrap:     func(s seqstore.Store) seqstore.Store { return parkNotAtomic{s.(parkerStore)} },
		catching: "Park/BelowCursor",
	},
	"unpark-shared-bytes": {
		wrap:     func(s seqstore.Store) seqstore.Store { return &unparkSharedBytes{parkerStore: s.(parkerStore)} },
		catching: "Park/Copies",
	},
	"parked-streams-unsorted": {
		wrap:     func(s seqstore.Store) seqstore.Store { return parkedStreamsUnsorted{s.(parkerStore)} },
		catching: "Park/ParkedStreams",
	},
	"park-context-ignored": {
		wrap:     func(s seqstore.Store) seqstore.Store { return parkContextIgnored{s.(parkerStore)} },
		catching: "Park/Cancelled",
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

func (s offByOne) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	rs, err := s.Store.Reserve(ctx, reqs)
	for i := range rs {
		if rs[i].First > 1 {
			rs[i].First++
		}
	}
	return rs, err
}

// nonAtomic applies each move of a batch on its own, and reports honestly
// which ones took effect.
type nonAtomic struct{ seqstore.Store }

func (s nonAtomic) Advance(ctx context.Context, batch []seqstore.Advance) error {
	errs := make([]error, len(batch))
	failed := false
	for i, a := range batch {
		if err := s.Store.Advance(ctx, []seqstore.Advance{a}); err != nil {
			errs[i], failed = seqstore.Failed(err, 0, 1), true
		}
	}
	if failed {
		return &seqstore.BatchError{Errs: errs}
	}
	return nil
}

// nonAtomicReserve makes one call per request, and reports honestly which
// ones took effect.
type nonAtomicReserve struct{ seqstore.Store }

func (s nonAtomicReserve) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	out := make([]seqstore.Reservation, len(reqs))
	errs := make([]error, len(reqs))
	failed := false
	for i, r := range reqs {
		rs, err := s.Store.Reserve(ctx, []seqstore.ReserveRequest{r})
		if err != nil {
			errs[i], failed = seqstore.Failed(err, 0, 1), true
			continue
		}
		out[i] = rs[0]
	}
	if failed {
		return nil, &seqstore.BatchError{Errs: errs}
	}
	return out, nil
}

// sameStreamOverlap gives every request of a stream the range of its first
// request in the call.
type sameStreamOverlap struct{ seqstore.Store }

func (s sameStreamOverlap) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	rs, err := s.Store.Reserve(ctx, reqs)
	first := map[seqstore.Stream]seqstore.Reservation{}
	for i := range rs {
		if r, ok := first[reqs[i].Stream]; ok {
			rs[i] = r
		} else {
			first[reqs[i].Stream] = rs[i]
		}
	}
	return rs, err
}

// cursorsFailTogether fails a whole Cursors call for one bad stream.
type cursorsFailTogether struct{ seqstore.Store }

func (s cursorsFailTogether) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	cs, err := s.Store.Cursors(ctx, streams)
	if err != nil {
		return nil, errors.New("cursors failed")
	}
	return cs, nil
}

// conflictMisnamed blames the first request of a conflicting batch.
type conflictMisnamed struct{ seqstore.Store }

func (s conflictMisnamed) Advance(ctx context.Context, batch []seqstore.Advance) error {
	err := s.Store.Advance(ctx, batch)
	var be *seqstore.BatchError
	if errors.As(err, &be) && errors.Is(err, seqstore.ErrConflict) {
		errs := make([]error, len(be.Errs))
		errs[0] = seqstore.ErrConflict
		return seqstore.Abort(errs)
	}
	return err
}

// lostUpdate compares the stored cursors itself, then writes over whatever
// is stored by then: two instances that compare before either writes both
// win.
type lostUpdate struct{ seqstore.Store }

func (s lostUpdate) Advance(ctx context.Context, batch []seqstore.Advance) error {
	streams := make([]seqstore.Stream, len(batch))
	for i, a := range batch {
		streams[i] = a.Stream
	}
	cur, err := s.Cursors(ctx, streams)
	if err != nil {
		return s.Store.Advance(ctx, batch)
	}
	errs := make([]error, len(batch))
	for i, a := range batch {
		if !cur[i].Same(a.From) {
			errs[i] = seqstore.ErrConflict
		}
	}
	if err := seqstore.Abort(errs); err != nil {
		return err
	}
	time.Sleep(time.Millisecond) // the window an unlocked read leaves open
	if cur, err = s.Cursors(ctx, streams); err != nil {
		return err
	}
	batch = slices.Clone(batch)
	for i := range batch {
		batch[i].From = cur[i]
	}
	return s.Store.Advance(ctx, batch)
}

// ownerIgnored compares Epoch and Next but not Owner.
type ownerIgnored struct{ seqstore.Store }

func (s ownerIgnored) Advance(ctx context.Context, batch []seqstore.Advance) error {
	batch = slices.Clone(batch)
	for i := range batch {
		if cs, err := s.Cursors(ctx, []seqstore.Stream{batch[i].Stream}); err == nil {
			batch[i].From.Owner = cs[0].Owner
		}
	}
	return s.Store.Advance(ctx, batch)
}

type contextIgnored struct{ seqstore.Store }

func (s contextIgnored) Reserve(_ context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	return s.Store.Reserve(context.Background(), reqs)
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

func (s *sharedFate) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if err := s.failed.Swap(nil); err != nil {
		return nil, *err
	}
	rs, err := s.Store.Reserve(ctx, reqs)
	if err != nil {
		s.failed.Store(&err)
	}
	return rs, err
}

// parkerStore is a Store that parks: the Share instances of memstore.
type parkerStore interface {
	seqstore.Store
	seqstore.Parker
}

// unparkUnsorted returns each query's entries in descending seq order.
type unparkUnsorted struct{ parkerStore }

func (s unparkUnsorted) Unpark(ctx context.Context, qs []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	out, err := s.parkerStore.Unpark(ctx, qs)
	for _, ps := range out {
		slices.Reverse(ps)
	}
	return out, err
}

// unparkMaxIgnored returns every entry from From on.
type unparkMaxIgnored struct{ parkerStore }

func (s unparkMaxIgnored) Unpark(ctx context.Context, qs []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	qs = slices.Clone(qs)
	for i := range qs {
		if qs[i].Max > 0 {
			qs[i].Max = 1 << 20
		}
	}
	return s.parkerStore.Unpark(ctx, qs)
}

// parkNotAtomic parks each entry on its own, and reports honestly which
// ones took effect.
type parkNotAtomic struct{ parkerStore }

func (s parkNotAtomic) Park(ctx context.Context, entries []seqstore.Parked) error {
	errs := make([]error, len(entries))
	failed := false
	for i, e := range entries {
		if err := s.parkerStore.Park(ctx, []seqstore.Parked{e}); err != nil {
			errs[i], failed = seqstore.Failed(err, 0, 1), true
		}
	}
	if failed {
		return &seqstore.BatchError{Errs: errs}
	}
	return nil
}

// unparkSharedBytes hands out the same body slice every time an entry is
// read, as a store returning its own bytes would.
type unparkSharedBytes struct {
	parkerStore
	mu   sync.Mutex
	seen map[string][]byte
}

func (s *unparkSharedBytes) Unpark(ctx context.Context, qs []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	out, err := s.parkerStore.Unpark(ctx, qs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string][]byte{}
	}
	for _, ps := range out {
		for i, p := range ps {
			k := fmt.Sprintf("%s %d %d", p.Stream, p.Epoch, p.Seq)
			if b, ok := s.seen[k]; ok && len(b) == len(p.Body) {
				ps[i].Body = b
			} else {
				s.seen[k] = p.Body
			}
		}
	}
	return out, err
}

type parkedStreamsUnsorted struct{ parkerStore }

func (s parkedStreamsUnsorted) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	ss, err := s.parkerStore.ParkedStreams(ctx, queue)
	slices.Reverse(ss)
	return ss, err
}

type parkContextIgnored struct{ parkerStore }

func (s parkContextIgnored) Park(_ context.Context, entries []seqstore.Parked) error {
	return s.parkerStore.Park(context.Background(), entries)
}
