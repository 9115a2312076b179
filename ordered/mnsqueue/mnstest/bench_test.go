package mnstest_test

import (
	"testing"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// BenchmarkBatchSendReceiveDelete measures what the emulator serves through
// the real SDK over loopback: each iteration is one batch send of 16, one
// batch receive and one batch delete (three requests), from GOMAXPROCS
// goroutines each with its own SDK queue object.
func BenchmarkBatchSendReceiveDelete(b *testing.B) {
	srv := newServer(b, &mnstest.Options{})
	name, _ := newQueue(b, srv, &mnstest.QueueAttributes{VisibilityTimeout: 60})
	client := newClient(srv)
	batch := msgs("benchmark-message-body-", 16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		q := ali_mns.NewMNSQueue(name, client, 1<<30)
		for pb.Next() {
			if _, err := q.BatchSendMessage(batch...); err != nil {
				b.Error(err)
				return
			}
			ms, err := batchReceive(q, 16, 1)
			if err != nil {
				b.Error(err)
				return
			}
			hs := make([]string, len(ms))
			for i, m := range ms {
				hs[i] = m.ReceiptHandle
			}
			if _, err := q.BatchDeleteMessage(hs...); err != nil {
				b.Error(err)
				return
			}
		}
	})
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(3*b.N)/sec, "req/s")
	b.ReportMetric(float64(16*b.N)/sec, "msg/s")
}
