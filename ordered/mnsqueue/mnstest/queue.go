package mnstest

import (
	"container/heap"
	"encoding/base64"
	"encoding/binary"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// QueueAttributes are a queue's settings, in the units the service uses.
// A zero field means the service's default.
type QueueAttributes struct {
	// DelaySeconds delays every new message by this many seconds unless the
	// message sets its own delay (0..604800, default 0).
	DelaySeconds int
	// MaximumMessageSize is the largest message body in bytes
	// (1024..65536, default 65536).
	MaximumMessageSize int
	// MessageRetentionPeriod is how long, in seconds, a message lives after
	// it was sent: then it is deleted, received or not, in flight or not
	// (60..604800, default 345600; older service documents allowed up to
	// 1296000, the current ones 7 days).
	MessageRetentionPeriod int
	// VisibilityTimeout is how long, in seconds, a received message stays
	// invisible before it is delivered again (1..43200, default 30).
	VisibilityTimeout int
	// PollingWaitSeconds is the long-poll wait of a receive that does not
	// say how long to wait (0..30, default 0).
	PollingWaitSeconds int
	// LoggingEnabled is stored and reported; it has no other effect.
	LoggingEnabled bool
	// DeadLetterQueue and MaxReceiveCount are the queue's dead-letter
	// policy, as the service offers it ("Dead-letter queue" in its
	// documentation): a message that was received MaxReceiveCount times and
	// is due to be received again is moved to DeadLetterQueue instead,
	// with its id, body, priority and retention deadline ("the total
	// retention time is the sum of the time spent in both"). Both empty:
	// no policy. MaxReceiveCount is 1..1000 (a range of our choosing: the
	// service documents none); the dead-letter queue must exist when the
	// policy is set and must not be the queue itself. If it is deleted
	// later, moved messages are dropped and counted
	// (Stats.DeadLetterDropped). Over REST the policy is the element
	// <DlqPolicy> with <Enabled>, <DeadLetterTargetQueue> and
	// <MaxReceiveCount>, the names of the service's OpenAPI; the Go SDK
	// v1.0.11 cannot send it.
	DeadLetterQueue string
	MaxReceiveCount int
	// QueueType is QueueTypeFIFO or, for a standard queue, "" (the
	// default; QueueTypeNormal is taken as "" so that attributes compare
	// equal however they were given, and GetQueueAttributes answers
	// "normal"). It is set when the queue is created and never changes.
	// A FIFO queue hands out the messages of each message group in the
	// order they arrived, one at a time (see the package documentation,
	// # FIFO queues and topics). Its dead-letter queue must be a FIFO
	// queue, a standard queue's a standard one.
	QueueType string
}

// Queue and topic types, the values of QueueType and TopicType.
const (
	QueueTypeNormal = "normal"
	QueueTypeFIFO   = "fifo"
	TopicTypeNormal = "normal"
	TopicTypeFIFO   = "fifo"
)

const (
	defaultMaxMessageSize  = 65536
	defaultRetention       = 345600
	defaultVisibility      = 30
	maxDelaySeconds        = 604800
	maxRetentionSeconds    = 604800
	maxVisibilitySeconds   = 43200
	maxPollingWaitSeconds  = 30
	maxReceiveCountLimit   = 1000
	minMaxMessageSize      = 1024
	maxBatch               = 16
	maxBatchBytes          = 65536
	defaultPriority        = 8
	maxPriority            = 16
	maxQueueNameLen        = 120
	redeliverCutMax        = time.Second
	defaultReorderWindow   = 16
	handleRawLen           = 21 // queue id, seq, generation, MAC: a multiple of 3, so no padding
	handleLen              = handleRawLen / 3 * 4
	millisecond            = int64(time.Millisecond)
	second                 = int64(time.Second)
	maxShards              = 64
	queueNameAllowedSymbol = '-'
)

// withDefaults fills zero fields with the service's defaults.
func (a QueueAttributes) withDefaults() QueueAttributes {
	if a.MaximumMessageSize == 0 {
		a.MaximumMessageSize = defaultMaxMessageSize
	}
	if a.MessageRetentionPeriod == 0 {
		a.MessageRetentionPeriod = defaultRetention
	}
	if a.VisibilityTimeout == 0 {
		a.VisibilityTimeout = defaultVisibility
	}
	if a.QueueType == QueueTypeNormal {
		a.QueueType = ""
	}
	return a
}

// queueType is the QueueType the REST API answers.
func (a *QueueAttributes) queueType() string {
	if a.QueueType == "" {
		return QueueTypeNormal
	}
	return a.QueueType
}

// check reports the first attribute out of the service's range.
func (a QueueAttributes) check() *apiError {
	switch {
	case a.DelaySeconds < 0 || a.DelaySeconds > maxDelaySeconds:
		return rangeError("DelaySeconds", 0, maxDelaySeconds, "seconds")
	case a.MaximumMessageSize < minMaxMessageSize || a.MaximumMessageSize > defaultMaxMessageSize:
		return rangeError("MaximumMessageSize", minMaxMessageSize, defaultMaxMessageSize, "bytes")
	case a.MessageRetentionPeriod < 60 || a.MessageRetentionPeriod > maxRetentionSeconds:
		return rangeError("MessageRetentionPeriod", 60, maxRetentionSeconds, "seconds")
	case a.VisibilityTimeout < 1 || a.VisibilityTimeout > maxVisibilitySeconds:
		return rangeError("VisibilityTimeout", 1, maxVisibilitySeconds, "seconds")
	case a.PollingWaitSeconds < 0 || a.PollingWaitSeconds > maxPollingWaitSeconds:
		return rangeError("PollingWaitSeconds", 0, maxPollingWaitSeconds, "seconds")
	case (a.DeadLetterQueue == "") != (a.MaxReceiveCount == 0):
		return invalidArgument("A dead-letter policy needs both DeadLetterTargetQueue and MaxReceiveCount.")
	case a.MaxReceiveCount < 0 || a.MaxReceiveCount > maxReceiveCountLimit:
		return rangeError("MaxReceiveCount", 1, maxReceiveCountLimit, "")
	case a.QueueType != "" && a.QueueType != QueueTypeFIFO:
		return invalidArgument("The value of QueueType should be normal or fifo.")
	}
	return nil
}

// checkQueueName validates a name as the service does: 1..120 characters,
// ASCII letters, digits and '-', starting with a letter or digit.
func checkQueueName(name string) *apiError {
	if len(name) == 0 || len(name) > maxQueueNameLen {
		return newAPIError(400, CodeQueueNameLengthError, "The length of queue name should be between 1 and 120.")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != queueNameAllowedSymbol) {
			return newAPIError(400, CodeInvalidQueueName, "The queue name you provided is not valid.")
		}
	}
	return nil
}

