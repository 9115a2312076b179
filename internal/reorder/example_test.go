package reorder_test

import (
	"fmt"

	"github.com/inorder/inorder/internal/reorder"
)

// A stream whose messages arrive out of order: early ones wait, and each
// arrival releases whatever became next.
func Example() {
	b := reorder.New[string](1, 16, 1<<20)
	for _, m := range []struct {
		seq  uint64
		body string
	}{{2, "b"}, {3, "c"}, {1, "a"}, {2, "b again"}, {5, "e"}} {
		r, _ := b.Insert(m.seq, m.body, len(m.body))
		fmt.Printf("insert %d: %v\n", m.seq, r)
		for b.Ready() {
			seq, body, _ := b.Pop()
			fmt.Printf("  deliver %d %q\n", seq, body)
		}
	}
	low, _ := b.Lowest()
	fmt.Printf("waiting for %d..%d\n", b.Next(), low-1)
	// Output:
	// insert 2: Buffered
	// insert 3: Buffered
	// insert 1: Ready
	//   deliver 1 "a"
	//   deliver 2 "b"
	//   deliver 3 "c"
	// insert 2: Duplicate
	// insert 5: Buffered
	// waiting for 4..4
}

// When a gap outlives its timeout, the caller gives up on it with SkipTo and
// delivers what waited behind it.
func ExampleBuffer_SkipTo() {
	b := reorder.New[string](10, 16, 1<<20)
	b.Insert(13, "m13", 3)
	b.Insert(14, "m14", 3)
	low, _ := b.Lowest()
	first, last, missing := b.SkipTo(low, nil)
	fmt.Printf("skipped %d..%d, %d missing\n", first, last, missing)
	for b.Ready() {
		seq, body, _ := b.Pop()
		fmt.Println(seq, body)
	}
	// Output:
	// skipped 10..12, 3 missing
	// 13 m13
	// 14 m14
}
