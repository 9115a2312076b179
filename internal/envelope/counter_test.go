package envelope_test

import (
	"bytes"
	"testing"

	"github.com/inorder/inorder/internal/envelope"
)

// The Counter appends exactly what Append would, across digit carries,
// for plain, encoded, long and legacy groups.
func TestCounterMatchesAppend(t *testing.T) {
	long := string(bytes.Repeat([]byte("g"), envelope.MaxGroupLen))
	heads := []envelope.Header{
		{Group: "g", Epoch: 1, Seq: 1},
		{Group: "order-7", Epoch: 1782000000000 << 20, Seq: 95},
		{Group: "订单-1", Epoch: 7, Seq: 999_990},
		{Group: long, Epoch: 99, Seq: 9_999_999_990},
		{Legacy: true, Seq: 8},
		{Group: "g", Epoch: 3, Seq: envelope.MaxNumber - 3},
	}
	for _, h := range heads {
		c := envelope.NewCounter(h)
		var got, want []byte
		for i := range 40 {
			payload := []byte{byte('a' + i%26)}
			if h.Seq+uint64(i) > envelope.MaxNumber {
				break
			}
			if c.Seq() != h.Seq+uint64(i) {
				t.Fatalf("%+v: Seq %d, want %d", h, c.Seq(), h.Seq+uint64(i))
			}
			hi := h
			hi.Seq += uint64(i)
			want = envelope.Append(want, hi, payload)
			got = c.Append(got, payload)
			if !bytes.Equal(got, want) {
				t.Fatalf("%+v, seq %d:\n got %q\nwant %q", h, hi.Seq, got, want)
			}
		}
	}
}

func TestCounterPanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	mustPanic("signed", func() { envelope.NewCounter(envelope.Header{Group: "g", Epoch: 1, Seq: 1, Signed: true}) })
	mustPanic("seq 0", func() { envelope.NewCounter(envelope.Header{Group: "g", Epoch: 1}) })
	c := envelope.NewCounter(envelope.Header{Group: "g", Epoch: 1, Seq: envelope.MaxNumber})
	c.Append(nil, nil)
	mustPanic("past MaxNumber", func() { c.Append(nil, nil) })
}

func BenchmarkCounter(b *testing.B) {
	payload := make([]byte, 256)
	buf := make([]byte, 0, 1024)
	for _, bh := range benchHeaders {
		b.Run(bh.name, func(b *testing.B) {
			c := envelope.NewCounter(bh.h)
			b.ReportAllocs()
			for b.Loop() {
				buf = c.Append(buf[:0], payload)
			}
		})
	}
}
