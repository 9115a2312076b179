// Package memqueue is an in-process queue that behaves like a distributed
// queue that is at-least-once and not FIFO, such as an Alibaba Cloud MNS
// standard queue. It implements [driver.Queue] for tests, examples and
// benchmarks, where it is the "raw" baseline.
//
// A [Queue] is created with [New]; every knob lives in [Options] (nil means
// the defaults).
//
// # Ordering guarantees
//
// None, on purpose. Each message sent is put on one of several internal
// shards (Options.Shards) chosen at random, and each receive starts at a
// random shard, biased towards the one whose first message is oldest, and
// visits the others in turn. The order received is therefore "basically
// ordered" with local swaps, as MNS documents for its standard queues: with
// the defaults a message is received a few dozen places from where it was
// sent, however deep the queue. A message whose visibility timeout expires
// goes to the back of its shard. With one shard and no chaos the queue is
// FIFO.
//
// # Delivery semantics
//
// At least once. A received message stays invisible until its NextVisible;
// then it is delivered again with DequeueCount one higher and a new receipt
// handle. Receipt handles also rotate on ChangeVisibility. A handle that no
// longer designates a message held by a receiver (its visibility expired, the
// message was delivered again or deleted) fails with
// [driver.ErrStaleReceipt]; a handle this queue never issued fails with
// [driver.ErrBadReceipt].
//
// Seeded chaos knobs emulate what a real service does at a configurable rate:
// extra redeliveries (Options.Redeliver), message loss (Options.Loss,
// Options.Retention), latency (Options.Latency, Options.LatencyJitter),
// transient errors (Options.ErrorRate) and long polls that end at once
// (Options.EarlyEmpty). With the same Options.Seed and the
// same sequence of calls from one goroutine, a run is reproducible.
//
// # Time
//
// A Queue starts no goroutine. Visibility and retention are evaluated lazily
// by every call, and a long-polling receive waits on a notification channel
// and a timer of its own. A Queue created inside a testing/synctest bubble
// therefore runs on the bubble's fake clock. Create it inside the bubble that
// uses it: its clock starts at New, so a Queue shared between a bubble and
// the outside would mix two clocks.
//
// # Errors
//
// Methods wrap the driver sentinels ([driver.ErrClosed],
// [driver.ErrTooLarge], [driver.ErrStaleReceipt], [driver.ErrBadReceipt])
// and ctx.Err(). Injected failures wrap [ErrInjected], which
// [Queue.IsRetryable] reports as retryable.
//
// # Shutdown
//
// [Queue.Close] is idempotent; it wakes receives that are waiting, which then
// return [driver.ErrClosed], as do all later calls.
package memqueue
