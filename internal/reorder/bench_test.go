package reorder

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// message stands in for the receive side's per-message record.
type message struct {
	body []byte
}

// cycle is how many seqs one precomputed arrival order covers; benchmarks
// replay it with a growing base.
const cycle = 1 << 16

// inOrder returns offsets 0..cycle-1 in order.
func inOrder() []uint64 {
	order := make([]uint64, cycle)
	for i := range order {
		order[i] = uint64(i)
	}
	return order
}

// jittered returns 0..cycle-1 where every offset arrives up to spread-1
// places early or late, the local reordering an MNS standard queue shows:
// offsets are sorted by i+U[0,spread).
func jittered(spread int) []uint64 {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]int, cycle)
	order := inOrder()
	for i := range keys {
		keys[i] = i + r.IntN(spread)
	}
	slices.SortStableFunc(order, func(a, b uint64) int { return keys[a] - keys[b] })
	return order
}

// shuffled returns 0..cycle-1 shuffled within consecutive blocks of block.
func shuffled(block int) []uint64 {
	r := rand.New(rand.NewPCG(3, 4))
	order := inOrder()
	for lo := 0; lo < cycle; lo += block {
		part := order[lo : lo+block]
		r.Shuffle(len(part), func(i, j int) { part[i], part[j] = part[j], part[i] })
	}
	return order
}

// runInsertPop inserts one message per iteration in the given arrival order
// and pops whatever became ready, so ns/op is the cost of one message in and
// out.
func runInsertPop(b *testing.B, order []uint64, window int) {
	buf := New[*message](1, window, 1<<30)
	msg := &message{body: make([]byte, 256)}
	base, i, popped := uint64(1), 0, 0
	b.ReportAllocs()
	for b.Loop() {
		seq := base + order[i]
		if r, _ := buf.Insert(seq, msg, len(msg.body)); r != Ready && r != Buffered {
			b.Fatalf("Insert(%d) with Next()=%d: %v", seq, buf.Next(), r)
		}
		for buf.Ready() {
			buf.Pop()
			popped++
		}
		if i++; i == len(order) {
			i, base = 0, base+uint64(len(order))
		}
	}
	b.ReportMetric(float64(popped)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkInsertPop(b *testing.B) {
	runInsertPop(b, inOrder(), 16)
}

func BenchmarkInsertPopReordered(b *testing.B) {
	runInsertPop(b, jittered(16), 16)
}

func BenchmarkInsertPopShuffled(b *testing.B) {
	runInsertPop(b, shuffled(1024), 1024)
}

// BenchmarkNew measures an idle stream: B/op is what a Buffer that never
// holds anything costs.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sink = New[*int](1, 1024, 1<<20)
	}
}

func TestMillionIdleBuffers(t *testing.T) {
	const streams = 1_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	bufs := make([]*Buffer[*message], streams)
	for i := range bufs {
		bufs[i] = New[*message](1, 1024, 1<<20)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perStream := float64(after.HeapAlloc-before.HeapAlloc) / streams
	t.Logf("%d idle buffers: %.1f heap bytes each, including the slice entry", streams, perStream)
	if perStream > 80 {
		t.Errorf("an idle buffer costs %.1f bytes, want <= 80 (64-byte struct plus an 8-byte pointer)", perStream)
	}
	runtime.KeepAlive(bufs)
}

// BenchmarkInsertPopManyStreams spreads the jittered arrivals over 10,000
// streams in turn, so that each message touches a buffer that is cold in the
// CPU cache, as on a receiver serving many groups.
func BenchmarkInsertPopManyStreams(b *testing.B) {
	const streams = 10_000
	order := jittered(16)
	bufs := make([]*Buffer[*message], streams)
	for i := range bufs {
		bufs[i] = New[*message](1, 16, 1<<30)
	}
	msg := &message{body: make([]byte, 256)}
	base, i, s, popped := uint64(1), 0, 0, 0
	b.ReportAllocs()
	for b.Loop() {
		buf := bufs[s]
		seq := base + order[i]
		if r, _ := buf.Insert(seq, msg, len(msg.body)); r != Ready && r != Buffered {
			b.Fatalf("stream %d: Insert(%d) with Next()=%d: %v", s, seq, buf.Next(), r)
		}
		for buf.Ready() {
			buf.Pop()
			popped++
		}
		if s++; s == streams {
			s = 0
			if i++; i == len(order) {
				i, base = 0, base+uint64(len(order))
			}
		}
	}
	b.ReportMetric(float64(popped)/b.Elapsed().Seconds(), "msgs/s")
}
