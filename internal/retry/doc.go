// Package retry calls an operation again after transient failures, waiting
// an exponential backoff with jitter between attempts, for as long as a
// context and an attempt bound allow. The wait is injectable (Policy.Sleep),
// so tests of code that retries need no real time.
//
// It is the one backoff of the module: the stores' group commits retry
// transactions with it, and ordered's RetryOptions compute their waits with
// Backoff.
package retry
