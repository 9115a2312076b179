package mnstest

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// Throttle makes the server throttle as the service does. The zero value
// throttles nothing. The service's rules are in its "Throttling policy"
// page (Simple Message Queue developer reference, updated Jan-Mar 2026):
// "If a sudden burst exceeds what elastic scaling can absorb, the server
// ... holds excess requests for approximately 500 ms before returning an
// error", 429 TooManyRequests "The request is denied by cluster flow
// limiter for too many requests."; batch operations count one per message;
// older documents gave 3,000 QPS per queue and 500 per topic and the answer
// 400 QpsLimitExceeded. The same page throttles "abnormal queue
// consumption": a client that receives messages and does not delete them
// has its receive rate cut once the behaviour lasts more than 30 minutes,
// or 5,000 messages are received and not deleted, or it receives without
// deleting at more than 1,000 TPS.
type Throttle struct {
	// RequestRate, when positive, is the rate of message operations each
	// queue (send, receive, peek, delete, change visibility) and each topic
	// (publish) accepts, per second, a batch counting one per entry (per
	// requested message for a batch receive). The bucket holds one second
	// of requests. A request beyond it is held for Hold and answered 429
	// TooManyRequests (see Legacy). Management operations are not limited.
	RequestRate float64
	// Legacy answers throttled requests 400 QpsLimitExceeded, as older
	// service documents and the SDK's error table have it, instead of 429
	// TooManyRequests.
	Legacy bool
	// Hold is how long a throttled request is held before its answer
	// (default 500ms, the service's "approximately 500 ms").
	Hold time.Duration
	// Consumption turns on the abnormal-consumption throttle, per queue.
	// A queue is abnormal while any of these holds (thresholds times
	// ConsumptionScale):
	//   - 5,000 messages are received and not deleted (in flight);
	//   - receipts end without a delete (the visibility timeout lapses,
	//     so the message is visible again) at more than 1,000 per second,
	//     over the last second;
	//   - a message has been held, received and not deleted, for more
	//     than 30 minutes without a break (visibility changes included).
	// While it is abnormal, the queue admits one receive request per
	// second (the service "significantly reduces the rate at which the
	// client can receive messages"; by how much it does not say) and
	// answers the others like RequestRate does. Deletes and everything
	// else are not affected, so a receiver that deletes ends it.
	// Stats.Consumption and QueueInfo report it.
	Consumption bool
	// ConsumptionScale multiplies the three thresholds of Consumption
	// (0..1; default 1), so that tests reach them quickly: at 0.01, 50
	// messages, 10 per second, 18 seconds.
	ConsumptionScale float64
	// MaxUndeleted, when positive, is the first threshold of Consumption
	// instead of 5,000 times ConsumptionScale: the queue turns abnormal
	// once MaxUndeleted messages are received and not deleted. Tests set
	// it one above a receiver's cap, so that a receiver that receives a
	// single message past its cap trips the throttle.
	MaxUndeleted int
}

// The service's abnormal-consumption thresholds, before ConsumptionScale.
const (
	ConsumptionMaxUndeleted = 5000
	ConsumptionMaxRate      = 1000 // receipts ended without delete, per second
	ConsumptionMaxHold      = 30 * time.Minute
	defaultThrottleHold     = 500 * time.Millisecond
)

func (t *Throttle) validate() error {
	switch {
	case t.RequestRate < 0 || math.IsNaN(t.RequestRate) || math.IsInf(t.RequestRate, 0):
		return fmt.Errorf("mnstest: throttle request rate %v must be a positive number or 0: %w", t.RequestRate, ErrInvalidArgument)
	case t.Hold < 0:
		return fmt.Errorf("mnstest: negative throttle hold %v: %w", t.Hold, ErrInvalidArgument)
	case t.MaxUndeleted < 0:
		return fmt.Errorf("mnstest: negative consumption threshold %d: %w", t.MaxUndeleted, ErrInvalidArgument)
	case !(t.ConsumptionScale >= 0 && t.ConsumptionScale <= 1):
		return fmt.Errorf("mnstest: consumption scale %v not in 0..1: %w", t.ConsumptionScale, ErrInvalidArgument)
	}
	if t.Hold == 0 {
		t.Hold = defaultThrottleHold
	}
	if t.ConsumptionScale == 0 {
		t.ConsumptionScale = 1
	}
	return nil
}

