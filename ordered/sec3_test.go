package ordered_test

// Security review 2 (issue 21): keys, MAC contexts, unsigned bodies and
// forged epochs, end to end over memqueue. The journal's seal is in
// sec3_journal_test.go.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

var sec3Key = []byte("0123456789abcdef0123456789abcdef")

// sec3Got collects what Run hands out.
type sec3Got struct {
	mu   sync.Mutex
	msgs []ordered.Message
}

func (g *sec3Got) handler(ctx context.Context, m *ordered.Message) error {
	g.mu.Lock()
	g.msgs = append(g.msgs, ordered.Message{Group: m.Group, Epoch: m.Epoch, Seq: m.Seq, Body: append([]byte(nil), m.Body...), Unordered: m.Unordered})
	g.mu.Unlock()
	return nil
}

// wait returns what was handed out once n messages were, or after d.
func (g *sec3Got) wait(t *testing.T, n int, d time.Duration) []ordered.Message {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		k := len(g.msgs)
		g.mu.Unlock()
		if k >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]ordered.Message(nil), g.msgs...)
}

func sec3Dump(ms []ordered.Message) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "\n  group=%q epoch=%d seq=%d unordered=%v body=%q", m.Group, m.Epoch, m.Seq, m.Unordered, m.Body)
	}
	return b.String()
}

// sec3Run runs q's handlers into g until the test ends, then closes q.
func sec3Run(t *testing.T, q *ordered.Queue, g *sec3Got) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = q.Run(ctx, g.handler) }()
	t.Cleanup(func() { cancel(); <-done; rxClose(t, q) })
}

// sec3Forge is a header signed with key (nil: unsigned) by someone who
// holds it, for group at epoch and seq.
func sec3Forge(key []byte, group string, epoch, seq uint64, payload string) []byte {
	h := envelope.Header{Group: group, Epoch: epoch, Seq: seq}
	if key != nil {
		h.Signed, h.MAC = true, envelope.Sign(key, h, []byte(payload))
	}
	return envelope.Append(nil, h, []byte(payload))
}

// The MAC binds a body to its queue (Options.Name, or MACContext): a signed
// message copied from queue A into queue B that shares the key is untagged
// in B, where before it took B's group over (newer epoch: B's own later
// message was demoted to Unordered).
func TestSec3SignedReplayAcrossQueues(t *testing.T) {
	ctx := context.Background()
	qa := memqueue.New(&memqueue.Options{Shards: 1})
	qb := memqueue.New(&memqueue.Options{Shards: 1})
	// B's sender starts first (older epoch); A's later (newer epoch).
	sb, err := ordered.New(ctx, qb, memstore.New(), &ordered.Options{Name: "billing", Key: sec3Key})
	require.NoError(t, err)
	defer rxClose(t, sb)
	require.NoError(t, sb.Send(ctx, "acct-42", []byte("b: debit 10")))
	require.NoError(t, sb.Send(ctx, "acct-42", []byte("b: debit 20")))
	time.Sleep(5 * time.Millisecond)
	sa, err := ordered.New(ctx, qa, memstore.New(), &ordered.Options{Name: "refunds", Key: sec3Key})
	require.NoError(t, err)
	defer rxClose(t, sa)
	require.NoError(t, sa.Send(ctx, "acct-42", []byte("a: refund 1000")))

	// The attacker reads A (or a dead-letter queue, a log) and sends to B.
	ms, err := qa.ReceiveBatch(ctx, 16, 100*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	stolen := ms[0].Body

	var untagged atomic.Int64
	rx, err := ordered.New(ctx, qb, memstore.New(), &ordered.Options{Name: "billing", Key: sec3Key,
		Hooks:   ordered.Hooks{OnUntagged: func(ordered.Event) { untagged.Add(1) }},
		Receive: ordered.ReceiveOptions{Wait: 50 * time.Millisecond, GapTimeout: 200 * time.Millisecond}})
	require.NoError(t, err)
	var g sec3Got
	sec3Run(t, rx, &g)
	g.wait(t, 2, 5*time.Second)
	require.NoError(t, qb.SendBatch(ctx, [][]byte{stolen}))
	time.Sleep(600 * time.Millisecond)
	require.NoError(t, sb.Send(ctx, "acct-42", []byte("b: debit 30")))
	g.wait(t, 3, 5*time.Second)
	time.Sleep(100 * time.Millisecond) // anything more would show now
	out := g.wait(t, 4, 0)
	t.Logf("receiver of B handed out:%s", sec3Dump(out))
	require.Len(t, out, 3, "B's three messages, and not A's")
	for i, m := range out {
		assert.False(t, m.Unordered, "TAKEOVER: B's own message %q demoted to Unordered", m.Body)
		assert.Equal(t, uint64(i+1), m.Seq, "B's messages in order")
		assert.NotEqual(t, "a: refund 1000", string(m.Body), "REPLAY: A's signed message handed out in B")
	}
	assert.Positive(t, untagged.Load(), "the replayed body is reported untagged")
}

// A topic's subscribers name the publisher's context: a receiver whose Name
// differs from the sender's verifies with MACContext, and fails without it.
func TestSec3MACContextForSubscribers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		context string
		ok      bool
	}{{"publisher's context", "orders", true}, {"own name", "", false}, {"other context", "billing", false}} {
		t.Run(tc.name, func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{Shards: 1})
			pub, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "orders", Key: sec3Key})
			require.NoError(t, err)
			require.NoError(t, pub.Send(ctx, "g", []byte("m1")))
			require.NoError(t, pub.Send(ctx, "g", []byte("m2")))
			rxClose(t, pub)
			var untagged atomic.Int64
			sub, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "orders-sub-a", Key: sec3Key, MACContext: tc.context,
				Hooks:   ordered.Hooks{OnUntagged: func(ordered.Event) { untagged.Add(1) }},
				Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}})
			require.NoError(t, err)
			var g sec3Got
			sec3Run(t, sub, &g)
			if tc.ok {
				out := g.wait(t, 2, 5*time.Second)
				require.Len(t, out, 2, "handed out:%s", sec3Dump(out))
				for _, m := range out {
					assert.False(t, m.Unordered, "%q", m.Body)
				}
				assert.Zero(t, untagged.Load())
				return
			}
			require.Eventually(t, func() bool { return untagged.Load() >= 2 }, 5*time.Second, 10*time.Millisecond, "both reported untagged")
			assert.Empty(t, g.wait(t, 1, 100*time.Millisecond), "a body signed for another context is not handed out")
		})
	}
}

