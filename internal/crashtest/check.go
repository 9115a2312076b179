package crashtest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Receive modes, as written in Event.Mode and Config.Mode.
const (
	ModeAtLeastOnce = "alo"
	ModeAtMostOnce  = "amo"
	ModeExactlyOnce = "eo"
)

// Rules a Violation can break.
const (
	RuleOrder     = "order"      // a group's deliveries in one incarnation did not go seq by seq
	RuleDuplicate = "duplicate"  // a delivery the mode does not allow twice
	RuleGap       = "gap"        // a seq was passed over
	RuleEpoch     = "epoch"      // an older epoch after a newer one
	RuleUnordered = "unordered"  // a message handed out flagged Unordered
	RuleLost      = "lost"       // a successful Send never delivered (or committed)
	RulePayload   = "payload"    // a seq delivered with another payload than the one sent
	RuleSendOrder = "send-order" // seqs do not follow the order Sends were admitted
	RuleAck       = "ack"        // an ack of a message not delivered in that incarnation
	RuleCommit    = "commit"     // committed seqs not consecutive, or one committed twice
	RuleDelete    = "delete"     // a message deleted before the cursor past it was durable
	RuleLeftover  = "leftover"   // messages left in the queue at the end
)

// Config says what the checker expects of a run.
type Config struct {
	// Mode is the receive mode under test (ModeAtLeastOnce by default).
	Mode string
	// Leftover is how many messages the queue still held at the end (the
	// harness asks the emulator after the receiver drained and closed).
	Leftover int
	// AllowUnordered accepts deliveries flagged Unordered.
	AllowUnordered bool
	// AllowLateStart accepts that a receiver's first delivery of a group
	// (after its store was wiped: StartLowest) passes over seqs: those
	// must then arrive late, handed out flagged Unordered, which the
	// end-of-run rule "lost" checks with AllowUnordered.
	AllowLateStart bool
	// MaxViolations bounds how many violations are collected (default 100).
	MaxViolations int
}

// Violation is a broken rule, located at the event that showed it.
type Violation struct {
	Rule   string
	Group  string
	Epoch  uint64
	Seq    uint64
	Event  string // the event, described
	Pos    string // file:line, or "" for end-of-run checks
	Detail string
}

func (v Violation) Error() string {
	pos := v.Pos
	if pos == "" {
		pos = "end of run"
	}
	return fmt.Sprintf("%s: rule %s: group %q epoch %d seq %d: %s (%s)", pos, v.Rule, v.Group, v.Epoch, v.Seq, v.Detail, v.Event)
}

// Report is the checker's verdict and the run's figures.
type Report struct {
	Violations []Violation
	Truncated  bool // more violations than Config.MaxViolations

	Groups       int
	Incarnations int // of all processes
	Killed       int // incarnations without a clean end
	Torn         int // files with a torn last line
	Attempts     int
	Sent         int // successful Sends recorded
	Failed       int // Sends that returned an error
	Delivered    int // deliveries recorded, duplicates included
	Distinct     int // distinct (group, epoch, seq) delivered
	Duplicates   int // deliveries of a seq delivered before
	Lost         int // seqs passed over at a crash (at-most-once)
	Committed    int // distinct seqs committed (exactly-once)
	Acked        int
	Deletes      int // messages the receivers asked the queue to delete
	Parked       int // messages parked durably in a receiver's store
}

// OK reports whether no rule was broken.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// First returns the first violation found, or nil.
func (r *Report) First() *Violation {
	if len(r.Violations) == 0 {
		return nil
	}
	return &r.Violations[0]
}

// Figures returns the run's figures on one line.
func (r *Report) Figures() string {
	return fmt.Sprintf("groups %d, incarnations %d (killed %d, torn %d), attempts %d, sent %d, failed %d, delivered %d (distinct %d, duplicates %d, lost %d), committed %d, deletes %d, parked %d, violations %d",
		r.Groups, r.Incarnations, r.Killed, r.Torn, r.Attempts, r.Sent, r.Failed, r.Delivered, r.Distinct, r.Duplicates, r.Lost, r.Committed, r.Deletes, r.Parked, len(r.Violations))
}

