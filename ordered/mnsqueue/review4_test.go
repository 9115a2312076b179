package mnsqueue_test

// Review 4: attacks on the MNS FIFO queue support. Each test states what it
// shows; a failing test is a defect found.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// swapFirst is a FIFO driver whose first SendGroups is held back and sent
// after the second one: the sender's first batch lands after its second,
// as a pipelined batch or a retried one does (README: "The sender
// pipelines its batches, so a group's messages can reach the service out
// of order").
type swapFirst struct {
	*mnsqueue.Queue
	mu     sync.Mutex
	calls  int
	bodies [][]byte
	groups []string
}

func (d *swapFirst) SendGroups(ctx context.Context, bodies [][]byte, groups []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.calls == 1 {
		for _, b := range bodies {
			d.bodies = append(d.bodies, append([]byte(nil), b...))
		}
		d.groups = append([]string(nil), groups...)
		return nil
	}
	if err := d.Queue.SendGroups(ctx, bodies, groups); err != nil {
		return err
	}
	if d.bodies != nil {
		err := d.Queue.SendGroups(ctx, d.bodies, d.groups)
		d.bodies = nil
		return err
	}
	return nil
}

// Found by review (refused at first, fixed since: the receiver writes a
// fresh group's cursor itself, with nothing out, so that its early first
// arrival can park): ExactlyOnce over a FIFO queue: a fresh group (no stored cursor)
// whose seq 2 reaches the service before its seq 1 never delivers
// anything. canPark refuses to park in ExactlyOnce without a stored cursor
// (park.go: g.dur.Epoch != 0 || Mode != ExactlyOnce), so route.go holds
// seq 2 waiting for seq 1 — which the service holds back behind seq 2 (one
// message of a group in flight). The receiver keeps extending seq 2's
// visibility: the group is stuck for ever. The same stream in AtLeastOnce
// is delivered (control subtest). Figures: AtLeastOnce receives 1,2;
// ExactlyOnce receives nothing in 15s, the service shows the group with 2
// messages, 1 in flight.
func TestReview4ExactlyOnceFreshGroupOutOfOrderStuck(t *testing.T) {
	for _, mode := range []ordered.Mode{ordered.AtLeastOnce, ordered.ExactlyOnce} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			srv := newServer(t, nil)
			name := newFIFO(t, srv, 5)
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
			rx, err := ordered.New(ctx, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{Mode: mode, Wait: time.Second}})
			require.NoError(t, err)
			defer func() {
				cctx, c := context.WithTimeout(context.Background(), 10*time.Second)
				defer c()
				_ = rx.Close(cctx)
			}()
			var got []uint64
			for len(got) < 2 {
				rctx, c := context.WithTimeout(ctx, 15*time.Second)
				m, err := rx.Receive(rctx)
				c()
				if err != nil {
					gs, _ := srv.Groups(name)
					t.Fatalf("%v: received seqs %v, then nothing for 15s (%v); service groups: %+v", mode, got, err, gs)
				}
				got = append(got, m.Seq)
				if mode == ordered.ExactlyOnce {
					require.NoError(t, store.Advance(ctx, []seqstore.Advance{m.CursorAdvance()}))
				}
				require.NoError(t, m.Ack(ctx))
			}
			assert.Equal(t, []uint64{1, 2}, got)
		})
	}
}

// Found by review (fixed): On a FIFO queue, a message in a group that ordered accepts but
// the service does not (the default group "", or a group with a control
// character: envelope.ValidateGroup allows both) fails the whole batch in
// SendGroups's checkGroup, and with it the messages of other, valid groups
// that the sender batched with it. Figures: 1 bad + 9 good messages sent
// together; every good one should succeed, but those batched with the bad
// one fail with ErrInvalidGroup.
func TestReview4FIFOInvalidGroupFailsOtherGroups(t *testing.T) {
	for _, bad := range []string{"", "a\x01b"} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			srv := newServer(t, nil)
			name := newFIFO(t, srv, 5)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
			require.NoError(t, err)
			defer drv.Close()
			// One send request at a time, so that the messages share batches.
			tx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Send: ordered.SendOptions{Concurrency: 1}})
			require.NoError(t, err)
			defer tx.Close(context.Background())
			var rs []*ordered.SendResult
			for i := range 10 {
				g := fmt.Sprintf("good%d", i)
				if i == 5 {
					g = bad
				}
				r, err := tx.SendAsync(ctx, g, []byte("x"))
				if i == 5 && err != nil {
					t.Logf("bad group refused at SendAsync: %v", err)
					rs = append(rs, nil)
					continue
				}
				require.NoError(t, err)
				rs = append(rs, r)
			}
			var failedGood []string
			for i, r := range rs {
				if r == nil {
					continue
				}
				err := r.Wait(ctx)
				if i == 5 {
					t.Logf("bad group %q: %v", bad, err)
					continue
				}
				if err != nil {
					failedGood = append(failedGood, fmt.Sprintf("good%d: %v", i, err))
				}
			}
			assert.Empty(t, failedGood, "messages of valid groups failed because of another group's invalid MessageGroupId")
		})
	}
}