// Message states.
const (
	stateDelayed  uint8 = iota // waiting for its delay, in the timer heap
	stateActive                // visible, in its shard's heap
	stateInflight              // received and invisible, in the timer heap
)

// A message of a FIFO queue is also in its group, behind the messages of
// the group that arrived before it. Only the group's head can be in a
// shard heap or in flight: a visible message behind the head is active
// but in no heap (blocked), and a delayed one stays in the timer heap
// and, when its delay ends, becomes active and blocked. When the head
// leaves (deleted, expired, dead-lettered), the next message becomes the
// head and, if active, enters its shard heap. So the receive path (pick)
// never sees two messages of one group, and the group lock is the head's
// stateInflight.

// group is one message group of a FIFO queue, guarded by its queue's mutex.
type group struct {
	id   string
	msgs []*message // arrival order; msgs[0] is the head
}

// message is one stored message. Its fields are guarded by its queue's mutex.
type message struct {
	seq       uint64 // enqueue order within the queue, also the handle's key
	id        string
	body      string
	md5       string
	priority  int
	shard     int
	enqueued  int64 // server clock, ns
	visible   int64 // when a delayed or in-flight message becomes visible, ns
	expires   int64 // enqueued + retention, ns
	due       int64 // min(visible, expires): when the timer heap must look at it
	firstDeq  int64 // first receive, ns; 0 before
	heldSince int64 // when the receive that made it in flight happened, ns
	dequeues  int64
	gen       uint32 // bumped by every receive and visibility change: older handles go stale
	state     uint8
	vidx      int    // index in the shard heap, -1 when not in it
	tidx      int    // index in the timer heap, -1 when not in it
	grp       *group // its group in a FIFO queue, nil in a standard one
}

