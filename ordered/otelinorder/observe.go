package otelinorder

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/inorder/inorder/ordered"
)

// statMetric is a counter or gauge whose value is one field of
// ordered.Stats, with the base attributes only.
type statMetric struct {
	name, unit, desc string
	gauge            bool
	value            func(*ordered.Stats) int64
}

// statMetrics are inorder's own metrics read from Stats. The README's
// table lists them; keep the two in step.
var statMetrics = []statMetric{
	{"inorder.buffered.count", "{message}", "Messages held in memory, waiting for their turn.", true,
		func(s *ordered.Stats) int64 { return int64(s.Receive.Buffered) }},
	{"inorder.buffered.size", "By", "Body bytes of the messages held in memory.", true,
		func(s *ordered.Stats) int64 { return int64(s.Receive.BufferedBytes) }},
	{"inorder.parked.count", "{message}", "Messages this receiver parked in the store that no durable cursor has passed yet.", true,
		func(s *ordered.Stats) int64 { return s.Receive.ParkedNow }},
	{"inorder.parked.size", "By", "Body bytes of the parked messages.", true,
		func(s *ordered.Stats) int64 { return s.Receive.ParkedBytes }},
	{"inorder.receive.undeleted", "{message}", "Messages received and not deleted, as the queue service counts them.", true,
		func(s *ordered.Stats) int64 { return int64(s.Receive.Undeleted) }},
	{"inorder.receive.undeleted.limit", "{message}", "The cap on received and not deleted messages (ReceiveOptions.MaxUndeleted).", true,
		func(s *ordered.Stats) int64 { return int64(s.Receive.UndeletedLimit) }},
	{"inorder.memory.usage", "By", "Bytes charged to ReceiveOptions.MaxMemory.", true,
		func(s *ordered.Stats) int64 { return int64(s.Receive.Memory) }},
	{"inorder.groups.in_memory", "{group}", "Groups with receive state in memory.", true,
		func(s *ordered.Stats) int64 { return int64(s.Receive.Groups) }},
	{"inorder.send.in_flight", "{message}", "Messages admitted by Send and not yet accepted by the queue or failed.", true,
		func(s *ordered.Stats) int64 { return s.Send.InFlight }},
	{"inorder.send.unmarked", "{message}", "Messages sent whose journal entry is not yet marked sent (durable mode).", true,
		func(s *ordered.Stats) int64 { return s.Send.Unmarked }},

	{"inorder.gaps", "{gap}", "Holes reported: a group's next seq missing for GapTimeout while later ones wait.", false,
		func(s *ordered.Stats) int64 { return s.Receive.Gaps }},
	{"inorder.skipped", "{message}", "Seqs skipped by the gap policy (GapSkip) or a repair (SkipHole).", false,
		func(s *ordered.Stats) int64 { return s.Receive.Skipped }},
	{"inorder.duplicates", "{message}", "Copies of already handled messages, dropped (deleted, never handed out again).", false,
		func(s *ordered.Stats) int64 { return s.Receive.Duplicates }},
	{"inorder.late", "{message}", "Late arrivals: an older epoch or a skipped seq, dead-lettered or handed out Unordered.", false,
		func(s *ordered.Stats) int64 { return s.Receive.Late }},
	{"inorder.conflicts", "{conflict}", "Cursors found moved by someone else (a second receiver on a stream).", false,
		func(s *ordered.Stats) int64 { return s.Receive.Conflicts }},
	{"inorder.redelivered", "{message}", "Arrivals the queue delivered again.", false,
		func(s *ordered.Stats) int64 { return s.Receive.Redelivered }},
	{"inorder.untagged", "{message}", "Bodies without a valid header (or, with a key, a MAC that does not verify).", false,
		func(s *ordered.Stats) int64 { return s.Receive.Untagged }},
	{"inorder.dead_lettered", "{message}", "Messages sent to the dead-letter queue.", false,
		func(s *ordered.Stats) int64 { return s.Receive.DeadLettered }},
	{"inorder.mismatches", "{message}", "Copies of a seq with another payload (forged or corrupted).", false,
		func(s *ordered.Stats) int64 { return s.Receive.Mismatches }},
	{"inorder.epoch.switches", "{switch}", "Groups that switched to a newer sender epoch.", false,
		func(s *ordered.Stats) int64 { return s.Receive.EpochSwitches }},
	{"inorder.hooks.dropped", "{event}", "Hook events dropped because the hooks were too slow.", false,
		func(s *ordered.Stats) int64 { return s.Receive.HooksDropped }},
	{"inorder.send.retries", "{message}", "Messages sent again after a retryable error.", false,
		func(s *ordered.Stats) int64 { return s.Send.Retries }},
	{"inorder.send.recovered", "{message}", "Journaled messages re-sent by recovery.", false,
		func(s *ordered.Stats) int64 { return s.Send.Recovered }},
}

