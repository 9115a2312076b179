// Package mnstest provides an MNS-compatible HTTP server for tests and local
// development, in the way net/http/httptest serves net/http: the real
// Alibaba Cloud MNS Go SDK (github.com/aliyun/aliyun-mns-go-sdk v1.0.11)
// talks to it unchanged over loopback.
//
//	srv, err := mnstest.NewServer(nil)
//	...
//	defer srv.Close()
//	client := ali_mns.NewAliMNSClientWithConfig(ali_mns.AliMNSClientConfig{
//		EndPoint:        srv.Endpoint(), // "http://127.0.0.1:PORT/."
//		AccessKeyId:     srv.AccessKeyID(),
//		AccessKeySecret: srv.AccessKeySecret(),
//	})
//
// # Endpoint
//
// The SDK splits the endpoint string on "." and panics unless there are
// exactly five pieces, so "http://127.0.0.1:PORT" is rejected. Endpoint
// returns "http://127.0.0.1:PORT/.": the extra dot passes the check and the
// SDK's HTTP client sends "/queues/..." on the wire, which is also the path
// the request signature covers. For the same reason the server listens on an
// IPv4 address only.
//
// # API
//
// The queue operations of the MNS REST API, as the SDK sends and parses them:
// create (201, 204 when it exists with the same attributes, 409
// QueueAlreadyExist otherwise), delete, get and set attributes, list (marker,
// ret-number, prefix, with-meta; each item has its QueueURL, with the
// attributes too when with-meta is true), send and batch send (at most 16 entries and
// 64 KiB in all; per-entry failures answered as a <Messages> list), receive
// and batch receive (1..16) with long polling (waitseconds 0..30, else the
// queue's PollingWaitSeconds; a message that arrives during the wait is
// returned at once; 404 MessageNotExist when nothing came), peek and batch
// peek (not on FIFO queues), delete and batch delete (per-entry failures as an <Errors> list),
// and change visibility.
//
// Request bodies may be in any XML namespace or none. Answers are in the
// documentation's namespace, "http://mns.aliyuncs.com/doc/v1/", except an
// <Error>, which is in "http://mns.aliyuncs.com/doc/v1" without the
// trailing slash: the Java SDK reads errors in that namespace only, the
// Go, Python and Node.js SDKs in any.
//
// The topic operations too: create (201, 204 when it exists with the same
// attributes, 409 TopicAlreadyExist otherwise, with a Location header), get
// and set attributes, delete, list; subscribe (same rules, 409
// SubscriptionAlreadyExist), get and set subscription attributes (only the
// NotifyStrategy can change, as in the service), unsubscribe (204 even when
// there was no such subscription), list subscriptions (lists carry each
// TopicURL or SubscriptionURL, with metadata too); and publish. A
// publish answers 201 with the topic message's id and body MD5 and then
// pushes to every subscription whose FilterTag is empty or equals the
// message's tag and whose endpoint is a queue
// (acs:mns:{region}:{account}:queues/{name}; region and account are not
// checked, see Subscription): one new message of that queue per push, whose
// body is, by the subscription's NotifyContentFormat, the published body
// itself (SIMPLIFIED), a <Notification> XML document (XML, the service's
// default) or a JSON object (JSON), laid out as the service writes them. A
// push takes its place in the queue's order when it lands. Faults.PushDelay,
// PushDuplicate and PushDrop make pushes late, double or lost, as the
// service's at-least-once, unordered pushes can be; Stats counts each.
//
// Every request must carry a valid signature for the configured access key,
// in either scheme the service takes: "MNS <AccessKeyId>:<signature>"
// (HMAC-SHA1 as the Go, Python and Node.js SDKs and the Java SDK's default
// compute it), or the V4 signature the Java SDK 2.0.0 recommends,
// "MNS4-HMAC-SHA256 Credential=<AccessKeyId>/<date>/<region>/mns/aliyun_v4_request,Signature=<hex>"
// (HMAC-SHA256 with a key derived from the date, region and service, over
// a canonical request of the method, path, query, Content-Type,
// Content-MD5 and x-mns-* headers; any region is served, the date must be
// the Date header's; the Apsara Stack variant APSARA-MNS4-HMAC-SHA256 too).
// An unknown key is answered 403 InvalidAccessKeyId, a wrong signature 403
// SignatureDoesNotMatch, a malformed Authorization header 400
// InvalidAuthorizationHeader. A
// Content-MD5 that does not match the body is 400 InvalidDegist (the
// service's spelling). As in the service, the signature covers the
// Content-MD5 header but not the body itself, and both are optional: a
// request signed without Content-MD5 is accepted with any body (the SDK
// always sends one), and a captured request can be sent again, to the same
// effect, as long as its Date is within 15 minutes of the server's clock
// (there is no nonce). Whoever can read the traffic can do both: serve the
// emulator on loopback, or behind TLS on a network you trust.
//
// # Semantics
//
// Like the service's standard queues, delivery is at-least-once and only
// "basically ordered": each queue keeps its messages in Options.Shards
// internal shards, a send picks a shard at random and a receive takes from a
// random shard among those whose oldest message is within
// Options.ReorderWindow sends of the oldest visible one, so neighbours swap
// but nothing falls far behind. Priority (1..16, 0 meaning the default 8)
// orders messages within a shard before enqueue order.
//
// A receive makes a message invisible for the queue's VisibilityTimeout and
// returns a receipt handle. Every receive and every change of visibility
// rotates the handle: an older handle is stale and gets 404 MessageNotExist,
// as does a handle whose visibility lapsed. A handle that is malformed or
// that this server did not issue for this queue gets 400 ReceiptHandleError.
// Dequeue counts, first dequeue times, message and queue delays (a message
// DelaySeconds of 0, which the SDK always sends, means the queue's delay),
// retention expiry (in flight or not) and the maximum message size behave as
// documented by the service. Message ids are 32 upper-case hex digits and
// receipt handles are URL-safe, as the service's are.
//
// State is in memory, one mutex per queue. Server.Advance moves the server's
// clock forward so that tests of visibility, delay and retention do not
// sleep.
//
// # FIFO queues and topics
//
// A queue created with QueueType "fifo" (QueueAttributes.QueueType
// QueueTypeFIFO; "normal", the default, is a standard queue) and a topic
// created with TopicType "fifo" behave as the service documents its FIFO
// ("ordered") queues and topics; GetQueueAttributes, ListQueue with
// metadata, GetTopicAttributes and ListTopic with metadata answer the type,
// which never changes (SetQueueAttributes or SetTopicAttributes with
// another type is 400 InvalidArgument, CreateQueue or CreateTopic with
// another type 409 as for any other attribute). The Java SDK 2.0.0 has no
// QueueType or TopicType (it sends and reads MessageGroupId only): a queue
// it creates is a standard queue, which ignores the group; make FIFO
// queues with the Go API (CreateQueue) or a raw CreateQueue request.
//
// Every SendMessage, every BatchSendMessage entry and every PublishMessage
// to a FIFO queue or topic must carry a <MessageGroupId> (the Java SDK
// writes it after MessageBody, DelaySeconds, Priority and the property
// lists; the Go SDK v1.0.11 cannot send it): without one, or with an empty
// one, a single send or a publish is answered 400
// FifoMissingMessageGroupId, and a batch entry fails with that code in the
// batch's <Messages> list while the other entries are stored (the answer is
// then a 500 like any partial batch failure). A standard queue or topic
// accepts a MessageGroupId and ignores it: not stored, not returned, not
// pushed.
//
// A FIFO queue keeps each group's messages in the order they arrived and
// hands out only a group's oldest message, its head: while the head is
// received and invisible (the group is locked), no other message of the
// group goes to anyone, until the head is deleted or its visibility
// timeout lapses; then the head comes again, first in its group (delivery
// stays at-least-once: a lost delete, a lapse or the Redeliver fault
// deliver the same message again). Different groups are independent: a
// receive takes heads of several groups, in the queue's usual "basically
// ordered" way across groups (shards, ReorderWindow, Priority), and a
// batch receive holds at most one message per group (one message in
// flight per group, as the service describes it). A delayed message keeps
// its place: a head whose delay has not ended blocks its group, and a
// later message without delay waits behind it. Received FIFO messages
// carry their <MessageGroupId> after <Priority>. No fault reorders a
// group: redelivery, 5xx, drops and the consumption throttle only delay
// it.
//
// PeekMessage and BatchPeekMessage on a FIFO queue answer 400
// UnsupportedOperation (a code of our choosing: the service says peeking
// is not supported, not how it answers). A FIFO queue's dead-letter queue
// must be a FIFO queue and a standard queue's a standard one (400
// InvalidArgument otherwise, checked when the policy is set); a move keeps
// the message's group. A normal topic cannot subscribe a FIFO queue (400
// InvalidArgument); a FIFO topic may subscribe either kind, and its pushes
// carry the publish's MessageGroupId into a FIFO queue (a standard queue
// ignores it; the notification bodies are unchanged). A FIFO topic's
// pushes to each subscription land in publish order: Faults.PushDelay
// makes them late but never reorders them, while PushDuplicate and
// PushDrop still double or lose a push. A queue deleted and created again
// with the other type after the check takes what arrives as its type
// does: a FIFO queue puts a message without a group in the group "".
//
// For tests, Server.Groups lists a FIFO queue's groups (head, message ids
// in arrival order, locked or delayed), and QueueInfo and Stats count
// groups and locked groups.
//
// # Faults
//
// Options.Faults (and SetFaults at run time) inject seeded failures: extra
// redeliveries, 500 InternalError answers before or after the operation took
// effect (and partial batch failures), connections closed without an answer,
// latency with jitter, and receives answered empty at once. With the same
// Seed and the same sequence of requests, the same faults fire. One fault
// does what the service never does, throwing away a message whose send
// succeeded (Faults.LoseAckedSends); it is off unless a test asks for it.
// Chaos returns a preset of faults and throttling for a hostile but
// lossless service; Options.OnPushLost reports each topic push that never
// reached its queue.
//
// # Throttling
//
// Options.Throttle, off by default, throttles as the service's "Throttling
// policy" describes it: a request rate per queue and per topic (429
// TooManyRequests after a hold of about 500ms, or the older 400
// QpsLimitExceeded), and the abnormal-consumption throttle of a queue whose
// client receives messages and does not delete them (5,000 held, 1,000
// receipts a second ending without a delete, or one message held for 30
// minutes; the thresholds scale for tests). Stats and QueueInfo report
// both.
//
// # Limits
//
// A queue may carry a dead-letter policy (QueueAttributes.DeadLetterQueue,
// MaxReceiveCount): a message received that many times moves to the
// dead-letter queue. The server reads a request for at most
// Options.ReadTimeout, and keeps at most MaxQueues queues, MaxTopics topics,
// 100 subscriptions per topic and MaxMessages messages of MaxMessageBytes in
// all, topic pushes on their way included, so that it is safe to leave
// running. It refuses to listen beyond loopback unless the secret is one of
// at least MinRemoteSecretLen bytes other than the published default.
//
// # Shutdown
//
// Close stops the listener, ends long polls (they answer MessageNotExist)
// and returns once every handler has returned. The only goroutines are
// net/http's (the accept loop and one per connection), and Close ends them
// all.
package mnstest
