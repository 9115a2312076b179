package ordered_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

const mdTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// mdGot collects what Run hands out, with each message's metadata.
type mdGot struct {
	mu   sync.Mutex
	msgs []mdMsg
}

type mdMsg struct {
	seq         uint64
	body        string
	unordered   bool
	md          map[string]string
	traceparent string
}

func (g *mdGot) handler(_ context.Context, m *ordered.Message) error {
	g.mu.Lock()
	g.msgs = append(g.msgs, mdMsg{seq: m.Seq, body: string(m.Body), unordered: m.Unordered, md: m.Metadata(), traceparent: m.TraceParent()})
	g.mu.Unlock()
	return nil
}

func (g *mdGot) wait(t *testing.T, n int) []mdMsg {
	t.Helper()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.msgs) >= n
	}, 10*time.Second, 5*time.Millisecond, "waiting for %d messages", n)
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]mdMsg(nil), g.msgs...)
}

func mdRun(t *testing.T, q *ordered.Queue) *mdGot {
	var g mdGot
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = q.Run(ctx, g.handler) }()
	t.Cleanup(func() { cancel(); <-done; rxClose(t, q) })
	return &g
}

// mdDrain takes every message out of drv (deleting it) and returns the
// bodies by seq.
func mdDrain(t *testing.T, drv driver.Queue, n int) map[uint64][]byte {
	t.Helper()
	ctx := context.Background()
	out := make(map[uint64][]byte)
	deadline := time.Now().Add(5 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		ms, err := drv.ReceiveBatch(ctx, 16, 20*time.Millisecond)
		require.NoError(t, err)
		for _, m := range ms {
			h, _, ok := envelope.Parse(m.Body)
			require.True(t, ok, "body %q has a header", m.Body)
			out[h.Seq] = m.Body
			require.NoError(t, drv.DeleteBatch(ctx, []string{m.Receipt}))
		}
	}
	require.Len(t, out, n, "messages in the queue")
	return out
}

// Metadata set at send comes back on the Message, with and without a key;
// a message sent without metadata is written byte for byte as before (v1),
// whichever method sent it.
func TestSendWithMetadataRoundTrip(t *testing.T) {
	for _, key := range [][]byte{nil, sec3Key} {
		t.Run("key="+strconv.FormatBool(key != nil), func(t *testing.T) {
			ctx := context.Background()
			drv := memqueue.New(&memqueue.Options{Shards: 1})
			sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: key})
			require.NoError(t, err)
			md := map[string]string{"traceparent": mdTraceparent, "tenant": "acme corp", "note": "a;b<c>&d%\n订"}
			require.NoError(t, sender.SendWithMetadata(ctx, "g", []byte("one"), md))
			require.NoError(t, sender.Send(ctx, "g", []byte("two")))
			require.NoError(t, sender.SendWithMetadata(ctx, "g", []byte("three"), nil))
			r, err := sender.SendAsyncWithMetadata(ctx, "g", []byte("four"), map[string]string{"k": "v"})
			require.NoError(t, err)
			require.NoError(t, r.Wait(ctx))
			md["tenant"] = "changed after send" // not kept by the Queue
			rxClose(t, sender)

			bodies := mdDrain(t, drv, 4)
			for seq, payload := range map[uint64]string{2: "two", 3: "three"} {
				h := envelope.Header{Group: "g", Epoch: r.Epoch(), Seq: seq}
				if key != nil {
					h.Signed, h.MAC = true, envelope.Sign(envelope.ContextKey(key, "default"), h, []byte(payload))
				}
				assert.Equal(t, string(envelope.Append(nil, h, []byte(payload))), string(bodies[seq]),
					"seq %d without metadata is a v1 body, as before metadata existed", seq)
			}
			assert.True(t, bytes.HasPrefix(bodies[1], []byte("#v2;")), "with metadata: v2, got %q", bodies[1])

			var all [][]byte
			for seq := uint64(1); seq <= 4; seq++ {
				all = append(all, bodies[seq])
			}
			require.NoError(t, drv.SendBatch(ctx, all))
			q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: key, Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}})
			require.NoError(t, err)
			got := mdRun(t, q).wait(t, 4)
			want := []mdMsg{
				{seq: 1, body: "one", md: map[string]string{"traceparent": mdTraceparent, "tenant": "acme corp", "note": "a;b<c>&d%\n订"}, traceparent: mdTraceparent},
				{seq: 2, body: "two"},
				{seq: 3, body: "three"},
				{seq: 4, body: "four", md: map[string]string{"k": "v"}},
			}
			assert.Equal(t, want, got)
		})
	}
}