// throttled is the answer to a throttled request, after the hold.
func (t *Throttle) throttled() *apiError {
	if t.Legacy {
		return errQPSLimit
	}
	return errTooManyRequests
}

// limits are a Throttle's thresholds in the units the queue core compares.
type limits struct {
	rate        float64 // tokens per second; 0: no request limit
	undeleted   int
	lapseRate   float64
	hold        int64 // ns
	consumption bool
}

func (t *Throttle) limits() limits {
	sc := t.ConsumptionScale
	undeleted := max(1, int(math.Ceil(ConsumptionMaxUndeleted*sc)))
	if t.MaxUndeleted > 0 {
		undeleted = t.MaxUndeleted
	}
	return limits{
		rate:        t.RequestRate,
		undeleted:   undeleted,
		lapseRate:   ConsumptionMaxRate * sc,
		hold:        int64(float64(ConsumptionMaxHold) * sc),
		consumption: t.Consumption,
	}
}

// bucket is a token bucket on the server clock.
type bucket struct {
	tokens float64
	last   int64 // ns; 0 before the first take
}

// take removes cost tokens if the bucket, refilled at rate per second up
// to burst, holds them. A cost above burst passes on a full bucket (and
// leaves it in debt), so that a batch larger than the rate is slowed, not
// refused forever.
func (b *bucket) take(now int64, rate, burst, cost float64) bool {
	if b.last == 0 {
		b.tokens = burst
	} else if now > b.last {
		b.tokens = min(burst, b.tokens+float64(now-b.last)/float64(second)*rate)
	}
	b.last = max(b.last, now)
	if b.tokens < min(cost, burst) {
		return false
	}
	b.tokens -= cost
	return true
}

// Reasons a queue's consumption is abnormal.
const (
	abnormalNone      = ""
	AbnormalUndeleted = "undeleted" // too many received and not deleted
	AbnormalRate      = "rate"      // receipts ending without delete too fast
	AbnormalHold      = "hold"      // a message held too long
)

// consumption is a queue's abnormal-consumption state. Guarded by the
// queue's mutex.
type consumption struct {
	lapses     [2]float64 // receipts ended without delete, this second and the one before
	lapseSec   int64      // the second lapses[0] counts, in server-clock seconds
	oldestHeld int64      // cached: earliest heldSince of an in-flight message, 0 if none
	heldAt     int64      // when oldestHeld was computed
	reason     string     // why it is throttled now, or ""
	trickle    bucket     // receives admitted while throttled
	peak       int        // most messages ever in flight at once
}

// lapse counts a receipt that ended without a delete, at its end (at),
// which may be a little behind the clock: the queue advances lazily, on
// requests, so lapses are counted when they happened, not all at once at
// the next request.
func (c *consumption) lapse(at int64) {
	switch sec := at / second; {
	case sec >= c.lapseSec:
		c.roll(at)
		c.lapses[0]++
	case sec == c.lapseSec-1:
		c.lapses[1]++
	}
}

// roll moves the per-second counters to now's second.
func (c *consumption) roll(now int64) {
	sec := now / second
	switch d := sec - c.lapseSec; {
	case d == 0:
	case d == 1:
		c.lapses[1], c.lapses[0] = c.lapses[0], 0
	default:
		c.lapses = [2]float64{}
	}
	c.lapseSec = sec
}

// lapseRate estimates the lapses over the last second: all of this
// second's and the part of the previous second's still inside the window.
func (c *consumption) lapseRate(now int64) float64 {
	c.roll(now)
	frac := float64(now%second) / float64(second)
	return c.lapses[0] + c.lapses[1]*(1-frac)
}

