package mnstest_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

const (
	codeQPSLimit    = 134
	codeUnknownCode = 135
)

// TestRequestRateLimit: past Throttle.RequestRate a queue's requests are
// held about Hold and answered 429 TooManyRequests (which the SDK, older
// than that answer, reports as MNS#135 with the code in its text), a batch
// counting one per message; the rate is per queue; management is not
// limited.
func TestRequestRateLimit(t *testing.T) {
	const hold = 200 * time.Millisecond
	srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{RequestRate: 1, Hold: hold}})
	name, q := newQueue(t, srv, nil)
	_, other := newQueue(t, srv, nil)
	_, err := q.BatchSendMessage(msgs("b", 16)...)
	require.NoError(t, err, "a batch passes on a full bucket, and costs 16")
	start := time.Now()
	_, err = q.SendMessage(msg("over"))
	took := time.Since(start)
	requireCode(t, codeUnknownCode, err, "the next send")
	assert.Contains(t, err.Error(), "code: TooManyRequests,", "the service's code")
	assert.GreaterOrEqual(t, took, hold-20*time.Millisecond, "held before the answer")
	assert.Less(t, took, hold+time.Second, "held about Hold, not longer")
	time.Sleep(time.Second)
	_, err = q.SendMessage(msg("still over"))
	requireCode(t, codeUnknownCode, err, "a second later: the batch counted 16 requests, not 1")
	_, err = other.SendMessage(msg("elsewhere"))
	assert.NoError(t, err, "another queue has its own rate")
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	for range 3 {
		_, err = mgr.GetQueueAttributes(name)
		assert.NoError(t, err, "management is not limited")
	}
	srv.Advance(16 * time.Second)
	_, err = q.SendMessage(msg("later"))
	assert.NoError(t, err, "once the rate allows it again")
	st := srv.Stats()
	assert.EqualValues(t, 2, st.Throttled, "two requests throttled")
	assert.EqualValues(t, 2, st.Errors["TooManyRequests"])
}

// TestRequestRateLimitLegacy: with Legacy the answer is the older
// documents' 400 QpsLimitExceeded, which the SDK maps to MNS#134.
func TestRequestRateLimitLegacy(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{RequestRate: 1, Legacy: true, Hold: time.Millisecond}})
	_, q := newQueue(t, srv, nil)
	_, err := q.SendMessage(msg("one"))
	require.NoError(t, err)
	_, err = q.SendMessage(msg("two"))
	requireCode(t, codeQPSLimit, err, "second send within the second")
}

// TestConsumptionThrottleUndeleted: a client that receives without deleting
// trips the abnormal-consumption throttle when the messages it holds reach
// the threshold (5,000 x scale); its receives are then refused but for one
// a second, until it deletes.
func TestConsumptionThrottleUndeleted(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{Consumption: true, ConsumptionScale: 0.01, Hold: time.Millisecond}})
	name, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 3600})
	for range 8 {
		_, err := q.BatchSendMessage(msgs("u", 16)...)
		require.NoError(t, err)
	}
	var handles []string
	for range 4 { // 64 received, 50 is the scaled threshold
		got, err := batchReceive(q, 16)
		require.NoError(t, err, "below the threshold when asked")
		for _, m := range got {
			handles = append(handles, m.ReceiptHandle)
		}
	}
	got, err := batchReceive(q, 16)
	require.NoError(t, err, "the first receive past the threshold passes (one a second does)")
	for _, m := range got {
		handles = append(handles, m.ReceiptHandle)
	}
	_, err = batchReceive(q, 16)
	requireCode(t, codeUnknownCode, err, "the next one is throttled")
	assert.Contains(t, err.Error(), "TooManyRequests")
	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, mnstest.AbnormalUndeleted, info.Throttled, "why the queue is throttled")
	assert.Equal(t, 80, info.PeakInactive, "most messages held at once")
	st := srv.Stats()
	assert.Equal(t, map[string]int64{mnstest.AbnormalUndeleted: 1}, st.ConsumptionTrips, "one trip, for the held count")
	assert.EqualValues(t, 1, st.ConsumptionThrottled)

	for i := 0; i < len(handles); i += 16 {
		_, err := q.BatchDeleteMessage(handles[i:min(i+16, len(handles))]...)
		require.NoError(t, err, "deletes are not throttled")
	}
	_, err = batchReceive(q, 16)
	assert.NoError(t, err, "receives pass again once the client deleted what it held")
}

