package mnsqueue_test

import (
	"testing"

	"github.com/inorder/inorder/ordered/drivertest"
)

// BenchmarkDriver runs the drivertest benchmarks over the emulator through
// the real SDK on loopback: rounds of one SendBatch, ReceiveBatch and
// DeleteBatch of 16 bodies of 64 bytes, serial ("RoundTrip": ns/op is one
// round of three requests) and parallel. The same benchmarks run over
// memqueue (memqueue.BenchmarkDriver), so the two compare with benchstat.
func BenchmarkDriver(b *testing.B) {
	_, q := benchQueue(b)
	drivertest.RunBenchmarks(b, q)
}
