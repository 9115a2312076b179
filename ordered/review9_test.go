package ordered_test

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/stretchr/testify/require"
)

// trickle sends n messages, one every gap, round robin over groups, to a
// driver of the given latency, and returns requests per message, the send
// latencies' median and p99, and the most requests that were not full in
// flight at once.
func trickle(t *testing.T, conc int, latency, gap time.Duration, n, groups int) (float64, time.Duration, time.Duration, int64) {
	ctx := sendCtx(t)
	d := newSendDriver()
	d.latency = latency
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{Concurrency: conc}})
	var mu sync.Mutex
	var lats []time.Duration
	var wg sync.WaitGroup
	tick := time.NewTicker(gap)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		start := time.Now()
		r, err := q.SendAsync(ctx, fmt.Sprintf("g%d", i%groups), []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, r.Wait(ctx))
			mu.Lock()
			lats = append(lats, time.Since(start))
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lats)
	return float64(d.calls.Load()) / float64(n), lats[len(lats)/2], lats[len(lats)*99/100], d.partPeak.Load()
}

// TestReview9SlowDriverNagle: with Concurrency 4 (MaxPartial was 1, held
// for as long as the request was in flight) and a driver whose requests
// take 20 ms, a steady trickle of 500 messages/s from many groups went out
// in about one request per 10 messages (0.100 requests per message before
// bf9f0ab). The 5 ms hold takes every 20 ms request for a stuck one, so a
// partial request leaves every 5 ms and the handlers fill with small
// requests: 0.37 requests per message, 3.7 times the requests (MNS bills by
// the request), for no latency gained at 100 ms requests.
func TestReview9SlowDriverNagle(t *testing.T) {
	rpm, p50, p99, _ := trickle(t, 4, 20*time.Millisecond, 2*time.Millisecond, 500, 1000)
	t.Logf("requests/message %.3f, p50 %v, p99 %v", rpm, p50, p99)
	require.LessOrEqual(t, rpm, 0.2, "a steady trickle over a 20 ms driver goes in small requests: one partial request every PartialHold")
}

// TestReview9SlowDriverLatency: the same trickle over a driver of 100 ms
// requests with Concurrency 4. Before bf9f0ab one partial request was in
// flight and the other handlers took full ones (p99 about 136 ms); with
// the 5 ms hold all four handlers filled with small partial requests
// within 20 ms and the next messages waited for a handler (p99 about 185
// ms): the hold meant to cut latency added to it. The test checks the
// cause, which load does not move as it moves a p99 (CI's -race run
// measured 194 ms on correct code): at most two partial requests in
// flight at once (the first request's FirstHold, 100 ms, may end as it
// does).
func TestReview9SlowDriverLatency(t *testing.T) {
	rpm, p50, p99, partials := trickle(t, 4, 100*time.Millisecond, 2*time.Millisecond, 500, 1000)
	t.Logf("requests/message %.3f, p50 %v, p99 %v, partial requests in flight at most %d", rpm, p50, p99, partials)
	require.LessOrEqual(t, partials, int64(2), "a steady trickle over a 100 ms driver filled the handlers with small partial requests")
}

// TestReview9DefaultSlowDriverNagle: the default Concurrency (16; MaxPartial
// was 4) and a driver of 50 ms requests (an MNS endpoint across a region):
// 1,000 messages/s from many groups took 0.127 requests per message before
// bf9f0ab and 0.19 after, one partial request every 5 ms whatever the
// request time: the commit's gain was measured over a local emulator,
// whose requests end well within the hold.
func TestReview9DefaultSlowDriverNagle(t *testing.T) {
	rpm, p50, p99, _ := trickle(t, 16, 50*time.Millisecond, time.Millisecond, 1000, 1000)
	t.Logf("requests/message %.3f, p50 %v, p99 %v", rpm, p50, p99)
	require.LessOrEqual(t, rpm, 0.16, "a steady trickle over a 50 ms driver goes in one partial request every PartialHold")
}