// TestConsumptionThrottleMaxUndeleted: Throttle.MaxUndeleted replaces the
// scaled threshold: a client that holds MaxUndeleted-1 messages is normal,
// one that holds MaxUndeleted trips the throttle.
func TestConsumptionThrottleMaxUndeleted(t *testing.T) {
	for _, limit := range []int{21, 20} {
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{Consumption: true, MaxUndeleted: limit, Hold: time.Millisecond}})
			_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 3600})
			for range 2 {
				_, err := q.BatchSendMessage(msgs("u", 16)...)
				require.NoError(t, err)
			}
			for _, n := range []int32{16, 4, 1} {
				_, err := batchReceive(q, n)
				require.NoError(t, err)
			}
			trips := srv.Stats().ConsumptionTrips[mnstest.AbnormalUndeleted]
			if limit == 20 {
				assert.EqualValues(t, 1, trips, "20 held with a threshold of 20")
			} else {
				assert.Zero(t, trips, "20 held with a threshold of 21")
			}
		})
	}
	_, err := mnstest.NewServer(&mnstest.Options{Throttle: mnstest.Throttle{MaxUndeleted: -1}})
	assert.ErrorIs(t, err, mnstest.ErrInvalidArgument)
}

// TestConsumptionThrottleRate: receipts that end without a delete faster
// than 1,000 x scale a second trip the throttle though few are held at once.
func TestConsumptionThrottleRate(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{Consumption: true, ConsumptionScale: 0.01, Hold: time.Millisecond}})
	_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 1})
	_, err := q.BatchSendMessage(msgs("r", 16)...)
	require.NoError(t, err)
	_, err = batchReceive(q, 16)
	require.NoError(t, err)
	srv.Advance(1100 * time.Millisecond) // all 16 lapse at once: 16 a second > 10
	_, err = batchReceive(q, 1)
	require.NoError(t, err, "the first throttled receive of the second passes")
	_, err = batchReceive(q, 1)
	requireCode(t, codeUnknownCode, err, "then receives are refused")
	assert.Equal(t, map[string]int64{mnstest.AbnormalRate: 1}, srv.Stats().ConsumptionTrips)
	assert.EqualValues(t, 16, srv.Stats().Lapsed, "16 receipts ended without a delete")
	srv.Advance(3 * time.Second)
	_, err = batchReceive(q, 16)
	assert.NoError(t, err, "the rate fell back: receives pass")
}

// TestConsumptionThrottleHold: a message held without a delete longer than
// 30 minutes x scale, its visibility extended meanwhile, trips it.
func TestConsumptionThrottleHold(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{Consumption: true, ConsumptionScale: 0.01, Hold: time.Millisecond}})
	_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 10})
	_, err := q.BatchSendMessage(msgs("h", 4)...)
	require.NoError(t, err)
	m, err := receive(q)
	require.NoError(t, err)
	h := m.ReceiptHandle
	for range 2 { // 20 s held, the limit is 18 s
		srv.Advance(9 * time.Second)
		r, err := q.ChangeMessageVisibility(h, 10)
		require.NoError(t, err)
		h = r.ReceiptHandle
	}
	_, err = receive(q)
	require.NoError(t, err, "the first throttled receive passes")
	_, err = receive(q)
	requireCode(t, codeUnknownCode, err, "then receives are refused")
	assert.Equal(t, map[string]int64{mnstest.AbnormalHold: 1}, srv.Stats().ConsumptionTrips)
}

