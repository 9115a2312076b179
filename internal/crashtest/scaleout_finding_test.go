//go:build finding

package crashtest

import (
	"testing"
)

// TestScaleOutFindingStaleAfterResume is a finding in ordered/scaleout,
// left failing (build tag finding: go test -tags finding -run
// TestScaleOutFindingStaleAfterResume ./internal/crashtest).
//
// The design (scaleout.md 3.1 I4, 3.8 "SIGSTOP > TTL") says a receiver
// delivers only before its local lease deadline: on SIGCONT after a pause
// longer than the TTL, "A's deadline check fails before its next
// delivery". ordered/scaleout has no such check at hand-out: the lease
// keeper fences a shard from its own goroutine (a timer), and the shard's
// ordered.Queue keeps handing out until the fence's cancel reaches it
// (fenceLocked cancels the run's ctx from yet another goroutine). So on
// SIGCONT, the handlers that were running at the stop return, and the next
// buffered messages of their groups are handed out at once, with the old
// token, although the new owner has claimed those groups and delivered the
// same messages meanwhile. Seen in TestScaleOut's histories: deliveries
// 0.1-2 ms after the SIGCONT, some after the "fence" change was reported.
// Their advances are refused (the store's fence holds), so order and no
// loss hold; handler exclusion does not: the zombie runs the handler of a
// message the new owner already handled, outside the "handler running at
// the stop" exception the design documents.
//
// The scenario: the harness of TestScaleOut on PostgreSQL with three
// SIGSTOPs of 1.5-3 x TTL and nothing else, checked with ResumeGrace 0.
// It fails with RuleStale (deliveries with a token below a claim of the
// group that had returned).
func TestScaleOutFindingStaleAfterResume(t *testing.T) {
	h := newScaleHarness(t, "postgres", scaleSeed(t), 0, false)
	h.plan = []string{faultStopLong, faultStopLong, faultStopLong}
	h.grace = 0
	res := h.run()
	h.judge(res)
	if res.report.StaleAfterResume > 0 {
		t.Errorf("%d stale deliveries", res.report.StaleAfterResume)
	}
}
