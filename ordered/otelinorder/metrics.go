package otelinorder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/inorder/inorder/ordered"
)

// ScopeName is the instrumentation scope of the meter and of the tracer
// helpers: this package's import path.
const ScopeName = "github.com/inorder/inorder/ordered/otelinorder"

// DefaultSystem is the messaging.system attribute unless Options.System
// says otherwise: the queue service inorder was built for, Alibaba Cloud
// MNS (Simple Message Queue), named in the conventions' style.
const DefaultSystem = "alibaba_mns"

// DefaultMaxGroups is the default of Options.MaxGroups.
const DefaultMaxGroups = 100

// OtherGroup is the inorder.group of the groups beyond Options.MaxGroups.
const OtherGroup = "other"

// Attribute keys of inorder's own.
const (
	// GroupKey is the message group (with Options.PerGroup).
	GroupKey = attribute.Key("inorder.group")
	// CauseKey says why a group is stuck: "gap", "poison", "conflict" or
	// "store" (ordered.StuckGroup.Reason).
	CauseKey = attribute.Key("inorder.stuck.cause")
	// RequestKindKey is the kind of a queue or store request.
	RequestKindKey = attribute.Key("inorder.request.kind")
)

// Options configures Metrics. The zero value (or nil) selects the
// documented defaults.
type Options struct {
	// MeterProvider makes the meter. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// System is the messaging.system attribute. Default DefaultSystem
	// ("alibaba_mns"); set it to the service under your driver.
	System string

	// PerGroup adds the inorder.group attribute to the metrics that are
	// per group by nature: messaging.process.duration and the stuck-group
	// gauges. The first MaxGroups groups seen keep a series of their own
	// for the Metrics' life; the others share inorder.group="other". Off
	// by default: a queue may have millions of groups.
	PerGroup bool

	// MaxGroups bounds the groups with series of their own under PerGroup.
	// Default DefaultMaxGroups (100).
	MaxGroups int

	// Attributes are added to every measurement (for example a service
	// role). They must not vary per message.
	Attributes []attribute.KeyValue
}

func (o *Options) validate() error {
	if o.MaxGroups < 0 {
		return fmt.Errorf("otelinorder: options: MaxGroups must be >= 0, got %d", o.MaxGroups)
	}
	return nil
}

func (o *Options) setDefaults() {
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.System == "" {
		o.System = DefaultSystem
	}
	if o.MaxGroups == 0 {
		o.MaxGroups = DefaultMaxGroups
	}
}

// Metrics records the metrics of one ordered.Queue: histograms fed by the
// hooks Instrument adds (Hooks.OnSettle, Hooks.OnCommit), and counters and
// gauges read from Queue.Stats each time the meter's reader collects
// (Observe). Its methods are safe for concurrent use.
type Metrics struct {
	opts   Options
	queue  string
	meter  metric.Meter
	groups *groupLabels // nil without PerGroup

	base        []attribute.KeyValue // messaging.system, messaging.destination.name, Options.Attributes
	baseSet     attribute.Set
	processAck  metric.MeasurementOption // process.duration of an Ack, without PerGroup
	process     metric.Float64Histogram
	commit      metric.Float64Histogram
	commitOK    metric.MeasurementOption
	processAttr []attribute.KeyValue // base and the operation's

	mu  sync.Mutex
	reg metric.Registration // nil until Observe
}

// processBuckets are the conventions' advice for messaging.process.duration,
// in seconds; commitBuckets reach lower, for a store write.
var (
	processBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	commitBuckets  = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
)

// Instrument makes the Metrics of the Queue that opts will make: it adds
// its hooks to opts.Hooks (OnSettle and OnCommit; hooks already set there
// are still called, after them) and creates the instruments. Pass opts to
// ordered.New, then the Queue to Observe. The queue's name
// (messaging.destination.name) is opts.Name, or ordered's default.
func Instrument(opts *ordered.Options, o *Options) (*Metrics, error) {
	if opts == nil {
		return nil, errors.New("otelinorder: instrument: nil *ordered.Options: the hooks must go into the Options the Queue is made with")
	}
	m := &Metrics{queue: opts.Name}
	if o != nil {
		m.opts = *o
	}
	if err := m.opts.validate(); err != nil {
		return nil, err
	}
	m.opts.setDefaults()
	if m.queue == "" {
		m.queue = "default" // ordered.Options.Name's default
	}
	if m.opts.PerGroup {
		m.groups = newGroupLabels(m.opts.MaxGroups)
	}
	m.meter = m.opts.MeterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	m.base = append([]attribute.KeyValue{
		semconv.MessagingSystemKey.String(m.opts.System),
		semconv.MessagingDestinationName(m.queue),
	}, m.opts.Attributes...)
	m.baseSet = attribute.NewSet(m.base...)
	m.processAttr = m.with(semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess)
	m.processAck = metric.WithAttributeSet(attribute.NewSet(m.processAttr...))
	m.commitOK = metric.WithAttributeSet(m.baseSet)

	var err error
	m.process, err = m.meter.Float64Histogram("messaging.process.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of processing operation: from the hand-out of a message to its Ack or Nack."),
		metric.WithExplicitBucketBoundaries(processBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otelinorder: instrument: %w", err)
	}
	m.commit, err = m.meter.Float64Histogram("inorder.commit.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of a store write of cursor advances (group commit: any number of groups per write)."),
		metric.WithExplicitBucketBoundaries(commitBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otelinorder: instrument: %w", err)
	}

	h := &opts.Hooks
	settle, commit := h.OnSettle, h.OnCommit
	h.OnSettle = func(ev ordered.Event) {
		m.recordSettle(ev)
		if settle != nil {
			settle(ev)
		}
	}
	h.OnCommit = func(ev ordered.Event) {
		m.recordCommit(ev)
		if commit != nil {
			commit(ev)
		}
	}
	return m, nil
}

