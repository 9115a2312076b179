package mnsqueue_test

// Attack on 843e11d (ExactlyOnce over MNS FIFO queues: the receiver pins a
// fresh group's first cursor so that an early arrival can park).

import (
	"context"
	"fmt"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/stretchr/testify/assert"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// End to end of TestAttackEOEpochZeroPinStalls (internal/recvcore): a
// producer that writes epoch-0 headers (the "#<seq>#" form of the MNS
// ordered-queue sample, which ordered accepts as the legacy format, or a
// tagged header with epoch 0) sends to an MNS FIFO queue (MessageGroupId
// "m"): 1, 2, then 4 before 3. ExactlyOnce receives 1 and 2; 4 arrives
// first (the service holds 3 behind it), parks, and pin, which takes the
// stored cursor 0/3 for "none" (g.dur.Epoch == 0), forces a commit with
// nothing to write: the group hands out nothing more, 3 never comes. A
// control with epoch 7 receives all four. Before 843e11d New refused
// ExactlyOnce on a FIFO queue. The AtLeastOnce subtests fail too (not
// 843e11d's doing: msg.stored in park.go is `g.dur.Epoch != 0`, so an
// epoch-0 group's park never goes out; see recvcore
// TestAttackEOEpochZeroParkNeverGoesALO).
func TestAttackEOFIFOEpochZeroStalls(t *testing.T) {
	for _, c := range []struct {
		kind string
		mode ordered.Mode
	}{{"epoch7", ordered.ExactlyOnce}, {"legacy", ordered.ExactlyOnce}, {"epoch0", ordered.ExactlyOnce}, {"legacy", ordered.AtLeastOnce}, {"epoch0", ordered.AtLeastOnce}} {
		kind, mode := c.kind, c.mode
		t.Run(fmt.Sprint(kind, "/", mode), func(t *testing.T) {
			srv := newServer(t, nil)
			name := newFIFO(t, srv, 5)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
			require.NoError(t, err)
			defer drv.Close()
			body := func(seq uint64) []byte {
				switch kind {
				case "legacy":
					return []byte(fmt.Sprintf("#%d#payload %d", seq, seq))
				case "epoch0":
					return envelope.Append(nil, envelope.Header{Group: "m", Epoch: 0, Seq: seq}, []byte(fmt.Sprint(seq)))
				}
				return envelope.Append(nil, envelope.Header{Group: "m", Epoch: 7, Seq: seq}, []byte(fmt.Sprint(seq)))
			}
			for _, s := range []uint64{1, 2, 4, 3} {
				require.NoError(t, drv.SendGroups(ctx, [][]byte{body(s)}, []string{"m"}))
			}
			store := memstore.New()
			rx, err := ordered.New(ctx, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{Mode: mode, Wait: time.Second}})
			require.NoError(t, err)
			defer func() {
				cctx, c := context.WithTimeout(context.Background(), 10*time.Second)
				defer c()
				_ = rx.Close(cctx)
			}()
			var got []uint64
			for len(got) < 4 {
				rctx, c := context.WithTimeout(ctx, 15*time.Second)
				m, err := rx.Receive(rctx)
				c()
				if err != nil {
					gs, _ := srv.Groups(name)
					t.Fatalf("%s: received seqs %v, then nothing for 15s (%v); service groups: %+v", kind, got, err, gs)
				}
				got = append(got, m.Seq)
				if mode == ordered.ExactlyOnce {
					require.NoError(t, store.Advance(ctx, []seqstore.Advance{m.CursorAdvance()}))
				}
				require.NoError(t, m.Ack(ctx))
			}
			require.Equal(t, []uint64{1, 2, 3, 4}, got)
		})
	}
}