// Found by review (fixed): A FIFO dead-letter queue behind a standard queue: a message of
// group "a\x01" (valid for ordered and the standard queue) is poison and
// goes to the dead-letter queue with its header's group as MessageGroupId
// (bodyGroups), which checkGroup refuses, failing the whole dead-letter
// batch for ever (a tagged message is retried without limit: dead.go's
// maxDeadTries applies to unordered ones only). A poison message of a
// valid group "b" in the same batch never reaches the dead-letter queue
// either once they share the failed batch's retry. Figures: a's message
// first, then 3 of b 3s later; after 12s the dead-letter queue holds
// none of b's (want 3), and a's is never dead-lettered (its group blocked,
// the message held with its visibility extended).
func TestReview4FIFODeadLetterInvalidGroupBlocksBatch(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	srv := newServer(t, nil)
	main := uniqueName("std")
	require.NoError(t, srv.CreateQueue(main, &mnstest.QueueAttributes{VisibilityTimeout: 5}))
	dlqName := newFIFO(t, srv, 5)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	drv, err := mnsqueue.New(ctx, srv.Endpoint(), main, serverCred(srv), nil)
	require.NoError(t, err)
	defer drv.Close()
	dlq, err := mnsqueue.New(ctx, srv.Endpoint(), dlqName, serverCred(srv), nil)
	require.NoError(t, err)
	defer dlq.Close()
	tx, err := ordered.New(ctx, drv, memstore.New(), nil)
	require.NoError(t, err)
	defer tx.Close(context.Background())
	require.NoError(t, tx.SendBatch(ctx, "a\x01", [][]byte{[]byte("pa")}))

	rx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{
		Wait: time.Second, MaxAttempts: 1, Poison: ordered.PoisonDeadLetter, DeadLetter: dlq,
	}})
	require.NoError(t, err)
	rctx, rcancel := context.WithTimeout(ctx, 12*time.Second)
	defer rcancel()
	go func() {
		// b's poison messages come once a's dead letter has failed.
		time.Sleep(3 * time.Second)
		assert.NoError(t, tx.SendBatch(ctx, "b", [][]byte{[]byte("pb1"), []byte("pb2"), []byte("pb3")}))
	}()
	_ = rx.Run(rctx, func(context.Context, *ordered.Message) error { return errors.New("poison") })
	cctx, c := context.WithTimeout(context.Background(), 10*time.Second)
	defer c()
	_ = rx.Close(cctx)
	gs, err := srv.Groups(dlqName)
	require.NoError(t, err)
	got := map[string]int{}
	for _, g := range gs {
		got[g.ID] = g.Messages
	}
	t.Logf("dead-letter queue groups: %v; receiver stats: %+v", got, rx.Stats().Receive)
	assert.Equal(t, 3, got["b"], "b's poison messages reach the dead-letter queue")
	assert.Equal(t, 1, got[mnsqueueUntagged()]+got["a\x01"], "a's poison message reaches the dead-letter queue (under some valid group)")
}

func mnsqueueUntagged() string { return ordered.UntaggedGroup }

// Restart over a FIFO queue: a receiver closed mid-stream (held, parked
// and in-flight messages given back or requeued), then a new one on the
// same store, must deliver the rest of every group in order, without
// anything stuck behind a group lock.
func TestReview4FIFORestartMidStream(t *testing.T) {
	const groups, n = 8, 40
	srv := newServer(t, &mnstest.Options{Seed: 11, Faults: mnstest.Faults{Redeliver: 0.05}})
	name := newFIFO(t, srv, 5)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	drv, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), nil)
	require.NoError(t, err)
	defer drv.Close()
	tx, err := ordered.New(ctx, drv, memstore.New(), nil)
	require.NoError(t, err)
	defer tx.Close(context.Background())
	store := memstore.New()
	rec := newGroupRecorder(groups * n / 3)
	open := func() *ordered.Queue {
		rx, err := ordered.New(ctx, drv, store, &ordered.Options{Receive: ordered.ReceiveOptions{Wait: time.Second, Concurrency: 8}})
		require.NoError(t, err)
		return rx
	}
	rx1 := open()
	errc := make(chan error, 1)
	go func() { errc <- runUntil(rx1, rec, 30*time.Second) }()
	sendGroups(t, ctx, tx, groups, n, 4)
	require.NoError(t, <-errc)
	cctx, c := context.WithTimeout(ctx, 15*time.Second)
	require.NoError(t, rx1.Close(cctx))
	c()
	first := rec.total.Load()
	rec.mu.Lock()
	rec.doneAt = -1 // counted below
	rec.mu.Unlock()
	rx2 := open()
	defer rx2.Close(context.Background())
	rctx, rcancel := context.WithCancel(ctx)
	go func() {
		deadline := time.Now().Add(40 * time.Second)
		for time.Now().Before(deadline) {
			rec.mu.Lock()
			done := 0
			for _, last := range rec.next {
				if last == n {
					done++
				}
			}
			rec.mu.Unlock()
			if done == groups {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		rcancel()
	}()
	_ = rx2.Run(rctx, rec.handle)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("first receiver handled %d, both %d; rx2 stats %+v", first, rec.total.Load(), rx2.Stats().Receive)
	assert.Empty(t, rec.bad)
	for g := range groups {
		assert.Equal(t, n, rec.next[fmt.Sprintf("g%d", g)], "last body of group g%d", g)
	}
}
