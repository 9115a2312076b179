package mnstest

import (
	"sync"
	"sync/atomic"
)

// op is an API operation, as counted in Stats.Requests.
type op int

const (
	opUnknown op = iota
	opCreateQueue
	opSetQueueAttributes
	opGetQueueAttributes
	opDeleteQueue
	opListQueue
	opSendMessage
	opBatchSendMessage
	opReceiveMessage
	opBatchReceiveMessage
	opPeekMessage
	opBatchPeekMessage
	opDeleteMessage
	opBatchDeleteMessage
	opChangeMessageVisibility
	opCreateTopic
	opSetTopicAttributes
	opGetTopicAttributes
	opDeleteTopic
	opListTopic
	opPublishMessage
	opSubscribe
	opSetSubscriptionAttributes
	opGetSubscriptionAttributes
	opUnsubscribe
	opListSubscriptionByTopic
	numOps
)

var opNames = [numOps]string{
	opUnknown:                   "Unknown",
	opCreateQueue:               "CreateQueue",
	opSetQueueAttributes:        "SetQueueAttributes",
	opGetQueueAttributes:        "GetQueueAttributes",
	opDeleteQueue:               "DeleteQueue",
	opListQueue:                 "ListQueue",
	opSendMessage:               "SendMessage",
	opBatchSendMessage:          "BatchSendMessage",
	opReceiveMessage:            "ReceiveMessage",
	opBatchReceiveMessage:       "BatchReceiveMessage",
	opPeekMessage:               "PeekMessage",
	opBatchPeekMessage:          "BatchPeekMessage",
	opDeleteMessage:             "DeleteMessage",
	opBatchDeleteMessage:        "BatchDeleteMessage",
	opChangeMessageVisibility:   "ChangeMessageVisibility",
	opCreateTopic:               "CreateTopic",
	opSetTopicAttributes:        "SetTopicAttributes",
	opGetTopicAttributes:        "GetTopicAttributes",
	opDeleteTopic:               "DeleteTopic",
	opListTopic:                 "ListTopic",
	opPublishMessage:            "PublishMessage",
	opSubscribe:                 "Subscribe",
	opSetSubscriptionAttributes: "SetSubscriptionAttributes",
	opGetSubscriptionAttributes: "GetSubscriptionAttributes",
	opUnsubscribe:               "Unsubscribe",
	opListSubscriptionByTopic:   "ListSubscriptionByTopic",
}

func (o op) String() string { return opNames[o] }

// faultable reports whether injected errors, drops and latency apply:
// message operations, publishing included, never management.
func (o op) faultable() bool {
	return o >= opSendMessage && o <= opChangeMessageVisibility || o == opPublishMessage
}

// counters are the server's running totals.
type counters struct {
	requests    [numOps]atomic.Int64
	sent        atomic.Int64
	received    atomic.Int64
	deleted     atomic.Int64
	expired     atomic.Int64
	lost        atomic.Int64
	redelivered atomic.Int64
	errors5xx   atomic.Int64
	drops       atomic.Int64
	earlyEmpty  atomic.Int64

	deadLettered      atomic.Int64
	deadLetterDropped atomic.Int64

	throttled            atomic.Int64
	consumptionThrottled atomic.Int64
	lapsed               atomic.Int64
	trips                [3]atomic.Int64 // AbnormalUndeleted, AbnormalRate, AbnormalHold

	published, pushed, pushDropped, pushDuplicated, pushFailed atomic.Int64

	errMu  sync.Mutex
	errors map[string]int64
}

var tripReasons = [3]string{AbnormalUndeleted, AbnormalRate, AbnormalHold}

func (c *counters) countTrip(reason string) {
	for i, r := range tripReasons {
		if r == reason {
			c.trips[i].Add(1)
		}
	}
}

func (c *counters) countError(code string) {
	c.errMu.Lock()
	if c.errors == nil {
		c.errors = make(map[string]int64)
	}
	c.errors[code]++
	c.errMu.Unlock()
}

