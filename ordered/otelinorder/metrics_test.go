package otelinorder_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/ordered/otelinorder"
	"github.com/inorder/inorder/seqstore/memstore"
)

// wantUnits is every metric the package reports, with its unit.
var wantUnits = map[string]string{
	"messaging.client.sent.messages":     "{message}",
	"messaging.client.consumed.messages": "{message}",
	"messaging.process.duration":         "s",
	"inorder.commit.duration":            "s",
	"inorder.buffered.count":             "{message}",
	"inorder.buffered.size":              "By",
	"inorder.parked.count":               "{message}",
	"inorder.parked.size":                "By",
	"inorder.receive.undeleted":          "{message}",
	"inorder.receive.undeleted.limit":    "{message}",
	"inorder.memory.usage":               "By",
	"inorder.groups.in_memory":           "{group}",
	"inorder.groups.stuck":               "{group}",
	"inorder.groups.stuck.age":           "s",
	"inorder.gaps":                       "{gap}",
	"inorder.skipped":                    "{message}",
	"inorder.duplicates":                 "{message}",
	"inorder.late":                       "{message}",
	"inorder.conflicts":                  "{conflict}",
	"inorder.redelivered":                "{message}",
	"inorder.untagged":                   "{message}",
	"inorder.dead_lettered":              "{message}",
	"inorder.mismatches":                 "{message}",
	"inorder.epoch.switches":             "{switch}",
	"inorder.hooks.dropped":              "{event}",
	"inorder.queue.requests":             "{request}",
	"inorder.store.requests":             "{request}",
	"inorder.send.in_flight":             "{message}",
	"inorder.send.unmarked":              "{message}",
	"inorder.send.retries":               "{message}",
	"inorder.send.recovered":             "{message}",
}

// collect reads every metric of the package from reader, by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := make(map[string]metricdata.Metrics)
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, otelinorder.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// points returns the int64 data points of a sum or gauge.
func points(t *testing.T, m metricdata.Metrics) []metricdata.DataPoint[int64] {
	t.Helper()
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		require.True(t, d.IsMonotonic, "%s is a counter", m.Name)
		return d.DataPoints
	case metricdata.Gauge[int64]:
		return d.DataPoints
	}
	t.Fatalf("%s: %T is not an int64 sum or gauge", m.Name, m.Data)
	return nil
}

// value returns the value of the one data point of m whose attributes
// include kvs (and no error.type unless kvs has one).
func value(t *testing.T, m metricdata.Metrics, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	wantErr := slices.ContainsFunc(kvs, func(kv attribute.KeyValue) bool { return kv.Key == "error.type" })
	var found []int64
	for _, p := range points(t, m) {
		_, isErr := p.Attributes.Value("error.type")
		if hasAll(p.Attributes, kvs) && isErr == wantErr {
			found = append(found, p.Value)
		}
	}
	require.Len(t, found, 1, "%s: data points with %v", m.Name, kvs)
	return found[0]
}

func hasAll(set attribute.Set, kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func histogram(t *testing.T, m metricdata.Metrics) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s: %T is not a float64 histogram", m.Name, m.Data)
	return h.DataPoints
}

func closeQueue(t *testing.T, q *ordered.Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, q.Close(ctx))
}

// instrumented makes a Queue over drv with its metrics in a fresh
// ManualReader.
func instrumented(t *testing.T, drv *memqueue.Queue, opts *ordered.Options, o *otelinorder.Options) (*ordered.Queue, *otelinorder.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	if o == nil {
		o = &otelinorder.Options{}
	}
	o.MeterProvider = mp
	m, err := otelinorder.Instrument(opts, o)
	require.NoError(t, err)
	q, err := ordered.New(context.Background(), drv, memstore.New(), opts)
	require.NoError(t, err)
	require.NoError(t, m.Observe(q))
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return q, m, reader
}

var (
	attrSystem = attribute.String("messaging.system", "alibaba_mns")
	attrQueue  = attribute.String("messaging.destination.name", "orders")
)

