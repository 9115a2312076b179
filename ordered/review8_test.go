package ordered_test

import (
	"context"
	"github.com/inorder/inorder/seqstore"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
)

// TestReview8RecoverCopiesInFlightAfterGap: Recover's doc says "Messages in
// flight in this process are left alone". A reservation whose answer was
// lost leaves a gap in the group's seqs; the group's next reservation
// (First != hi+1) resets the group's known range to its own seqs, so a
// message of this process still in flight below that gap is no longer
// recognised: Recover sends a copy of it and counts it.
func TestReview8RecoverCopiesInFlightAfterGap(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	block := make(chan struct{})
	d.block = block
	store := &gateStore{testStore: newTestStore(), entered: make(chan struct{}, 1)}
	q := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Millisecond}})

	first, err := q.SendAsync(ctx, "g", []byte("inflight")) // seq 1, blocked in the driver
	require.NoError(t, err)
	require.Eventually(t, func() bool { return d.calls.Load() > 0 }, 5*time.Second, time.Millisecond)

	store.lose.Store(true) // seq 2: applied, answer lost
	r, err := q.SendAsync(ctx, "g", []byte("lost"))
	require.NoError(t, err)
	require.ErrorIs(t, r.Wait(ctx), errAnswerLost)

	third, err := q.SendAsync(ctx, "g", []byte("third")) // seq 3: the range restarts at 3
	require.NoError(t, err)
	require.Eventually(t, func() bool { return store.reservations() >= 3 }, 5*time.Second, time.Millisecond)
	time.Sleep(10 * time.Millisecond) // its reservation call ends

	time.AfterFunc(50*time.Millisecond, func() { close(block) })
	n, err := q.Recover(ctx)
	require.NoError(t, err)
	require.NoError(t, first.Wait(ctx))
	require.NoError(t, third.Wait(ctx))
	d.mu.Lock()
	copies := 0
	for b, k := range d.attempts {
		if k > 1 {
			copies++
			t.Logf("body sent %d times: %q", k, b)
		}
	}
	d.mu.Unlock()
	assert.Equal(t, 1, n, "Recover sends the lost reservation's entry only, not the in-flight seq 1")
	assert.Zero(t, copies, "no in-flight message is sent twice")
}

// oldEntryStore lists, once old is set, one extra journal entry of group
// "g" in another epoch: an earlier process's, never sent.
type oldEntryStore struct {
	*testStore
	old atomic.Bool
}

func (s *oldEntryStore) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	out, err := s.testStore.Pending(ctx, queue)
	if err != nil || !s.old.Load() {
		return out, err
	}
	return append([]seqstore.Entry{{Stream: seqstore.Stream{Queue: queue, Group: "g"}, Epoch: 7, Seq: 1, Body: []byte("old")}}, out...), nil
}

// TestReview8RecoverBusyGroupLivelock (held up): a group that reserves continuously
// (its senders never stop), with an earlier process's entry in another
// epoch. Recover defers the entry while the group is in a reservation and
// looks again when a reservation call ends; if the group's next call has
// begun by then, it defers again.
func TestReview8RecoverBusyGroupLivelock(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	ts := newTestStore()
	ts.delay = time.Millisecond
	store := &oldEntryStore{testStore: ts}
	q := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Millisecond}})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := q.SendAsync(ctx, "g", []byte(strconv.Itoa(w*1000000+i))); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	store.old.Store(true)
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	n, err := q.Recover(rctx)
	el := time.Since(start)
	close(stop)
	wg.Wait()
	t.Logf("Recover: n=%d err=%v after %v; reservations %d", n, err, el, ts.reservations())
	require.NoError(t, err, "Recover while a group reserves continuously")
	assert.Equal(t, 1, n)
}

// TestReview8CloseWhileRecoverWaits (held up): Recover waits for a
// reservation held in the store; Close gives up on it after its ctx, which
// ends the reservation; Recover returns ErrClosed and Close returns.
func TestReview8CloseWhileRecoverWaits(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	store, q := lostAnswer(t, ctx, d)
	gate := make(chan struct{}) // never opened
	store.gate.Store(&gate)
	_, err := q.SendAsync(ctx, "g", []byte("next"))
	require.NoError(t, err)
	<-store.entered
	type res struct {
		n   int
		err error
	}
	rec := make(chan res, 1)
	go func() {
		n, err := q.Recover(ctx)
		rec <- res{n, err}
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case r := <-rec:
		t.Fatalf("Recover returned while the reservation is held: %d, %v", r.n, r.err)
	default:
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- q.Close(cctx) }()
	select {
	case err := <-closed:
		t.Logf("Close: %v", err)
	case <-time.After(3 * time.Second):
		t.Fatal("Close hangs while Recover waits")
	}
	select {
	case r := <-rec:
		t.Logf("Recover: %d, %v", r.n, r.err)
		require.ErrorIs(t, r.err, ordered.ErrClosed)
	case <-time.After(3 * time.Second):
		t.Fatal("Recover hangs after Close")
	}
}

// interleavedStore lists the journal sorted by seq, then group: one
// group's entries are not contiguous.
type interleavedStore struct {
	*gateStore
}

func (s *interleavedStore) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	out, err := s.testStore.Pending(ctx, queue)
	slices.SortStableFunc(out, func(a, b seqstore.Entry) int {
		if a.Seq != b.Seq {
			return int(a.Seq) - int(b.Seq)
		}
		return strings.Compare(a.Stream.Group, b.Stream.Group)
	})
	return out, err
}

