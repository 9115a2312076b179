package crashtest

// Fault cases over the MNS emulator, through the real SDK, one test each
// (issue 6). Each judges its run with Check, the crash harness's checker.
// Where package ordered tests the same case over memqueue, the test named
// in the comment is the unit-level counterpart.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/memstore"
)

func openFilestore(t *testing.T, dir string) *filestore.Store {
	t.Helper()
	s, err := filestore.Open(dir, nil)
	require.NoError(t, err, "filestore.Open")
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestFaultQueue5xx: the queue answers 60% of message requests with 500 (or
// drops the connection) for two seconds in the middle of a run; every Send
// that returned nil is delivered, in order, once. (ordered:
// TestSendRetryBackoff, TestReceiveChaos over memqueue.) A send that fails
// all its attempts (0.6^8 for one under the faults, more often when a
// loaded host stretches the faulty rounds past the retries: 2 of 598 in
// CI's -race run of 0050f2b) leaves a hole that the receiver closes after
// GapTimeout: 5 s, past the longest retry chain (about 1.2 s), where its
// default 30 s outlasted the test's wait for the messages behind it.
func TestFaultQueue5xx(t *testing.T) {
	e := newEnv(t, nil, nil)
	rec := newRecorder()
	tx := e.open(openFilestore(t, t.TempDir()), nil)
	rx := e.open(openFilestore(t, t.TempDir()), &ordered.Options{Receive: ordered.ReceiveOptions{SyncAck: true, GapTimeout: 5 * time.Second}})
	stop := run(t, rx, rec.handler("r", 1, nil))
	ctx := t.Context()
	for round := range 6 {
		if round == 2 {
			require.NoError(t, e.srv.SetFaults(mnstest.Faults{Error5xx: 0.5, Drop: 0.1}))
		}
		if round == 4 {
			require.NoError(t, e.srv.SetFaults(mnstest.Faults{}))
		}
		for g := range 5 {
			rec.send(ctx, tx, "s", 1, fmt.Sprintf("g%d", g), 20)
		}
		time.Sleep(300 * time.Millisecond)
	}
	rec.waitDelivered(t, 20*time.Second, rx)
	stop()
	st := e.srv.Stats()
	rep := rec.check(t, Config{Leftover: e.waitEmpty(10 * time.Second)})
	assert.Positive(t, st.Errors5xx+st.Drops, "faults injected")
	t.Logf("5xx %d, drops %d; %s", st.Errors5xx, st.Drops, rep.Figures())
}

// TestFaultStoreOutage: the sender's and the receiver's stores fail every
// call for a while (a filestore behind a wrapper that fails: root ignores a
// read-only directory). Sends during the outage fail or wait, nothing
// successful is lost, and deliveries resume in order once it ends.
// (ordered: TestSendStoreFailure.)
func TestFaultStoreOutage(t *testing.T) {
	e := newEnv(t, nil, nil)
	rec := newRecorder()
	sstore := &flaky{Store: openFilestore(t, t.TempDir())}
	rstore := &flaky{Store: openFilestore(t, t.TempDir())}
	tx := e.open(sstore, nil)
	rx := e.open(rstore, &ordered.Options{Receive: ordered.ReceiveOptions{SyncAck: true}})
	stop := run(t, rx, rec.handler("r", 1, nil))
	for round := range 6 {
		switch round {
		case 1:
			rstore.down.Store(true)
		case 2:
			sstore.down.Store(true)
		case 4:
			sstore.down.Store(false)
			rstore.down.Store(false)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		for g := range 4 {
			rec.send(ctx, tx, "s", 1, fmt.Sprintf("g%d", g), 10)
		}
		cancel()
		time.Sleep(400 * time.Millisecond)
	}
	_, err := tx.Recover(t.Context())
	require.NoError(t, err, "Recover after the outage")
	rec.waitDelivered(t, 20*time.Second, rx)
	stop()
	rep := rec.check(t, Config{Leftover: e.waitEmpty(10 * time.Second)})
	assert.Positive(t, sstore.fails.Load(), "sender store calls failed")
	assert.Positive(t, rstore.fails.Load(), "receiver store calls failed")
	t.Logf("store failures: sender %d, receiver %d; %s", sstore.fails.Load(), rstore.fails.Load(), rep.Figures())
}

// TestFaultQueueRecreated: the queue is deleted and created again under a
// running receiver. The receiver survives (its fetchers retry
// QueueNotExist), and messages sent after the re-creation are delivered in
// order; Sends made while the queue was missing fail and stay journaled,
// and Recover delivers them once the queue is back.
func TestFaultQueueRecreated(t *testing.T) {
	e := newEnv(t, nil, nil)
	rec := newRecorder()
	tx := e.open(openFilestore(t, t.TempDir()), nil)
	rx := e.open(openFilestore(t, t.TempDir()), &ordered.Options{Receive: ordered.ReceiveOptions{SyncAck: true}})
	stop := run(t, rx, rec.handler("r", 1, nil))
	ctx := t.Context()
	sent := rec.send(ctx, tx, "s", 1, "g", 10)
	require.Equal(t, 10, sent)
	waitFor(t, 10*time.Second, "first messages delivered", func() bool { return rec.delivered() >= 10 })
	require.Equal(t, 0, e.waitEmpty(5*time.Second), "acked messages deleted before the queue goes")

	require.NoError(t, e.srv.DeleteQueue(e.queue))
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	missing := rec.send(sctx, tx, "s", 1, "g", 3)
	cancel()
	assert.Zero(t, missing, "sends to a deleted queue succeed")
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, e.srv.CreateQueue(e.queue, &mnstest.QueueAttributes{VisibilityTimeout: 2}))
	n, err := tx.Recover(ctx)
	require.NoError(t, err, "Recover")
	assert.Equal(t, 3, n, "journaled sends recovered")
	sent += rec.send(ctx, tx, "s", 1, "g", 10)
	want := sent + n
	waitFor(t, 20*time.Second, "messages after re-creation delivered", func() bool { return rec.delivered() >= want })
	stop()
	rec.check(t, Config{Leftover: e.waitEmpty(10 * time.Second)})
	assert.Equal(t, want, rec.delivered(), "deliveries")
}

// TestFaultSenderStoreWiped: a sender loses its store and starts again with
// a new epoch at seq 1. The receiver finishes the old epoch, switches to the
// new one (Hooks.OnEpoch) and delivers it in order. (ordered:
// TestReceiveSenderReset, TestSynctestEpochSwitch.)
func TestFaultSenderStoreWiped(t *testing.T) {
	e := newEnv(t, nil, nil)
	rec := newRecorder()
	var epochs atomic.Int64
	rx := e.open(openFilestore(t, t.TempDir()), &ordered.Options{
		Hooks:   ordered.Hooks{OnEpoch: func(ordered.Event) { epochs.Add(1) }},
		Receive: ordered.ReceiveOptions{SyncAck: true, GapTimeout: time.Second}})
	stop := run(t, rx, rec.handler("r", 1, nil))
	ctx := t.Context()
	tx1 := e.open(memstore.New(), nil)
	require.Equal(t, 10, rec.send(ctx, tx1, "s", 1, "g", 10))
	waitFor(t, 10*time.Second, "old epoch delivered", func() bool { return rec.delivered() >= 10 })
	tx2 := e.open(memstore.New(), nil) // the wiped store: a new epoch
	require.Equal(t, 10, rec.send(ctx, tx2, "s", 2, "g", 10))
	waitFor(t, 15*time.Second, "new epoch delivered", func() bool { return rec.delivered() >= 20 })
	stop()
	// The checker flags any epoch switch; here one is expected, so check
	// each epoch's run with the rules and the switch count by hand.
	rep := Check(rec.histories(), Config{Leftover: e.waitEmpty(10 * time.Second)})
	for _, v := range rep.Violations {
		assert.Equal(t, RuleEpoch, v.Rule, "only the expected epoch switch: %v", v)
		assert.Contains(t, v.Detail, "switch from epoch", "the switch: %v", v)
	}
	assert.Len(t, rep.Violations, 1, "one epoch switch, no other violation")
	assert.Equal(t, int64(1), epochs.Load(), "OnEpoch calls")
}

// TestFaultReceiverStoreWiped: a receiver loses its store after the first
// messages were delivered and deleted. Its replacement, starting at the
// lowest seq it sees (StartLowest), delivers the rest in order and none of
// the old ones again.
func TestFaultReceiverStoreWiped(t *testing.T) {
	e := newEnv(t, nil, nil)
	rec := newRecorder()
	tx := e.open(openFilestore(t, t.TempDir()), nil)
	ropts := func() *ordered.Options {
		return &ordered.Options{Receive: ordered.ReceiveOptions{SyncAck: true, Start: ordered.StartLowest, StartSettle: 300 * time.Millisecond}}
	}
	rx1 := e.open(openFilestore(t, t.TempDir()), ropts())
	stop1 := run(t, rx1, rec.handler("r", 1, nil))
	ctx := t.Context()
	require.Equal(t, 10, rec.send(ctx, tx, "s", 1, "g", 10))
	waitFor(t, 10*time.Second, "first receiver's messages", func() bool { return rec.delivered() >= 10 })
	stop1()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	require.NoError(t, rx1.Close(cctx))
	cancel()
	rec.add(RoleReceive, "r", 1, Event{Kind: KindEnd})
	require.Equal(t, 0, e.waitEmpty(5*time.Second), "acked messages deleted")

	rx2 := e.open(openFilestore(t, t.TempDir()), ropts()) // the wiped store
	require.Equal(t, 10, rec.send(ctx, tx, "s", 1, "g", 10))
	stop2 := run(t, rx2, rec.handler("r", 2, nil))
	// Late arrivals (below the start StartLowest picked, see below) are
	// handed out flagged Unordered: they count.
	for end := time.Now().Add(20 * time.Second); rec.handedOut() < 20; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited 20s for the second receiver's messages: %d of 20 handed out (%d in order); receiver %+v; queue holds %d",
				rec.handedOut(), rec.delivered(), rx2.Stats().Receive, e.left())
		}
	}
	stop2()
	// Under load a seq below the start StartLowest picked can arrive after
	// the settle time: it is handed out flagged Unordered (a late arrival),
	// never deleted as a duplicate.
	rep := rec.check(t, Config{Leftover: e.waitEmpty(10 * time.Second), AllowUnordered: true, AllowLateStart: true})
	assert.Zero(t, rep.Duplicates, "duplicates")
}

