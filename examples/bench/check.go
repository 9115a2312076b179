package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// minPayload is the size of the fields every payload starts with.
const minPayload = 32

// stamp is what a payload carries so that the receiving side can check
// order and measure latency.
type stamp struct {
	admit    int64  // nanoseconds since the checker began, when the send was called
	id       uint64 // 0..n-1, unique per message
	group    uint32 // group index
	producer uint32
	count    uint64 // 1, 2, 3... per (group, producer), in sending order
}

func (s stamp) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], uint64(s.admit))
	binary.LittleEndian.PutUint64(b[8:], s.id)
	binary.LittleEndian.PutUint32(b[16:], s.group)
	binary.LittleEndian.PutUint32(b[20:], s.producer)
	binary.LittleEndian.PutUint64(b[24:], s.count)
}

func readStamp(b []byte) (stamp, bool) {
	if len(b) < minPayload {
		return stamp{}, false
	}
	return stamp{
		admit:    int64(binary.LittleEndian.Uint64(b[0:])),
		id:       binary.LittleEndian.Uint64(b[8:]),
		group:    binary.LittleEndian.Uint32(b[16:]),
		producer: binary.LittleEndian.Uint32(b[20:]),
		count:    binary.LittleEndian.Uint64(b[24:]),
	}, true
}

// checker receives every delivery of a run. It counts first deliveries
// and duplicates, records latencies, and for ordered runs checks that each
// group's seqs are 1, 2, 3... and that each producer's messages to a group
// come in the order it sent them. All its state is allocated by newChecker,
// so that a run's allocation count is the system's, not the checker's.
type checker struct {
	n, groups, producers int
	names                []string
	start                time.Time

	seen      []atomic.Bool   // per message id
	lastSeq   []atomic.Uint64 // per group: the last seq delivered
	lastCount []atomic.Uint64 // per (group, producer): the last count delivered
	lat       []int64         // latencies of first deliveries, in ns
	at        []int64         // times of first deliveries, in ns since begin (same order as lat)
	latN      atomic.Int64
	end       atomic.Int64 // ns since start of the last first delivery

	delivered, dups, violations atomic.Int64

	mu       sync.Mutex
	problems []string // the first few violations, for the report

	done     chan struct{} // closed when every message was delivered
	doneOnce sync.Once

	// tokens bounds the messages sent and not yet delivered (nil: no
	// bound): a producer puts one in before it sends, a first delivery
	// takes one out.
	tokens chan struct{}
}

// maxBacklog caps the bound of setBacklog, so that a run with many groups
// measures latency with a bounded queue rather than the whole run queued.
// It stays under the receiver's default cap of messages received and not
// deleted (ReceiveOptions.MaxUndeleted, 4,000): beyond it the receiver
// parks early arrivals in the store, and these rows measure throughput,
// not parking (the backlog/ rows measure that).
const maxBacklog = 3000

// setBacklog bounds the messages sent and not yet delivered to perGroup
// times the groups, at most maxBacklog (0: no bound): with messages spread
// round-robin, about perGroup per group.
func (c *checker) setBacklog(perGroup int) {
	if b := min(perGroup*c.groups, maxBacklog); perGroup > 0 && b < c.n {
		c.tokens = make(chan struct{}, b)
	}
}