// TestReview8RecoverPinsInterleavedAndCancelled (held up): two groups
// reserving, their journal entries interleaved; one Recover waits and is
// cancelled, the next waits and finishes. Every pin is undone: once the
// sends complete, no group is left.
func TestReview8RecoverPinsInterleavedAndCancelled(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	gs := &gateStore{testStore: newTestStore(), entered: make(chan struct{}, 1)}
	store := &interleavedStore{gs}
	q := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Millisecond}})
	// Journal entries of a and b: applied, answers lost (one call each).
	for _, g := range []string{"a", "b", "a", "b"} {
		gs.lose.Store(true)
		r, err := q.SendAsync(ctx, g, []byte("lost-"+g))
		require.NoError(t, err)
		require.ErrorIs(t, r.Wait(ctx), errAnswerLost)
	}
	gs.after = true
	gate := make(chan struct{})
	gs.gate.Store(&gate)
	var wg sync.WaitGroup
	for _, g := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, q.SendBatch(ctx, g, [][]byte{[]byte("x-" + g)}))
		}()
	}
	<-gs.entered
	time.Sleep(5 * time.Millisecond)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	n, err := q.Recover(rctx)
	t.Logf("cancelled Recover: %d, %v", n, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(gate)
	wg.Wait() // a second call, if a and b were not in one, said so in entered's buffer
	select {
	case <-gs.entered:
	default:
	}
	gs.gate.Store(nil)
	require.Eventually(t, func() bool { return q.Stats().Send.InFlight == 0 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, q.Stats().Send.Groups, "a cancelled Recover left a group pinned")
	n2, err := q.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n+n2, "the four lost entries")
	require.Eventually(t, func() bool { return q.Stats().Send.InFlight == 0 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, q.Stats().Send.Groups, "no group left pinned")
	assert.ElementsMatch(t, []string{"lost-a", "lost-a", "x-a"}, payloadsOf(d, "a"))
	assert.ElementsMatch(t, []string{"lost-b", "lost-b", "x-b"}, payloadsOf(d, "b"))
	checkStreams(t, d)
}

// TestReview8RecoverWaitStopsSentMarks: Recover holds flushMu while it
// waits for a reservation in progress, which may take as long as the store
// call does. Meanwhile the marker cannot flush the Sent marks of any
// group: messages of other groups, sent and accepted, stay journaled (a
// crash re-sends them all) for the whole wait, although MarkInterval is
// 1 ms.
func TestReview8RecoverWaitStopsSentMarks(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	block := make(chan struct{})
	d.block = block
	store, q := lostAnswer(t, ctx, d)
	var hs []*ordered.SendResult
	for i := range 50 {
		r, err := q.SendAsync(ctx, "h", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		hs = append(hs, r)
	}
	require.Eventually(t, func() bool { return d.calls.Load() > 0 }, 5*time.Second, time.Millisecond, "h's sends reach the driver")
	// Every h message reserved before the gate, which holds every Reserve.
	require.Eventually(t, func() bool { return store.journalLen() == 51 }, 5*time.Second, time.Millisecond, "lost and h's 50 journaled")
	gate := make(chan struct{})
	store.gate.Store(&gate)
	next, err := q.SendAsync(ctx, "g", []byte("next"))
	require.NoError(t, err)
	<-store.entered
	rec := make(chan error, 1)
	go func() { _, err := q.Recover(ctx); rec <- err }()
	time.Sleep(10 * time.Millisecond) // Recover waits for g's reservation
	close(block)                      // h's messages are accepted
	for _, r := range hs {
		require.NoError(t, r.Wait(ctx))
	}
	time.Sleep(300 * time.Millisecond) // 300 mark intervals
	unmarked, journal := q.Stats().Send.Unmarked, store.journalLen()
	close(gate)
	require.NoError(t, <-rec)
	require.NoError(t, next.Wait(ctx))
	assert.Zero(t, unmarked, "Sent marks of group h, accepted 300 ms ago, were not flushed while Recover waited for g's reservation (journal: %d entries)", journal)
}

// TestReview8SecondRecoverIgnoresCtx: Recover takes flushMu without
// looking at its ctx, and a first Recover now holds it while it waits for
// a reservation in progress (as long as the store call takes). A second
// Recover whose ctx ends after 50 ms does not return until the first one
// is done: its deadline is not honoured.
func TestReview8SecondRecoverIgnoresCtx(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	store, q := lostAnswer(t, ctx, d)
	gate := make(chan struct{})
	store.gate.Store(&gate)
	next, err := q.SendAsync(ctx, "g", []byte("next"))
	require.NoError(t, err)
	<-store.entered
	first := make(chan error, 1)
	go func() { _, err := q.Recover(ctx); first <- err }()
	time.Sleep(10 * time.Millisecond) // the first Recover waits for g's reservation
	time.AfterFunc(2*time.Second, func() { close(gate) })
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = q.Recover(sctx)
	el := time.Since(start)
	t.Logf("second Recover: %v after %v", err, el)
	require.NoError(t, <-first)
	require.NoError(t, next.Wait(ctx))
	assert.Less(t, el, 500*time.Millisecond, "a Recover whose ctx ended after 50 ms returned only after %v", el)
}
