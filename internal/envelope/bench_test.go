package envelope_test

import (
	"testing"

	"github.com/inorder/inorder/internal/envelope"
)

var benchHeaders = []struct {
	name string
	h    envelope.Header
}{
	{"legacy", envelope.Header{Legacy: true, Seq: 123456}},
	{"plain", envelope.Header{Group: "order-1234567", Epoch: 1782000000000 << 20, Seq: 123456}},
	{"encoded", envelope.Header{Group: "订单-1234567", Epoch: 1782000000000 << 20, Seq: 123456}},
}

func BenchmarkAppend(b *testing.B) {
	payload := make([]byte, 256)
	buf := make([]byte, 0, 1024)
	for _, bh := range benchHeaders {
		b.Run(bh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = envelope.Append(buf[:0], bh.h, payload)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	payload := make([]byte, 256)
	for _, bh := range benchHeaders {
		body := envelope.Append(nil, bh.h, payload)
		b.Run(bh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, ok := envelope.Parse(body); !ok {
					b.Fatal("untagged")
				}
			}
		})
	}
}
