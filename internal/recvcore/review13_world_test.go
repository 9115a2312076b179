package recvcore_test

import (
	"flag"
	"testing"

	"pgregory.net/rapid"
)

// Review13: a TestWorld case that CI's -race step drew at random (it failed
// after 69 cases of one run of go test -race -p 4 -parallel 4
// ./internal/recvcore on 5b512e1, and replays the same way back to a23fc92
// at least): with leases, a stale owner (life 7, token 7) loses a message.
// Life 8 took g0 over, unparked seq 13, handed it out and, closing, abandoned
// it: it committed 13 as skipped and owed and sent it back to the queue
// (requeue). Life 7, fenced but still receiving, got that copy (rh92) and
// deleted it at once, in the same Ready as its retried commit 12->13 (which
// the store then refused: cursor conflict, fenced). No copy of g0/100/13 is
// left in the queue or the park and it was never settled: property
// recoverable/parked. Replayed from the failfile that run wrote.
//
//	INORDER_WORLD_TRACE=1 go test ./internal/recvcore -run 'TestReview13_WorldZombieDeletesRequeued' -v
func TestReview13_WorldZombieDeletesRequeued(t *testing.T) {
	f := flag.Lookup("rapid.failfile")
	if f == nil {
		t.Skip("rapid's flags not registered")
	}
	was := f.Value.String()
	if err := f.Value.Set("testdata/review13/world-zombie-deletes-13.fail"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Value.Set(was) }()
	rapid.Check(t, worldCase)
}
