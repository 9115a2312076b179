package ordered_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/seqstore"
)

var errReserveTimeout = errors.New("test: reserve timed out (the store applies it later)")

// recoverOpening runs Recover while a reservation waits at gate, which it
// opens 20 ms later: Recover waits for a reservation in progress whose
// entries it cannot place yet.
func recoverOpening(ctx context.Context, q *ordered.Queue, gate chan struct{}) (int, error) {
	time.AfterFunc(20*time.Millisecond, func() { close(gate) })
	return q.Recover(ctx)
}

// lateStore models a reservation that times out on the client while the
// store still applies it a moment later (a SQL COMMIT or a Redis script
// already on the wire when the ctx ended). With late set, the next Reserve
// returns errReserveTimeout at once and is applied by apply; otherwise it
// is a gateStore's.
type lateStore struct {
	*gateStore
	late atomic.Bool

	mu    sync.Mutex
	stash []seqstore.ReserveRequest
}

func (s *lateStore) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if s.late.CompareAndSwap(true, false) {
		s.mu.Lock()
		for _, r := range reqs {
			j := make([][]byte, len(r.Journal))
			for i, b := range r.Journal {
				j[i] = slices.Clone(b)
			}
			s.stash = append(s.stash, seqstore.ReserveRequest{Stream: r.Stream, N: r.N, Journal: j})
		}
		s.mu.Unlock()
		return nil, errReserveTimeout
	}
	return s.gateStore.Reserve(ctx, reqs)
}

// apply applies the reservations that timed out.
func (s *lateStore) apply(ctx context.Context) error {
	s.mu.Lock()
	reqs := s.stash
	s.stash = nil
	s.mu.Unlock()
	_, err := s.testStore.Reserve(ctx, reqs)
	return err
}

// TestReview7RecoverAfterReserveTimeoutAppliedLate: a reservation times
// out and the store applies it just after. A Recover run in between finds
// nothing journaled yet. Once the entry is journaled, a Recover run while
// the group's next reservation is in the store must send it (review7 #1:
// on f479326 it skipped it as that reservation's and returned 0, nil, a
// hole until some later Recover happened to run outside a reservation).
func TestReview7RecoverAfterReserveTimeoutAppliedLate(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	store := &lateStore{gateStore: &gateStore{testStore: newTestStore(), entered: make(chan struct{}, 1)}}
	store.late.Store(true)
	q := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Millisecond}})

	r, err := q.SendAsync(ctx, "g", []byte("lost"))
	require.NoError(t, err)
	require.ErrorIs(t, r.Wait(ctx), errReserveTimeout)

	// The application reacts to the failure at once: nothing journaled yet.
	n, err := q.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing journaled yet")

	// The store applies the timed-out reservation: "lost" is journaled.
	require.NoError(t, store.apply(ctx))

	gate := make(chan struct{})
	store.gate.Store(&gate)
	next, err := q.SendAsync(ctx, "g", []byte("next"))
	require.NoError(t, err)
	select {
	case <-store.entered:
	case <-ctx.Done():
		t.Fatal("the second send's reservation never reached the store")
	}
	n, err = recoverOpening(ctx, q, gate)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "Recover must send the journaled entry of the failed send whose reservation the store applied")
	require.NoError(t, next.Wait(ctx))
	payloads := payloadsOf(d, "g")
	assert.Equal(t, []string{"lost", "next"}, payloads, "after Recover returned nil, the group has a hole at seq 1")
}

// TestReview7RecoverOrphanGroupResendsInFlight: Recover's doc says
// "Messages in flight in this process are left alone" and that it returns
// "how many messages it sent again". After a reservation whose answer was
// lost, with the group's next reservation applied and its answer on its
// way, Recover sends the lost one's entry only (review7 #2: on f479326 it
// sent the in-flight batch's too, counted them, and the queue got each
// twice). Five rounds: a Recover that looks again at a group evicted as
// its batch completes (mutant recover-wait-unpinned) does so in about 9
// runs of 10.
func TestReview7RecoverOrphanGroupResendsInFlight(t *testing.T) {
	for round := range 5 {
		t.Run(strconv.Itoa(round), review7RecoverOrphanGroup)
	}
}

