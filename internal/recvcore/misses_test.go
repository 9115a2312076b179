package recvcore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
)

// StartLowest passes over the lowest seq seen only when it is a stale copy:
// received before (DequeueCount above 1) and more than Window below the
// next seq seen. A message received for the first time is never passed
// over, however far below the next one it lies: it is in the queue now, and
// starting above it would hand it out late (Unordered) or not at all (a
// blind plant that passed over a first-time lowest seq went unseen: every
// test had either a dense sample or a stale copy received three times).
func TestStartLowestKeepsFirstTimeLowest(t *testing.T) {
	cfg := ehConfig()
	cfg.Start = recvcore.StartLowest
	cfg.Window = 100
	h := newEH(t, cfg)
	w := newEHWorld()
	h.c.Arrive(h.now, []recvcore.Incoming{
		{Body: tagged("g", 7, 5), ID: "m5", Receipt: "r5", DequeueCount: 1},
		{Body: tagged("g", 7, 5+uint64(cfg.Window)+50), ID: "m155", Receipt: "r155", DequeueCount: 1},
	})
	h.ready()
	h.pump(w)
	h.tick(cfg.StartSettle + time.Second)
	h.pump(w)
	d, ok := h.next()
	require.True(t, ok, "the group starts and hands out its first message: %s", h.c.Dump())
	require.Equal(t, uint64(5), d.Seq, "the lowest seq, received for the first time, is where the group starts")
	require.False(t, d.Unordered)
}

// Epochs are consumed in order. When the sender restarted twice, two newer
// epochs can wait at once while the old one still has a message out; once
// it is done the group switches to the lower of the two, hands it out, and
// only then goes to the higher one. Switching straight to the highest
// epoch seen records the intermediate one's seqs as passed over and hands
// them out after the newer epoch, out of order (a blind plant that kept the
// highest newer epoch went unseen: no test had two newer epochs waiting).
func TestEpochSwitchTakesIntermediateEpochFirst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		epochs []uint64 // the order the newer epochs arrive in
	}{
		{"ascending", []uint64{2, 3}},
		{"descending", []uint64{3, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ehConfig()
			h := newEH(t, cfg)
			w := newEHWorld()
			h.arrive(tagged("g", 1, 1))
			h.pump(w)
			first, ok := h.next()
			require.True(t, ok)
			require.Equal(t, [2]uint64{1, 1}, [2]uint64{first.Epoch, first.Seq})
			// Epoch 1's seq 1 is out; both newer epochs arrive meanwhile.
			for _, e := range tc.epochs {
				h.arrive(tagged("g", e, 1), tagged("g", e, 2))
				h.pump(w)
			}
			_, ok = h.next()
			require.False(t, ok, "nothing of a newer epoch is handed out while the old one has a message out")
			_, err := h.c.Ack(h.now, &first, false)
			require.NoError(t, err)
			h.ready()
			h.pump(w)
			got := [][2]uint64{{first.Epoch, first.Seq}}
			for range 4 * int(cfg.GapTimeout/time.Second) {
				h.tick(time.Second)
				h.pump(w)
				for {
					d, ok := h.next()
					if !ok {
						break
					}
					require.False(t, d.Unordered, "epoch %d seq %d handed out Unordered", d.Epoch, d.Seq)
					got = append(got, [2]uint64{d.Epoch, d.Seq})
					_, err := h.c.Ack(h.now, &d, false)
					require.NoError(t, err)
					h.ready()
					h.pump(w)
				}
			}
			require.Equal(t, [][2]uint64{{1, 1}, {2, 1}, {2, 2}, {3, 1}, {3, 2}}, got,
				"epochs are consumed in order, the intermediate one included")
		})
	}
}

// StartLowest keeps the lowest seqs while it settles, also when more
// arrive than the window holds: a lower arrival takes the place of the
// highest one held, which goes back to the queue. Keeping the highest
// instead (review 2's plant RC6: the start tie-break towards the highest)
// starts the group past seqs that were present, and they become late.
func TestStartLowestFullWindowKeepsLowest(t *testing.T) {
	cfg := ehConfig()
	cfg.Start = recvcore.StartLowest
	cfg.Window = 4
	h := newEH(t, cfg)
	w := newEHWorld()
	for _, seq := range []uint64{10, 11, 12, 13, 3, 4} {
		id := fmt.Sprintf("m%d", seq)
		h.c.Arrive(h.now, []recvcore.Incoming{{Body: tagged("g", 7, seq), ID: id, Receipt: "r" + id, DequeueCount: 1}})
		h.ready()
		h.pump(w)
	}
	h.tick(cfg.StartSettle + time.Second)
	h.pump(w)
	d, ok := h.next()
	require.True(t, ok, "the group starts and hands out its first message: %s", h.c.Dump())
	require.Equal(t, uint64(3), d.Seq, "the lowest seq seen is where the group starts: %s", h.c.Dump())
	require.False(t, d.Unordered)
}
