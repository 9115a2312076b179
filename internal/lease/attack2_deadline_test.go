package lease_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inorder/inorder/internal/lease"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// lateRenewStore answers each Renew just before the keeper's local
// deadline (the previous proof's send time + RenewDeadline), as a store
// that is slow but in time.
type lateRenewStore struct {
	*memstore.Store
	within time.Duration // RenewDeadline
	mu     sync.Mutex
	proof  time.Time // when the last Acquire or Renew arrived
	// prompt makes Renew answer at once: a store back to normal.
	prompt atomic.Bool
}

func (s *lateRenewStore) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	s.mu.Lock()
	s.proof = time.Now()
	s.mu.Unlock()
	return s.Store.Acquire(ctx, ns, shards, owner, ttl)
}

func (s *lateRenewStore) Renew(_ context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	s.mu.Lock()
	target := s.proof.Add(s.within - time.Duration(rand.IntN(150_000))*time.Nanosecond)
	s.proof = time.Now()
	s.mu.Unlock()
	lost, err := s.Store.Renew(context.Background(), ns, held, ttl)
	for !s.prompt.Load() && time.Now().Before(target) {
		if time.Until(target) > 300*time.Microsecond {
			time.Sleep(time.Until(target) - 250*time.Microsecond)
		}
	}
	return lost, err
}

// watched is the shard whose lease the test checks: the last of
// seqstore.MaxShards, whose grant the keeper publishes last.
const watched = seqstore.MaxShards - 1

// lateCheckRecv is a lease.Receiver whose shards check the lease as
// scaleout's leaseCheck does (time.Now() against Keeper.Deadline), in a
// loop, and stop for good the first time it fails, as an ordered.Queue
// with ReceiveOptions.Lease does.
type lateCheckRecv struct {
	k       atomic.Pointer[lease.Keeper]
	st      *lateRenewStore
	mu      sync.Mutex
	dead    map[uint64]bool // tokens whose check failed
	fenced  map[uint64]bool
	current map[int]uint64
	stop    chan struct{}
	wg      sync.WaitGroup
}

func (r *lateCheckRecv) Start(l seqstore.Lease) {
	r.mu.Lock()
	r.current[l.Shard] = l.Token
	r.mu.Unlock()
	if l.Shard != watched {
		return
	}
	r.wg.Go(func() {
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			k := r.k.Load()
			if k == nil {
				continue
			}
			if !time.Now().Before(k.Deadline(l.Shard, l.Token)) {
				k.Expired(l.Shard, l.Token) // as scaleout's leaseCheck does
				r.mu.Lock()
				r.dead[l.Token] = true
				r.mu.Unlock()
				r.st.prompt.Store(true) // the store recovers
				return
			}
			runtime.Gosched()
		}
	})
}

func (r *lateCheckRecv) Revoke(shard int) {
	if k := r.k.Load(); k != nil {
		k.Drained(shard)
	}
}

func (r *lateCheckRecv) Fence(shard int) {
	if shard != watched {
		return
	}
	r.mu.Lock()
	r.fenced[r.current[shard]] = true
	r.mu.Unlock()
}

// TestAttack2DeadlineCheckSeesExpiryTheKeeperDoesNot: a shard's Queue
// checks its lease (scaleout's leaseCheck: time.Now() against the
// deadline the keeper published) and, once the check fails, hands out and
// settles nothing for good (ordered.ReceiveOptions.Lease is sticky); its
// Run returns, and scaleout logs nothing for an ErrFenced end. The keeper
// extends the deadline when a Renew answers in time, judged by the loop's
// time.Now() when it handles the answer (Core.RenewDone via ev(now)), and
// publishes it only on the loop's next turn (publish). A check that runs
// between the two, after the old deadline passed, fails, while the core,
// which saw the renewal in time, never fences: the keeper keeps the
// shard, renews it for good, and never starts it again. What a user sees:
// with a store whose Renew answers close to RenewDeadline (a slow or
// loaded store), a shard now and then stops being handled, silently,
// until the member restarts: its groups pile up, nobody else may take
// them. Cause: the deadline the Queue reads and the one the core judges
// by are not the same decision: the check is sticky, the keeper's
// extension is not visible atomically with its judgement. Suggested fix:
// when the shard's Queue ends on a lease failure the keeper did not
// fence, fence it in the keeper (Receiver notices q.Run's ErrFenced and
// tells the keeper, which gives the lease up and acquires anew), or
// publish the extended deadline before the core judges (publish the
// outcome in the event's own step, compare against the event's now), or
// make the local check non-sticky within a grace the store's TTL allows.
//
// The test: a store whose Renew answers 0-150 µs before the deadline (the
// store's work done first), 1024 shards held (the watched one, the last,
// is published last, which widens the window to publish's loop), and a
// check spinning on the last shard as a busy Queue does; once a check
// failed, the store answers at once again (a store back to normal), and
// the keeper either fences that token (consistent: the test goes on) or
// keeps renewing it. When written, it failed within 2 s in every run, the
// check having seen the time 60-100 ns past the published deadline (15 s
// without a hit passes).
func TestAttack2DeadlineCheckSeesExpiryTheKeeperDoesNot(t *testing.T) {
	if raceEnabled {
		// It spins a core for seconds against a 1,024-shard keeper, a
		// timing race the detector's slowdown hides; .ci/run runs it
		// without -race. (Under -race it once drew a report of its own:
		// a Start's wg.Go racing the test's wg.Wait, since the keeper was
		// closed after the wait; it is closed first now.)
		t.Skip("timing stress test: run without -race (.ci/run does)")
	}
	const within = 30 * time.Millisecond
	st := &lateRenewStore{Store: memstore.New(), within: within}
	recv := &lateCheckRecv{dead: map[uint64]bool{}, fenced: map[uint64]bool{}, current: map[int]uint64{}, stop: make(chan struct{}), st: st}
	k, err := lease.New(st, "ns", seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}, seqstore.MaxShards, recv, &lease.Options{
		TTL: 200 * time.Millisecond, RenewEvery: 20 * time.Millisecond, RetryPeriod: 10 * time.Millisecond,
		RenewDeadline: within, RebalanceDelay: 10 * time.Millisecond, CloseDrain: time.Second,
		OnError: func(kind lease.Kind, err error) { t.Logf("%v: %v", kind, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	recv.k.Store(k)
	end := time.Now().Add(5 * time.Second)
	var stuck uint64
	for time.Now().Before(end) && stuck == 0 {
		time.Sleep(50 * time.Millisecond)
		if !st.prompt.Load() {
			continue
		}
		// A check failed and the store answers at once since: either the
		// keeper fenced that token (consistent; try again), or it keeps it.
		time.Sleep(300 * time.Millisecond)
		recv.mu.Lock()
		for tok := range recv.dead {
			if !recv.fenced[tok] && k.Deadline(watched, tok).After(time.Now()) {
				stuck = tok
			}
		}
		recv.mu.Unlock()
		st.prompt.Store(false)
	}
	close(recv.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = k.Close(ctx) // no Start after it returns: wg.Go never races wg.Wait
	recv.wg.Wait()
	recv.mu.Lock()
	t.Logf("checks failed for %d tokens, %d tokens fenced, token now %d", len(recv.dead), len(recv.fenced), recv.current[watched])
	recv.mu.Unlock()
	if stuck != 0 {
		t.Fatalf("the shard's lease check failed for token %d (its Queue stops for good) while the keeper never fenced it and, the store back to prompt answers, still holds and renews it 300 ms later", stuck)
	}
}