type key struct {
	group      string
	epoch, seq uint64
}

// groupState is the checker's view of one group on the receive side.
type groupState struct {
	epoch    uint64
	maxDel   uint64 // highest seq delivered in epoch
	durable  uint64 // highest seq known durably past the cursor
	lastInc  int    // incarnation of the last delivery (-1: none yet)
	lastProc string
	last     uint64 // last seq delivered in lastInc
	out      map[uint64]bool
	commit   uint64 // highest seq committed (exactly-once)
}

type checker struct {
	cfg    Config
	rep    *Report
	groups map[string]*groupState
	// killed[proc] lists the incarnations that ended without KindEnd.
	killed    map[string]map[int]bool
	delivered map[key]string // payload first delivered
	sent      map[key]*Event
	sentNoSeq []*Event          // sent by SendBatch, which reports no seq
	byPayload map[string]key    // delivered payload -> its seq
	attempts  map[string]*Event // payload -> attempt
	lostSeqs  map[key]bool
}

// Check checks the histories of one run (as Load returns them) against the
// rules of cfg.Mode and returns the violations, first found first, and the
// run's figures.
//
// Per group, on the receive side, walking each receiver's incarnations in
// order:
//   - within an incarnation, deliveries go seq by seq: each is the previous
//     one plus 1 (RuleOrder, RuleDuplicate);
//   - the first delivery of an incarnation continues the run: at most the
//     highest seq delivered so far plus 1 (RuleGap), and above every seq known
//     durable (RuleDuplicate): acked with Durable, committed, or delivered by
//     an incarnation that ended cleanly. In at-least-once and exactly-once
//     mode it may repeat seqs above that (the messages out or acked but not
//     durable at a crash); in at-most-once mode it repeats nothing and may pass
//     over one seq per incarnation killed since the group's last delivery
//     (the message that was out at the crash);
//   - epochs never go back (RuleEpoch), and a new epoch starts at seq 1;
//   - committed seqs (exactly-once) are consecutive from 1 and each once
//     (RuleCommit);
//   - commit before delete: a message is deleted (KindDelete) only below a
//     cursor this incarnation knew to be durable before it asked (a
//     KindDurable record, a commit, or an ack with Durable), or that this
//     incarnation parked durably before it asked (KindParked) (RuleDelete).
//     Deletes of messages handed out flagged Unordered are not judged.
//
// At the end: every Send recorded as successful was delivered with its
// payload (committed, in exactly-once mode), unless at-most-once passed over
// it at a crash (RuleLost, RulePayload); within a group, seqs follow the
// order in which one sender admitted its payloads (RuleSendOrder); and the
// queue held no message (RuleLeftover).
func Check(hs []*History, cfg Config) *Report {
	if cfg.Mode == "" {
		cfg.Mode = ModeAtLeastOnce
	}
	if cfg.MaxViolations <= 0 {
		cfg.MaxViolations = 100
	}
	c := &checker{
		cfg: cfg, rep: &Report{},
		groups:    map[string]*groupState{},
		killed:    map[string]map[int]bool{},
		delivered: map[key]string{},
		sent:      map[key]*Event{},
		byPayload: map[string]key{},
		attempts:  map[string]*Event{},
		lostSeqs:  map[key]bool{},
	}
	hs = append([]*History(nil), hs...)
	SortHistories(hs)
	for _, h := range hs {
		c.rep.Incarnations++
		if h.Torn {
			c.rep.Torn++
		}
		if !h.Clean {
			if c.killed[h.Proc] == nil {
				c.killed[h.Proc] = map[int]bool{}
			}
			c.killed[h.Proc][h.Inc] = true
			if h.Role != RoleDB {
				c.rep.Killed++
			}
		}
	}
	for _, h := range hs {
		switch h.Role {
		case RoleSend:
			c.sender(h)
		case RoleReceive:
			c.receiver(h)
		}
	}
	for _, h := range hs {
		if h.Role == RoleDB {
			c.db(h)
		}
	}
	c.final()
	c.rep.Groups = len(c.groups)
	c.rep.Distinct = len(c.delivered)
	return c.rep
}