// delivery is what a receive or peek answers for one message, copied out of
// the queue so that the response is built without the lock.
type delivery struct {
	id, handle, md5, body       string
	enqueued, visible, firstDeq int64
	dequeues                    int64
	priority                    int
	group                       *string // MessageGroupId of a FIFO queue's message, else nil
}

// shardHeap holds a shard's visible messages, by priority then enqueue order.
type shardHeap []*message

func (h shardHeap) Len() int { return len(h) }
func (h shardHeap) Less(i, j int) bool {
	return lessKey(h[i], h[j])
}
func (h shardHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].vidx = i
	h[j].vidx = j
}
func (h *shardHeap) Push(x any) {
	m := x.(*message)
	m.vidx = len(*h)
	*h = append(*h, m)
}
func (h *shardHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.vidx = -1
	return m
}

func lessKey(a, b *message) bool {
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	return a.seq < b.seq
}

// timerHeap holds delayed and in-flight messages by the time they become
// visible or expire, whichever comes first.
type timerHeap []*message

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].tidx = i
	h[j].tidx = j
}
func (h *timerHeap) Push(x any) {
	m := x.(*message)
	m.tidx = len(*h)
	*h = append(*h, m)
}
func (h *timerHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.tidx = -1
	return m
}

// queue is one queue's state, guarded by mu: no global lock is taken on the
// message path.
type queue struct {
	name  string
	id    uint32
	srv   *Server
	mu    sync.Mutex
	attrs QueueAttributes
	// fifo is attrs.QueueType == QueueTypeFIFO; the type never changes, so
	// it may be read without mu.
	fifo   bool
	groups map[string]*group // FIFO queues: the groups that have messages
	// created and modified are server-clock times in ns.
	created, modified int64
	deleted           bool
	shards            []shardHeap
	timers            timerHeap
	msgs              map[uint64]*message
	nextSeq           uint64
	rng               *rand.Rand
	cand              []int
	active, inflight  int
	delayed           int
	waitCh            chan struct{}
	waiters           int
	rate              bucket      // Throttle.RequestRate
	cons              consumption // Throttle.Consumption
	bytes             int64       // sum of the stored bodies
	incoming          arrivals    // topic pushes on their way
	incomingBytes     int64       // their bodies, reserved against the caps
	arrivalSeq        uint64
}

// arrival is a topic push on its way to the queue: it becomes a message when
// it lands, so that it takes its place in the queue's order then.
type arrival struct {
	due   int64 // server clock, ns
	n     uint64
	body  string
	group string // MessageGroupId of a FIFO topic's push
}

// arrivals is a heap of arrivals by landing time.
type arrivals []arrival

func (h arrivals) Len() int { return len(h) }
func (h arrivals) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].n < h[j].n
}
func (h arrivals) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *arrivals) Push(x any)   { *h = append(*h, x.(arrival)) }
func (h *arrivals) Pop() any {
	old := *h
	a := old[len(old)-1]
	*h = old[:len(old)-1]
	return a
}