// with returns the base attributes followed by kvs, in a new slice.
func (m *Metrics) with(kvs ...attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(m.base)+len(kvs))
	return append(append(out, m.base...), kvs...)
}

func (m *Metrics) recordSettle(ev ordered.Event) {
	ctx := context.Background()
	secs := ev.Duration.Seconds()
	if ev.Err == nil && m.groups == nil {
		m.process.Record(ctx, secs, m.processAck)
		return
	}
	if ev.Err == nil {
		m.process.Record(ctx, secs, m.groups.option(ev.Group, m.processAttr))
		return
	}
	kvs := append(m.with(semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess), semconv.ErrorType(ev.Err))
	if m.groups != nil {
		kvs = append(kvs, m.groups.label(ev.Group))
	}
	m.process.Record(ctx, secs, metric.WithAttributes(kvs...))
}

func (m *Metrics) recordCommit(ev ordered.Event) {
	if ev.Err == nil {
		m.commit.Record(context.Background(), ev.Duration.Seconds(), m.commitOK)
		return
	}
	m.commit.Record(context.Background(), ev.Duration.Seconds(), metric.WithAttributes(m.with(semconv.ErrorType(ev.Err))...))
}

// Observe registers the counters and gauges that read q.Stats() whenever the
// meter's reader collects: nothing is counted per message for them. q must
// be the Queue made from the Options given to Instrument. Observe once;
// Close unregisters.
func (m *Metrics) Observe(q *ordered.Queue) error {
	if q == nil {
		return errors.New("otelinorder: observe: nil queue")
	}
	if q.Name() != m.queue {
		return fmt.Errorf("otelinorder: observe: queue %q is not the one instrumented (%q): pass the Queue made from the Options given to Instrument", q.Name(), m.queue)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reg != nil {
		return errors.New("otelinorder: observe: already observing a queue")
	}
	obs, err := m.observables()
	if err != nil {
		return fmt.Errorf("otelinorder: observe: %w", err)
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		obs.observe(o, q.Stats())
		return nil
	}, obs.list...)
	if err != nil {
		return fmt.Errorf("otelinorder: observe: %w", err)
	}
	m.reg = reg
	return nil
}

// Close unregisters what Observe registered. The hooks stay in the Queue's
// Options (they record into instruments the reader keeps). Close is
// idempotent.
func (m *Metrics) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reg == nil {
		return nil
	}
	err := m.reg.Unregister()
	m.reg = nil
	if err != nil {
		return fmt.Errorf("otelinorder: close: %w", err)
	}
	return nil
}

// groupLabels hands out inorder.group values: the group itself for the
// first max groups seen, OtherGroup for the rest (a group named "other"
// shares their series). Lookups of groups seen take no lock.
type groupLabels struct {
	max   int64
	n     atomic.Int64
	seen  sync.Map // group -> *groupLabel
	mu    sync.Mutex
	other groupLabel
}

type groupLabel struct {
	kv  attribute.KeyValue
	ack atomic.Pointer[metric.MeasurementOption] // made on first use
}

func newGroupLabels(max int) *groupLabels {
	l := &groupLabels{max: int64(max)}
	l.other.kv = GroupKey.String(OtherGroup)
	return l
}

func (l *groupLabels) get(group string) *groupLabel {
	if v, ok := l.seen.Load(group); ok {
		return v.(*groupLabel)
	}
	if l.n.Load() >= l.max {
		return &l.other
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.seen.Load(group); ok {
		return v.(*groupLabel)
	}
	if l.n.Load() >= l.max {
		return &l.other
	}
	g := &groupLabel{kv: GroupKey.String(group)}
	l.seen.Store(group, g)
	l.n.Add(1)
	return g
}

// label returns group's inorder.group attribute.
func (l *groupLabels) label(group string) attribute.KeyValue { return l.get(group).kv }

// option returns the measurement option of an Ack of group: attrs and the
// group's label, made once per label.
func (l *groupLabels) option(group string, attrs []attribute.KeyValue) metric.MeasurementOption {
	g := l.get(group)
	if p := g.ack.Load(); p != nil {
		return *p
	}
	kvs := append(append(make([]attribute.KeyValue, 0, len(attrs)+1), attrs...), g.kv)
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	g.ack.Store(&opt)
	return opt
}
