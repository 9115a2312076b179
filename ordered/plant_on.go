//go:build inorder_plant

package ordered

import (
	"os"
	"sync/atomic"
	"time"
)

var (
	plantSpin, _ = time.ParseDuration(os.Getenv("INORDER_PLANT_SPIN"))
	plantAlloc   = os.Getenv("INORDER_PLANT") == "handout-alloc"
	plantSink    atomic.Pointer[[16]byte] // keeps the planted allocation on the heap
)

// plantHandOut runs the planted regressions of a hand-out (see plant.go).
func plantHandOut() {
	if plantSpin > 0 {
		for start := time.Now(); time.Since(start) < plantSpin; {
		}
	}
	if plantAlloc {
		plantSink.Store(new([16]byte))
	}
}
