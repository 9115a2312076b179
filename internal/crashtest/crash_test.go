package crashtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite"
)

// crashDuration is the chaos phase of each mode: INORDER_CRASH_DURATION
// split over the three modes, else 3s (2s with -short). It goes on longer
// while a required kill point has not fired (see scenario.require).
func crashDuration(t *testing.T) time.Duration {
	if s := os.Getenv("INORDER_CRASH_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "INORDER_CRASH_DURATION")
		return d / 3
	}
	if testing.Short() {
		return 2 * time.Second
	}
	return 3 * time.Second
}

// senderPause is the pause between a sender goroutine's rounds: long runs
// send slower so that the receiver keeps up and the final drain is short.
func senderPause(d time.Duration) time.Duration {
	if d > time.Minute {
		return 300 * time.Millisecond
	}
	return 50 * time.Millisecond
}

// receiveWindow is the receiver's window: the library's default. (While
// ordered's fetch stall was open, see TestFaultHeldStall, the short form used
// 4096 to make it rarer; keep the knob for such investigations.)
func receiveWindow(d time.Duration) int {
	_ = d
	return 0
}

// crashMaxUndeleted is the receiver's cap in TestCrash: low, so that the
// chaos makes it park (and the kill points park-after and unpark-after
// fire), and under the emulator's scaled consumption threshold (1,000).
const crashMaxUndeleted = 200

// requiredPoints are the kill points each mode must show firing at least
// once, as the README's Guarantees section cites them: the sender's in
// every mode (durability of sends), and the receiver's where the mode's
// rules are at stake (alo: a crash between delivery and ack, after ack,
// after a commit and before its delete; amo: while a message is out, after
// the commit that precedes the hand-out; eo: after the application's
// commit, before Ack).
var requiredPoints = map[string][]string{
	ModeAtLeastOnce: {"send-before", "send-after", "sent", "delivered", "acked", "acked-recorded", "advance-after", "delete-before", "park-after", "unpark-after"},
	ModeAtMostOnce:  {"send-before", "send-after", "sent", "delivered", "advance-after", "delete-before", "park-after", "unpark-after"},
	ModeExactlyOnce: {"send-before", "send-after", "sent", "delivered", "committed", "delete-before", "park-after", "unpark-after"},
}