// Two ExactlyOnce receivers on one FIFO queue and one store (faults on:
// redeliveries and 5xx), 20 groups x 30 sent pipelined (early arrivals, so
// pins and parks), then a third receiver after the first two closed half
// way. Every group must see 1..n in order, each accepted once (the
// application's CursorAdvance is the proof: a refused one is not
// counted), within the time.
func TestAttackEOFIFOTwoReceiversAndRestart(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	const groups, n = 20, 30
	srv := newServer(t, &mnstest.Options{Seed: 11, Faults: mnstest.Faults{Redeliver: 0.05, Error5xx: 0.02}})
	name := newFIFO(t, srv, 5)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	open := func(o *ordered.Options, store seqstore.Store) (*ordered.Queue, func()) {
		drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), &mnsqueue.Options{QueueType: mnsqueue.QueueTypeFIFO})
		require.NoError(t, err)
		q, err := ordered.New(ctx, drv, store, o)
		require.NoError(t, err)
		var once sync.Once
		closeQ := func() {
			once.Do(func() {
				cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				assert.NoError(t, q.Close(cctx))
				assert.NoError(t, drv.Close())
			})
		}
		t.Cleanup(closeQ)
		return q, closeQ
	}
	tx, _ := open(nil, memstore.New())
	rxStore := memstore.New()
	ro := &ordered.Options{Receive: ordered.ReceiveOptions{Mode: ordered.ExactlyOnce, Wait: time.Second, Concurrency: 8}}
	rec := newGroupRecorder(groups * n)
	var refused atomic.Int64
	rec.apply = func(ctx context.Context, m *ordered.Message) error {
		err := rxStore.Advance(ctx, []seqstore.Advance{m.CursorAdvance()})
		if err != nil {
			refused.Add(1)
		}
		return err
	}
	rx1, close1 := open(ro, rxStore)
	rx2, close2 := open(ro, rxStore)
	// The first two run until half is handled, then close.
	half := make(chan struct{})
	go func() {
		for rec.total.Load() < groups*n/2 {
			time.Sleep(10 * time.Millisecond)
		}
		close(half)
	}()
	runTill := func(q *ordered.Queue, stop <-chan struct{}) chan error {
		errc := make(chan error, 1)
		rctx, c := context.WithCancel(ctx)
		go func() {
			select {
			case <-stop:
			case <-rec.done:
			case <-ctx.Done():
			}
			c()
		}()
		go func() { errc <- q.Run(rctx, rec.handle) }()
		return errc
	}
	e1 := runTill(rx1, half)
	e2 := runTill(rx2, half)
	sendGroups(t, ctx, tx, groups, n, 4)
	require.NoError(t, <-e1)
	require.NoError(t, <-e2)
	close1()
	close2()
	t.Logf("after the first two: handled %d, refused advances %d", rec.total.Load(), refused.Load())
	rx3, _ := open(ro, rxStore)
	err := runUntil(rx3, rec, 60*time.Second)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("handled %d of %d, refused advances %d", rec.total.Load(), groups*n, refused.Load())
	require.NoError(t, err)
	assert.Empty(t, rec.bad, "out-of-order, duplicate or unordered deliveries")
	for g, last := range rec.next {
		assert.Equal(t, n, last, "last body of group %s", g)
	}
}

