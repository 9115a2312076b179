package crashtest

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite"
)

// crashDuration is the chaos phase of each mode: INORDER_CRASH_DURATION
// split over the three modes, else 8s (3s with -short).
func crashDuration(t *testing.T) time.Duration {
	if s := os.Getenv("INORDER_CRASH_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "INORDER_CRASH_DURATION")
		return d / 3
	}
	if testing.Short() {
		return 3 * time.Second
	}
	return 8 * time.Second
}

// TestCrash runs senders and a receiver over the emulator with chaos on,
// kills them with SIGKILL at random moments and at kill points (between
// reserve and send, after send before the sent mark, after commit before
// delete, between delivery and ack, mid-batch), restarts them, and checks
// the histories: per group, delivered in order and gap-free, every
// successful Send delivered, duplicates only where the mode allows them,
// the queue empty at the end.
func TestCrash(t *testing.T) {
	d := crashDuration(t)
	for i, mode := range []string{ModeAtLeastOnce, ModeAtMostOnce, ModeExactlyOnce} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, scenario{mode: mode, senders: 2, groups: 20, workers: 4, chaos: d,
				killEvery: 700 * time.Millisecond, killPoints: killPoints, drain: 45 * time.Second,
				seed: uint64(time.Now().UnixNano()) + uint64(i)})
			res := h.run()
			t.Logf("mode %s, %v chaos, %v in all: %s", mode, d, res.elapsed.Round(time.Millisecond), res)
			for i, v := range res.report.Violations {
				if i == 10 {
					break
				}
				t.Logf("violation: %v", v)
			}
			require.True(t, res.report.OK(), "want no violation, first: %v (histories in %s)", res.report.First(), h.hist)
			assert.Positive(t, res.report.Sent, "messages sent")
			assert.Positive(t, res.deaths, "processes killed")
			if mode == ModeExactlyOnce {
				assert.Positive(t, res.report.Committed, "messages committed")
			}
		})
	}
}