func review7RecoverOrphanGroup(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	store, q := lostAnswer(t, ctx, d)

	store.after = true // the next reservation is applied, its answer held
	gate := make(chan struct{})
	store.gate.Store(&gate)
	done := make(chan error, 1)
	go func() {
		done <- q.SendBatch(ctx, "g", [][]byte{[]byte("b1"), []byte("b2"), []byte("b3")})
	}()
	select {
	case <-store.entered:
	case <-ctx.Done():
		t.Fatal("the batch's reservation never reached the store")
	}
	n, err := recoverOpening(ctx, q, gate)
	require.NoError(t, err)
	require.NoError(t, <-done)
	assert.Equal(t, 1, n, "Recover sends the orphan only; the batch in flight is left alone")
	payloads := payloadsOf(d, "g")
	assert.Equal(t, []string{"lost", "b1", "b2", "b3"}, payloads, "each message once")
}

// TestReview7RecoveredCopyFails: the entry of a reservation whose answer
// was lost, sent by Recover, fails; the next Recover sends it, and the
// recovery book ends empty with the journal.
func TestReview7RecoveredCopyFails(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	var failCopies atomic.Bool
	d.fail = func(call int, bodies [][]byte) error {
		if failCopies.Load() {
			return errPermanent
		}
		return nil
	}
	store, q := lostAnswer(t, ctx, d)
	failCopies.Store(true)
	_, err := q.Recover(ctx)
	require.ErrorIs(t, err, errPermanent, "the copy fails")
	assert.Equal(t, 1, ordered.Review7RecoveryBook(q), "the failed copy is recorded")
	failCopies.Store(false)
	n, err := q.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"lost"}, payloadsOf(d, "g"))
	require.Eventually(t, func() bool { return store.journalLen() == 0 }, 5*time.Second, time.Millisecond, "the journal empties")
	assert.Zero(t, ordered.Review7RecoveryBook(q), "nothing left in the recovery book")
}

func payloadsOf(d *sendDriver, group string) []string {
	var out []string
	for _, m := range d.byGroup()[group] {
		out = append(out, m.Payload)
	}
	return out
}

// lossyStore loses the answer of a random share of Reserve calls after
// applying them (several groups per call), and holds calls at a gate.
type lossyStore struct {
	*testStore
	mu      sync.Mutex
	n       int
	gate    atomic.Pointer[chan struct{}]
	entered atomic.Int64
}

func (s *lossyStore) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if g := s.gate.Load(); g != nil {
		s.entered.Add(1)
		<-*g
		return s.testStore.Reserve(ctx, reqs)
	}
	res, err := s.testStore.Reserve(ctx, reqs)
	s.mu.Lock()
	s.n++
	lose := s.n%7 == 3
	s.mu.Unlock()
	if err == nil && lose {
		return nil, errAnswerLost
	}
	return res, err
}

// TestReview7LossyMultiGroupRecoverDuringReserve (held up): many groups,
// reservation calls of several groups whose answers are lost at random,
// concurrent Recovers; then one Recover while every group's next
// reservation is held in the store must fill every hole.
func TestReview7LossyMultiGroupRecoverDuringReserve(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	store := &lossyStore{testStore: newTestStore()}
	q := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Millisecond}})
	const groups, per = 16, 60
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = q.Recover(ctx)
			time.Sleep(time.Millisecond)
		}
	}()
	for g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				r, err := q.SendAsync(ctx, "g"+strconv.Itoa(g), []byte(strconv.Itoa(i)))
				if err == nil && i%5 == 4 {
					_ = r.Wait(ctx)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	require.Eventually(t, func() bool { return q.Stats().Send.InFlight == 0 }, 5*time.Second, time.Millisecond)
	gate := make(chan struct{})
	store.gate.Store(&gate)
	var last []*ordered.SendResult
	for g := range groups {
		r, err := q.SendAsync(ctx, "g"+strconv.Itoa(g), []byte("last"))
		require.NoError(t, err)
		last = append(last, r)
	}
	require.Eventually(t, func() bool { return store.entered.Load() > 0 }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	_, err := recoverOpening(ctx, q, gate)
	require.NoError(t, err)
	for _, r := range last {
		require.NoError(t, r.Wait(ctx))
	}
	// Copies (same epoch and seq) are allowed: receivers drop them. Holes
	// are not: every seq the store handed out must have been sent.
	for g, msgs := range d.byGroup() {
		seen := map[uint64]bool{}
		for _, m := range msgs {
			seen[m.Seq] = true
		}
		var last uint64
		store.testStore.mu.Lock()
		for st, ts := range store.streams {
			if st.Group == g {
				last = ts.next - 1
			}
		}
		store.testStore.mu.Unlock()
		for seq := uint64(1); seq <= last; seq++ {
			assert.True(t, seen[seq], "group %q: seq %d of %d never sent", g, seq, last)
		}
	}
}
