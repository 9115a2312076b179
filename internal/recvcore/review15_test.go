package recvcore_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// Review 15: an Unordered hand-out the application had (d) is disowned
// and handed out again (d2). Core.check tells an Unordered message's
// hand-outs apart by Attempt only; Disown takes the attempt back, so d2
// had d's Attempt, and the stale d still settled d2 (its holder's Ack then
// got ErrSettled). Return has the same shape, but its d never reached
// anyone; Disown's did. Fixed: Disown keeps an Unordered message's attempt.
func TestReview15_DisownUnorderedStaleDeliveryRefused(t *testing.T) {
	h := newEH(t, ehConfig())
	h.arrive([]byte("plain untagged payload"))
	d, ok := h.next()
	require.True(t, ok)
	require.True(t, d.Unordered)
	require.NoError(t, h.c.Disown(h.now, &d))
	h.ready()
	d2, ok := h.next()
	require.True(t, ok, "handed out again")
	require.Equal(t, d.Attempt+1, d2.Attempt, "told apart from the disowned hand-out by its attempt")
	_, err := h.c.Ack(h.now, &d, false)
	require.ErrorIs(t, err, recvcore.ErrSettled, "the disowned hand-out's Ack must not settle the next hand-out")
}

// The same for a grouped message (held up: gen tells the hand-outs apart).
func TestReview15_DisownGroupedStaleDeliveryRefused(t *testing.T) {
	h := newEH(t, ehConfig())
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	h.arrive(tagged("g", 1, 1))
	h.pump(w)
	d, ok := h.next()
	require.True(t, ok)
	require.NoError(t, h.c.Disown(h.now, &d))
	h.ready()
	d2, ok := h.next()
	require.True(t, ok)
	_, err := h.c.Ack(h.now, &d, false)
	require.ErrorIs(t, err, recvcore.ErrSettled)
	require.ErrorIs(t, h.c.Nack(h.now, &d, errors.New("x")), recvcore.ErrSettled)
	require.ErrorIs(t, h.c.Disown(h.now, &d), recvcore.ErrSettled)
	_, err = h.c.Ack(h.now, &d2, false)
	require.NoError(t, err)
}

// Disown at MaxAttempts: a poison message (MaxAttempts failures) handed
// out again and disowned must keep its attempt count; Disown then Nack of
// the new hand-out applies the poison policy at the same attempt.
func TestReview15_DisownKeepsAttempts(t *testing.T) {
	cfg := ehConfig()
	cfg.Poison = recvcore.PoisonDeadLetter
	cfg.DeadLetter = true
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	h.arrive(tagged("g", 1, 1))
	h.pump(w)
	var d recvcore.Delivery
	for i := 1; i < cfg.MaxAttempts; i++ {
		var ok bool
		d, ok = h.next()
		require.True(t, ok, "attempt %d", i)
		require.Equal(t, i, d.Attempt)
		require.NoError(t, h.c.Nack(h.now, &d, errors.New("fail")))
		h.tick(cfg.RetryMax)
	}
	d, ok := h.next()
	require.True(t, ok)
	require.Equal(t, cfg.MaxAttempts, d.Attempt)
	require.NoError(t, h.c.Disown(h.now, &d))
	h.ready()
	d2, ok := h.next()
	require.True(t, ok)
	require.Equal(t, cfg.MaxAttempts, d2.Attempt)
	require.NoError(t, h.c.Nack(h.now, &d2, errors.New("fail")))
	h.ready()
	require.Len(t, h.deads, 1, "dead-lettered at MaxAttempts")
	st := h.c.Stats()
	require.Equal(t, int64(cfg.MaxAttempts+1), st.Delivered)
}
