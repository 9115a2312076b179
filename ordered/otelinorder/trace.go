package otelinorder

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/inorder/inorder/ordered"
)

// SeqKey is the message's seq in its group, on consumer spans.
const SeqKey = attribute.Key("inorder.seq")

// propagator carries W3C trace context: the traceparent and tracestate
// keys, which are valid metadata keys.
var propagator = propagation.TraceContext{}

// Inject adds the W3C trace context of ctx's span (the keys "traceparent"
// and, when set, "tracestate") to md, for Queue.SendWithMetadata, and
// returns md, made when nil. A ctx without a valid span context adds
// nothing (and returns md as it was, nil included).
func Inject(ctx context.Context, md map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return md
	}
	if md == nil {
		md = make(map[string]string, 2)
	}
	propagator.Inject(ctx, propagation.MapCarrier(md))
	return md
}

// Extract returns ctx with the remote span context that m's metadata
// carries (its producer's span), for trace.SpanContextFromContext or to
// parent a span on; ctx itself when m carries none.
func Extract(ctx context.Context, m *ordered.Message) context.Context {
	if m.TraceParent() == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier(m.Metadata()))
}

// StartConsumerSpan starts the span that processes m: of kind Consumer,
// named "process <queue>", a child of ctx's span (if any) with a link to
// the producer's span that m's metadata carries (if any). The link, not
// the parent, is what the messaging semantic conventions recommend for a
// message that crossed a queue: the consumer's own trace stays whole,
// and the producer's trace is one click away. To make the producer's span
// the parent instead, start the span from Extract(ctx, m).
//
// The span carries messaging.system (DefaultSystem; override it with
// trace.WithAttributes in opts), messaging.operation.name and .type
// "process", messaging.destination.name, messaging.message.id,
// inorder.group and inorder.seq. End it when m is settled.
func StartConsumerSpan(ctx context.Context, tracer trace.Tracer, m *ordered.Message, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(DefaultSystem),
		semconv.MessagingOperationName("process"),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(m.QueueName()),
		GroupKey.String(m.Group),
	}
	if m.ID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(m.ID))
	}
	if m.Seq != 0 {
		attrs = append(attrs, SeqKey.Int64(int64(m.Seq))) // seqs fit: at most 2^63-2
	}
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if sc := trace.SpanContextFromContext(Extract(context.Background(), m)); sc.IsValid() {
		start = append(start, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return tracer.Start(ctx, "process "+m.QueueName(), append(start, opts...)...)
}