// Metadata that the header cannot carry is refused before anything is
// reserved, with an error wrapping ErrInvalidMetadata.
func TestSendMetadataRefused(t *testing.T) {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	q, err := ordered.New(ctx, drv, memstore.New(), nil)
	require.NoError(t, err)
	for name, md := range map[string]map[string]string{
		"over 1 KiB":         {"k": strings.Repeat("v", 1023)},
		"over 1 KiB escaped": {"k": strings.Repeat("\n", 342)},
		"key with a space":   {"bad key": "v"},
		"empty key":          {"": "v"},
		"non-ASCII key":      {"clé": "v"},
	} {
		err := q.SendWithMetadata(ctx, "g", []byte("x"), md)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ordered.ErrInvalidMetadata, name)
		assert.True(t, strings.HasPrefix(err.Error(), "ordered: invalid metadata"), "%s: %v", name, err)
		_, err = q.SendAsyncWithMetadata(ctx, "g", []byte("x"), md)
		assert.ErrorIs(t, err, ordered.ErrInvalidMetadata, name)
	}
	assert.ErrorContains(t, q.SendWithMetadata(ctx, "g", nil, map[string]string{"k": strings.Repeat("v", 1023)}), "1025 bytes, more than 1024")
	require.NoError(t, q.SendWithMetadata(ctx, "g", nil, map[string]string{"k": strings.Repeat("v", 1022)}), "exactly 1 KiB fits")
	st := q.Stats()
	assert.Equal(t, int64(1), st.Requests.Reserve, "only the message that fits reserved a seq")
	assert.Equal(t, int64(1), st.Send.Sent)
	rxClose(t, q)

	legacy, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Send: ordered.SendOptions{Format: ordered.FormatLegacy}})
	require.NoError(t, err)
	err = legacy.SendWithMetadata(ctx, "", []byte("x"), map[string]string{"k": "v"})
	assert.ErrorIs(t, err, ordered.ErrInvalidMetadata, "the legacy format carries no metadata")
	require.NoError(t, legacy.SendWithMetadata(ctx, "", []byte("x"), nil), "no metadata: a legacy send")
	rxClose(t, legacy)
}

// With a key, the metadata is covered by the MAC: a message whose metadata
// was changed in the queue does not verify, is untagged (reported with a
// bad-MAC error) and handed out only as Unordered, without metadata.
func TestMetadataTamperedFailsVerification(t *testing.T) {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: sec3Key})
	require.NoError(t, err)
	md := map[string]string{"traceparent": mdTraceparent, "user": "alice"}
	require.NoError(t, sender.SendWithMetadata(ctx, "g", []byte("one"), md))
	require.NoError(t, sender.SendWithMetadata(ctx, "g", []byte("two"), md))
	rxClose(t, sender)
	bodies := mdDrain(t, drv, 2)

	tampered := bytes.Replace(bodies[1], []byte("user=alice"), []byte("user=mallo"), 1)
	require.NotEqual(t, bodies[1], tampered)
	h, _, ok := envelope.Parse(tampered)
	require.True(t, ok, "the tampered body still parses: only its MAC can tell")
	assert.Equal(t, "mallo", envelope.DecodeMetadata(h.Meta)["user"])
	require.NoError(t, drv.SendBatch(ctx, [][]byte{tampered, bodies[2]}))

	var untagged []error
	var mu sync.Mutex
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: sec3Key, Hooks: ordered.Hooks{
		OnUntagged: func(ev ordered.Event) { mu.Lock(); untagged = append(untagged, ev.Err); mu.Unlock() },
	}, Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, Untagged: ordered.UntaggedDeliver, GapTimeout: time.Hour}})
	require.NoError(t, err)
	got := mdRun(t, q).wait(t, 1)
	require.Len(t, got, 1, "seq 2 waits for seq 1, which did not verify")
	assert.True(t, got[0].unordered, "the tampered message is untagged")
	assert.Nil(t, got[0].md, "an untagged message carries no metadata")
	assert.Empty(t, got[0].traceparent)
	assert.Equal(t, string(tampered), got[0].body, "handed out as the whole body, header included")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(untagged) == 1 }, 5*time.Second, 5*time.Millisecond)
	mu.Lock()
	assert.ErrorContains(t, untagged[0], "MAC")
	mu.Unlock()
	assert.Equal(t, int64(1), q.Stats().Receive.Untagged)
}

