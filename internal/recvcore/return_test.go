package recvcore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// TestReturn: a hand-out that never reached the application comes back
// first, as the same attempt, and does not count as delivered; one
// returned at Close is given back to the queue; AtMostOnce refuses it.
func TestReturn(t *testing.T) {
	t.Run("handed out again first", func(t *testing.T) {
		h := newEH(t, ehConfig())
		w := newEHWorld()
		w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
		h.arrive(tagged("g", 1, 1), tagged("g", 1, 2))
		h.pump(w)
		d, ok := h.next()
		require.True(t, ok)
		require.Equal(t, uint64(1), d.Seq)
		require.NoError(t, h.c.Return(h.now, &d))
		h.ready()
		require.ErrorIs(t, h.c.Return(h.now, &d), recvcore.ErrSettled, "returned twice")
		require.Zero(t, h.c.Stats().Delivered)

		again, ok := h.next()
		require.True(t, ok, "the returned message is ready at once")
		require.Equal(t, uint64(1), again.Seq)
		require.Equal(t, d.Attempt, again.Attempt, "the same attempt")
		_, err := h.c.Ack(h.now, &d, false)
		require.ErrorIs(t, err, recvcore.ErrSettled, "the returned Delivery is stale")
		_, err = h.c.Ack(h.now, &again, false)
		require.NoError(t, err)
		h.ready()
		d2, ok := h.next()
		require.True(t, ok)
		require.Equal(t, uint64(2), d2.Seq)
		require.Equal(t, int64(2), h.c.Stats().Delivered)
	})
	t.Run("given back at close", func(t *testing.T) {
		h := newEH(t, ehConfig())
		w := newEHWorld()
		w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
		receipts := h.arrive(tagged("g", 1, 1))
		h.pump(w)
		d, ok := h.next()
		require.True(t, ok)
		h.c.Close(h.now)
		h.ready()
		require.NoError(t, h.c.Return(h.now, &d))
		h.ready()
		require.Contains(t, h.visAll(), receipts[0], "its visibility shortened: back to the queue")
		_, ok = h.next()
		require.False(t, ok)
	})
	t.Run("at-most-once", func(t *testing.T) {
		cfg := ehConfig()
		cfg.Mode = recvcore.AtMostOnce
		h := newEH(t, cfg)
		w := newEHWorld()
		w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
		h.arrive(tagged("g", 1, 1))
		h.pump(w)
		d, ok := h.next()
		require.True(t, ok)
		require.ErrorIs(t, h.c.Return(h.now, &d), recvcore.ErrNotReturnable)
	})
}

// TestDisown: a hand-out the application had but whose settle no longer
// counts (the lease ended) is taken back: it stays counted as delivered,
// comes again as the same attempt (no handler failed), and after Close it is given back to the
// queue instead of staying invisible until its last extension ends.
func TestDisown(t *testing.T) {
	t.Run("handed out again", func(t *testing.T) {
		h := newEH(t, ehConfig())
		w := newEHWorld()
		w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
		h.arrive(tagged("g", 1, 1))
		h.pump(w)
		d, ok := h.next()
		require.True(t, ok)
		require.NoError(t, h.c.Disown(h.now, &d))
		h.ready()
		require.ErrorIs(t, h.c.Disown(h.now, &d), recvcore.ErrSettled, "disowned twice")
		require.Equal(t, int64(1), h.c.Stats().Delivered)
		again, ok := h.next()
		require.True(t, ok)
		require.Equal(t, uint64(1), again.Seq)
		require.Equal(t, d.Attempt, again.Attempt, "the same attempt: not a failure")
	})
	t.Run("given back at close", func(t *testing.T) {
		h := newEH(t, ehConfig())
		w := newEHWorld()
		w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
		receipts := h.arrive(tagged("g", 1, 1))
		h.pump(w)
		d, ok := h.next()
		require.True(t, ok)
		require.NoError(t, h.c.Disown(h.now, &d))
		h.ready()
		h.c.Close(h.now)
		h.ready()
		require.Contains(t, h.visAll(), receipts[0], "its visibility shortened: back to the queue")
		_, ok = h.next()
		require.False(t, ok)
	})
	t.Run("at-most-once", func(t *testing.T) {
		cfg := ehConfig()
		cfg.Mode = recvcore.AtMostOnce
		h := newEH(t, cfg)
		w := newEHWorld()
		w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
		h.arrive(tagged("g", 1, 1))
		h.pump(w)
		d, ok := h.next()
		require.True(t, ok)
		require.ErrorIs(t, h.c.Disown(h.now, &d), recvcore.ErrNotReturnable)
	})
}