// expect schedules a topic push to land at due; advance lands it. Its room
// is taken now, within Options.MaxMessages and MaxMessageBytes, so that
// pushes held back by Faults.PushDelay count against the caps: one that
// finds the emulator full fails at once, as it would have when it landed.
func (q *queue) expect(body, group string, due int64) {
	if !q.srv.reserve(1, int64(len(body)), false) {
		q.srv.stats.pushFailed.Add(1)
		return
	}
	q.incomingBytes += int64(len(body))
	q.arrivalSeq++
	heap.Push(&q.incoming, arrival{due: due, n: q.arrivalSeq, body: body, group: group})
	if q.incoming[0].n == q.arrivalSeq {
		q.wake() // a new earliest deadline: long polls shorten their sleep
	}
}

// land makes the pushes due by now messages of the queue, in the order they
// arrive, with the queue's delay, in the room expect reserved for them.
func (q *queue) land(now int64) {
	for len(q.incoming) > 0 && q.incoming[0].due <= now {
		a := heap.Pop(&q.incoming).(arrival)
		q.incomingBytes -= int64(len(a.body))
		q.send(a.body, md5Hex(a.body), -1, defaultPriority, a.group, a.due, false)
		q.srv.stats.pushed.Add(1)
	}
}

// store adds m to the queue's messages and to the server's totals, which
// Options.MaxMessages and MaxMessageBytes bound (the caller reserved room
// with Server.reserve).
func (q *queue) store(m *message) {
	q.msgs[m.seq] = m
	q.bytes += int64(len(m.body))
}

// unstore removes m from the queue's messages (and from its group) and
// releases its room.
func (q *queue) unstore(m *message) {
	if m.grp != nil {
		q.leaveGroup(m)
	}
	delete(q.msgs, m.seq)
	q.bytes -= int64(len(m.body))
	q.srv.release(1, int64(len(m.body)))
}

// joinGroup puts m at the end of its group, creating the group.
func (q *queue) joinGroup(m *message, id string) {
	g := q.groups[id]
	if g == nil {
		g = &group{id: id}
		q.groups[id] = g
	}
	m.grp = g
	g.msgs = append(g.msgs, m)
}

// leaveGroup takes m out of its group. When m was the head, the next
// message becomes the head and, if it is visible, receivable: this is
// where a group's lock ends. m keeps its group pointer, so that its
// MessageGroupId stays known (a dead-letter move needs it).
func (q *queue) leaveGroup(m *message) {
	g := m.grp
	if g.msgs[0] != m {
		// A delayed message behind the head, deleted or expired.
		if i := slices.Index(g.msgs, m); i >= 0 {
			g.msgs = slices.Delete(g.msgs, i, i+1)
		}
		return
	}
	g.msgs[0] = nil
	g.msgs = g.msgs[1:]
	if len(g.msgs) == 0 {
		delete(q.groups, g.id)
		return
	}
	if h := g.msgs[0]; h.state == stateActive && h.vidx < 0 {
		heap.Push(&q.shards[h.shard], h)
		q.wake()
	}
}

// blocked reports whether m waits behind the head of its FIFO group.
func (q *queue) blocked(m *message) bool {
	return m.grp != nil && m.grp.msgs[0] != m
}

// activate makes m visible: into its shard heap, unless it is blocked
// behind the head of its group. The caller wakes the long polls.
func (q *queue) activate(m *message) {
	m.state = stateActive
	q.active++
	if !q.blocked(m) {
		heap.Push(&q.shards[m.shard], m)
	}
}

func newQueue(s *Server, name string, id uint32, attrs QueueAttributes, now int64) *queue {
	fifo := attrs.QueueType == QueueTypeFIFO
	var groups map[string]*group
	if fifo {
		groups = make(map[string]*group)
	}
	return &queue{
		fifo:     fifo,
		groups:   groups,
		name:     name,
		id:       id,
		srv:      s,
		attrs:    attrs,
		created:  now,
		modified: now,
		shards:   make([]shardHeap, s.opts.Shards),
		msgs:     make(map[uint64]*message),
		rng:      rand.New(rand.NewPCG(uint64(s.opts.Seed), uint64(id)<<32|0x9e3779b9)),
		cand:     make([]int, 0, s.opts.Shards),
		waitCh:   make(chan struct{}),
	}
}