// requestKind is one kind of queue or store request and its count.
type requestKind struct {
	kind  string
	value func(*ordered.RequestStats) int64
}

var queueRequests = []requestKind{
	{"send", func(r *ordered.RequestStats) int64 { return r.Send }},
	{"receive", func(r *ordered.RequestStats) int64 { return r.Receive }},
	{"delete", func(r *ordered.RequestStats) int64 { return r.Delete }},
	{"change_visibility", func(r *ordered.RequestStats) int64 { return r.ChangeVisibility }},
}

var storeRequests = []requestKind{
	{"reserve", func(r *ordered.RequestStats) int64 { return r.Reserve }},
	{"sent", func(r *ordered.RequestStats) int64 { return r.Sent }},
	{"advance", func(r *ordered.RequestStats) int64 { return r.Advance }},
	{"cursor", func(r *ordered.RequestStats) int64 { return r.Cursor }},
	{"park", func(r *ordered.RequestStats) int64 { return r.Park }},
	{"unpark", func(r *ordered.RequestStats) int64 { return r.Unpark }},
}

// stuckCauses are the values of ordered.StuckGroup.Reason.
var stuckCauses = []string{"gap", "poison", "conflict", "store"}

// observables holds the instruments Observe registers and the attribute
// sets they are observed with, made once.
type observables struct {
	m    *Metrics
	list []metric.Observable

	stats     []metric.Int64Observable // parallel to statMetrics
	sent      metric.Int64ObservableCounter
	consumed  metric.Int64ObservableCounter
	queueReqs metric.Int64ObservableCounter
	storeReqs metric.Int64ObservableCounter
	stuck     metric.Int64ObservableGauge
	stuckAge  metric.Float64ObservableGauge

	base                   metric.ObserveOption
	sentOK, sentFailed     metric.ObserveOption
	consumedOpt            metric.ObserveOption
	queueKinds, storeKinds []metric.ObserveOption
	causes                 map[string]metric.ObserveOption // without PerGroup
}

func (m *Metrics) observables() (*observables, error) {
	b := &observables{m: m, base: metric.WithAttributeSet(m.baseSet)}
	for _, sm := range statMetrics {
		var inst metric.Int64Observable
		var err error
		if sm.gauge {
			inst, err = m.meter.Int64ObservableGauge(sm.name, metric.WithUnit(sm.unit), metric.WithDescription(sm.desc))
		} else {
			inst, err = m.meter.Int64ObservableCounter(sm.name, metric.WithUnit(sm.unit), metric.WithDescription(sm.desc))
		}
		if err != nil {
			return nil, err
		}
		b.stats = append(b.stats, inst)
		b.list = append(b.list, inst)
	}
	var err error
	if b.sent, err = m.meter.Int64ObservableCounter("messaging.client.sent.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Number of messages producer attempted to send to the broker: accepted by the queue, or failed (error.type).")); err != nil {
		return nil, err
	}
	if b.consumed, err = m.meter.Int64ObservableCounter("messaging.client.consumed.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Number of messages that were delivered to the application (hand-outs, retries after a Nack included).")); err != nil {
		return nil, err
	}
	if b.queueReqs, err = m.meter.Int64ObservableCounter("inorder.queue.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests made to the queue service, by kind.")); err != nil {
		return nil, err
	}
	if b.storeReqs, err = m.meter.Int64ObservableCounter("inorder.store.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests made to the sequence store, by kind.")); err != nil {
		return nil, err
	}
	if b.stuck, err = m.meter.Int64ObservableGauge("inorder.groups.stuck", metric.WithUnit("{group}"),
		metric.WithDescription("Groups that cannot progress on their own, by cause: gap, poison, conflict, store.")); err != nil {
		return nil, err
	}
	if b.stuckAge, err = m.meter.Float64ObservableGauge("inorder.groups.stuck.age", metric.WithUnit("s"),
		metric.WithDescription("How long the longest stuck group has been stuck, by cause.")); err != nil {
		return nil, err
	}
	b.list = append(b.list, b.sent, b.consumed, b.queueReqs, b.storeReqs, b.stuck, b.stuckAge)

	set := func(kvs ...attribute.KeyValue) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(m.with(kvs...)...))
	}
	b.sentOK = set(semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend)
	b.sentFailed = set(semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend, semconv.ErrorTypeOther)
	b.consumedOpt = set(semconv.MessagingOperationName("receive"), semconv.MessagingOperationTypeReceive)
	for _, k := range queueRequests {
		b.queueKinds = append(b.queueKinds, set(RequestKindKey.String(k.kind)))
	}
	for _, k := range storeRequests {
		b.storeKinds = append(b.storeKinds, set(RequestKindKey.String(k.kind)))
	}
	b.causes = make(map[string]metric.ObserveOption, len(stuckCauses))
	for _, c := range stuckCauses {
		b.causes[c] = set(CauseKey.String(c))
	}
	return b, nil
}