// Send N, receive N: the counters say N exactly, the histograms count N
// settles and every commit, and every metric exists with its unit.
func TestMetricsCounts(t *testing.T) {
	const n = 40
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Seed: 1})
	q, _, reader := instrumented(t, drv, &ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}}, nil)
	for i := range n {
		require.NoError(t, q.Send(ctx, "g"+strconv.Itoa(i%4), []byte("m"+strconv.Itoa(i))))
	}
	seen := make(map[string]uint64)
	for range n {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := q.Receive(rctx)
		cancel()
		require.NoError(t, err)
		require.Equal(t, seen[m.Group]+1, m.Seq, "in order")
		seen[m.Group] = m.Seq
		require.NoError(t, m.Ack(ctx))
	}
	closeQueue(t, q) // commits flushed
	st := q.Stats()
	got := collect(t, reader)

	for name, unit := range wantUnits {
		m, ok := got[name]
		if assert.True(t, ok, "metric %s missing", name) {
			assert.Equal(t, unit, m.Unit, "unit of %s", name)
			assert.NotEmpty(t, m.Description, "description of %s", name)
		}
	}
	for name := range got {
		assert.Contains(t, wantUnits, name, "metric %s is not in the test's (and the README's) list", name)
	}

	sent := got["messaging.client.sent.messages"]
	assert.Equal(t, int64(n), value(t, sent, attrSystem, attrQueue, attribute.String("messaging.operation.name", "send"), attribute.String("messaging.operation.type", "send")))
	assert.Equal(t, int64(0), value(t, sent, attribute.String("error.type", "_OTHER")), "no send failed")
	assert.Len(t, points(t, sent), 2, "sent and failed")
	consumed := got["messaging.client.consumed.messages"]
	assert.Equal(t, int64(n), value(t, consumed, attrSystem, attrQueue, attribute.String("messaging.operation.name", "receive")))

	proc := histogram(t, got["messaging.process.duration"])
	require.Len(t, proc, 1, "one series without PerGroup")
	assert.Equal(t, uint64(n), proc[0].Count, "one process.duration per Ack")
	assert.True(t, hasAll(proc[0].Attributes, []attribute.KeyValue{attrSystem, attrQueue, attribute.String("messaging.operation.name", "process")}), "attributes %v", proc[0].Attributes.ToSlice())
	_, grouped := proc[0].Attributes.Value(otelinorder.GroupKey)
	assert.False(t, grouped, "no group attribute without PerGroup")
	commits := histogram(t, got["inorder.commit.duration"])
	require.Len(t, commits, 1)
	assert.Equal(t, uint64(st.Receive.Commits), commits[0].Count, "one commit.duration per store write")
	assert.Positive(t, commits[0].Count)

	for name, want := range map[string]int64{
		"inorder.duplicates": st.Receive.Duplicates, "inorder.gaps": 0, "inorder.skipped": 0, "inorder.late": 0, "inorder.conflicts": 0,
		"inorder.untagged": 0, "inorder.buffered.count": 0, "inorder.parked.count": 0, "inorder.send.in_flight": 0,
		"inorder.receive.undeleted.limit": 4000, "inorder.redelivered": st.Receive.Redelivered,
	} {
		assert.Equal(t, want, value(t, got[name], attrSystem, attrQueue), name)
	}
	for kind, want := range map[string]int64{"send": st.Requests.Send, "receive": st.Requests.Receive, "delete": st.Requests.Delete} {
		assert.Equal(t, want, value(t, got["inorder.queue.requests"], attribute.String("inorder.request.kind", kind)), "queue requests %s", kind)
	}
	assert.Equal(t, st.Requests.Advance, value(t, got["inorder.store.requests"], attribute.String("inorder.request.kind", "advance")))
	assert.Positive(t, st.Requests.Send)
	for _, cause := range []string{"gap", "poison", "conflict", "store"} {
		assert.Equal(t, int64(0), value(t, got["inorder.groups.stuck"], attribute.String("inorder.stuck.cause", cause)), "stuck %s", cause)
	}
}

