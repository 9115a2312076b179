// Package drivertest is the conformance suite for implementations of
// [driver.Queue]. Every driver runs it from a one-line test:
//
//	func TestConformance(t *testing.T) {
//		drivertest.RunConformanceTests(t, drivertest.Harness{
//			New: func(t *testing.T, visibility time.Duration) driver.Queue {
//				q := memqueue.New(&memqueue.Options{Visibility: visibility})
//				t.Cleanup(func() { q.Close() })
//				return q
//			},
//		})
//	}
//
// Each rule stated in the documentation of package driver has a test here:
// round trips of binary, empty and maximum-size bodies, size and batch
// limits, at-least-once delivery of every message, deletion, stale and
// invalid receipt handles, visibility changes, long-poll waits, context
// cancellation, the closed state, concurrent use and error classification.
// A partial SendBatch failure is the one rule it cannot provoke on a healthy
// queue; drivers test their mapping of it themselves.
//
// With the defaults a run takes a few seconds, most of it waiting for
// visibility timeouts of about 300ms plus 1s of slack for scheduling. With
// Harness.Slow the short visibility is 2s and the slack 4s, and a run takes
// about 20s plus the service's round trips.
//
// The tests run in parallel, each on a fresh queue from [Harness.New], and
// take their timing from the queue's [driver.Limits], so a driver that rounds
// the visibility timeout up is tested with the value it really uses.
// Capabilities a driver lacks ([Harness.NoStaleReceipts],
// [Harness.NoVisibility]) turn the tests that need them into skips with a
// reason, and so does a harness without [Harness.NewThrottled] for the test
// that a throttling answer wraps [driver.ErrThrottled] and is retryable; [Harness.Slow] marks a remote service, for which the suite sends
// fewer messages and waits longer.
//
// [RunBenchmarks] measures a driver's raw send-receive-delete throughput.
package drivertest
