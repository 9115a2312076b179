package ordered

import "testing"

func TestGoid(t *testing.T) {
	here := goid()
	there := make(chan uint64)
	go func() { there <- goid() }()
	if other := <-there; here == 0 || other == 0 || here == other || goid() != here {
		t.Fatalf("goid: %d here (then %d), %d on another goroutine", here, goid(), other)
	}
}