// Recovery re-sends a journaled message with its metadata, sealed or not;
// a payload that begins like the journal's metadata frame, sent without
// metadata, comes back unchanged.
func TestMetadataRecovered(t *testing.T) {
	for _, key := range [][]byte{nil, sec3Key} {
		t.Run("key="+strconv.FormatBool(key != nil), func(t *testing.T) {
			ctx := context.Background()
			store := memstore.New()
			broken := newSendDriver()
			broken.fail = func(int, [][]byte) error { return errPermanent }
			q1, err := ordered.New(ctx, broken, store, &ordered.Options{Key: key, Send: ordered.SendOptions{NoRecover: true}})
			require.NoError(t, err)
			md := map[string]string{"traceparent": mdTraceparent, "tenant": "acme"}
			lookalike := "\xffiM1\x00\x03k=vpayload"
			require.True(t, errors.Is(q1.SendWithMetadata(ctx, "g", []byte("one"), md), errPermanent))
			require.True(t, errors.Is(q1.Send(ctx, "g", []byte(lookalike)), errPermanent))
			require.True(t, errors.Is(q1.SendWithMetadata(ctx, "g", []byte("three"), map[string]string{"k": "3"}), errPermanent))
			rxClose(t, q1)
			pending, err := store.Pending(ctx, "default")
			require.NoError(t, err)
			require.Len(t, pending, 3, "the failed sends stay journaled")

			drv := memqueue.New(&memqueue.Options{Shards: 1})
			q2, err := ordered.New(ctx, drv, store, &ordered.Options{Key: key, Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return q2.Stats().Send.Recovered == 3 }, 5*time.Second, 5*time.Millisecond, "New recovers the journal")
			got := mdRun(t, q2).wait(t, 3)
			assert.Equal(t, []mdMsg{
				{seq: 1, body: "one", md: md, traceparent: mdTraceparent},
				{seq: 2, body: lookalike},
				{seq: 3, body: "three", md: map[string]string{"k": "3"}},
			}, got)
		})
	}
}

// A message parked in the store (early, beyond the cap) keeps its metadata
// when it is read back: parking keeps the whole body, header included.
func TestMetadataParked(t *testing.T) {
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: sec3Key})
	require.NoError(t, err)
	for i := 1; i <= 5; i++ {
		require.NoError(t, sender.SendWithMetadata(ctx, "g", []byte("m"+strconv.Itoa(i)), map[string]string{"n": strconv.Itoa(i), "traceparent": mdTraceparent}))
	}
	rxClose(t, sender)
	bodies := mdDrain(t, drv, 5)
	require.NoError(t, drv.SendBatch(ctx, [][]byte{bodies[2], bodies[3], bodies[4], bodies[5]}))
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Key: sec3Key, Receive: ordered.ReceiveOptions{
		Wait: 20 * time.Millisecond, Window: 1, MaxUndeleted: 2}})
	require.NoError(t, err)
	g := mdRun(t, q)
	require.Eventually(t, func() bool { return q.Stats().Receive.Parked >= 3 }, 5*time.Second, 5*time.Millisecond, "early arrivals parked")
	require.NoError(t, drv.SendBatch(ctx, [][]byte{bodies[1]}))
	got := g.wait(t, 5)
	require.Len(t, got, 5)
	for i, m := range got {
		n := strconv.Itoa(i + 1)
		assert.Equal(t, mdMsg{seq: uint64(i + 1), body: "m" + n, md: map[string]string{"n": n, "traceparent": mdTraceparent}, traceparent: mdTraceparent}, m)
	}
	assert.GreaterOrEqual(t, q.Stats().Receive.Unparked, int64(3), "read back from the park")
}
