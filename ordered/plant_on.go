//go:build inorder_plant

package ordered

import (
	"os"
	"sync/atomic"
	"time"
)

var (
	plantSpin, _ = time.ParseDuration(os.Getenv("INORDER_PLANT_SPIN"))
	plantRounds  = int(float64(plantSpin.Nanoseconds()) * plantRoundsPerNs)
	plantAlloc   = os.Getenv("INORDER_PLANT") == "handout-alloc"
	plantSink    atomic.Pointer[[16]byte] // keeps the planted allocation on the heap
	plantSum     atomic.Uint64            // keeps the planted work from being dropped
)

// plantRoundsPerNs is how many rounds of plantWork take a nanosecond on the
// machine of the bench guard's baselines (its speed 1, where raw/memqueue/g1
// costs 0.49 µs of CPU per message): 2.4 ns a round measured where the guard
// measured speed 0.55-0.63. The planted regression is a fixed amount of work,
// not of time: on a slower host it takes longer, as a real regression would,
// and the guard, which scales what it measures by the host's speed, sees
// the same 1 µs (a busy-wait of 1 µs came out at 0.6 µs on such a host, and
// passed the guard).
const plantRoundsPerNs = 1 / (2.4 * 0.6)

// plantHandOut runs the planted regressions of a hand-out (see plant.go).
func plantHandOut() {
	if plantRounds > 0 {
		plantSum.Add(plantWork(plantRounds))
	}
	if plantAlloc {
		plantSink.Store(new([16]byte))
	}
}

// plantWork is n rounds of xorshift, each depending on the one before.
func plantWork(n int) uint64 {
	x := uint64(88172645463325252)
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}
