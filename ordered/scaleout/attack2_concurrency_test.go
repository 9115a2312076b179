package scaleout

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestAttack2SenderDefaultConcurrencyScalesWithShards: NewSender's default
// Concurrency is 16 per shard, and the ordered sender starts all its
// workers at once, so a sender over the 1024 shards the package allows
// (seqstore.MaxShards) starts 16384 goroutines (and about 50 MB of heap
// and stacks, measured) to send a single message, and holds them for its
// life; a process with a sender per logical queue multiplies that. What a
// user sees: memory and goroutine counts that grow with S although the
// load did not, and up to 16*S requests in flight at once to the service
// (the per-shard batchers allow 16 each: 16384 open HTTP requests over
// S=1024). Cause: scaleout.go sets o.Send.Concurrency =
// 16*len(shards) when left 0, and ordered's sender spawns Concurrency
// workers eagerly (send.go: s.workers.Add(o.Concurrency)). Suggested fix:
// cap the default (the per-shard batchers already merge: the sender's
// workers only need to keep each busy shard's batcher fed), or start the
// sender's workers on demand.
func TestAttack2SenderDefaultConcurrencyScalesWithShards(t *testing.T) {
	before := runtime.NumGoroutine()
	shards := make([]Shard, 1024)
	for i := range shards {
		shards[i] = Shard{Name: fmt.Sprintf("orders-%d", i), Queue: memqueue.New(nil)}
	}
	ctx := context.Background()
	snd, err := NewSender(ctx, shards, memstore.New(), &ordered.Options{Name: "orders"})
	require.NoError(t, err)
	defer func() { _ = snd.Close(ctx) }()
	require.NoError(t, snd.Send(ctx, "g", []byte("x")))
	require.Less(t, runtime.NumGoroutine()-before, 2048,
		"goroutines a sender over 1024 shards keeps after sending one message")
}