// TestFaultRetentionExpiry: a message expires in the queue before any
// receiver took it. Under GapSkip the receiver skips it after GapTimeout
// (Hooks.OnSkip names it) and delivers the rest in order; under GapWait it
// reports the hole (Hooks.OnGap) and delivers nothing past it. (ordered:
// TestSynctestGapWait, TestSynctestGapSkip.)
func TestFaultRetentionExpiry(t *testing.T) {
	for _, policy := range []ordered.GapPolicy{ordered.GapSkip, ordered.GapWait} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			e := newEnv(t, nil, &mnstest.QueueAttributes{VisibilityTimeout: 2, MessageRetentionPeriod: 60})
			rec := newRecorder()
			tx := e.open(memstore.New(), nil)
			ctx := t.Context()
			require.Equal(t, 1, rec.send(ctx, tx, "s", 1, "g", 1))
			e.srv.Advance(61 * time.Second) // seq 1 expires
			require.Equal(t, 5, rec.send(ctx, tx, "s", 1, "g", 5))
			var skipped, gaps atomic.Int64
			var skipSeq atomic.Uint64
			rx := e.open(memstore.New(), &ordered.Options{
				Hooks: ordered.Hooks{
					OnSkip: func(ev ordered.Event) { skipped.Add(1); skipSeq.Store(ev.Seq) },
					OnGap:  func(ordered.Event) { gaps.Add(1) },
				},
				Receive: ordered.ReceiveOptions{GapPolicy: policy, GapTimeout: 500 * time.Millisecond}})
			stop := run(t, rx, rec.handler("r", 1, nil))
			if policy == ordered.GapWait {
				waitFor(t, 10*time.Second, "OnGap", func() bool { return gaps.Load() > 0 })
				time.Sleep(500 * time.Millisecond)
				stop()
				assert.Zero(t, rec.delivered(), "deliveries past a hole under GapWait")
				assert.Equal(t, 1, int(e.srv.Stats().Expired), "expired messages")
				assert.Equal(t, 5, e.left(), "the queue holds the five messages past the hole, nothing deleted undelivered")
				return
			}
			waitFor(t, 10*time.Second, "the rest delivered", func() bool { return rec.delivered() >= 5 })
			stop()
			assert.Equal(t, int64(1), skipped.Load(), "OnSkip calls")
			assert.Equal(t, uint64(1), skipSeq.Load(), "skipped seq")
			// The checker sees seq 1 sent but never delivered: the one
			// expected loss (a gap at the group's first delivery and a lost
			// send), and nothing else.
			rep := Check(rec.histories(), Config{Leftover: e.waitEmpty(10 * time.Second)})
			require.NotEmpty(t, rep.Violations, "the expired message")
			assert.Equal(t, RuleGap, rep.First().Rule, "first violation %v", rep.First())
			for _, v := range rep.Violations {
				ok := v.Rule == RuleGap && v.Seq == 2 || v.Rule == RuleLost && v.Seq == 1
				assert.True(t, ok, "only the expired seq 1 may be missing: %v", v)
			}
		})
	}
}

