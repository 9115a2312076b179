package otelinorder_test

import (
	"context"
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/ordered/otelinorder"
	"github.com/inorder/inorder/seqstore/memstore"
)

// Metrics and trace context for one Queue: the hooks go into the Options
// before New, the Queue into Observe after; the producer's span context
// rides in the message's metadata and the consumer's span links to it.
func Example() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader() // in production: a periodic reader and an exporter
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(ctx)
	tracer := tp.Tracer("example")

	opts := &ordered.Options{Name: "orders"}
	metrics, err := otelinorder.Instrument(opts, &otelinorder.Options{MeterProvider: mp})
	if err != nil {
		log.Fatal(err)
	}
	q, err := ordered.New(ctx, memqueue.New(nil), memstore.New(), opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := metrics.Observe(q); err != nil {
		log.Fatal(err)
	}
	defer metrics.Close()

	// Producer: the span's trace context goes into the message's metadata.
	pctx, send := tracer.Start(ctx, "send orders", trace.WithSpanKind(trace.SpanKindProducer))
	if err := q.SendWithMetadata(pctx, "acct-7", []byte("debit 10"), otelinorder.Inject(pctx, nil)); err != nil {
		log.Fatal(err)
	}
	send.End()

	// Consumer: a span linked to the producer's, ended when the message is settled.
	msg, err := q.Receive(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, span := otelinorder.StartConsumerSpan(ctx, tracer, msg)
	fmt.Printf("processing %s\n", msg.Body)
	if err := msg.Ack(ctx); err != nil {
		log.Fatal(err)
	}
	span.End()
	if err := q.Close(ctx); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	counts := make(map[string]int64)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				counts[m.Name] += p.Value
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				counts[m.Name] += int64(p.Count)
			}
		}
	}
	fmt.Println("messages sent:", counts["messaging.client.sent.messages"])
	fmt.Println("messages consumed:", counts["messaging.client.consumed.messages"])
	fmt.Println("processing times recorded:", counts["messaging.process.duration"])
	for _, s := range spans.GetSpans() {
		if s.SpanKind == trace.SpanKindConsumer {
			fmt.Println("consumer span linked to the producer's trace:", s.Links[0].SpanContext.TraceID() == send.SpanContext().TraceID())
		}
	}
	// Output:
	// processing debit 10
	// messages sent: 1
	// messages consumed: 1
	// processing times recorded: 1
	// consumer span linked to the producer's trace: true
}