func (c *checker) fail(rule string, ev *Event, g string, epoch, seq uint64, format string, args ...any) {
	if len(c.rep.Violations) >= c.cfg.MaxViolations {
		c.rep.Truncated = true
		return
	}
	v := Violation{Rule: rule, Group: g, Epoch: epoch, Seq: seq, Detail: fmt.Sprintf(format, args...)}
	if ev != nil {
		v.Event, v.Pos = ev.String(), ev.Pos()
	}
	c.rep.Violations = append(c.rep.Violations, v)
}

func (c *checker) group(g string) *groupState {
	st := c.groups[g]
	if st == nil {
		st = &groupState{lastInc: -1, out: map[uint64]bool{}}
		c.groups[g] = st
	}
	return st
}

func (c *checker) sender(h *History) {
	for i := range h.Events {
		ev := &h.Events[i]
		switch ev.Kind {
		case KindAttempt:
			c.rep.Attempts++
			if prev, dup := c.attempts[ev.Payload]; dup {
				c.fail(RulePayload, ev, ev.Group, 0, 0, "payload attempted twice (first at %s)", prev.Pos())
				continue
			}
			c.attempts[ev.Payload] = ev
		case KindSent:
			c.rep.Sent++
			if ev.Seq == 0 {
				c.sentNoSeq = append(c.sentNoSeq, ev)
				continue
			}
			k := key{ev.Group, ev.Epoch, ev.Seq}
			if prev, dup := c.sent[k]; dup {
				c.fail(RulePayload, ev, ev.Group, ev.Epoch, ev.Seq, "seq returned by two Sends (first %s at %s)", prev.Payload, prev.Pos())
				continue
			}
			c.sent[k] = ev
		case KindFailed:
			c.rep.Failed++
		}
	}
}

// killedBetween counts the incarnations of proc in [from, to) that were
// killed.
func (c *checker) killedBetween(proc string, from, to int) int {
	n := 0
	for inc := range c.killed[proc] {
		if inc >= from && inc < to {
			n++
		}
	}
	return n
}

// durableCursor is a cursor a receiver knows to be stored: seqs below
// next of epoch, and every seq of an older epoch, are handled.
type durableCursor struct{ epoch, next uint64 }

func (d durableCursor) covers(epoch, seq uint64) bool {
	return d.epoch > epoch || d.epoch == epoch && seq < d.next
}

func (c *checker) receiver(h *History) {
	mode := c.cfg.Mode
	seen := map[string]bool{} // groups delivered in this incarnation
	known := map[string]durableCursor{}
	raise := func(g string, epoch, next uint64) {
		if d := known[g]; epoch > d.epoch || epoch == d.epoch && next > d.next {
			known[g] = durableCursor{epoch, next}
		}
	}
	loose := map[key]bool{}  // handed out flagged Unordered
	parked := map[key]bool{} // parked durably by this incarnation
	for i := range h.Events {
		ev := &h.Events[i]
		switch ev.Kind {
		case KindDurable:
			raise(ev.Group, ev.Epoch, ev.Seq)
		case KindParked:
			c.rep.Parked++
			parked[key{ev.Group, ev.Epoch, ev.Seq}] = true
		case KindDelete:
			c.rep.Deletes++
			if d := known[ev.Group]; !d.covers(ev.Epoch, ev.Seq) && !loose[key{ev.Group, ev.Epoch, ev.Seq}] && !parked[key{ev.Group, ev.Epoch, ev.Seq}] {
				c.fail(RuleDelete, ev, ev.Group, ev.Epoch, ev.Seq, "deleted before the cursor past it was durable (durable cursor known: epoch %d next %d)", d.epoch, d.next)
			}
		case KindDelivered:
			c.rep.Delivered++
			if ev.Unordered {
				loose[key{ev.Group, ev.Epoch, ev.Seq}] = true
				if !c.cfg.AllowUnordered {
					c.fail(RuleUnordered, ev, ev.Group, ev.Epoch, ev.Seq, "message handed out flagged Unordered")
				} else if k := (key{ev.Group, ev.Epoch, ev.Seq}); ev.Seq != 0 && c.delivered[k] == "" {
					// A late arrival (a seq below a StartLowest start or in a
					// skipped range) handed out flagged: delivered, not lost.
					c.delivered[k] = ev.Payload
				}
				continue
			}
			c.deliver(h, ev, mode, !seen[ev.Group])
			seen[ev.Group] = true
		case KindAcked:
			c.rep.Acked++
			st := c.group(ev.Group)
			if st.lastInc != h.Inc || st.lastProc != h.Proc || !st.out[ev.Seq] || ev.Epoch != st.epoch {
				c.fail(RuleAck, ev, ev.Group, ev.Epoch, ev.Seq, "ack of a message this incarnation did not deliver")
				continue
			}
			delete(st.out, ev.Seq)
			if ev.Durable && ev.Seq > st.durable {
				st.durable = ev.Seq
			}
			if ev.Durable {
				raise(ev.Group, ev.Epoch, ev.Seq+1)
			}
		case KindCommitted:
			raise(ev.Group, ev.Epoch, ev.Seq+1)
			st := c.group(ev.Group)
			if ev.Epoch == st.epoch && ev.Seq > st.durable {
				st.durable = ev.Seq
			}
		}
	}
	if h.Clean {
		// Close returned nil: every advance acknowledged is durable, and the
		// worker acknowledges everything it recorded before it closes.
		for g := range seen {
			st := c.groups[g]
			st.durable = max(st.durable, st.maxDel)
		}
	}
}