// TestFaultPoison: one message fails every attempt. Under PoisonDeadLetter
// it goes to the dead-letter queue after MaxAttempts with its original body
// and the group goes on; under PoisonBlock the group is reported stuck and
// delivers nothing past it while other groups flow. (ordered:
// TestSynctestNackBackoffAndPoison.)
func TestFaultPoison(t *testing.T) {
	for _, policy := range []ordered.PoisonPolicy{ordered.PoisonDeadLetter, ordered.PoisonBlock} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			e := newEnv(t, nil, nil)
			require.NoError(t, e.srv.CreateQueue("dead", nil))
			dlq := e.driver("dead")
			rec := newRecorder()
			tx := e.open(memstore.New(), nil)
			var stuck, dead atomic.Int64
			rx := e.open(memstore.New(), &ordered.Options{
				Hooks:   ordered.Hooks{OnStuck: func(ordered.Event) { stuck.Add(1) }, OnDeadLetter: func(ordered.Event) { dead.Add(1) }},
				Receive: ordered.ReceiveOptions{MaxAttempts: 3, Poison: policy, DeadLetter: dlq}})
			ctx := t.Context()
			require.Equal(t, 5, rec.send(ctx, tx, "s", 1, "bad", 5))
			require.Equal(t, 5, rec.send(ctx, tx, "s", 1, "good", 5))
			var attempts atomic.Int64
			stop := run(t, rx, rec.handler("r", 1, func(m *ordered.Message) error {
				if m.Group == "bad" && m.Seq == 2 {
					attempts.Add(1)
					return errors.New("poison")
				}
				return nil
			}))
			if policy == ordered.PoisonDeadLetter {
				waitFor(t, 20*time.Second, "both groups done", func() bool { return rec.acks.Load() >= 9 })
				assert.Zero(t, e.waitEmpty(10*time.Second), "messages left in the queue (the poison one is in the dead-letter queue)")
				stop()
				assert.Equal(t, int64(1), dead.Load(), "OnDeadLetter calls")
				assert.Equal(t, int64(3), attempts.Load(), "attempts before dead-lettering")
				ms, err := dlq.ReceiveBatch(ctx, 16, time.Second)
				require.NoError(t, err)
				require.Len(t, ms, 1, "dead-lettered messages")
				// The body as it was on the queue: header and payload.
				h, payload, ok := envelope.Parse(ms[0].Body)
				require.True(t, ok, "dead letter %q carries its header", ms[0].Body)
				assert.Equal(t, "bad", h.Group, "dead letter's group")
				assert.Equal(t, uint64(2), h.Seq, "dead letter's seq")
				assert.Equal(t, "s.1.bad.2", string(payload), "dead letter's payload")
				return
			}
			waitFor(t, 20*time.Second, "OnStuck", func() bool { return stuck.Load() > 0 && rec.acks.Load() >= 6 })
			// Left: the blocked group's poison message and the three behind
			// it, nothing of what was delivered.
			waitFor(t, 10*time.Second, "the queue to hold only bad/2..5", func() bool { return e.left() == 4 })
			stop()
			st := rx.Stats().Receive
			require.NotEmpty(t, st.Stuck, "stuck groups")
			assert.Equal(t, "bad", st.Stuck[0].Group, "stuck group")
			assert.Equal(t, int64(6), rec.acks.Load(), "acks: bad 1 and good 1..5, nothing past the poison")
			assert.GreaterOrEqual(t, attempts.Load(), int64(3), "attempts")
		})
	}
}

