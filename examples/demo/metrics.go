package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/otelinorder"
)

// meters are the OpenTelemetry metrics of one ordered.Queue (package
// otelinorder), read on demand with the SDK's ManualReader, where a service
// would have a periodic reader and an exporter.
type meters struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	m      *otelinorder.Metrics
}

// instrument adds the metrics' hooks to opts, before ordered.New.
func instrument(opts *ordered.Options) (*meters, error) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := otelinorder.Instrument(opts, &otelinorder.Options{MeterProvider: mp})
	if err != nil {
		return nil, err
	}
	return &meters{reader: reader, mp: mp, m: m}, nil
}

// observe starts reading q's Stats at each collection.
func (m *meters) observe(q *ordered.Queue) error { return m.m.Observe(q) }

func (m *meters) close() {
	_ = m.m.Close()                         // only unregisters
	_ = m.mp.Shutdown(context.Background()) // a ManualReader has nothing to flush
}

// snapshot is one collection: the metrics by name.
type snapshot map[string]metricdata.Metrics

func (m *meters) collect(ctx context.Context) (snapshot, error) {
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(ctx, &rm); err != nil {
		return nil, fmt.Errorf("collect metrics: %w", err)
	}
	s := make(snapshot)
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			s[x.Name] = x
		}
	}
	return s, nil
}

// match reports whether a point's attributes have every key=value of kv
// (a value "" asks that the key be absent).
func match(set attribute.Set, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		v, ok := set.Value(attribute.Key(kv[i]))
		if kv[i+1] == "" {
			if ok {
				return false
			}
			continue
		}
		if !ok || v.String() != kv[i+1] {
			return false
		}
	}
	return true
}

// int sums the int64 points of name whose attributes match kv.
func (s snapshot) int(name string, kv ...string) int64 {
	var n int64
	add := func(ps []metricdata.DataPoint[int64]) {
		for _, p := range ps {
			if match(p.Attributes, kv) {
				n += p.Value
			}
		}
	}
	switch d := s[name].Data.(type) {
	case metricdata.Sum[int64]:
		add(d.DataPoints)
	case metricdata.Gauge[int64]:
		add(d.DataPoints)
	}
	return n
}

// float is the largest float64 gauge point of name whose attributes match kv.
func (s snapshot) float(name string, kv ...string) float64 {
	var v float64
	if d, ok := s[name].Data.(metricdata.Gauge[float64]); ok {
		for _, p := range d.DataPoints {
			if match(p.Attributes, kv) {
				v = max(v, p.Value)
			}
		}
	}
	return v
}

// histogram is the sum of the histogram points of name: its count, sum,
// and the bucket bounds that its p50 and p99 fall under.
func (s snapshot) histogram(name string) (count uint64, sum float64, p50, p99 string) {
	d, _ := s[name].Data.(metricdata.Histogram[float64])
	var bounds []float64
	var buckets []uint64
	for _, p := range d.DataPoints {
		count += p.Count
		sum += p.Sum
		if bounds == nil {
			bounds = p.Bounds
			buckets = make([]uint64, len(p.BucketCounts))
		}
		for i, b := range p.BucketCounts {
			if i < len(buckets) {
				buckets[i] += b
			}
		}
	}
	quantile := func(q float64) string {
		if count == 0 {
			return "-"
		}
		rank := uint64(q*float64(count) + 0.5)
		var seen uint64
		for i, b := range buckets {
			seen += b
			if seen >= max(rank, 1) {
				if i < len(bounds) {
					return "<= " + seconds(bounds[i])
				}
				return "> " + seconds(bounds[len(bounds)-1])
			}
		}
		return "-"
	}
	return count, sum, quantile(0.50), quantile(0.99)
}

// seconds formats s seconds as a duration.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