// observe reports st.
func (b *observables) observe(o metric.Observer, st ordered.Stats) {
	for i, sm := range statMetrics {
		o.ObserveInt64(b.stats[i], sm.value(&st), b.base)
	}
	o.ObserveInt64(b.sent, st.Send.Sent, b.sentOK)
	o.ObserveInt64(b.sent, st.Send.Failed, b.sentFailed)
	o.ObserveInt64(b.consumed, st.Receive.Delivered, b.consumedOpt)
	for i, k := range queueRequests {
		o.ObserveInt64(b.queueReqs, k.value(&st.Requests), b.queueKinds[i])
	}
	for i, k := range storeRequests {
		o.ObserveInt64(b.storeReqs, k.value(&st.Requests), b.storeKinds[i])
	}
	b.observeStuck(o, st.Receive.Stuck, time.Now())
}

// stuckKey is one series of the stuck gauges.
type stuckKey struct {
	cause string
	group attribute.KeyValue // zero without PerGroup
}

// observeStuck reports the stuck groups by cause: without PerGroup, every
// cause, 0 when none; with it, one series per (group label, cause) that
// has stuck groups now.
func (b *observables) observeStuck(o metric.Observer, stuck []ordered.StuckGroup, now time.Time) {
	if b.m.groups == nil {
		count := make(map[string]int64, len(stuckCauses))
		age := make(map[string]float64, len(stuckCauses))
		for _, g := range stuck {
			count[g.Reason]++
			age[g.Reason] = max(age[g.Reason], since(now, g.Since))
		}
		for _, c := range stuckCauses {
			o.ObserveInt64(b.stuck, count[c], b.causes[c])
			o.ObserveFloat64(b.stuckAge, age[c], b.causes[c])
		}
		for c, n := range count { // a cause this package does not know yet
			if _, known := b.causes[c]; !known {
				opt := metric.WithAttributes(b.m.with(CauseKey.String(c))...)
				o.ObserveInt64(b.stuck, n, opt)
				o.ObserveFloat64(b.stuckAge, age[c], opt)
			}
		}
		return
	}
	count := make(map[stuckKey]int64)
	age := make(map[stuckKey]float64)
	var order []stuckKey
	for _, g := range stuck {
		k := stuckKey{cause: g.Reason, group: b.m.groups.label(g.Group)}
		if _, seen := count[k]; !seen {
			order = append(order, k)
		}
		count[k]++
		age[k] = max(age[k], since(now, g.Since))
	}
	for _, k := range order {
		opt := metric.WithAttributes(b.m.with(CauseKey.String(k.cause), k.group)...)
		o.ObserveInt64(b.stuck, count[k], opt)
		o.ObserveFloat64(b.stuckAge, age[k], opt)
	}
}

// since returns the seconds from t to now, 0 for a zero t.
func since(now, t time.Time) float64 {
	if t.IsZero() || now.Before(t) {
		return 0
	}
	return now.Sub(t).Seconds()
}