// A hole under GapWait shows in the stuck gauge with cause "gap" (and, with
// PerGroup, the group's name), with its age.
func TestMetricsStuckGap(t *testing.T) {
	for _, perGroup := range []bool{false, true} {
		t.Run("PerGroup="+strconv.FormatBool(perGroup), func(t *testing.T) {
			ctx := context.Background()
			drv := memqueue.New(&memqueue.Options{Shards: 1})
			sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "orders"})
			require.NoError(t, err)
			for i := 1; i <= 3; i++ {
				require.NoError(t, sender.Send(ctx, "acct-7", []byte("m"+strconv.Itoa(i))))
			}
			closeQueue(t, sender)
			var keep [][]byte
			for len(keep) < 2 {
				ms, err := drv.ReceiveBatch(ctx, 16, 20*time.Millisecond)
				require.NoError(t, err)
				for _, m := range ms {
					if h, _, _ := envelope.Parse(m.Body); h.Seq != 1 {
						keep = append(keep, m.Body)
					}
					require.NoError(t, drv.DeleteBatch(ctx, []string{m.Receipt}))
				}
			}
			require.NoError(t, drv.SendBatch(ctx, keep)) // seq 1 is lost: a hole

			q, _, reader := instrumented(t, drv, &ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{
				Wait: 20 * time.Millisecond, GapPolicy: ordered.GapWait, GapTimeout: 50 * time.Millisecond}},
				&otelinorder.Options{PerGroup: perGroup})
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- q.Run(rctx, func(context.Context, *ordered.Message) error { return nil }) }()
			t.Cleanup(func() { cancel(); <-done; closeQueue(t, q) })
			require.Eventually(t, func() bool { return len(q.Stats().Receive.Stuck) == 1 }, 10*time.Second, 5*time.Millisecond, "the hole makes the group stuck")
			time.Sleep(20 * time.Millisecond)
			got := collect(t, reader)

			stuck, age := got["inorder.groups.stuck"], got["inorder.groups.stuck.age"]
			gap := attribute.String("inorder.stuck.cause", "gap")
			assert.Equal(t, int64(1), value(t, stuck, attrSystem, attrQueue, gap))
			agePoints := age.Data.(metricdata.Gauge[float64]).DataPoints
			var gapAge float64
			for _, p := range agePoints {
				if hasAll(p.Attributes, []attribute.KeyValue{gap}) {
					gapAge = p.Value
				}
			}
			assert.GreaterOrEqual(t, gapAge, 0.02, "the hole's group has been stuck since GapTimeout passed")
			assert.Equal(t, int64(1), value(t, got["inorder.gaps"]), "one hole reported")
			if perGroup {
				assert.Equal(t, int64(1), value(t, stuck, gap, attribute.String("inorder.group", "acct-7")))
				assert.Len(t, points(t, stuck), 1, "with PerGroup, only stuck groups have series")
			} else {
				assert.Len(t, points(t, stuck), 4, "one series per cause")
				assert.Equal(t, int64(0), value(t, stuck, attribute.String("inorder.stuck.cause", "poison")))
			}
		})
	}
}

// With PerGroup, 500 groups make at most MaxGroups (100) series of their
// own plus "other", and the counts add up.
func TestMetricsPerGroupCap(t *testing.T) {
	const groups = 500
	ctx := context.Background()
	drv := memqueue.New(&memqueue.Options{Seed: 2})
	q, _, reader := instrumented(t, drv, &ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}},
		&otelinorder.Options{PerGroup: true})
	for i := range groups {
		_, err := q.SendAsync(ctx, fmt.Sprintf("acct-%03d", i), []byte("x"))
		require.NoError(t, err)
	}
	var acked atomic.Int64
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- q.Run(rctx, func(context.Context, *ordered.Message) error { acked.Add(1); return nil })
	}()
	require.Eventually(t, func() bool {
		return acked.Load() == groups && len(collectProcess(t, reader)) > 0 && total(collectProcess(t, reader)) == groups
	},
		20*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	closeQueue(t, q)

	proc := collectProcess(t, reader)
	var names []string
	for _, p := range proc {
		g, ok := p.Attributes.Value(otelinorder.GroupKey)
		require.True(t, ok, "with PerGroup every series has inorder.group: %v", p.Attributes.ToSlice())
		names = append(names, g.AsString())
	}
	assert.Len(t, names, otelinorder.DefaultMaxGroups+1, "100 groups and \"other\"")
	assert.Contains(t, names, otelinorder.OtherGroup)
	assert.Equal(t, uint64(groups), total(proc), "every Ack counted once, in its group's series or in other's")
	for _, p := range proc {
		if g, _ := p.Attributes.Value(otelinorder.GroupKey); g.AsString() != otelinorder.OtherGroup {
			assert.Equal(t, uint64(1), p.Count, "group %s", g.AsString())
		} else {
			assert.Equal(t, uint64(groups-otelinorder.DefaultMaxGroups), p.Count, "the groups beyond the cap")
		}
	}
	for _, m := range collect(t, reader) {
		if m.Name == "messaging.process.duration" {
			continue
		}
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
			assert.Len(t, h.DataPoints, 1, m.Name)
			continue
		}
		if g, ok := m.Data.(metricdata.Gauge[float64]); ok {
			assert.LessOrEqual(t, len(g.DataPoints), 4, m.Name)
			continue
		}
		assert.LessOrEqual(t, len(points(t, m)), 6, "%s does not grow with the groups", m.Name)
	}
}

