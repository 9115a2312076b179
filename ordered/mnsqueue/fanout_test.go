package mnsqueue_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore/memstore"
)

// holes records, per queue and group, the seqs whose push the emulator
// lost (OnPushLost), read from the published envelope.
type holes struct {
	mu sync.Mutex
	by map[string]map[string][]uint64 // queue -> group -> seqs
}

func (h *holes) record(t *testing.T) func(mnstest.LostPush) {
	return func(l mnstest.LostPush) {
		raw, err := base64.StdEncoding.DecodeString(l.Body)
		hdr, _, ok := envelope.Parse(raw)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil || !ok {
			t.Errorf("lost push with a body that is not a base64 envelope: %q", l.Body)
			return
		}
		if h.by[l.Queue] == nil {
			h.by[l.Queue] = map[string][]uint64{}
		}
		h.by[l.Queue][hdr.Group] = append(h.by[l.Queue][hdr.Group], hdr.Seq)
	}
}

// count is the number of lost seqs of queue, each counted once (a push
// published twice by a retried send may be lost twice).
func (h *holes) seqs(queue, group string) []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := slices.Clone(h.by[queue][group])
	slices.Sort(s)
	return slices.Compact(s)
}

// streamLog records what one receiver handed out and skipped, per group.
type streamLog struct {
	mu        sync.Mutex
	delivered map[string][]uint64
	skipped   map[string][]uint64
	bad       []string
	total     atomic.Int64
}

func newStreamLog() *streamLog {
	return &streamLog{delivered: map[string][]uint64{}, skipped: map[string][]uint64{}}
}

func (l *streamLog) handle(_ context.Context, m *ordered.Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := strconv.ParseUint(string(m.Body), 10, 64)
	d := l.delivered[m.Group]
	switch {
	case err != nil || n != m.Seq:
		l.bad = append(l.bad, fmt.Sprintf("group %s seq %d: body %q", m.Group, m.Seq, m.Body))
	case m.Unordered:
		l.bad = append(l.bad, fmt.Sprintf("group %s seq %d handed out unordered", m.Group, m.Seq))
	case len(d) > 0 && m.Seq <= d[len(d)-1]:
		l.bad = append(l.bad, fmt.Sprintf("group %s: seq %d after %d", m.Group, m.Seq, d[len(d)-1]))
	}
	l.delivered[m.Group] = append(d, m.Seq)
	l.total.Add(1)
	return nil
}

func (l *streamLog) onSkip(e ordered.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := e.Seq; s <= e.Last; s++ {
		l.skipped[e.Group] = append(l.skipped[e.Group], s)
	}
}

// TestOrderedFanOut publishes 10,000 messages in 100 groups through a topic
// to three subscribed queues (SIMPLIFIED, XML, JSON) with push faults on
// (delays that reorder pushes, duplicates, drops) and early redeliveries
// from the queues, and runs an ordinary receiver on each queue with
// GapSkip and a short GapTimeout. Each receiver must hand out every group
// in order, without duplicates, every message whose push arrived; and the
// ranges it skipped must be exactly the pushes the emulator dropped for its
// queue, except a trailing run (a group whose last pushes were dropped
// never learns of them: nothing comes after).
func TestOrderedFanOut(t *testing.T) {
	const groups, perGroup = 100, 100
	var lost = &holes{by: map[string]map[string][]uint64{}}
	srv := newServer(t, &mnstest.Options{Seed: 14, Faults: mnstest.Faults{
		PushDelay: 200 * time.Millisecond, PushDuplicate: 0.02, PushDrop: 0.005, Redeliver: 0.01,
		// No 500s: one after a receive took effect hides its messages for
		// a visibility timeout, longer than GapTimeout, which would make
		// holes that are not lost pushes.
	}, OnPushLost: lost.record(t)})
	f := newFanOut(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	pub, err := ordered.New(ctx, f.publisher(t, nil), memstore.New(), &ordered.Options{Name: f.topic,
		Send: ordered.SendOptions{Concurrency: 4}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, pub.Close(context.Background()), "publisher Close") })

	logs := map[string]*streamLog{}
	var runs sync.WaitGroup
	runErrs := make(chan error, len(formats))
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, format := range formats {
		q := f.queues[format]
		log := newStreamLog()
		logs[q] = log
		rx, err := ordered.New(ctx, f.subscriber(t, format, nil), memstore.New(), &ordered.Options{Name: q,
			Receive: ordered.ReceiveOptions{Wait: time.Second, Concurrency: 64, GapPolicy: ordered.GapSkip, GapTimeout: 2 * time.Second},
			Hooks:   ordered.Hooks{OnSkip: log.onSkip}})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, rx.Close(context.Background()), "receiver Close") })
		runs.Go(func() { runErrs <- rx.Run(rctx, log.handle) })
	}

	// Publish seq by seq across the groups, with few publishes in flight:
	// the publisher then keeps each group's publishes in order and the
	// receivers keep up, so that the only disorder is what the pushes and
	// the queues make. (Many publishes in flight over a loaded machine let
	// one of a group's publishes lag the next by seconds, a hole of the
	// sender's making that GapTimeout would skip; so would a deep backlog,
	// whose buffered messages today's receiver lets lapse. Both are the
	// subject of issue 12, not of this test.)
	var pending []*ordered.SendResult
	for seq := 1; seq <= perGroup; seq++ {
		for g := range groups {
			r, err := pub.SendAsync(ctx, "g"+strconv.Itoa(g), []byte(strconv.Itoa(seq)))
			require.NoError(t, err, "SendAsync")
			pending = append(pending, r)
		}
	}
	for _, r := range pending {
		require.NoError(t, r.Wait(ctx), "publish")
	}
	// Wait until each receiver has handed out all it can: every message
	// but the ones whose push was lost.
	caughtUp := func() bool {
		for _, format := range formats {
			q := f.queues[format]
			lostN := 0
			for g := range groups {
				lostN += len(lost.seqs(q, "g"+strconv.Itoa(g)))
			}
			if logs[q].total.Load() < int64(groups*perGroup-lostN) {
				return false
			}
		}
		return true
	}
	for !caughtUp() && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, ctx.Err(), "receivers catching up")
	time.Sleep(500 * time.Millisecond) // let late extras (a wrong duplicate) show
	stop()
	runs.Wait()
	close(runErrs)
	for err := range runErrs {
		require.NoError(t, err, "Run")
	}

	st := srv.Stats()
	require.Positive(t, st.PushDropped, "the test must drop pushes to mean anything")
	require.Positive(t, st.PushDuplicated, "and duplicate some")
	totalSkipped := 0
	for _, format := range formats {
		q := f.queues[format]
		log := logs[q]
		log.mu.Lock()
		assert.Empty(t, log.bad, "%s: out of order, duplicate, unordered or wrong deliveries", format)
		for g := range groups {
			group := "g" + strconv.Itoa(g)
			gone := lost.seqs(q, group)
			var want []uint64
			for s := uint64(1); s <= perGroup; s++ {
				if !slices.Contains(gone, s) {
					want = append(want, s)
				}
			}
			assert.Equal(t, want, log.delivered[group], "%s group %s: every seq whose push arrived, in order (lost %v)", format, group, gone)
			trailing := gone
			for i := len(gone) - 1; i >= 0 && gone[i] == perGroup-uint64(len(gone)-1-i); i-- {
				trailing = gone[:i]
			}
			skipped := slices.Clone(log.skipped[group])
			slices.Sort(skipped)
			assert.Equal(t, nonNil(trailing), nonNil(skipped), "%s group %s: skipped exactly the lost pushes, but a trailing run", format, group)
			totalSkipped += len(skipped)
		}
		log.mu.Unlock()
	}
	t.Logf("pushed %d, dropped %d, duplicated %d; skipped %d in all; server %+v", st.Pushed, st.PushDropped, st.PushDuplicated, totalSkipped, st)
	require.Positive(t, totalSkipped, "a dropped push in the middle of a group must have been skipped")
}