// wake releases every long poll waiting on the queue so that it looks again.
// The caller holds q.mu.
func (q *queue) wake() {
	if q.waiters > 0 {
		close(q.waitCh)
		q.waitCh = make(chan struct{})
	}
}

// pushTimer schedules m to become visible at visible (or to expire before);
// a new earliest deadline wakes the long polls so that they shorten their
// sleep.
func (q *queue) pushTimer(m *message, visible int64) {
	m.visible = visible
	m.due = min(visible, m.expires)
	heap.Push(&q.timers, m)
	if m.tidx == 0 {
		q.wake()
	}
}

// advance moves every delayed or in-flight message whose time has come back
// to its shard, and deletes those past retention: the service deletes a
// message at the end of its retention period whether it was received or
// not, so an in-flight one goes too. The caller holds q.mu.
func (q *queue) advance(now int64) {
	q.land(now)
	woke := false
	for len(q.timers) > 0 && q.timers[0].due <= now {
		m := heap.Pop(&q.timers).(*message)
		inflight := m.state == stateInflight
		if inflight {
			q.inflight--
		} else {
			q.delayed--
		}
		if m.expires <= now {
			q.unstore(m)
			q.srv.stats.expired.Add(1)
			continue
		}
		if inflight {
			// A receipt ended without a delete, at m.visible.
			q.cons.lapse(m.visible)
			q.srv.stats.lapsed.Add(1)
		}
		q.activate(m)
		woke = true
	}
	if woke {
		q.wake()
	}
}

// nextDue is the earliest time a delayed or in-flight message becomes
// visible or expires, or a push lands, or 0.
func (q *queue) nextDue() int64 {
	var due int64
	if len(q.timers) > 0 {
		due = q.timers[0].due
	}
	if len(q.incoming) > 0 && (due == 0 || q.incoming[0].due < due) {
		due = q.incoming[0].due
	}
	return due
}

