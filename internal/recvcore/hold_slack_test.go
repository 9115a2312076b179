package recvcore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
	const late = 45 * time.Second // under the slack: 1m
	latest, n := holdSlackRunTick(t, 2*time.Minute, late, 15*time.Second)
	require.LessOrEqual(t, latest, 20*time.Minute,
		"an extension applied %v late keeps the message received until %v after (MaxHold 20m)", late, latest)
	require.Equal(t, 4, n, "extensions asked for (at 3, 6, 9 and 12 minutes)")
}