// Restart around the pin: seq 2 reaches the FIFO queue before seq 1
// (swapFirst); a first ExactlyOnce receiver runs one Receive with a short
// deadline (the pin, the park of 2, maybe the hand-out of 1) and closes;
// a second one, on the same store, receives the rest. 1 and 2 are each
// handled once, in order, with no refused advance.
func TestAttackEOFIFORestartAroundPin(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for _, first := range []time.Duration{time.Millisecond, 3 * time.Millisecond, 6 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(first.String(), func(t *testing.T) {
			srv := newServer(t, nil)
			name := newFIFO(t, srv, 3)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
			require.NoError(t, err)
			defer drv.Close()
			tx, err := ordered.New(ctx, &swapFirst{Queue: drv}, memstore.New(), nil)
			require.NoError(t, err)
			defer tx.Close(context.Background())
			require.NoError(t, tx.Send(ctx, "g", []byte("1")))
			require.NoError(t, tx.Send(ctx, "g", []byte("2")))

			store := memstore.New()
			var got []uint64
			refused := 0
			handle := func(m *ordered.Message) {
				if err := store.Advance(ctx, []seqstore.Advance{m.CursorAdvance()}); err != nil {
					refused++
					require.NoError(t, m.Nack(ctx, err))
					return
				}
				got = append(got, m.Seq)
				require.NoError(t, m.Ack(ctx))
			}
			opts := &ordered.Options{Receive: ordered.ReceiveOptions{Mode: ordered.ExactlyOnce, Wait: time.Second}}
			rx1, err := ordered.New(ctx, drv, store, opts)
			require.NoError(t, err)
			rctx, c := context.WithTimeout(ctx, first)
			if m, err := rx1.Receive(rctx); err == nil {
				handle(m)
			}
			c()
			cctx, c2 := context.WithTimeout(ctx, 10*time.Second)
			require.NoError(t, rx1.Close(cctx))
			c2()
			t.Logf("first receiver: %v", got)
			rx2, err := ordered.New(ctx, drv, store, opts)
			require.NoError(t, err)
			defer func() {
				cctx, c := context.WithTimeout(context.Background(), 10*time.Second)
				defer c()
				_ = rx2.Close(cctx)
			}()
			for len(got) < 2 {
				rctx, c := context.WithTimeout(ctx, 15*time.Second)
				m, err := rx2.Receive(rctx)
				c()
				if err != nil {
					gs, _ := srv.Groups(name)
					t.Fatalf("received %v, then nothing for 15s (%v); service groups: %+v", got, err, gs)
				}
				handle(m)
			}
			require.Equal(t, []uint64{1, 2}, got)
			require.Zero(t, refused)
		})
	}
}

// End to end of recvcore TestAttackEOConflictNackStoreUnchanged
// (early=false), over an emulator FIFO queue: the application's first
// attempt at g/1 fails with an error wrapping seqstore.ErrConflict while
// g's cursor did not move (its store call also carried another group's
// advance, which conflicted: a *BatchError wraps ErrConflict for every
// entry). It Nacks with that error, as Message.Nack's doc invites. g/1
// must come back and be handled. Seen: nothing more is delivered (15 s):
// the Core left g.next at 2, so g/1 back from the queue is taken for a
// duplicate of a handled seq, kept until a cursor past it is durable
// (never: nothing else of g is handed out), and the service holds g/2
// behind it. On a standard queue the same state loses g/1 (the core test:
// g/2 arrives, is handed out from the zero cursor, the copy of g/1 is
// deleted).
func TestAttackEOFIFOConflictNackLosesMessage(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	srv := newServer(t, nil)
	name := newFIFO(t, srv, 2)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
	require.NoError(t, err)
	defer drv.Close()
	tx, err := ordered.New(ctx, drv, memstore.New(), nil)
	require.NoError(t, err)
	defer tx.Close(context.Background())
	require.NoError(t, tx.Send(ctx, "g", []byte("1")))
	require.NoError(t, tx.Send(ctx, "g", []byte("2")))

	store := memstore.New()
	rx, err := ordered.New(ctx, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{Mode: ordered.ExactlyOnce, Wait: time.Second}})
	require.NoError(t, err)
	defer func() {
		cctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = rx.Close(cctx)
	}()
	var handled []uint64
	failed := false
	for len(handled) < 2 {
		rctx, c := context.WithTimeout(ctx, 15*time.Second)
		m, err := rx.Receive(rctx)
		c()
		if err != nil {
			t.Fatalf("handled %v, then nothing for 15s (%v)", handled, err)
		}
		if !failed {
			failed = true
			cause := &seqstore.BatchError{Errs: []error{seqstore.ErrAborted, fmt.Errorf("%w: other group", seqstore.ErrConflict)}}
			require.NoError(t, m.Nack(ctx, cause))
			continue
		}
		a := m.CursorAdvance()
		t.Logf("seq %d, advance %d/%d -> %d/%d", m.Seq, a.From.Epoch, a.From.Next, a.To.Epoch, a.To.Next)
		require.NoError(t, store.Advance(ctx, []seqstore.Advance{a}))
		handled = append(handled, m.Seq)
		require.NoError(t, m.Ack(ctx))
		if m.Seq == 2 && len(handled) == 1 {
			break
		}
	}
	require.Equal(t, []uint64{1, 2}, handled, "g/1 was never handled")
}