// TestConsumptionThrottleOffByDefault: the same pattern without
// Throttle.Consumption is not throttled.
func TestConsumptionThrottleOffByDefault(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 3600})
	for range 8 {
		_, err := q.BatchSendMessage(msgs("o", 16)...)
		require.NoError(t, err)
	}
	for range 8 {
		_, err := batchReceive(q, 16)
		require.NoError(t, err)
	}
	assert.Empty(t, srv.Stats().ConsumptionTrips)
	assert.NotContains(t, strings.Join(mapKeys(srv.Stats().Errors), ","), "TooManyRequests")
}

func mapKeys(m map[string]int64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestConsumptionThrottleNormalConsumer: a consumer that deletes what it
// receives, with a batch still in hand while it fetches the next, never
// trips the throttle, even at 1/100 of the thresholds and over more than
// their 18 s.
func TestConsumptionThrottleNormalConsumer(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{Consumption: true, ConsumptionScale: 0.01, Hold: time.Millisecond}})
	name, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 30})
	var held []string
	for round := range 40 {
		_, err := q.BatchSendMessage(msgs("n", 16)...)
		require.NoError(t, err)
		got, err := batchReceive(q, 16)
		require.NoError(t, err, "round %d", round)
		if held != nil {
			_, err = q.BatchDeleteMessage(held...)
			require.NoError(t, err)
		}
		held = held[:0]
		for _, m := range got {
			held = append(held, m.ReceiptHandle)
		}
		srv.Advance(time.Second)
	}
	assert.Empty(t, srv.Stats().ConsumptionTrips, "no trip")
	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 32, info.PeakInactive, "two batches held at most")
}

// TestTopicRequestRate: a topic has its own request rate, like a queue.
func TestTopicRequestRate(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{RequestRate: 1, Hold: time.Millisecond}})
	require.NoError(t, srv.CreateTopic("t", nil))
	require.NoError(t, srv.CreateTopic("u", nil))
	topic := ali_mns.NewMNSTopic("t", newClient(srv))
	_, err := topic.PublishMessage(ali_mns.MessagePublishRequest{MessageBody: "1"})
	require.NoError(t, err)
	_, err = topic.PublishMessage(ali_mns.MessagePublishRequest{MessageBody: "2"})
	requireCode(t, codeUnknownCode, err, "the second publish within the second")
	assert.Contains(t, err.Error(), "code: TooManyRequests,")
	_, err = ali_mns.NewMNSTopic("u", newClient(srv)).PublishMessage(ali_mns.MessagePublishRequest{MessageBody: "1"})
	assert.NoError(t, err, "another topic has its own rate")
	assert.EqualValues(t, 1, srv.Stats().Throttled)
}

// TestChaosPreset: the preset is valid, loses nothing, and throttles
// abnormal consumption.
func TestChaosPreset(t *testing.T) {
	f, th := mnstest.Chaos()
	srv := newServer(t, &mnstest.Options{Faults: f, Throttle: th})
	assert.Zero(t, srv.Faults().LoseAckedSends, "nothing lost")
	assert.Zero(t, srv.Faults().PushDrop, "no push dropped")
	assert.True(t, srv.Options().Throttle.Consumption, "the consumption throttle is on")
	assert.Positive(t, srv.Faults().Redeliver)
}