// TestCrash runs senders and a receiver over the emulator with chaos on,
// kills them with SIGKILL at random moments and at kill points (between
// reserve and send, after send before the sent mark, after commit before
// delete, between delivery and ack, after ack, after the application's
// commit), restarts them, and checks the histories: per group, delivered
// in order and gap-free, every successful Send delivered, duplicates only
// where the mode allows them, nothing deleted before the cursor past it was
// durable, the queue empty at the end. It also fails on any exit of a
// worker that was not the harness's doing (a panic, an error, a race
// report: under -race the workers run with the race detector), on a
// receiver stall during the drain, and when a kill point the mode must show
// never fired.
func TestCrash(t *testing.T) {
	d := crashDuration(t)
	for i, mode := range []string{ModeAtLeastOnce, ModeAtMostOnce, ModeExactlyOnce} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, scenario{mode: mode, senders: 2, groups: 20, workers: 4, chaos: d,
				killEvery: 700 * time.Millisecond, killPoints: killPoints, require: requiredPoints[mode],
				drain: max(45*time.Second, d/2), pause: senderPause(d), window: receiveWindow(d),
				maxUndeleted: crashMaxUndeleted, consumption: true, storeFaults: storeFaults, sendAttempts: sendAttempts,
				seed: uint64(time.Now().UnixNano()) + uint64(i)})
			res := h.run()
			t.Logf("mode %s, %v chaos, %v in all: %s", mode, d, res.elapsed.Round(time.Millisecond), res)
			if res.leftover > 0 {
				t.Logf("drain incomplete: %d messages still in the queue after the drain bound (%d receiver stalls); the lost sends below may be those", res.leftover, res.stalls)
			}
			for i, v := range res.report.Violations {
				if i == 10 {
					break
				}
				t.Logf("violation: %v", v)
			}
			if len(res.failures) > 0 {
				t.Fatalf("%d worker exits the harness did not cause (histories kept in %s); the first: %s", len(res.failures), h.keep(), res.failures[0])
			}
			if !res.report.OK() {
				t.Fatalf("want no violation, first: %v (histories kept in %s)", res.report.First(), h.keep())
			}
			if res.stalls > 0 {
				// A liveness failure, not a safety violation: order,
				// duplicates and losses were checked above on the whole run,
				// restarts included. INORDER_CRASH_ALLOW_STALL=1 tolerates it
				// (for investigating something else).
				msg := fmt.Sprintf("the receiver stalled %d times during the drain and was restarted", res.stalls)
				if os.Getenv("INORDER_CRASH_ALLOW_STALL") != "1" {
					t.Fatalf("%s (histories kept in %s)", msg, h.keep())
				}
				t.Log(msg)
			}
			assert.Empty(t, res.missing, "kill points the mode must show that never fired in %v of chaos (fired: %v)", d+extraChaos, res.points)
			assert.Positive(t, res.report.Sent, "messages sent")
			assert.Positive(t, res.report.Deletes, "deletes recorded (the commit-before-delete rule had something to judge)")
			assert.Positive(t, res.report.Parked, "messages parked (the park rule had something to judge)")
			// Kills leave what the receiver held to lapse together, which
			// the service counts as receipts ended without a delete (its
			// "rate" reason); holding too much undeleted is the receiver's
			// own doing.
			assert.Zero(t, res.server.ConsumptionTrips["undeleted"], "the receiver never held more than the service's threshold")
			assert.Positive(t, res.deaths, "processes killed")
			if mode == ModeExactlyOnce {
				assert.Positive(t, res.report.Committed, "messages committed")
			}
		})
	}
}

// TestCheckerCatchesPlantedBugs runs the harness with a receiver that has a
// planted bug and requires the checker to name it: (a) messages deleted on
// receipt, before the application acknowledged them (the order of commit and
// delete flipped): a crash loses what was buffered, a gap; (b) the dedup
// check dropped: a seq delivered twice in one incarnation; (c) buffered
// messages delivered unsorted: seqs out of order (or a group's first
// delivery past seq 1).
func TestCheckerCatchesPlantedBugs(t *testing.T) {
	for _, tc := range []struct {
		bug   string
		rules []string // the first violation breaks one of these
		kill  string   // INORDER_CRASH_KILL besides the common points
	}{
		// Bug a loses what a receiver had fetched but not handed out when
		// it dies: kills right after a fetch make that certain, where the
		// common points alone missed it in one CI run of about six.
		{"a", []string{RuleGap, RuleLost}, "received=0.03"},
		{"b", []string{RuleDuplicate}, ""},
		{"c", []string{RuleOrder, RuleDuplicate, RuleGap}, ""},
	} {
		t.Run(tc.bug, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, scenario{mode: ModeAtLeastOnce, senders: 1, groups: 10, workers: 4, chaos: 2 * time.Second,
				killEvery: time.Second, killPoints: strings.TrimSuffix("send-before=0.002,delivered=0.003,"+tc.kill, ","), bug: tc.bug, drain: 6 * time.Second, pause: 20 * time.Millisecond,
				seed: uint64(time.Now().UnixNano())})
			res := h.run()
			t.Logf("bug %s: %s", tc.bug, res)
			require.False(t, res.report.OK(), "bug %s: want a violation, the checker found none", tc.bug)
			assert.Empty(t, res.failures, "worker exits the harness did not cause")
			first := res.report.First()
			t.Logf("bug %s: first violation: %v", tc.bug, first)
			assert.Contains(t, tc.rules, first.Rule, "bug %s: first violation %v", tc.bug, first)
			assert.NotEmpty(t, first.Group, "the violation names its group")
			assert.NotZero(t, first.Seq, "the violation names its seq")
		})
	}
}
