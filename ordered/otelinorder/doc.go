// Package otelinorder connects an ordered.Queue to OpenTelemetry: metrics
// that follow the messaging semantic conventions (plus inorder's own, under
// "inorder."), and W3C trace context carried through the queue in each
// message's metadata. It lives apart from package ordered so that ordered
// depends on no OpenTelemetry module.
//
// # Metrics
//
// Instrument adds two hooks to the ordered.Options a Queue is made with
// (Hooks.OnSettle and Hooks.OnCommit, which run on the acking and
// committing goroutines: no queue, nothing dropped) for the two
// histograms, messaging.process.duration and inorder.commit.duration.
// Observe registers every other metric as an asynchronous counter or gauge
// that reads Queue.Stats once per collection: nothing is counted per
// message for them, and the counters are exact (they are the Queue's own).
//
//	opts := &ordered.Options{Name: "orders"}
//	m, err := otelinorder.Instrument(opts, &otelinorder.Options{MeterProvider: mp})
//	q, err := ordered.New(ctx, drv, store, opts)
//	err = m.Observe(q)
//	defer m.Close()
//
// Every measurement carries messaging.system (Options.System, default
// "alibaba_mns") and messaging.destination.name (the queue's Name). Group
// names are attributes only with Options.PerGroup, and then for at most
// Options.MaxGroups groups (default 100), the others sharing the series
// inorder.group="other". The README lists every metric, its unit and
// attributes.
//
// # Traces
//
// Inject puts the span context of a context into a message's metadata
// (the "traceparent" and "tracestate" keys of W3C Trace Context) for
// Queue.SendWithMetadata; Extract reads it back from an ordered.Message;
// StartConsumerSpan starts the consumer's span linked to the producer's.
// With ordered.Options.Key the metadata is covered by the header's MAC, so
// a trace context changed in the queue makes the message fail verification.
//
//	err := q.SendWithMetadata(ctx, group, payload, otelinorder.Inject(ctx, nil))
//
//	ctx, span := otelinorder.StartConsumerSpan(ctx, tracer, msg)
//	defer span.End()
package otelinorder