func (c *checker) deliver(h *History, ev *Event, mode string, first bool) {
	g, e, s := ev.Group, ev.Epoch, ev.Seq
	st := c.group(g)
	k := key{g, e, s}
	if p, ok := c.delivered[k]; ok && p != ev.Payload {
		c.fail(RulePayload, ev, g, e, s, "seq delivered with payload %s before, now %s", p, ev.Payload)
	}
	switch {
	case e < st.epoch:
		c.fail(RuleEpoch, ev, g, e, s, "epoch %d after epoch %d", e, st.epoch)
		return
	case e > st.epoch:
		// Switching away from an epoch abandons it, which this harness
		// never provokes. The new epoch then starts as a fresh stream: the
		// rules below want seq 1 (or, at-most-once, a seq passed over at a
		// crash).
		if st.epoch != 0 {
			c.fail(RuleEpoch, ev, g, e, s, "switch from epoch %d to %d", st.epoch, e)
		}
		st.epoch, st.maxDel, st.durable, st.commit = e, 0, 0, 0
		first = true
	}
	sameInc := st.lastInc == h.Inc && st.lastProc == h.Proc
	if !first && sameInc {
		switch {
		case s <= st.last:
			c.fail(RuleDuplicate, ev, g, e, s, "seq %d delivered again in one incarnation after seq %d", s, st.last)
		case s != st.last+1:
			c.fail(RuleOrder, ev, g, e, s, "seq %d after seq %d, want %d", s, st.last, st.last+1)
		}
	} else {
		switch mode {
		case ModeAtMostOnce:
			switch {
			case s <= st.maxDel:
				c.fail(RuleDuplicate, ev, g, e, s, "at-most-once delivered seq %d again (up to %d delivered)", s, st.maxDel)
			case s > st.maxDel+1:
				from := st.lastInc
				if from < 0 {
					from = 0
				}
				allowed := uint64(c.killedBetween(h.Proc, from, h.Inc))
				if lost := s - st.maxDel - 1; lost > allowed {
					c.fail(RuleGap, ev, g, e, s, "seqs %d..%d passed over, %d crashes since the group's last delivery allow %d", st.maxDel+1, s-1, allowed, allowed)
				} else {
					for q := st.maxDel + 1; q < s; q++ {
						c.lostSeqs[key{g, e, q}] = true
					}
					c.rep.Lost += int(lost)
				}
			}
		default:
			switch {
			case s <= st.durable:
				c.fail(RuleDuplicate, ev, g, e, s, "seq %d delivered again though the cursor was durably past %d", s, st.durable)
			case s > st.maxDel+1 && !(first && c.cfg.AllowLateStart && c.cfg.AllowUnordered):
				c.fail(RuleGap, ev, g, e, s, "seq %d after %d delivered, want at most %d", s, st.maxDel, st.maxDel+1)
			}
		}
	}
	if _, ok := c.delivered[k]; ok {
		c.rep.Duplicates++
	} else {
		c.delivered[k] = ev.Payload
		if prev, ok := c.byPayload[ev.Payload]; ok && prev != k {
			c.fail(RulePayload, ev, g, e, s, "payload %s delivered before as seq %d of group %q", ev.Payload, prev.seq, prev.group)
		}
		c.byPayload[ev.Payload] = k
	}
	if !sameInc {
		st.out = map[uint64]bool{}
	}
	st.out[s] = true
	st.lastInc, st.lastProc, st.last = h.Inc, h.Proc, s
	st.maxDel = max(st.maxDel, s)
}

