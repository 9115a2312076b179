package mnstest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkServeBatch measures the server's own cost per request, in
// process (no network, no SDK): one batch send of 16 messages of 100 bytes,
// one batch receive and one batch delete per iteration, requests signed as
// the SDK signs them.
func BenchmarkServeBatch(b *testing.B) {
	s, err := NewServer(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateQueue("bench", &QueueAttributes{VisibilityTimeout: 60}); err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("<Messages>")
	for range 16 {
		sb.WriteString("<Message><MessageBody>" + strings.Repeat("x", 100) + "</MessageBody><DelaySeconds>0</DelaySeconds><Priority>8</Priority></Message>")
	}
	sb.WriteString("</Messages>")
	sendBody := sb.String()
	serve := func(method, uri, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, uri, strings.NewReader(body))
		signRequest(r, []byte(body), s.AccessKeyID(), s.AccessKeySecret())
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if w := serve("POST", "/queues/bench/messages", sendBody); w.Code != http.StatusCreated {
			b.Fatalf("send: %d %s", w.Code, w.Body)
		}
		w := serve("GET", "/queues/bench/messages?numOfMessages=16&waitseconds=1", "")
		if w.Code != http.StatusOK {
			b.Fatalf("receive: %d %s", w.Code, w.Body)
		}
		// Handles are base64: no escaping, so plain string scanning finds
		// them without charging an XML decoder to the server.
		var db strings.Builder
		db.WriteString("<ReceiptHandles>")
		rest := w.Body.String()
		n := 0
		for {
			_, after, ok := strings.Cut(rest, "<ReceiptHandle>")
			if !ok {
				break
			}
			h, after, _ := strings.Cut(after, "</ReceiptHandle>")
			db.WriteString("<ReceiptHandle>" + h + "</ReceiptHandle>")
			rest = after
			n++
		}
		db.WriteString("</ReceiptHandles>")
		if n != 16 {
			b.Fatalf("received %d messages, want 16", n)
		}
		if w := serve("DELETE", "/queues/bench/messages", db.String()); w.Code != http.StatusNoContent {
			b.Fatalf("delete: %d %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(b.N*3)/b.Elapsed().Seconds(), "req/s")
}
