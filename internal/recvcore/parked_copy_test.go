package recvcore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestAnotherCopyOfAParkedSeqIsReleased: a message read back from the park
// waits for its turn; another queue message with its seq arrives (a
// duplicate send, or the copy a newer owner of the group took from the park
// and sent back while this receiver, its lease ended without its knowing,
// still sees it parked). That message is released, not deleted: deleting
// it lost the newer owner's only copy (review13's world case, whose replay
// no longer reaches it since the world and the core moved on).
func TestAnotherCopyOfAParkedSeqIsReleased(t *testing.T) {
	cfg := ehConfig()
	cfg.Park = true
	cfg.Window = 2
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	var rs []string
	for _, s := range []uint64{1, 4, 5} { // 4 and 5 are beyond the window: parked
		rs = append(rs, h.arrive(tagged("g", 1, s))...)
		h.pump(w)
		h.tick(time.Second)
		h.pump(w)
	}
	require.Contains(t, w.park["g"], uint64(5), "%+v\n%s", h.c.Stats(), h.c.Dump())
	require.Contains(t, h.deleted, rs[2], "parked, then deleted from the queue")
	for s := uint64(1); s <= 4; s++ {
		if s == 2 || s == 3 {
			h.arrive(tagged("g", 1, s))
			h.pump(w)
		}
		h.tick(time.Second)
		h.pump(w)
		d, ok := h.next()
		require.True(t, ok, "seq %d\n%s", s, h.c.Dump())
		require.Equal(t, s, d.Seq)
		if s == 4 {
			break // out with the application: 5, read back with it, waits
		}
		_, err := h.c.Ack(h.now, &d, false)
		require.NoError(t, err)
		h.pump(w)
	}
	require.Equal(t, int64(2), h.c.Stats().Unparked, "4 and 5 read back from the park\n%s", h.c.Dump())

	other := h.arriveID("another-id", tagged("g", 1, 5))
	h.pump(w)
	require.NotContains(t, h.deleted, other, "another message with the parked seq is not deleted: it may be the only copy")
	require.Equal(t, int64(1), h.c.Stats().Released, "it is released: back to the queue")

}