// The upgrade path: a body signed by an earlier release (a MAC under the
// bare key, valid in any queue) is untagged unless the receiver sets
// AcceptContextFreeMAC; with it, both forms are accepted.
func TestSec3AcceptContextFreeMAC(t *testing.T) {
	ctx := context.Background()
	for _, accept := range []bool{false, true} {
		t.Run(fmt.Sprintf("accept=%v", accept), func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{Shards: 1})
			epoch := seqstore.NewEpoch(time.Now().Add(-time.Hour))
			// Seq 1 from an old sender, seq 2 from an upgraded one.
			rxSend(t, drv, [][]byte{sec3Forge(sec3Key, "g", epoch, 1, "old sender")})
			snd, err := ordered.New(ctx, drv, &fixedEpochStore{Store: memstore.New(), epoch: epoch, first: 2}, &ordered.Options{Key: sec3Key})
			require.NoError(t, err)
			require.NoError(t, snd.Send(ctx, "g", []byte("new sender")))
			rxClose(t, snd)

			var untagged atomic.Int64
			rx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: sec3Key, AcceptContextFreeMAC: accept,
				Hooks:   ordered.Hooks{OnUntagged: func(ordered.Event) { untagged.Add(1) }},
				Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, Start: ordered.StartLowest, StartSettle: 100 * time.Millisecond}})
			require.NoError(t, err)
			var g sec3Got
			sec3Run(t, rx, &g)
			if accept {
				out := g.wait(t, 2, 5*time.Second)
				require.Len(t, out, 2, "handed out:%s", sec3Dump(out))
				assert.Equal(t, "old sender", string(out[0].Body))
				assert.Equal(t, "new sender", string(out[1].Body))
				assert.False(t, out[0].Unordered || out[1].Unordered)
				return
			}
			require.Eventually(t, func() bool { return untagged.Load() >= 1 }, 5*time.Second, 10*time.Millisecond, "the old form reported untagged")
			out := g.wait(t, 1, 5*time.Second)
			require.Len(t, out, 1, "handed out:%s", sec3Dump(out))
			assert.Equal(t, "new sender", string(out[0].Body), "only the context-bound MAC verifies")
		})
	}
}

// fixedEpochStore reserves at a chosen epoch and first seq, as a store
// holding an earlier sender's state would.
type fixedEpochStore struct {
	seqstore.Store
	epoch, first uint64
}

