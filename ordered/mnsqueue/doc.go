// Package mnsqueue is a driver.Queue over an Alibaba Cloud MNS (Simple
// Message Queue) standard queue, through the MNS Go SDK
// (github.com/aliyun/aliyun-mns-go-sdk v1.0.11). Hand it to ordered.New to get
// strict per-group order on top of the queue's "basically ordered"
// at-least-once delivery.
//
//	q, err := mnsqueue.New(ctx, "http://1234567890.mns.cn-hangzhou.aliyuncs.com", "orders",
//		mnsqueue.Credentials{AccessKeyID: id, AccessKeySecret: secret}, nil)
//
// For tests, package mnstest serves the same API on loopback; its Endpoint
// ("http://127.0.0.1:PORT/.") is accepted by New unchanged.
//
// # What the driver takes care of
//
// The SDK has traps that the driver closes:
//   - its constructors panic on a bad endpoint or an empty key: New
//     validates first and recovers as a backstop, returning an error;
//   - receives deliver through channels that the SDK writes before it
//     returns: the driver passes buffered ones;
//   - a waitseconds of 0 makes the SDK skip the request and send nothing on
//     either channel (a deadlock): a wait is rounded up to whole seconds, at
//     least 1; a zero wait is a short poll only on a queue whose
//     PollingWaitSeconds New found to be 0 (otherwise it waits 1s);
//   - a queue object is not safe for concurrent use (its client-side QPS
//     counter races): the driver keeps a pool of them over one client and
//     gives each call its own;
//   - the SDK sends priority 0 unless told: the driver always sends
//     Options.Priority (default 8);
//   - the SDK has no context: each call runs in a goroutine owned by the
//     Queue, and ctx only ends the caller's wait. Close closes the
//     connections, which ends the calls, and waits for them;
//   - the SDK's HTTP client (fasthttp) silently repeats GET and PUT requests
//     that failed or timed out, up to five times, so one receive could take
//     up to five batches (left invisible until their visibility timeout) and
//     one visibility change could rotate a receipt several times. The driver
//     installs its own transport that makes every request exactly once (a
//     failure is a retryable error; the portable layer retries), and the
//     request timeout
//     (Options.Timeout, at least MinTimeout) exceeds the longest long-poll
//     wait, so that a long poll is never cut short by the client.
//
// # Bodies
//
// By default a body is sent base64-encoded (StdEncoding), so any bytes
// survive the SDK's XML encoding, as the other MNS SDKs do. The service takes
// 64 KiB per message and per batch after encoding, so a body may have 49120
// bytes and a batch as many in all (49152 less the base64 padding of 16
// bodies), or less on a queue with a smaller MaximumMessageSize. With
// Options.Raw bodies travel as text, for peers that send and expect plain
// text, up to 65536 bytes; a
// body that XML cannot carry is refused with ErrInvalidBody instead of being
// corrupted. In base64 mode, a received body that is not valid base64 is
// delivered as it came (and logged), never dropped.
//
// # Topics
//
// NewTopic returns a send-only driver that publishes to a topic: an
// ordered.Queue over it sends each group's messages with the same header,
// pipelining and durable journal as over a queue, one PublishMessage per
// message (the service has no batch publish). Every queue subscribed to the
// topic receives its own copy of each group's stream: read it with New and
// an ordered.Queue of its own, whose cursors (its store, or its
// Options.Name) are its own. CreateTopic, Subscribe, Unsubscribe and
// DeleteTopic set them up.
//
// What a subscribed queue receives depends on the subscription's notify
// content format: SIMPLIFIED writes the published body itself; XML (the
// service's default, which the SDK falls back to when the format is left
// empty) and JSON wrap it in a notification. A Queue unwraps notifications
// (Options.KeepNotifications keeps them) and tells the cases apart by the
// body's first byte: '#' is an envelope, '<' an XML notification, '{' a
// JSON one, anything else base64; so a subscription left at the default
// works. Subscribe subscribes in SIMPLIFIED unless told otherwise.
//
// The service pushes at least once and in no guaranteed order, starting
// with the messages published after the subscription exists, and drops a
// push whose retries fail (Subscribe's default strategy here,
// EXPONENTIAL_DECAY_RETRY, retries for a day). So a receiver on a queue
// subscribed to a stream already running starts with ordered.StartLowest;
// a dropped push is a hole in its group, which the gap policy handles
// (GapSkip skips it after GapTimeout and reports it through Hooks.OnSkip).
// A FilterTag makes holes by design: give each tag its own publisher
// (Options.MessageTag) and stream names. See TOPICS.md beside this file for
// the service's facts and their sources.
//
// # Errors
//
// Errors are *Error values that wrap the SDK's error, reachable with
// errors.As and an interface{ Code() uint64; Namespace() string }, and,
// where the portable layer needs one, a sentinel of package driver:
//   - MessageNotExist on a receive is "no message": an empty result;
//   - MessageNotExist on a delete or a visibility change is
//     driver.ErrStaleReceipt (the message was received again, its
//     visibility lapsed, or it was deleted);
//   - ReceiptHandleError is driver.ErrBadReceipt;
//   - QueueNotExist is driver.ErrQueueNotFound;
//   - throttling, 429 TooManyRequests (the service's answer today, past
//     its request rate or to a consumer that receives without deleting)
//     and 400 QpsLimitExceeded (older versions), is driver.ErrThrottled,
//     and retryable: the portable layer backs off;
//   - network errors and timeouts, InternalError and answers that do not
//     parse are retryable (IsRetryable); anything else, InvalidArgument
//     for one, is not.
//
// A batch in which some entries failed returns a *driver.BatchError whose
// entries are classified the same way.
//
// # Shutdown
//
// Close refuses new calls (driver.ErrClosed), closes the connections so that
// calls in progress end at once, and waits for them for at most
// Options.CloseTimeout. It is idempotent.
package mnsqueue