// TestFaultSecondReceiver: two receivers run on the same streams by
// mistake, each with its own Store instance over one database (as two
// processes would): PostgreSQL, and Redis. Every message is in the queue
// twice (an at-least-once queue may store a send twice), so that each
// receiver can hold its own copy of each seq, and the handlers of the two
// copies meet before acknowledging: both Acks commit the same cursor move
// at the same moment. The store's compare-and-set (a row lock, the Lua
// check) must make one lose (ErrConflict, Hooks.OnConflict; asserted, so
// the race is real): with SyncAck no seq is acknowledged by both. Every
// seq is handed out, and nothing is left in the queue. (ordered:
// TestReceiveConflict.)
//
// Not asserted: that every seq gets one Ack that returned nil. Today's
// receiver can end a race with both Acks refused, and an Ack can wait for
// a commit result that never comes (until its ctx ends); the test logs
// both counts.
func TestFaultSecondReceiver(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	t.Run("postgres", func(t *testing.T) {
		dsn := serverVar(t, "INORDER_TEST_POSTGRES_DSN")
		secondReceiver(t, postgresStores(t, dsn, dsn))
	})
	t.Run("redis", func(t *testing.T) {
		addr := redisAddr(t)
		secondReceiver(t, redisStores(t, addr, addr))
	})
}

