package ordered

import (
	"testing"
	"time"
)

// SetPartialHold sets how long a partial send request holds the next one
// back, for the queues t creates; t must not be parallel.
func SetPartialHold(t *testing.T, d time.Duration) {
	old := partialHold
	partialHold = d
	t.Cleanup(func() { partialHold = old })
}

// DumpReceiver describes the receive core's state, for test failures.
func DumpReceiver(q *Queue) string {
	q.mu.Lock()
	r := q.rcv
	q.mu.Unlock()
	if r == nil {
		return "no receiver"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.core.Dump()
}
