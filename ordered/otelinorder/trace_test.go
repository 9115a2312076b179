package otelinorder_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/ordered/otelinorder"
	"github.com/inorder/inorder/seqstore/memstore"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func newTracer(t *testing.T) (trace.Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	return tp.Tracer("test"), exp
}

func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(exp.GetSpans()))
	return tracetest.SpanStub{}
}

// The producer's span context goes into the message's metadata at send and
// comes out at receive: Extract gives it back, and the consumer span links
// to it (its parent is the consumer's own context, here none).
func TestTraceThroughQueue(t *testing.T) {
	for _, key := range [][]byte{nil, testKey} {
		t.Run("key="+map[bool]string{false: "none", true: "set"}[key != nil], func(t *testing.T) {
			ctx := context.Background()
			tracer, exp := newTracer(t)
			drv := memqueue.New(&memqueue.Options{Shards: 1})
			q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "orders", Key: key, Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}})
			require.NoError(t, err)
			defer closeQueue(t, q)

			// A tracestate from upstream rides along.
			ts, err := trace.ParseTraceState("rojo=00f067aa0ba902b7")
			require.NoError(t, err)
			upstream := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
			pctx, producer := tracer.Start(trace.ContextWithRemoteSpanContext(ctx, upstream), "send orders", trace.WithSpanKind(trace.SpanKindProducer))
			md := otelinorder.Inject(pctx, map[string]string{"tenant": "acme"})
			require.NoError(t, q.SendWithMetadata(pctx, "acct-7", []byte("debit 10"), md))
			producer.End()
			psc := producer.SpanContext()
			assert.Equal(t, "00-"+psc.TraceID().String()+"-"+psc.SpanID().String()+"-01", md["traceparent"])
			assert.Equal(t, "rojo=00f067aa0ba902b7", md["tracestate"])
			assert.Equal(t, "acme", md["tenant"], "Inject keeps the metadata it is given")

			msg, err := q.Receive(ctx)
			require.NoError(t, err)
			assert.Equal(t, md["traceparent"], msg.TraceParent())
			assert.Equal(t, md, msg.Metadata())
			got := trace.SpanContextFromContext(otelinorder.Extract(ctx, msg))
			assert.True(t, got.IsRemote(), "extracted as a remote span context")
			assert.Equal(t, psc.TraceID(), got.TraceID())
			assert.Equal(t, psc.SpanID(), got.SpanID())
			assert.Equal(t, "rojo=00f067aa0ba902b7", got.TraceState().String())

			_, span := otelinorder.StartConsumerSpan(ctx, tracer, msg)
			span.End()
			require.NoError(t, msg.Ack(ctx))

			consumer := spanNamed(t, exp, "process orders")
			assert.Equal(t, trace.SpanKindConsumer, consumer.SpanKind)
			require.Len(t, consumer.Links, 1, "the consumer span links to the producer span")
			assert.Equal(t, psc.TraceID(), consumer.Links[0].SpanContext.TraceID(), "link: the producer's trace id")
			assert.Equal(t, psc.SpanID(), consumer.Links[0].SpanContext.SpanID(), "link: the producer's span id")
			assert.False(t, consumer.Parent.IsValid(), "no parent: the consumer's context had no span")
			assert.NotEqual(t, psc.TraceID(), consumer.SpanContext.TraceID(), "a trace of its own, linked")
			attrs := attribute.NewSet(consumer.Attributes...)
			for k, want := range map[attribute.Key]attribute.Value{
				"messaging.system": attribute.StringValue("alibaba_mns"), "messaging.operation.type": attribute.StringValue("process"),
				"messaging.destination.name": attribute.StringValue("orders"), "inorder.group": attribute.StringValue("acct-7"),
				"inorder.seq": attribute.Int64Value(1), "messaging.message.id": attribute.StringValue(msg.ID),
			} {
				v, ok := attrs.Value(k)
				assert.True(t, ok, "attribute %s", k)
				assert.Equal(t, want, v, "attribute %s", k)
			}
		})
	}
}

