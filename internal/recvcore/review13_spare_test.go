package recvcore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
)

// Review13: 5b512e1 drops the spare msgs only inside compact, and only when
// live is 0 at that moment. A group is compacted compactDelay after its
// cursor is durable, while its deletes may still be in flight (a slow or
// retried DeleteBatch): live > 0 then, nothing is dropped, and the deletes'
// msgs that come back to the pool afterwards stay for good, since no
// compaction follows (the goal of the change: "a receiver that saw a burst
// and then nothing does not keep them for good").
func TestReview13_SparesKeptWhenDeletesOutlastCompaction(t *testing.T) {
	cfg := ehConfig()
	cfg.IdleEvict = time.Hour
	h := newEH(t, cfg)
	w := newEHWorld()
	h.noDeletes = true // the queue's deletes are slow: they answer late
	h.burst(w)
	for range 10 {
		h.tick(100 * time.Millisecond)
		h.pump(w)
	}
	require.NotZero(t, len(h.deletes), "deletes in flight")
	for range 7 { // the groups are compacted while the deletes are out
		h.tick(time.Second)
		h.pump(w)
	}
	h.noDeletes = false
	h.pump(w) // the deletes answer now
	require.Zero(t, h.c.Stats().Held, "every message deleted")
	for range 20 {
		h.tick(time.Second)
		h.pump(w)
	}
	require.Zero(t, recvcore.Spare(h.c), "an idle Core with nothing held keeps no spare msgs (kept: %d)", recvcore.Spare(h.c))
}