// admit waits until one more message may be sent.
func (c *checker) admit(ctx context.Context) error {
	if c.tokens == nil {
		return nil
	}
	select {
	case c.tokens <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newChecker(n, groups, producers int) *checker {
	c := &checker{
		n: n, groups: groups, producers: producers,
		names:     make([]string, groups),
		seen:      make([]atomic.Bool, n),
		lastSeq:   make([]atomic.Uint64, groups),
		lastCount: make([]atomic.Uint64, groups*producers),
		lat:       make([]int64, n),
		at:        make([]int64, n),
		done:      make(chan struct{}),
	}
	for g := range c.names {
		c.names[g] = groupName(g)
	}
	c.start = time.Now()
	return c
}

// begin starts the clock.
func (c *checker) begin() { c.start = time.Now() }

// now returns the time since begin, for stamps.
func (c *checker) now() int64 { return int64(time.Since(c.start)) }

// elapsed returns the time from begin to the last first delivery.
func (c *checker) elapsed() time.Duration { return time.Duration(c.end.Load()) }

func (c *checker) violate(format string, args ...any) {
	c.violations.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.problems) < 5 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// first records a delivery and reports whether it is the message's first.
func (c *checker) first(s stamp) bool {
	if s.id >= uint64(c.n) {
		c.violate("message id %d out of range (%d messages)", s.id, c.n)
		return false
	}
	if c.seen[s.id].Swap(true) {
		c.dups.Add(1)
		return false
	}
	if c.tokens != nil {
		<-c.tokens
	}
	now := c.now()
	i := c.latN.Add(1) - 1
	c.lat[i], c.at[i] = now-s.admit, now
	if c.delivered.Add(1) == int64(c.n) {
		c.end.Store(now)
		c.doneOnce.Do(func() { close(c.done) })
	}
	return true
}

// raw records a delivery of the raw driver: no order is expected.
func (c *checker) raw(body []byte) {
	s, ok := readStamp(body)
	if !ok {
		c.violate("body of %d bytes carries no stamp", len(body))
		return
	}
	c.first(s)
}

// grouped records a delivery of a queue that orders each group itself (a
// FIFO queue), received raw as group, and checks what the service
// promises: the message comes back in the group it was sent to, and each
// producer's messages to a group come in the order it sent them. One
// message of a group is handed out at a time, the next only after the
// previous one's delete, which follows this call: plain load-then-store
// is enough here too.
func (c *checker) grouped(group string, body []byte) {
	s, ok := readStamp(body)
	switch {
	case !ok:
		c.violate("group %q: body of %d bytes carries no stamp", group, len(body))
		return
	case int(s.group) >= c.groups || int(s.producer) >= c.producers:
		c.violate("message %d names group %d, producer %d: out of range", s.id, s.group, s.producer)
		return
	case group != c.names[s.group]:
		c.violate("message %d sent to group %q delivered as group %q", s.id, c.names[s.group], group)
		return
	}
	if !c.first(s) {
		return // a redelivery of the group's head: counted
	}
	k := int(s.group)*c.producers + int(s.producer)
	if last := c.lastCount[k].Load(); s.count != last+1 {
		c.violate("group %q: producer %d's message #%d delivered after its #%d", group, s.producer, s.count, last)
	}
	c.lastCount[k].Store(s.count)
}

// ordered records a delivery of ordered.Queue and checks its order.
func (c *checker) ordered(group string, seq uint64, unordered bool, body []byte) {
	s, ok := readStamp(body)
	switch {
	case !ok:
		c.violate("group %q seq %d: body of %d bytes carries no stamp", group, seq, len(body))
		return
	case unordered:
		c.violate("message %d handed out flagged Unordered (group %q seq %d)", s.id, group, seq)
	case int(s.group) >= c.groups || int(s.producer) >= c.producers:
		c.violate("message %d names group %d, producer %d: out of range", s.id, s.group, s.producer)
		return
	case group != c.names[s.group]:
		c.violate("message %d sent to group %q delivered as group %q", s.id, c.names[s.group], group)
		return
	}
	if !c.first(s) {
		return // a duplicate delivery: at-least-once allows it; counted
	}
	// Handlers of one group never run at once, and the Queue orders them
	// (a group is unlocked by the previous message's ack), so plain
	// load-then-store is enough; atomics keep the race detector informed.
	if last := c.lastSeq[s.group].Load(); seq != last+1 {
		c.violate("group %q: seq %d delivered after seq %d", group, seq, last)
	}
	c.lastSeq[s.group].Store(seq)
	k := int(s.group)*c.producers + int(s.producer)
	if last := c.lastCount[k].Load(); s.count != last+1 {
		c.violate("group %q: producer %d's message #%d delivered after its #%d", group, s.producer, s.count, last)
	}
	c.lastCount[k].Store(s.count)
}

// err returns an error describing the violations, or nil.
func (c *checker) err() error {
	if c.violations.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Errorf("ORDER OR CONTENT VIOLATED: %d violations, first: %s", c.violations.Load(), strings.Join(c.problems, "; "))
}

// latencies returns the p50 and p99 latencies in milliseconds.
func (c *checker) latencies() (p50, p99 float64) {
	l := c.lat[:c.latN.Load()]
	slices.Sort(l)
	return percentile(l, 0.50), percentile(l, 0.99)
}

// pauses returns the time from from (ns since begin) to the first first
// delivery, and the longest time between two first deliveries.
func (c *checker) pauses(from int64) (first, longest time.Duration) {
	at := slices.Clone(c.at[:c.latN.Load()])
	if len(at) == 0 {
		return 0, 0
	}
	slices.Sort(at)
	var gap int64
	for i := 1; i < len(at); i++ {
		gap = max(gap, at[i]-at[i-1])
	}
	return time.Duration(at[0] - from), time.Duration(gap)
}

// groupName returns the name of group g: g0000, g0001...
func groupName(g int) string { return fmt.Sprintf("g%04d", g) }

// producerRange returns the ids [lo, hi) that producer p sends.
func producerRange(n, producers, p int) (lo, hi int) {
	per := (n + producers - 1) / producers
	return min(p*per, n), min((p+1)*per, n)
}

// payloads hands out the payload buffers of a run, all allocated at once.
type payloads struct {
	arena []byte
	size  int
}

func newPayloads(n, size int) *payloads {
	return &payloads{arena: make([]byte, n*size), size: size}
}

func (p *payloads) get(id int) []byte {
	return p.arena[id*p.size : (id+1)*p.size : (id+1)*p.size]
}
