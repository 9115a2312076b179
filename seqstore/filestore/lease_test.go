package filestore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestLeaserNotSupported checks that every lease method refuses with
// ErrNotSupported, after validating its arguments, and fails with
// ErrClosed after Close and with the context's error when it ended.
func TestLeaserNotSupported(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	var l seqstore.Leaser = s
	m := seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}
	held := []seqstore.Lease{{Shard: 0, Token: 1, Owner: "a-1"}}
	tp := seqstore.Topology{Shards: 1, Hash: "h", Queues: []string{"q"}}
	calls := func(ctx context.Context, ns string) map[string]error {
		_, hb := l.Heartbeat(ctx, ns, m, time.Second)
		_, acq := l.Acquire(ctx, ns, []int{0}, "a-1", time.Second)
		_, ren := l.Renew(ctx, ns, held, time.Second)
		_, ls := l.Leases(ctx, ns)
		return map[string]error{
			"Topology": l.Topology(ctx, ns, tp), "Heartbeat": hb, "Acquire": acq, "Renew": ren,
			"Release": l.Release(ctx, ns, held), "Leave": l.Leave(ctx, ns, "a-1"), "Leases": ls,
		}
	}
	for name, err := range calls(t.Context(), "ns") {
		assert.ErrorIs(t, err, seqstore.ErrNotSupported, "%s", name)
	}
	for name, err := range calls(t.Context(), "") {
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "%s with an empty namespace", name)
	}
	_, err = l.Acquire(t.Context(), "ns", []int{-1}, "a-1", time.Second)
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Acquire of shard -1")
	_, err = l.Renew(t.Context(), "ns", held, 0)
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument, "Renew with ttl 0")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for name, err := range calls(ctx, "ns") {
		assert.ErrorIs(t, err, context.Canceled, "%s with a cancelled context", name)
	}
	require.NoError(t, s.Close())
	for name, err := range calls(t.Context(), "ns") {
		assert.ErrorIs(t, err, seqstore.ErrClosed, "%s after Close", name)
	}
}