func (s *fixedEpochStore) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	rs, err := s.Store.Reserve(ctx, reqs)
	for i := range rs {
		rs[i].Epoch, rs[i].First = s.epoch, s.first
		s.first += uint64(reqs[i].N)
	}
	return rs, err
}

// An empty entry in OldKeys (an unset environment variable read into it),
// an empty or short Key: New refuses them. Before, the empty old key was
// accepted and a header signed with it (which anyone can compute, here at
// epoch MaxNumber) was handed out as ordered.
func TestSec3EmptyOldKeyFailsOpen(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		o    ordered.Options
		want string
	}{
		{"empty old key", ordered.Options{Key: sec3Key, OldKeys: [][]byte{[]byte(os.Getenv("SEC3_UNSET_OLD_KEY"))}}, "OldKeys[0]"},
		{"short old key", ordered.Options{Key: sec3Key, OldKeys: [][]byte{sec3Key, []byte("k")}}, "OldKeys[1]"},
		{"empty key", ordered.Options{Key: []byte(os.Getenv("SEC3_UNSET_KEY"))}, "Key"},
		{"one-byte key", ordered.Options{Key: []byte("k")}, "Key"},
		{"15-byte key", ordered.Options{Key: []byte("fifteen bytes!!")}, "Key"},
		{"old keys without key", ordered.Options{OldKeys: [][]byte{sec3Key}}, "OldKeys without Key"},
		{"context without key", ordered.Options{MACContext: "x"}, "need Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			_, err := ordered.New(ctx, memqueue.New(nil), memstore.New(), &o)
			require.Error(t, err, "options must be refused")
			assert.ErrorContains(t, err, tc.want)
			if strings.Contains(tc.name, "key") && !strings.Contains(tc.name, "without") {
				assert.ErrorIs(t, err, envelope.ErrWeakKey)
			}
		})
	}
	q, err := ordered.New(ctx, memqueue.New(nil), memstore.New(), &ordered.Options{Key: []byte("sixteen bytes!!!")})
	require.NoError(t, err, "a 16-byte key is accepted")
	rxClose(t, q)

	// With a valid configuration, a header signed with the empty key is
	// not authenticated, even when the handler asks for untagged bodies.
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	q, err = ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: sec3Key, OldKeys: [][]byte{[]byte("old-key-0123456789abcdef")},
		Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, Untagged: ordered.UntaggedDeliver}})
	require.NoError(t, err)
	var g sec3Got
	sec3Run(t, q, &g)
	require.NoError(t, drv.SendBatch(ctx, [][]byte{sec3Forge([]byte{}, "acct", envelope.MaxNumber, 1, "FORGED")}))
	out := g.wait(t, 1, 3*time.Second)
	require.Len(t, out, 1, "handed out:%s", sec3Dump(out))
	assert.True(t, out[0].Unordered, "FAIL-OPEN: header signed with the empty key accepted as ordered (epoch %d)", out[0].Epoch)
}

// With a key, unsigned bodies do not reach the handler by default: they go
// to the dead-letter queue when there is one, else stay in the queue, and
// are reported. An explicit UntaggedDeliver still hands them out flagged.
// Before, both reached the handler under the default policy.
func TestSec3UnsignedDeliveredWithKey(t *testing.T) {
	ctx := context.Background()
	forged := [][]byte{[]byte("#v1;1;1;acct#transfer all"), []byte("plain forged")}
	for _, tc := range []string{"default", "default with DLQ", "explicit deliver"} {
		t.Run(tc, func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: time.Minute})
			var dlq *memqueue.Queue
			var untagged atomic.Int64
			o := &ordered.Options{Key: sec3Key,
				Hooks:   ordered.Hooks{OnUntagged: func(ordered.Event) { untagged.Add(1) }},
				Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, ReapInterval: 5 * time.Millisecond}}
			switch tc {
			case "default with DLQ":
				dlq = memqueue.New(nil)
				o.Receive.DeadLetter = dlq
			case "explicit deliver":
				o.Receive.Untagged = ordered.UntaggedDeliver
			}
			q, err := ordered.New(ctx, drv, memstore.New(), o)
			require.NoError(t, err)
			var g sec3Got
			sec3Run(t, q, &g)
			require.NoError(t, drv.SendBatch(ctx, forged))
			require.Eventually(t, func() bool { return untagged.Load() >= 2 }, 5*time.Second, 10*time.Millisecond, "both reported untagged")
			if tc == "explicit deliver" {
				out := g.wait(t, 2, 5*time.Second)
				require.Len(t, out, 2, "UntaggedDeliver hands them out:%s", sec3Dump(out))
				assert.True(t, out[0].Unordered && out[1].Unordered)
				return
			}
			if dlq != nil {
				require.Eventually(t, func() bool { n, _ := dlq.Len(); return n == 2 }, 5*time.Second, 10*time.Millisecond, "dead-lettered")
			}
			out := g.wait(t, 1, 200*time.Millisecond)
			assert.Empty(t, out, "unsigned bodies reached the handler although a Key is set:%s", sec3Dump(out))
			vis, inflight := drv.Len()
			if dlq == nil {
				assert.Equal(t, 2, vis+inflight, "rejected: left in the queue")
			} else {
				require.Eventually(t, func() bool { vis, inflight := drv.Len(); return vis+inflight == 0 }, 5*time.Second, 10*time.Millisecond,
					"deleted once dead-lettered")
			}
		})
	}
}