// heldRefresh is how often the oldest held message is looked up again: a
// scan of the timer heap, so not on every receive.
const heldRefresh = 100 * int64(time.Millisecond)

// abnormal reports why q's consumption is abnormal at now, or "". It
// counts a trip when the state turns abnormal. The caller holds q.mu.
func (q *queue) abnormal(now int64, l limits) string {
	c := &q.cons
	reason := abnormalNone
	switch {
	case q.inflight >= l.undeleted:
		reason = AbnormalUndeleted
	case c.lapseRate(now) > l.lapseRate:
		reason = AbnormalRate
	case q.oldestHeld(now) > 0 && now-q.cons.oldestHeld > l.hold:
		reason = AbnormalHold
	}
	if reason != abnormalNone && c.reason == abnormalNone {
		q.srv.stats.countTrip(reason)
	}
	c.reason = reason
	return reason
}

// oldestHeld returns the earliest time an in-flight message began its
// hold, looked up at most every heldRefresh, or 0.
func (q *queue) oldestHeld(now int64) int64 {
	c := &q.cons
	if c.heldAt != 0 && now-c.heldAt < heldRefresh {
		return c.oldestHeld
	}
	c.heldAt, c.oldestHeld = now, 0
	for _, m := range q.timers {
		if m.state == stateInflight && (c.oldestHeld == 0 || m.heldSince < c.oldestHeld) {
			c.oldestHeld = m.heldSince
		}
	}
	return c.oldestHeld
}

// admitRate charges cost against a queue's or topic's request rate
// (Throttle.RequestRate). The caller holds the lock of b's owner.
func admitRate(b *bucket, now int64, t *Throttle, cost int, st *counters) *apiError {
	if t.RequestRate > 0 && !b.take(now, t.RequestRate, t.RequestRate, float64(cost)) {
		st.throttled.Add(1)
		return t.throttled()
	}
	return nil
}

// admit applies the request-rate limit (cost tokens) and, for receives,
// the consumption throttle. nil means go ahead. The caller holds q.mu and
// has advanced q to now.
func (q *queue) admit(now int64, t *Throttle, cost int, receive bool) *apiError {
	if err := admitRate(&q.rate, now, t, cost, &q.srv.stats); err != nil {
		return err
	}
	l := t.limits()
	if !receive || !l.consumption {
		return nil
	}
	if q.abnormal(now, l) != abnormalNone && !q.cons.trickle.take(now, 1, 1, 1) {
		q.srv.stats.consumptionThrottled.Add(1)
		return t.throttled()
	}
	return nil
}

var (
	errTooManyRequests = newAPIError(http.StatusTooManyRequests, CodeTooManyRequests,
		"The request is denied by cluster flow limiter for too many requests.")
	errQPSLimit = newAPIError(http.StatusBadRequest, CodeQpsLimitExceeded, "The QPS limit is exceeded.")
)

// isThrottle reports whether err is a throttling answer, which is held.
func isThrottle(err *apiError) bool { return err == errTooManyRequests || err == errQPSLimit }

// Chaos returns the chaos preset: the faults and throttling of a hostile but
// realistic service, for end-to-end tests and the mns-emulator's -chaos.
// Deliveries are repeated early (2%), requests answered 500 (2%) or cut
// (1%), latency 1..4ms, receives answered empty at once (5%), topic pushes
// delayed up to 200ms and made twice (2%), and the service's
// abnormal-consumption throttle is on at its real thresholds. Nothing is
// lost: LoseAckedSends and PushDrop are 0, so that a test of "no loss" can
// use it as it is.
func Chaos() (Faults, Throttle) {
	return Faults{
			Redeliver: 0.02, Error5xx: 0.02, Drop: 0.01, Latency: time.Millisecond, Jitter: 3 * time.Millisecond,
			EarlyEmpty: 0.05, PushDelay: 200 * time.Millisecond, PushDuplicate: 0.02,
		}, Throttle{
			Consumption: true,
		}
}
