package mnsqueue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

func benchQueue(b *testing.B) (*mnstest.Server, *mnsqueue.Queue) {
	b.Helper()
	srv := newServer(b, nil)
	name := uniqueName("bench")
	require.NoError(b, mnsqueue.CreateQueue(b.Context(), srv.Endpoint(), serverCred(srv), name, nil))
	q, err := mnsqueue.New(b.Context(), srv.Endpoint(), name, serverCred(srv), nil)
	require.NoError(b, err)
	b.Cleanup(func() { q.Close() })
	return srv, q
}

// BenchmarkSendBatch16 measures one SendBatch of 16 bodies of 100 bytes over
// loopback HTTP to the emulator, one call at a time.
func BenchmarkSendBatch16(b *testing.B) {
	_, q := benchQueue(b)
	bodies := make([][]byte, 16)
	for i := range bodies {
		bodies[i] = make([]byte, 100)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := q.SendBatch(b.Context(), bodies); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*16)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRawThroughput measures the raw driver's send+receive+delete
// throughput over the emulator with 16-message batches: senders and
// receivers run concurrently, every message is received and deleted once.
// One op is one message.
func BenchmarkRawThroughput(b *testing.B) {
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			srv, q := benchQueue(b)
			ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
			defer cancel()
			body := make([]byte, 100)
			batches := (b.N + 15) / 16
			total := int64(batches * 16)
			var next, deleted atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range conc {
				wg.Go(func() {
					bodies := make([][]byte, 16)
					for i := range bodies {
						bodies[i] = body
					}
					for next.Add(1) <= int64(batches) {
						if err := q.SendBatch(ctx, bodies); err != nil {
							if deleted.Load() < total { // else the call finished as ctx ended
								b.Error(err)
							}
							return
						}
					}
				})
				wg.Go(func() {
					for deleted.Load() < total && ctx.Err() == nil {
						msgs, err := q.ReceiveBatch(ctx, 16, time.Second)
						if err != nil {
							if ctx.Err() == nil {
								b.Error(err)
							}
							return
						}
						if len(msgs) == 0 {
							continue
						}
						rs := make([]string, len(msgs))
						for i, m := range msgs {
							rs[i] = m.Receipt
						}
						if err := q.DeleteBatch(ctx, rs); err != nil {
							b.Error(err)
							return
						}
						if deleted.Add(int64(len(msgs))) >= total {
							cancel() // the other receivers stop waiting
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			st := srv.Stats()
			var reqs int64
			for _, n := range st.Requests {
				reqs += n
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(reqs)/float64(total), "reqs/msg")
		})
	}
}