// A forged epoch takes no group over: far ahead of the clock without a key
// (the day-ahead clamp), or unsigned with a key. (Without a key, an epoch
// within the clamp, such as now+1h, still takes a group over: anyone who
// can write the queue can forge any header then; see Options.Key.)
func TestSec3ForgedEpoch(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for _, tc := range []struct {
		name   string
		key    []byte
		forged func() []byte
	}{
		{"nokey-max", nil, func() []byte { return sec3Forge(nil, "acct", envelope.MaxNumber, 1, "FORGED") }},
		{"nokey-2days", nil, func() []byte {
			return sec3Forge(nil, "acct", seqstore.NewEpoch(time.Now().Add(48*time.Hour)), 1, "FORGED")
		}},
		{"key-unsigned-now+1h", sec3Key, func() []byte {
			return sec3Forge(nil, "acct", seqstore.NewEpoch(time.Now().Add(time.Hour)), 1, "FORGED")
		}},
		{"key-signed-max", sec3Key, func() []byte {
			// Signed by the key's holder (a sender whose store was
			// tampered with, or whose clock is wrong).
			return sec3Forge(envelope.ContextKey(sec3Key, "default"), "acct", envelope.MaxNumber, 1, "FORGED")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv := memqueue.New(&memqueue.Options{Shards: 1})
			opts := &ordered.Options{Key: tc.key, Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, GapTimeout: 200 * time.Millisecond,
				Untagged: ordered.UntaggedDeliver}}
			q, err := ordered.New(context.Background(), drv, memstore.New(), opts)
			require.NoError(t, err)
			var g sec3Got
			sec3Run(t, q, &g)
			ctx := context.Background()
			for i := 1; i <= 3; i++ {
				require.NoError(t, q.Send(ctx, "acct", []byte("real-"+strconv.Itoa(i))))
			}
			g.wait(t, 3, 5*time.Second)
			require.NoError(t, drv.SendBatch(ctx, [][]byte{tc.forged()}))
			time.Sleep(500 * time.Millisecond)
			for i := 4; i <= 5; i++ {
				require.NoError(t, q.Send(ctx, "acct", []byte("real-"+strconv.Itoa(i))))
			}
			ms := g.wait(t, 6, 5*time.Second)
			t.Logf("%s: handed out:%s", tc.name, sec3Dump(ms))
			require.Len(t, ms, 6)
			for _, m := range ms {
				forged := strings.Contains(string(m.Body), "FORGED")
				assert.False(t, forged && !m.Unordered, "forged body handed out as ordered seq %d of epoch %d", m.Seq, m.Epoch)
				assert.False(t, !forged && m.Unordered, "real message %q demoted to Unordered (group taken over)", m.Body)
			}
		})
	}
}

// Keys of at least 16 bytes from the environment, as the example does; a
// signed round trip works with OldKeys during a rotation.
func TestSec3KeyRotation(t *testing.T) {
	ctx := context.Background()
	oldKey, newKey := []byte("old-key-0123456789abcdef"), []byte("new-key-0123456789abcdef")
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	snd, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: oldKey})
	require.NoError(t, err)
	require.NoError(t, snd.Send(ctx, "g", []byte("under the old key")))
	rxClose(t, snd)
	rx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: newKey, OldKeys: [][]byte{oldKey},
		Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}})
	require.NoError(t, err)
	var g sec3Got
	sec3Run(t, rx, &g)
	out := g.wait(t, 1, 5*time.Second)
	require.Len(t, out, 1)
	assert.False(t, out[0].Unordered, "a body signed under an old key verifies during the rotation")
}