// Stats is a snapshot of what the server has done since it started.
type Stats struct {
	// Requests counts requests by operation name (SendMessage,
	// BatchReceiveMessage, ...), including rejected ones.
	Requests map[string]int64
	// Errors counts error answers by MNS error code, injected ones included.
	Errors map[string]int64
	// Sent counts messages stored, Received deliveries (a redelivery counts
	// again), Deleted messages deleted, Expired messages dropped past
	// retention.
	Sent, Received, Deleted, Expired int64
	// Injected faults: acknowledged sends thrown away (LoseAckedSends),
	// deliveries cut short, 500 answers (whole or partial batch failures),
	// dropped connections, receives answered empty at once.
	LostAckedSends, Redelivered, Errors5xx, Drops, EarlyEmpty int64
	// Throttled counts requests refused by Throttle.RequestRate,
	// ConsumptionThrottled receives refused by Throttle.Consumption.
	Throttled, ConsumptionThrottled int64
	// ConsumptionTrips counts how often a queue's consumption turned
	// abnormal, by reason (AbnormalUndeleted, AbnormalRate, AbnormalHold);
	// counted only with Throttle.Consumption on.
	ConsumptionTrips map[string]int64
	// Lapsed counts receipts that ended without a delete: the visibility
	// timeout lapsed and the message became visible again. Received minus
	// Lapsed is what receivers deleted or still hold.
	Lapsed int64
	// Published counts topic messages published; Pushed the messages their
	// pushes made in subscribed queues (duplicates included);
	// PushDuplicated and PushDropped the pushes that Faults.PushDuplicate
	// and PushDrop doubled and dropped; PushFailed those that found their
	// queue gone, too small for the body or the emulator full.
	Published, Pushed, PushDuplicated, PushDropped, PushFailed int64
	// DeadLettered counts messages moved by a queue's dead-letter policy,
	// DeadLetterDropped those of them whose dead-letter queue was gone.
	DeadLettered, DeadLetterDropped int64
	// Active, Inactive and Delayed count the messages of all queues by state.
	Active, Inactive, Delayed int
	// Groups and LockedGroups add up QueueInfo.Groups and LockedGroups of
	// every FIFO queue: the groups holding messages, and those of them
	// whose head is in flight.
	Groups, LockedGroups int
}

// Stats returns a snapshot of the counters and the messages by state.
func (s *Server) Stats() Stats {
	c := &s.stats
	st := Stats{
		Requests:       make(map[string]int64),
		Errors:         make(map[string]int64),
		Sent:           c.sent.Load(),
		Received:       c.received.Load(),
		Deleted:        c.deleted.Load(),
		Expired:        c.expired.Load(),
		LostAckedSends: c.lost.Load(),
		Redelivered:    c.redelivered.Load(),
		Errors5xx:      c.errors5xx.Load(),
		Drops:          c.drops.Load(),
		EarlyEmpty:     c.earlyEmpty.Load(),

		DeadLettered:      c.deadLettered.Load(),
		DeadLetterDropped: c.deadLetterDropped.Load(),

		Throttled:            c.throttled.Load(),
		ConsumptionThrottled: c.consumptionThrottled.Load(),
		ConsumptionTrips:     make(map[string]int64),
		Lapsed:               c.lapsed.Load(),

		Published:      c.published.Load(),
		Pushed:         c.pushed.Load(),
		PushDuplicated: c.pushDuplicated.Load(),
		PushDropped:    c.pushDropped.Load(),
		PushFailed:     c.pushFailed.Load(),
	}
	for i, r := range tripReasons {
		if n := c.trips[i].Load(); n > 0 {
			st.ConsumptionTrips[r] = n
		}
	}
	for i := range c.requests {
		if n := c.requests[i].Load(); n > 0 {
			st.Requests[op(i).String()] = n
		}
	}
	c.errMu.Lock()
	for k, v := range c.errors {
		st.Errors[k] = v
	}
	c.errMu.Unlock()
	for _, q := range s.Queues() {
		st.Active += q.Active
		st.Inactive += q.Inactive
		st.Delayed += q.Delayed
		st.Groups += q.Groups
		st.LockedGroups += q.LockedGroups
	}
	return st
}