func (c *checker) db(h *History) {
	for i := range h.Events {
		ev := &h.Events[i]
		if ev.Kind != KindCommitted {
			continue
		}
		st := c.group(ev.Group)
		if ev.Epoch != st.epoch {
			c.fail(RuleEpoch, ev, ev.Group, ev.Epoch, ev.Seq, "committed in epoch %d, receiver at epoch %d", ev.Epoch, st.epoch)
			continue
		}
		switch {
		case ev.Seq <= st.commit:
			c.fail(RuleCommit, ev, ev.Group, ev.Epoch, ev.Seq, "seq %d committed again after %d", ev.Seq, st.commit)
			continue
		case ev.Seq != st.commit+1:
			c.fail(RuleCommit, ev, ev.Group, ev.Epoch, ev.Seq, "seq %d committed after %d, want %d", ev.Seq, st.commit, st.commit+1)
		}
		if p, ok := c.delivered[key{ev.Group, ev.Epoch, ev.Seq}]; ok && p != ev.Payload {
			c.fail(RulePayload, ev, ev.Group, ev.Epoch, ev.Seq, "committed payload %s, delivered %s", ev.Payload, p)
		}
		st.commit = ev.Seq
		c.rep.Committed++
	}
}

// stall describes where the group's deliveries stopped, to point at the
// cause of a loss: the first seq never delivered and what the senders
// recorded about it.
func (c *checker) stall(k key) string {
	st := c.groups[k.group]
	if st == nil || st.epoch != k.epoch {
		return " (nothing of its epoch was delivered)"
	}
	first := uint64(1)
	for c.delivered[key{k.group, k.epoch, first}] != "" || c.lostSeqs[key{k.group, k.epoch, first}] {
		first++
	}
	if first >= k.seq {
		return ""
	}
	what := "no Send recorded it"
	if ev := c.sent[key{k.group, k.epoch, first}]; ev != nil {
		what = "sent at " + ev.Pos()
	}
	return fmt.Sprintf("; the group's deliveries stop before seq %d (%s)", first, what)
}

// payloadOrder parses the admission order of a payload id
// "<proc>.<inc>.<group index>.<n>": (inc, n) within its sender.
func payloadOrder(id string) (proc string, inc, n int, ok bool) {
	parts := strings.Split(id, ".")
	if len(parts) != 4 {
		return "", 0, 0, false
	}
	i, err1 := strconv.Atoi(parts[1])
	m, err2 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return parts[0], i, m, true
}

