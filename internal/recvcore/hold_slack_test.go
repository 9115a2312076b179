package recvcore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestHoldSlackCoversALateExtension: the queue applies a visibility change
// when it handles the request, which may be well after the Core asked for
// it (a slow network, a throttled queue). An extension must therefore not
// reach MaxHold itself: the Core stops extending MaxHold/10 (at most a
// minute) before it. Here a handler keeps a message (MaxHold 20m, slack
// 1m), every extension of 5 minutes is applied 45 seconds after it was
// asked for, and the visibility the queue ends up with must end by MaxHold
// after the message was received. Asked at 3, 6, 9 and 12 minutes, the last
// one ends at 17m45s; one more asked at 15 minutes would end at 20m45s.
// (review13_holdslack_test.go has the boundary: asks at 14m40s.)
func TestHoldSlackCoversALateExtension(t *testing.T) {
	cfg := ehConfig()
	cfg.Visibility = 5 * time.Minute
	cfg.VisibilityExtend = 5 * time.Minute
	cfg.VisibilityMargin = 2 * time.Minute
	cfg.MaxHold = 20 * time.Minute
	const late = 45 * time.Second // under the slack: 1m
	h := newEH(t, cfg)
	w := newEHWorld()
	w.curs["g"] = seqstore.Cursor{Epoch: 1, Next: 1}
	h.arrive(tagged("g", 1, 1))
	since := h.now
	h.pump(w)
	_, ok := h.next()
	require.True(t, ok, "seq 1 is handed out")
	extended := 0
	for h.now.Sub(since) < 25*time.Minute {
		h.tick(15 * time.Second)
		for _, v := range h.vis {
			if v.Timeout != cfg.VisibilityExtend {
				continue
			}
			extended++
			end := h.now.Add(late + v.Timeout)
			require.False(t, end.After(since.Add(cfg.MaxHold)),
				"an extension asked for %v after receipt, applied %v later, keeps the message received until %v after (MaxHold %v)",
				h.now.Sub(since), late, end.Sub(since), cfg.MaxHold)
		}
		h.visAll()
	}
	require.Equal(t, 4, extended, "extensions asked for (at 3, 6, 9 and 12 minutes)")
}