func secondReceiver(t *testing.T, open func() seqstore.Store) {
	const groups, perGroup, epoch = 12, 3, 42
	e := newEnv(t, nil, &mnstest.QueueAttributes{VisibilityTimeout: 1})
	var conflicts, met, refused, hung atomic.Int64
	var mu sync.Mutex
	handed, acked := map[string]int{}, map[string]int{}
	var rxs []*ordered.Queue
	for range 2 {
		rxs = append(rxs, e.open(open(), &ordered.Options{
			Hooks:   ordered.Hooks{OnConflict: func(ordered.Event) { conflicts.Add(1) }},
			Receive: ordered.ReceiveOptions{SyncAck: true}}))
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var bodies [][]byte
	for g := range groups {
		for seq := uint64(1); seq <= perGroup; seq++ {
			bodies = append(bodies, envelope.Append(nil, envelope.Header{Group: fmt.Sprintf("g%d", g), Epoch: epoch, Seq: seq}, fmt.Appendf(nil, "g%d-%d", g, seq)))
		}
	}
	drv := e.driver("")
	for copy := range 2 {
		for i := 0; i < len(bodies); i += 16 {
			require.NoError(t, drv.SendBatch(ctx, bodies[i:min(i+16, len(bodies))]), "send copy %d", copy+1)
		}
	}
	rv := &rendezvous{waiting: map[string]chan struct{}{}}
	var wg sync.WaitGroup
	for _, rx := range rxs {
		for range groups {
			wg.Go(func() {
				for {
					m, err := rx.Receive(ctx)
					if err != nil {
						return
					}
					k := fmt.Sprintf("%s/%d", m.Group, m.Seq)
					mu.Lock()
					handed[k]++
					mu.Unlock()
					if rv.meet(k, 3*time.Second) {
						met.Add(1) // by each of the two
					}
					actx, acancel := context.WithTimeout(ctx, 5*time.Second)
					err = m.Ack(actx)
					acancel()
					switch {
					case errors.Is(err, ordered.ErrConflict):
						refused.Add(1)
					case err != nil && ctx.Err() == nil:
						hung.Add(1)
					case err == nil:
						mu.Lock()
						acked[k]++
						mu.Unlock()
					}
				}
			})
		}
	}
	// Done when every seq was handed out and the queue is empty: every
	// copy was deleted, so every cursor moved past its last seq.
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(handed)
		mu.Unlock()
		if n == groups*perGroup && e.left() == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("waited 60s for every seq handed out (%d of %d) and the queue empty (it holds %d); receivers: %+v; %+v",
				n, groups*perGroup, e.left(), rxs[0].Stats().Receive, rxs[1].Stats().Receive)
		}
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for k, n := range acked {
		assert.Equal(t, 1, n, "acks of %s that returned nil: a seq acknowledged by both receivers", k)
	}
	assert.Positive(t, conflicts.Load(), "cursor conflicts: the receivers never raced (handlers met %d times)", met.Load()/2)
	t.Logf("handlers met %d times; conflicts %d; Acks refused %d, still waiting after 5s %d; seqs with no Ack that returned nil: %d of %d",
		met.Load()/2, conflicts.Load(), refused.Load(), hung.Load(), groups*perGroup-len(acked), groups*perGroup)
}