func (c *checker) final() {
	// Every successful Send delivered with its payload.
	keys := make([]key, 0, len(c.sent))
	for k := range c.sent {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.group != b.group {
			return a.group < b.group
		}
		if a.epoch != b.epoch {
			return a.epoch < b.epoch
		}
		return a.seq < b.seq
	})
	for _, k := range keys {
		ev := c.sent[k]
		p, ok := c.delivered[k]
		switch {
		case !ok && c.lostSeqs[k]:
		case !ok:
			c.fail(RuleLost, ev, k.group, k.epoch, k.seq, "Send returned nil but the message was never delivered%s", c.stall(k))
		case p != ev.Payload:
			c.fail(RulePayload, ev, k.group, k.epoch, k.seq, "sent payload %s, delivered %s", ev.Payload, p)
		}
		if c.cfg.Mode == ModeExactlyOnce && ok {
			if st := c.groups[k.group]; st == nil || st.epoch != k.epoch || st.commit < k.seq {
				c.fail(RuleLost, ev, k.group, k.epoch, k.seq, "Send returned nil but the message was never committed")
			}
		}
	}
	// Seqs passed over at a crash that no Send with a known seq claims may
	// be those of SendBatch payloads.
	unclaimed := map[string]int{}
	for k := range c.lostSeqs {
		if _, ok := c.sent[k]; !ok {
			unclaimed[k.group]++
		}
	}
	for _, ev := range c.sentNoSeq {
		k, ok := c.byPayload[ev.Payload]
		switch {
		case !ok && unclaimed[ev.Group] > 0:
			unclaimed[ev.Group]--
		case !ok:
			c.fail(RuleLost, ev, ev.Group, 0, 0, "SendBatch returned nil but payload %s was never delivered", ev.Payload)
		case k.group != ev.Group:
			c.fail(RulePayload, ev, ev.Group, k.epoch, k.seq, "payload sent to group %q delivered in group %q", ev.Group, k.group)
		case c.cfg.Mode == ModeExactlyOnce:
			if st := c.groups[k.group]; st == nil || st.epoch != k.epoch || st.commit < k.seq {
				c.fail(RuleLost, ev, k.group, k.epoch, k.seq, "SendBatch returned nil but the message was never committed")
			}
		}
	}
	// Delivered payloads were attempted, and seqs follow admission order.
	type item struct {
		seq    uint64
		inc, n int
		id     string
	}
	byStream := map[[2]string][]item{} // (group, sender) -> items
	streamEpoch := map[[2]string]uint64{}
	add := func(k key, id string) {
		proc, inc, n, ok := payloadOrder(id)
		if !ok {
			c.fail(RulePayload, nil, k.group, k.epoch, k.seq, "payload id %q is not <proc>.<inc>.<group>.<n>", id)
			return
		}
		sk := [2]string{k.group, proc}
		if e, seen := streamEpoch[sk]; seen && e != k.epoch {
			return // epochs are compared on the receive side
		}
		streamEpoch[sk] = k.epoch
		byStream[sk] = append(byStream[sk], item{k.seq, inc, n, id})
	}
	dkeys := make([]key, 0, len(c.delivered))
	for k := range c.delivered {
		dkeys = append(dkeys, k)
	}
	sort.Slice(dkeys, func(i, j int) bool {
		return dkeys[i].seq < dkeys[j].seq || dkeys[i].seq == dkeys[j].seq && dkeys[i].group < dkeys[j].group
	})
	for _, k := range dkeys {
		id := c.delivered[k]
		if len(c.attempts) > 0 {
			if _, ok := c.attempts[id]; !ok {
				c.fail(RulePayload, nil, k.group, k.epoch, k.seq, "delivered payload %s was never attempted", id)
			}
		}
		add(k, id)
	}
	for _, k := range keys {
		if _, ok := c.delivered[k]; !ok {
			add(k, c.sent[k].Payload)
		}
	}
	sks := make([][2]string, 0, len(byStream))
	for sk := range byStream {
		sks = append(sks, sk)
	}
	sort.Slice(sks, func(i, j int) bool { return sks[i][0] < sks[j][0] || sks[i][0] == sks[j][0] && sks[i][1] < sks[j][1] })
	for _, sk := range sks {
		items := byStream[sk]
		sort.Slice(items, func(i, j int) bool { return items[i].seq < items[j].seq })
		for i := 1; i < len(items); i++ {
			a, b := items[i-1], items[i]
			if b.inc < a.inc || b.inc == a.inc && b.n <= a.n {
				c.fail(RuleSendOrder, nil, sk[0], streamEpoch[sk], b.seq, "payload %s has seq %d after payload %s at seq %d, but was admitted before it", b.id, b.seq, a.id, a.seq)
				break
			}
		}
	}
	if c.cfg.Leftover > 0 {
		c.fail(RuleLeftover, nil, "", 0, 0, "%d messages left in the queue", c.cfg.Leftover)
	}
}