// table prints the metrics that matter of step 3's Queue, by their OTel
// names, one a line. st is the Queue's Stats, for the peaks metrics do not
// carry.
func (m *meters) table(ctx context.Context, w io.Writer, st ordered.Stats) error {
	s, err := m.collect(ctx)
	if err != nil {
		return err
	}
	consumed := s.int("messaging.client.consumed.messages")
	per := func(n int64) string {
		if consumed == 0 {
			return ""
		}
		return fmt.Sprintf("%.3f per message consumed", float64(n)/float64(consumed))
	}
	kinds := func(name string, ks ...string) (total int64, parts string) {
		var ps []string
		for _, k := range ks {
			n := s.int(name, "inorder.request.kind", k)
			total += n
			ps = append(ps, fmt.Sprintf("%s %d", k, n))
		}
		return total, strings.Join(ps, ", ")
	}
	row := func(name string, value any, note string) {
		fmt.Fprintf(w, "  %-34s %8v  %s\n", name, value, note)
	}
	fmt.Fprintln(w, "metrics (OpenTelemetry, package otelinorder, read once with a ManualReader;")
	fmt.Fprintln(w, "  p50 and p99 are the histograms' bucket bounds):")
	row("messaging.client.sent.messages", s.int("messaging.client.sent.messages", "error.type", ""),
		fmt.Sprintf("accepted by the queue; failed (error.type): %d", s.int("messaging.client.sent.messages", "error.type", "_OTHER")))
	row("messaging.client.consumed.messages", consumed, "handed to the handler")
	row("inorder.duplicates", s.int("inorder.duplicates"), "copies dropped, never handed out")
	row("inorder.redelivered", s.int("inorder.redelivered"), "arrivals the queue delivered again")
	row("inorder.gaps", s.int("inorder.gaps"), "holes reported after GapTimeout")
	row("inorder.skipped", s.int("inorder.skipped"), "seqs skipped (GapSkip, SkipHole)")
	row("inorder.late", s.int("inorder.late"), "late arrivals, handed out Unordered")
	row("inorder.buffered.count", s.int("inorder.buffered.count"), fmt.Sprintf("now; the run's peak: %d", st.Receive.MaxBuffered))
	row("inorder.receive.undeleted", s.int("inorder.receive.undeleted"),
		fmt.Sprintf("now, of inorder.receive.undeleted.limit %d", s.int("inorder.receive.undeleted.limit")))
	var causes []string
	for _, cause := range []string{"gap", "poison", "conflict", "store"} {
		causes = append(causes, fmt.Sprintf("%s %d", cause, s.int("inorder.groups.stuck", "inorder.stuck.cause", cause)))
	}
	row("inorder.groups.stuck", s.int("inorder.groups.stuck"), strings.Join(causes, ", ")+" (by cause)")
	qn, qparts := kinds("inorder.queue.requests", "send", "receive", "delete", "change_visibility")
	row("inorder.queue.requests", qn, per(qn))
	fmt.Fprintf(w, "    by kind: %s\n", qparts)
	sn, sparts := kinds("inorder.store.requests", "reserve", "sent", "advance", "cursor", "park", "unpark")
	row("inorder.store.requests", sn, per(sn))
	fmt.Fprintf(w, "    by kind: %s\n", sparts)
	n, sum, p50, p99 := s.histogram("messaging.process.duration")
	row("messaging.process.duration", n, fmt.Sprintf("sum %s, p50 %s, p99 %s", seconds(sum), p50, p99))
	n, sum, p50, p99 = s.histogram("inorder.commit.duration")
	row("inorder.commit.duration", n, fmt.Sprintf("sum %s, p50 %s, p99 %s", seconds(sum), p50, p99))
	return nil
}

// stuckGauge prints inorder.groups.stuck and inorder.groups.stuck.age for
// cause.
func (m *meters) stuckGauge(ctx context.Context, w io.Writer, cause string) error {
	s, err := m.collect(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "inorder.groups.stuck{inorder.stuck.cause=%s} = %d, inorder.groups.stuck.age{...} = %.1f s\n",
		cause, s.int("inorder.groups.stuck", "inorder.stuck.cause", cause), s.float("inorder.groups.stuck.age", "inorder.stuck.cause", cause))
	return nil
}