// rendezvous lets two handlers of the same message meet, so that their
// Acks race.
type rendezvous struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

// meet waits up to d for a second caller with key and reports whether one
// came.
func (r *rendezvous) meet(key string, d time.Duration) bool {
	r.mu.Lock()
	if ch, ok := r.waiting[key]; ok {
		delete(r.waiting, key)
		r.mu.Unlock()
		close(ch)
		return true
	}
	ch := make(chan struct{})
	r.waiting[key] = ch
	r.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
		return true
	case <-timer.C:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting[key] == ch {
		delete(r.waiting, key)
		return false
	}
	return true // the second came just now
}

// TestFaultUntaggedAndMalformed: bodies without a valid header, sent
// straight to the queue, are handed out flagged Unordered (UntaggedDeliver)
// or dead-lettered (UntaggedDeadLetter), and deleted; tagged messages around
// them keep their order. (ordered: TestReceiveUntagged.)
func TestFaultUntaggedAndMalformed(t *testing.T) {
	bad := [][]byte{[]byte("hello"), []byte("#v1;x;1;g#p"), []byte("#v1;1;2;g"), {0xff, 0xfe, 0}, []byte("#"), []byte("#v1;1;0;g#zero seq")}
	for _, policy := range []ordered.UntaggedPolicy{ordered.UntaggedDeliver, ordered.UntaggedDeadLetter} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			e := newEnv(t, nil, nil)
			require.NoError(t, e.srv.CreateQueue("dead", nil))
			dlq := e.driver("dead")
			rec := newRecorder()
			tx := e.open(memstore.New(), nil)
			ctx := t.Context()
			require.Equal(t, 5, rec.send(ctx, tx, "s", 1, "g", 5))
			require.NoError(t, e.driver("").SendBatch(ctx, bad))
			require.Equal(t, 5, rec.send(ctx, tx, "s", 1, "g", 5))
			var untagged atomic.Int64
			rx := e.open(memstore.New(), &ordered.Options{
				Receive: ordered.ReceiveOptions{SyncAck: true, Untagged: policy, DeadLetter: dlq}})
			stop := run(t, rx, rec.handler("r", 1, func(m *ordered.Message) error {
				if m.Unordered {
					untagged.Add(1)
				}
				return nil
			}))
			waitFor(t, 15*time.Second, "tagged messages", func() bool { return rec.delivered() >= 10 })
			if policy == ordered.UntaggedDeliver {
				waitFor(t, 10*time.Second, "untagged messages", func() bool { return untagged.Load() >= int64(len(bad)) })
			}
			stop()
			rec.check(t, Config{Leftover: e.waitEmpty(10 * time.Second), AllowUnordered: true})
			if policy == ordered.UntaggedDeliver {
				assert.Equal(t, int64(len(bad)), untagged.Load(), "untagged hand-outs")
				return
			}
			assert.Zero(t, untagged.Load(), "untagged hand-outs")
			var got []string
			waitFor(t, 10*time.Second, "dead letters", func() bool {
				ms, err := dlq.ReceiveBatch(ctx, 16, time.Second)
				require.NoError(t, err)
				for _, m := range ms {
					got = append(got, string(m.Body))
				}
				return len(got) >= len(bad)
			})
			want := make([]string, len(bad))
			for i, b := range bad {
				want[i] = string(b)
			}
			assert.ElementsMatch(t, want, got, "dead-lettered bodies")
		})
	}
}