// nonNil makes an empty slice nil, so that "none" compares equal.
func nonNil(s []uint64) []uint64 {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestSubscriberJoinsMidStream: a queue subscribed after the publisher has
// begun gets only what is published from then on (the service pushes "from
// the latest message at subscription time"), so its groups start past seq
// 1. A receiver with ordered.StartLowest starts each group at the first seq
// that reached its queue and hands out the rest in order.
func TestSubscriberJoinsMidStream(t *testing.T) {
	const groups, before, after = 10, 30, 30
	srv := newServer(t, &mnstest.Options{Seed: 3, Faults: mnstest.Faults{PushDelay: 100 * time.Millisecond, PushDuplicate: 0.05}})
	cred := serverCred(srv)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	topic := uniqueName("topic")
	require.NoError(t, mnsqueue.CreateTopic(ctx, srv.Endpoint(), cred, topic, 0))
	tp, err := mnsqueue.NewTopic(ctx, srv.Endpoint(), topic, cred, nil)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, tp.Close()) })
	pub, err := ordered.New(ctx, tp, memstore.New(), &ordered.Options{Name: topic, Send: ordered.SendOptions{Concurrency: 4}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, pub.Close(context.Background())) })
	publish := func(from, to int) {
		for seq := from; seq <= to; seq++ {
			for g := range groups {
				require.NoError(t, pub.Send(ctx, "g"+strconv.Itoa(g), []byte(strconv.Itoa(seq))), "Send")
			}
		}
	}
	publish(1, before)

	q := uniqueName("late")
	require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), cred, q, nil))
	require.NoError(t, mnsqueue.Subscribe(ctx, srv.Endpoint(), cred, topic, "late", q, nil))
	drv, err := mnsqueue.New(ctx, srv.Endpoint(), q, cred, nil)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, drv.Close()) })
	log := newStreamLog()
	rx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: q,
		Receive: ordered.ReceiveOptions{Wait: time.Second, Start: ordered.StartLowest, StartSettle: time.Second}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rx.Close(context.Background())) })
	rctx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- rx.Run(rctx, log.handle) }()

	publish(before+1, before+after)
	for log.total.Load() < groups*after && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let a wrong extra show
	stop()
	require.NoError(t, <-runErr, "Run")
	log.mu.Lock()
	defer log.mu.Unlock()
	assert.Empty(t, log.bad, "out of order, duplicate, unordered or wrong deliveries")
	for g := range groups {
		var want []uint64
		for s := before + 1; s <= before+after; s++ {
			want = append(want, uint64(s))
		}
		assert.Equal(t, want, log.delivered["g"+strconv.Itoa(g)], "group g%d: from the first seq published after the subscription", g)
	}
}
