package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
)

// body encodes the envelope of group/epoch/seq with a payload naming them.
func rxBody(group string, epoch, seq uint64) []byte {
	h := envelope.Header{Group: group, Epoch: epoch, Seq: seq}
	return envelope.Append(nil, h, []byte(fmt.Sprintf("%s/%d/%d", group, epoch, seq)))
}

// rxSend sends bodies through the driver in batches, retrying injected
// failures; a retried batch may enqueue twice, which receivers must absorb.
func rxSend(t testing.TB, drv driver.Queue, bodies [][]byte) {
	t.Helper()
	ctx := context.Background()
	max := drv.Limits().MaxBatch
	for i := 0; i < len(bodies); i += max {
		chunk := bodies[i:min(i+max, len(bodies))]
		for attempt := 0; ; attempt++ {
			err := drv.SendBatch(ctx, chunk)
			if err == nil {
				break
			}
			var be *driver.BatchError
			if errors.As(err, &be) {
				var again [][]byte
				for j, e := range be.Errs {
					if e != nil {
						again = append(again, chunk[j])
					}
				}
				chunk = again
			}
			require.True(t, drv.IsRetryable(err), "send failed with a permanent error: %v", err)
			require.Less(t, attempt, 100, "send kept failing: %v", err)
		}
	}
}

// rxBodies returns the bodies of seqs first..last of a stream, optionally
// shuffled.
func rxBodies(group string, epoch, first, last uint64, rng *rand.Rand) [][]byte {
	var bs [][]byte
	for s := first; s <= last; s++ {
		bs = append(bs, rxBody(group, epoch, s))
	}
	if rng != nil {
		rng.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
	}
	return bs
}

// recorder checks, per group, that the handler sees consecutive seqs, one
// at a time, and that no Unordered message is handed out twice; it collects
// what it saw.
type rxRecorder struct {
	mu        sync.Mutex
	seen      map[string][]uint64 // group -> seqs in delivery order
	total     int
	errs      []string
	inflight  map[string]bool // groups whose handler runs
	unordered map[string]bool // Unordered messages handed out (group/epoch/seq, or id when untagged)
	done      chan struct{}
	want      int
	once      sync.Once
}

func newRxRecorder(want int) *rxRecorder {
	return &rxRecorder{seen: map[string][]uint64{}, inflight: map[string]bool{}, unordered: map[string]bool{},
		done: make(chan struct{}), want: want}
}

// record checks and records m as its handler starts; call the function it
// returns when the handler ends (defer rc.record(m)()).
func (rc *rxRecorder) record(m *ordered.Message) (end func()) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if m.Unordered {
		key := fmt.Sprintf("%s/%d/%d", m.Group, m.Epoch, m.Seq)
		if m.Seq == 0 {
			key = "id:" + m.ID
		}
		if m.Attempt == 1 && rc.unordered[key] {
			rc.errs = append(rc.errs, fmt.Sprintf("Unordered message %s handed out twice", key))
		}
		rc.unordered[key] = true
		return func() {}
	}
	if rc.inflight[m.Group] {
		rc.errs = append(rc.errs, fmt.Sprintf("group %q: two messages out at once (seq %d)", m.Group, m.Seq))
	}
	rc.inflight[m.Group] = true
	end = func() {
		rc.mu.Lock()
		rc.inflight[m.Group] = false
		rc.mu.Unlock()
	}
	s := rc.seen[m.Group]
	if n := len(s); n > 0 && m.Seq != s[n-1]+1 && m.Attempt == 1 {
		rc.errs = append(rc.errs, fmt.Sprintf("group %q: seq %d after %d", m.Group, m.Seq, s[n-1]))
	}
	if m.Attempt == 1 {
		rc.seen[m.Group] = append(s, m.Seq)
		rc.total++
		if rc.total == rc.want {
			rc.once.Do(func() { close(rc.done) })
		}
	}
	return end
}

// check asserts that each group saw exactly 1..n[group] in order.
func (rc *rxRecorder) check(t testing.TB, n map[string]uint64) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Empty(t, rc.errs, "order violations")
	for g, last := range n {
		s := rc.seen[g]
		require.Len(t, s, int(last), "group %q: want seqs 1..%d, got %d deliveries", g, last, len(s))
		for i, seq := range s {
			if seq != uint64(i+1) {
				require.Failf(t, "out of order", "group %q: delivery %d is seq %d, want %d", g, i, seq, i+1)
			}
		}
	}
}

func rxWait(t testing.TB, rc *rxRecorder, d time.Duration) {
	t.Helper()
	select {
	case <-rc.done:
	case <-time.After(d):
		rc.mu.Lock()
		defer rc.mu.Unlock()
		require.Failf(t, "timeout", "delivered %d of %d messages within %v", rc.total, rc.want, d)
	}
}