// pick removes and returns the next visible message, or nil. It behaves like
// the service's standard queues: "basically ordered". Among the shards whose
// head has the best priority and lies within the reorder window of the
// oldest head, it picks one at random, so neighbours swap places but no
// message falls behind by more than the window.
func (q *queue) pick(now int64) *message {
	for {
		best := -1
		for i := range q.shards {
			if len(q.shards[i]) > 0 && (best < 0 || lessKey(q.shards[i][0], q.shards[best][0])) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		head := q.shards[best][0]
		q.cand = q.cand[:0]
		for i := range q.shards {
			if len(q.shards[i]) == 0 {
				continue
			}
			h := q.shards[i][0]
			if h.priority == head.priority && h.seq-head.seq <= q.srv.opts.window {
				q.cand = append(q.cand, i)
			}
		}
		shard := q.cand[0]
		if len(q.cand) > 1 {
			shard = q.cand[q.rng.IntN(len(q.cand))]
		}
		m := heap.Pop(&q.shards[shard]).(*message)
		q.active--
		if m.expires <= now {
			q.unstore(m)
			q.srv.stats.expired.Add(1)
			continue
		}
		return m
	}
}

// send stores one message. delay is in ns; < 0 means the queue's
// DelaySeconds. group is its MessageGroupId, which a FIFO queue keeps and a
// standard one ignores. lost throws it away (Faults.LoseAckedSends).
func (q *queue) send(body, md5 string, delay int64, priority int, group string, now int64, lost bool) (id, handle string) {
	q.nextSeq++
	seq := q.nextSeq
	shard := 0
	if len(q.shards) > 1 {
		shard = q.rng.IntN(len(q.shards))
	}
	id = q.srv.messageID(q.id, seq)
	if delay < 0 {
		delay = int64(q.attrs.DelaySeconds) * second
	}
	if lost {
		q.srv.stats.lost.Add(1)
		if delay > 0 {
			handle = q.srv.encodeHandle(q.id, seq, 0)
		}
		return id, handle
	}
	m := &message{
		seq:      seq,
		id:       id,
		body:     body,
		md5:      md5,
		priority: priority,
		shard:    shard,
		enqueued: now,
		expires:  now + int64(q.attrs.MessageRetentionPeriod)*second,
		vidx:     -1,
		tidx:     -1,
	}
	q.store(m)
	if q.fifo {
		q.joinGroup(m, group)
	}
	q.srv.stats.sent.Add(1)
	if delay > 0 {
		m.state = stateDelayed
		q.delayed++
		q.pushTimer(m, now+delay)
		return id, q.srv.encodeHandle(q.id, seq, 0)
	}
	q.activate(m)
	q.wake()
	return id, ""
}

// receive hands out up to n visible messages, making them invisible for the
// queue's visibility timeout (or less, when the Redeliver fault fires).
// Under a dead-letter policy, a message already received MaxReceiveCount
// times is removed instead and returned in dead, for the caller to move to
// the dead-letter queue once it has released q.mu.
func (q *queue) receive(n int, now int64, redeliver float64, out []delivery, dead []*message) ([]delivery, []*message) {
	vt := int64(q.attrs.VisibilityTimeout) * second
	for len(out) < n {
		m := q.pick(now)
		if m == nil {
			break
		}
		if q.attrs.MaxReceiveCount > 0 && m.dequeues >= int64(q.attrs.MaxReceiveCount) {
			q.unstore(m)
			dead = append(dead, m)
			continue
		}
		m.state = stateInflight
		q.inflight++
		q.cons.peak = max(q.cons.peak, q.inflight)
		m.heldSince = now
		m.dequeues++
		m.gen++
		if m.firstDeq == 0 {
			m.firstDeq = now
		}
		visible := now + vt
		if redeliver > 0 && q.rng.Float64() < redeliver {
			visible = now + q.rng.Int64N(min(vt, int64(redeliverCutMax)))
			q.srv.stats.redelivered.Add(1)
		}
		q.pushTimer(m, visible)
		q.srv.stats.received.Add(1)
		out = append(out, q.deliveryOf(m, true))
	}
	return out, dead
}

// adopt stores messages moved from another queue by its dead-letter policy:
// same id, body, priority and retention deadline, received afresh. The
// move takes the room it freed (forced: it cannot fail).
func (q *queue) adopt(moved []*message) {
	for _, old := range moved { // not expired: pick dropped those
		q.srv.reserve(1, int64(len(old.body)), true)
		q.nextSeq++
		m := &message{
			seq:      q.nextSeq,
			id:       old.id,
			body:     old.body,
			md5:      old.md5,
			priority: old.priority,
			enqueued: old.enqueued,
			expires:  old.expires,
			state:    stateActive,
			vidx:     -1,
			tidx:     -1,
		}
		if len(q.shards) > 1 {
			m.shard = q.rng.IntN(len(q.shards))
		}
		q.store(m)
		if q.fifo {
			// A FIFO queue's dead-letter queue is FIFO: the group goes
			// along, and the move takes its place at the group's end.
			gid := ""
			if old.grp != nil {
				gid = old.grp.id
			}
			q.joinGroup(m, gid)
		}
		q.activate(m)
	}
	q.wake()
}

// peek returns up to n visible messages without changing their state.
func (q *queue) peek(n int, now int64, out []delivery) []delivery {
	start := len(out)
	var taken []*message
	for len(out)-start < n {
		m := q.pick(now)
		if m == nil {
			break
		}
		taken = append(taken, m)
		out = append(out, q.deliveryOf(m, false))
	}
	for _, m := range taken {
		heap.Push(&q.shards[m.shard], m)
		q.active++
	}
	return out
}

func (q *queue) deliveryOf(m *message, withHandle bool) delivery {
	d := delivery{
		id:       m.id,
		md5:      m.md5,
		body:     m.body,
		enqueued: m.enqueued,
		firstDeq: m.firstDeq,
		dequeues: m.dequeues,
		priority: m.priority,
	}
	if m.grp != nil {
		d.group = &m.grp.id
	}
	if withHandle {
		d.handle = q.srv.encodeHandle(q.id, m.seq, m.gen)
		d.visible = m.visible
	}
	return d
}

// held finds the message a handle designates, if the handle is still the
// current one: 400 ReceiptHandleError for malformed or foreign handles, 404
// MessageNotExist for stale ones.
func (q *queue) held(handle string) (*message, *apiError) {
	qid, seq, gen, ok := q.srv.decodeHandle(handle)
	if !ok || qid != q.id {
		return nil, errReceiptHandle
	}
	m := q.msgs[seq]
	if m == nil || m.gen != gen || m.state == stateActive {
		return nil, errMessageNotExist
	}
	return m, nil
}

// remove deletes the message a handle designates.
func (q *queue) remove(handle string) *apiError {
	m, err := q.held(handle)
	if err != nil {
		return err
	}
	heap.Remove(&q.timers, m.tidx)
	if m.state == stateInflight {
		q.inflight--
	} else {
		q.delayed--
	}
	q.unstore(m)
	q.srv.stats.deleted.Add(1)
	return nil
}

// changeVisibility makes the message invisible until now+vt and rotates its
// handle.
func (q *queue) changeVisibility(handle string, vt int64, now int64) (string, int64, *apiError) {
	m, err := q.held(handle)
	if err != nil {
		return "", 0, err
	}
	m.gen++
	m.visible = now + vt*second
	m.due = min(m.visible, m.expires)
	heap.Fix(&q.timers, m.tidx)
	if m.tidx == 0 {
		q.wake()
	}
	return q.srv.encodeHandle(q.id, m.seq, m.gen), m.visible, nil
}

// info snapshots the queue for GetQueueAttributes and Server.Queue.
func (q *queue) info() QueueInfo {
	locked := 0
	for _, g := range q.groups {
		if g.msgs[0].state == stateInflight {
			locked++
		}
	}
	return QueueInfo{
		Groups:         len(q.groups),
		LockedGroups:   locked,
		Name:           q.name,
		Attributes:     q.attrs,
		Active:         q.active,
		Inactive:       q.inflight,
		Delayed:        q.delayed,
		PeakInactive:   q.cons.peak,
		Throttled:      q.cons.reason,
		CreateTime:     time.Unix(0, q.created),
		LastModifyTime: time.Unix(0, q.modified),
	}
}

// QueueInfo describes a queue and counts its messages by state.
type QueueInfo struct {
	Name       string
	Attributes QueueAttributes
	// Active messages are visible; the count may include messages past
	// retention that no receive has touched yet, and, in a FIFO queue,
	// includes those waiting behind their group's head.
	Active int
	// Inactive messages were received and are invisible until their
	// visibility timeout ends.
	Inactive int
	// Delayed messages wait for their delay to end.
	Delayed int
	// PeakInactive is the most messages that were ever in flight at once:
	// received and not deleted, the figure the service's
	// abnormal-consumption throttle watches.
	PeakInactive int
	// Throttled says why the queue's receives are throttled now
	// (AbnormalUndeleted, AbnormalRate, AbnormalHold) as of the last
	// receive, or "" (Throttle.Consumption).
	Throttled                  string
	CreateTime, LastModifyTime time.Time
	// Groups counts the message groups of a FIFO queue that hold messages,
	// LockedGroups those whose head is received and invisible, so that no
	// other message of theirs can be received (0 for a standard queue).
	Groups, LockedGroups int
}

// GroupInfo describes one message group of a FIFO queue.
type GroupInfo struct {
	// ID is the MessageGroupId.
	ID string
	// Messages counts the group's stored messages, the head included.
	Messages int
	// HeadID is the id of the head, the oldest message of the group: the
	// only one a receive can return.
	HeadID string
	// Locked: the head is received and invisible (in flight); Delayed:
	// its delay has not ended. Either way the group hands out nothing.
	Locked, Delayed bool
	// MessageIDs are the ids of the group's messages in arrival order,
	// the head first.
	MessageIDs []string
}

// groupInfos snapshots the groups, sorted by id.
func (q *queue) groupInfos() []GroupInfo {
	out := make([]GroupInfo, 0, len(q.groups))
	for _, g := range q.groups {
		h := g.msgs[0]
		gi := GroupInfo{ID: g.id, Messages: len(g.msgs), HeadID: h.id, Locked: h.state == stateInflight,
			Delayed: h.state == stateDelayed, MessageIDs: make([]string, len(g.msgs))}
		for i, m := range g.msgs {
			gi.MessageIDs[i] = m.id
		}
		out = append(out, gi)
	}
	slices.SortFunc(out, func(a, b GroupInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// encodeHandle builds a receipt handle: queue id, message seq and generation,
// authenticated with a per-server keyed hash so that handles from another
// server, or made up, are told apart from stale ones. Like the service's
// (1-ODU4OTkzNDU5My0xNDM1MTk3NjAwLTItNg==) they are URL-safe: the URL-safe
// base64 alphabet without padding, so a client that puts the handle in a
// query string unescaped (the Python and Node.js SDKs do) sends it intact.
func (s *Server) encodeHandle(qid uint32, seq uint64, gen uint32) string {
	var raw [handleRawLen]byte
	binary.BigEndian.PutUint32(raw[0:], qid)
	binary.BigEndian.PutUint64(raw[4:], seq)
	binary.BigEndian.PutUint32(raw[12:], gen)
	mac := maphash.Bytes(s.handleSeed, raw[:16])
	raw[16], raw[17], raw[18], raw[19], raw[20] = byte(mac>>32), byte(mac>>24), byte(mac>>16), byte(mac>>8), byte(mac)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

func (s *Server) decodeHandle(h string) (qid uint32, seq uint64, gen uint32, ok bool) {
	if len(h) != handleLen {
		return 0, 0, 0, false
	}
	var raw [handleRawLen]byte
	n, err := base64.RawURLEncoding.Decode(raw[:], []byte(h))
	if err != nil || n != handleRawLen {
		return 0, 0, 0, false
	}
	if s.encodeHandle(binary.BigEndian.Uint32(raw[0:]), binary.BigEndian.Uint64(raw[4:]), binary.BigEndian.Uint32(raw[12:])) != h {
		return 0, 0, 0, false // a wrong MAC, or a spelling the server never issues
	}
	return binary.BigEndian.Uint32(raw[0:]), binary.BigEndian.Uint64(raw[4:]), binary.BigEndian.Uint32(raw[12:]), true
}

// messageID builds an id in the service's current shape: 32 upper-case hex
// digits (the REST documentation's older example,
// 5F290C926D472878-2-14D9529A8FA-200000001, is no longer what it issues).
// Server tag, queue or topic id and sequence make it unique.
func (s *Server) messageID(entity uint32, seq uint64) string {
	b := make([]byte, 0, 32)
	b = append(b, s.tag...)
	b = appendHex(b, uint64(entity), 8)
	b = appendHex(b, seq, 16)
	return string(b)
}

// appendHex appends v in upper-case hex, zero-padded to width digits.
func appendHex(b []byte, v uint64, width int) []byte {
	const digits = "0123456789ABCDEF"
	var buf [16]byte
	i := len(buf)
	for v > 0 || len(buf)-i < width {
		i--
		buf[i] = digits[v&15]
		v >>= 4
	}
	return append(b, buf[i:]...)
}