func collectProcess(t *testing.T, reader *sdkmetric.ManualReader) []metricdata.HistogramDataPoint[float64] {
	m, ok := collect(t, reader)["messaging.process.duration"]
	if !ok {
		return nil
	}
	return histogram(t, m)
}

func total(ps []metricdata.HistogramDataPoint[float64]) uint64 {
	var n uint64
	for _, p := range ps {
		n += p.Count
	}
	return n
}

// Instrument keeps the hooks already set, and refuses what it cannot use.
func TestInstrumentHooksAndErrors(t *testing.T) {
	ctx := context.Background()
	var settled, committed atomic.Int64
	opts := &ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}, Hooks: ordered.Hooks{
		OnSettle: func(ordered.Event) { settled.Add(1) },
		OnCommit: func(ordered.Event) { committed.Add(1) },
	}}
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	q, m, reader := instrumented(t, drv, opts, &otelinorder.Options{System: "inorder", Attributes: []attribute.KeyValue{attribute.String("service.role", "billing")}})
	require.NoError(t, q.Send(ctx, "g", []byte("x")))
	msg, err := q.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, msg.Ack(ctx))
	closeQueue(t, q)
	assert.Equal(t, int64(1), settled.Load(), "the application's OnSettle still runs")
	// OnCommit runs on the committer's goroutine after it is counted done
	// (it may call Close, which waits for that count): Close does not wait
	// for it. Under load it had not run yet when Close returned (CI, stop 39).
	assert.Eventually(t, func() bool { return committed.Load() > 0 }, 5*time.Second, time.Millisecond, "the application's OnCommit still runs")
	proc := collectProcess(t, reader)
	require.Len(t, proc, 1)
	assert.True(t, hasAll(proc[0].Attributes, []attribute.KeyValue{attribute.String("messaging.system", "inorder"), attribute.String("service.role", "billing")}),
		"Options.System and Attributes: %v", proc[0].Attributes.ToSlice())

	assert.ErrorContains(t, m.Observe(q), "already observing")
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
	assert.NotContains(t, collect(t, reader), "inorder.buffered.count", "Close unregistered the observers")

	_, err = otelinorder.Instrument(nil, nil)
	assert.ErrorContains(t, err, "nil *ordered.Options")
	_, err = otelinorder.Instrument(&ordered.Options{}, &otelinorder.Options{MaxGroups: -1})
	assert.ErrorContains(t, err, "MaxGroups")
	other, err := otelinorder.Instrument(&ordered.Options{Name: "other"}, nil)
	require.NoError(t, err)
	assert.ErrorContains(t, other.Observe(q), `queue "orders" is not the one instrumented ("other")`)
}

// TestREADMEListsMetrics keeps the README's table in step with the metrics.
func TestREADMEListsMetrics(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	names := make([]string, 0, len(wantUnits))
	for name := range wantUnits {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		row := "| `" + name + "` | " + wantUnits[name] + " |"
		assert.True(t, strings.Contains(readme, row), "README.md lacks the row %q", row)
	}
}