// TestConsumptionRate: the abnormal-consumption rate counts receipts that
// end without a delete (a visibility timeout that lapses, a visibility
// shortened by ChangeMessageVisibility that then lapses), not receipts a
// delete ended, and it trips only above 1,000 x scale a second.
func TestConsumptionRate(t *testing.T) {
	throttle := &mnstest.Options{Throttle: mnstest.Throttle{Consumption: true, ConsumptionScale: 0.01, Hold: time.Millisecond}}
	t.Run("deleted", func(t *testing.T) {
		srv := newServer(t, throttle)
		_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 1})
		for range 2 {
			_, err := q.BatchSendMessage(msgs("d", 16)...)
			require.NoError(t, err)
			ms, err := batchReceive(q, 16)
			require.NoError(t, err)
			var hs []string
			for _, m := range ms {
				hs = append(hs, m.ReceiptHandle)
			}
			_, err = q.BatchDeleteMessage(hs...)
			require.NoError(t, err)
		}
		srv.Advance(1100 * time.Millisecond)
		for range 3 {
			_, err := receive(q)
			require.Error(t, err) // empty queue: MessageNotExist, not throttled
			requireCode(t, codeMessageNotExist, err, "32 receipts ended by deletes within a second are no abnormal rate")
		}
		assert.Empty(t, srv.Stats().ConsumptionTrips)
		assert.Zero(t, srv.Stats().Lapsed)
	})
	t.Run("at the limit", func(t *testing.T) {
		srv := newServer(t, throttle)
		_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 1})
		_, err := q.BatchSendMessage(msgs("l", 10)...)
		require.NoError(t, err)
		_, err = batchReceive(q, 10)
		require.NoError(t, err)
		srv.Advance(1100 * time.Millisecond) // 10 lapse at once: 10 a second is the limit, not above it
		for range 3 {
			_, err := batchReceive(q, 1)
			require.NoError(t, err)
		}
		assert.Empty(t, srv.Stats().ConsumptionTrips)
		assert.EqualValues(t, 10, srv.Stats().Lapsed)
	})
	t.Run("spread", func(t *testing.T) {
		srv := newServer(t, throttle)
		_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 1})
		_, err := q.BatchSendMessage(msgs("s", 5)...)
		require.NoError(t, err)
		for range 6 { // 5 lapse each 1.1 s: 30 in 6.6 s, never 10 in a second
			_, err := batchReceive(q, 5)
			require.NoError(t, err)
			srv.Advance(1100 * time.Millisecond)
		}
		assert.Empty(t, srv.Stats().ConsumptionTrips)
		assert.EqualValues(t, 30, srv.Stats().Lapsed)
	})
	t.Run("counted when they lapse", func(t *testing.T) {
		// The emulator advances lazily, at the next request: 8 lapses
		// at 1 s and 8 at 3 s, seen by one request at 5 s, are two
		// seconds of 8, not 16 at once.
		srv := newServer(t, throttle)
		_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 60})
		_, err := q.BatchSendMessage(msgs("c", 16)...)
		require.NoError(t, err)
		ms, err := batchReceive(q, 16)
		require.NoError(t, err)
		for i, m := range ms {
			_, err := q.ChangeMessageVisibility(m.ReceiptHandle, int64(1+2*(i%2)))
			require.NoError(t, err)
		}
		srv.Advance(5 * time.Second)
		for range 3 {
			_, err := batchReceive(q, 1)
			require.NoError(t, err)
		}
		assert.Empty(t, srv.Stats().ConsumptionTrips)
		assert.EqualValues(t, 16, srv.Stats().Lapsed)
	})
	t.Run("shortened", func(t *testing.T) {
		srv := newServer(t, throttle)
		_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 60})
		_, err := q.BatchSendMessage(msgs("g", 12)...)
		require.NoError(t, err)
		ms, err := batchReceive(q, 12)
		require.NoError(t, err)
		for _, m := range ms { // a receiver giving back what it holds
			_, err := q.ChangeMessageVisibility(m.ReceiptHandle, 1)
			require.NoError(t, err)
		}
		srv.Advance(500 * time.Millisecond)
		_, err = batchReceive(q, 1)
		requireCode(t, codeMessageNotExist, err, "still invisible, no lapse yet")
		srv.Advance(600 * time.Millisecond) // 12 given back lapse at once: above 10 a second
		_, err = batchReceive(q, 1)
		require.NoError(t, err, "the first throttled receive of the second passes")
		_, err = batchReceive(q, 1)
		requireCode(t, codeUnknownCode, err, "then receives are refused")
		assert.Equal(t, map[string]int64{mnstest.AbnormalRate: 1}, srv.Stats().ConsumptionTrips)
		assert.EqualValues(t, 12, srv.Stats().Lapsed)
		srv.Advance(2 * time.Second)
		_, err = batchReceive(q, 4)
		assert.NoError(t, err, "the rate fell back: receives pass")
	})
}
