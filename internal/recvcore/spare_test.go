package recvcore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// TestIdleCoreDropsItsSpares: the msgs kept for reuse (up to 4,096, about
// 750 KB) go once nothing received is held and nothing arrived for 5 s: a
// receiver that saw a burst and then nothing does not keep them for good
// (ordered's TestReceiveManyGroupsMemory counted them per idle group).
func TestIdleCoreDropsItsSpares(t *testing.T) {
	cfg := ehConfig()
	cfg.IdleEvict = time.Hour
	h := newEH(t, cfg)
	w := newEHWorld()
	h.burst(w)
	for range 10 {
		h.tick(100 * time.Millisecond)
		h.pump(w)
	}
	require.Zero(t, h.c.Stats().Held, "every message deleted")
	require.Positive(t, recvcore.Spare(h.c), "the deleted messages' msgs are kept for reuse")
	h.tick(time.Second)
	require.Positive(t, recvcore.Spare(h.c), "kept while the last arrival is less than 5 s old")
	for range 6 {
		h.tick(time.Second)
		h.pump(w)
	}
	require.Zero(t, recvcore.Spare(h.c), "an idle Core with nothing held keeps no spare msgs")
}

// burst has 20 groups of 3 messages each arrive, and hands out and acks
// them all, answering what the Core asks for on the way (unless
// h.noDeletes).
func (h *eh) burst(w *ehWorld) {
	var bodies [][]byte
	for g := range 20 {
		name := fmt.Sprintf("g%02d", g)
		w.curs[name] = seqstore.Cursor{Epoch: 1, Next: 1}
		for s := uint64(1); s <= 3; s++ {
			bodies = append(bodies, tagged(name, 1, s))
		}
	}
	h.arrive(bodies...)
	h.pump(w)
	for n := 0; n < len(bodies); {
		d, ok := h.next()
		if !ok {
			h.tick(10 * time.Millisecond)
			h.pump(w)
			continue
		}
		_, err := h.c.Ack(h.now, &d, false)
		require.NoError(h.t, err)
		h.ready()
		n++
	}
}