// The consumer span is a child of the consumer's context, and Extract can
// make the producer the parent instead; a message without trace context
// gives a span without a link and Extract returns ctx unchanged.
func TestTraceParentAndNone(t *testing.T) {
	ctx := context.Background()
	tracer, exp := newTracer(t)
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}})
	require.NoError(t, err)
	defer closeQueue(t, q)
	pctx, producer := tracer.Start(ctx, "send")
	require.NoError(t, q.SendWithMetadata(ctx, "g", []byte("a"), otelinorder.Inject(pctx, nil)))
	producer.End()
	require.NoError(t, q.SendWithMetadata(ctx, "g", []byte("b"), otelinorder.Inject(ctx, nil)), "no span: Inject adds nothing")
	assert.Nil(t, otelinorder.Inject(ctx, nil))

	msg, err := q.Receive(ctx)
	require.NoError(t, err)
	rctx, run := tracer.Start(ctx, "poll")
	_, span := otelinorder.StartConsumerSpan(rctx, tracer, msg, trace.WithAttributes(attribute.String("messaging.system", "inorder")))
	span.End()
	_, child := tracer.Start(otelinorder.Extract(ctx, msg), "handle")
	child.End()
	run.End()
	require.NoError(t, msg.Ack(ctx))

	consumer := spanNamed(t, exp, "process orders")
	assert.Equal(t, run.SpanContext().SpanID(), consumer.Parent.SpanID(), "parent: the consumer's context")
	require.Len(t, consumer.Links, 1)
	assert.Equal(t, producer.SpanContext().TraceID(), consumer.Links[0].SpanContext.TraceID())
	cattrs := attribute.NewSet(consumer.Attributes...)
	sys, _ := cattrs.Value("messaging.system")
	assert.Equal(t, "inorder", sys.AsString(), "opts override the defaults")
	handle := spanNamed(t, exp, "handle")
	assert.Equal(t, producer.SpanContext().TraceID(), handle.SpanContext.TraceID(), "parented on the extracted producer span")
	assert.Equal(t, producer.SpanContext().SpanID(), handle.Parent.SpanID())

	plain, err := q.Receive(ctx)
	require.NoError(t, err)
	assert.Empty(t, plain.TraceParent())
	assert.Nil(t, plain.Metadata())
	assert.Equal(t, ctx, otelinorder.Extract(ctx, plain))
	exp.Reset()
	_, span = otelinorder.StartConsumerSpan(ctx, tracer, plain)
	span.End()
	assert.Empty(t, spanNamed(t, exp, "process orders").Links, "no trace context: no link")
	require.NoError(t, plain.Ack(ctx))
}

// With a key, a trace context changed in the queue makes the message fail
// verification: it is untagged, handed out (UntaggedDeliver) as Unordered
// without metadata, and no consumer span links to the forged trace.
func TestTraceTamperedWithKey(t *testing.T) {
	ctx := context.Background()
	tracer, exp := newTracer(t)
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "orders", Key: testKey})
	require.NoError(t, err)
	pctx, producer := tracer.Start(ctx, "send")
	require.NoError(t, sender.SendWithMetadata(ctx, "g", []byte("a"), otelinorder.Inject(pctx, nil)))
	producer.End()
	closeQueue(t, sender)

	ms, err := drv.ReceiveBatch(ctx, 1, time.Second)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	body := ms[0].Body
	require.NoError(t, drv.DeleteBatch(ctx, []string{ms[0].Receipt}))
	tid := producer.SpanContext().TraceID().String()
	forged := strings.Repeat("f", len(tid))
	tampered := bytes.Replace(body, []byte(tid), []byte(forged), 1)
	require.NotEqual(t, body, tampered, "the trace id is in the body")
	h, _, ok := envelope.Parse(tampered)
	require.True(t, ok, "still a well-formed header: only the MAC tells")
	require.Contains(t, envelope.DecodeMetadata(h.Meta)["traceparent"], forged)
	require.NoError(t, drv.SendBatch(ctx, [][]byte{tampered}))

	q, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "orders", Key: testKey,
		Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, Untagged: ordered.UntaggedDeliver}})
	require.NoError(t, err)
	defer closeQueue(t, q)
	msg, err := q.Receive(ctx)
	require.NoError(t, err)
	assert.True(t, msg.Unordered, "failed verification: untagged")
	assert.Equal(t, int64(1), q.Stats().Receive.Untagged)
	assert.Empty(t, msg.TraceParent(), "no trace context from a message that did not verify")
	assert.False(t, trace.SpanContextFromContext(otelinorder.Extract(ctx, msg)).IsValid())
	exp.Reset()
	_, span := otelinorder.StartConsumerSpan(ctx, tracer, msg)
	span.End()
	assert.Empty(t, spanNamed(t, exp, "process orders").Links, "nothing links to the forged trace")
	require.NoError(t, msg.Ack(ctx))
}