// TestFaultBodySizeLimit: over the emulator and the real SDK, a payload
// that with the largest header its group can need fills the driver's
// MaxBody exactly is sent and delivered intact; one byte more is
// ErrTooLarge and reserves nothing. (ordered: TestSendSizeLimitIsExact.)
func TestFaultBodySizeLimit(t *testing.T) {
	e := newEnv(t, nil, nil)
	store := memstore.New()
	tx := e.open(store, nil)
	limit := e.driver("").Limits().MaxBody
	const group = "size"
	worst := envelope.HeaderLen(envelope.Header{Group: group, Epoch: seqstore.MaxSeq, Seq: seqstore.MaxSeq})
	fits := []byte(strings.Repeat("x", limit-worst-1) + "!")
	ctx := t.Context()
	err := tx.Send(ctx, group, append(fits, 'y'))
	require.ErrorIs(t, err, ordered.ErrTooLarge, "a payload one byte over (%d + header %d > %d)", len(fits)+1, worst, limit)
	require.NoError(t, tx.Send(ctx, group, fits), "a payload of %d bytes with a %d-byte worst header in %d", len(fits), worst, limit)
	rx := e.open(memstore.New(), nil)
	got := make(chan *ordered.Message, 2)
	stop := run(t, rx, func(_ context.Context, m *ordered.Message) error { got <- m; return nil })
	select {
	case m := <-got:
		assert.Equal(t, uint64(1), m.Seq, "the over-size payload reserved no seq")
		assert.Equal(t, len(fits), len(m.Body), "delivered size")
		assert.True(t, string(m.Body) == string(fits), "delivered body intact")
	case <-time.After(10 * time.Second):
		t.Fatal("the payload at the limit was not delivered within 10s")
	}
	assert.Zero(t, e.waitEmpty(10*time.Second), "messages left in the queue")
	stop()
}

// TestFaultCloseUnderLoad: sender and receiver are closed while sends and
// deliveries are in full flow. Close returns within its deadline (goleak in
// TestMain checks no goroutine is left), and a second receiver delivers the
// rest: nothing that Send confirmed is lost, nothing is out of order, and
// since the first receiver closed cleanly nothing is delivered twice.
// (ordered: TestSynctestReaperAndClose, TestSendCloseFlushes.)
func TestFaultCloseUnderLoad(t *testing.T) {
	e := newEnv(t, &mnstest.Options{Faults: mnstest.Faults{Latency: time.Millisecond, Jitter: 2 * time.Millisecond}}, nil)
	rec := newRecorder()
	sdir, rdir := t.TempDir(), t.TempDir()
	sstore := openFilestore(t, sdir)
	tx := e.open(sstore, nil)
	rstore := openFilestore(t, rdir)
	rx := e.open(rstore, nil)
	stop := run(t, rx, rec.handler("r", 1, nil))
	ctx := t.Context()
	var wg sync.WaitGroup
	// At most 480 messages: a second receiver that starts behind more than
	// holdHigh (512) held messages can hit the fetch stall the crash
	// harness reports (see receiveWindow in crash_test.go).
	for g := range 8 {
		wg.Go(func() {
			for i := 0; i < 3 && rec.send(ctx, tx, "s", 1, fmt.Sprintf("g%d", g), 20) == 20; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	time.Sleep(150 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	start := time.Now()
	require.NoError(t, rx.Close(cctx), "receiver Close under load")
	require.NoError(t, tx.Close(cctx), "sender Close under load")
	closed := time.Since(start)
	cancel()
	wg.Wait()
	stop()
	rec.add(RoleReceive, "r", 1, Event{Kind: KindEnd})

	rx2 := e.open(rstore, nil)
	var sent int
	for _, h := range rec.histories() {
		for _, ev := range h.Events {
			if ev.Kind == KindSent {
				sent++
			}
		}
	}
	stop2 := run(t, rx2, rec.handler("r", 2, nil))
	waitFor(t, 30*time.Second, "the rest delivered", func() bool { return rec.delivered() >= sent })
	stop2()
	rep := rec.check(t, Config{Leftover: e.waitEmpty(10 * time.Second)})
	assert.Zero(t, rep.Duplicates, "duplicates after a clean Close")
	t.Logf("Close took %v; %s", closed, rep.Figures())
}
