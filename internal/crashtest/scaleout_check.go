package crashtest

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"time"
)

// Rules of CheckScaleOut, besides RuleOrder, RuleGap, RuleDuplicate,
// RuleEpoch, RuleLost, RulePayload and RuleLeftover.
const (
	// RuleExclusion: a delivery of a group began while another delivery of
	// the group was open, and the open one's process was not stopped
	// (SIGSTOP) while it was open.
	RuleExclusion = "exclusion"
	// RuleFence: the store accepted a write (a claim or an advance) with a
	// token below that of a claim of the same cursor that had returned
	// before the write began.
	RuleFence = "fence"
	// RuleStale: a delivery with a token below that of a claim of its
	// group that had returned before the delivery began: a receiver
	// handed out a message of a shard it had lost.
	RuleStale = "stale"
	// RuleLiveness: a group's last message was handled later than
	// ScaleConfig.Liveness after the last fault (or after it was sent).
	RuleLiveness = "liveness"
	// RuleMatch: a done without an open delivery of its message in its
	// incarnation (a broken history).
	RuleMatch = "match"
)

// ScaleConfig says what CheckScaleOut expects of a scale-out run.
type ScaleConfig struct {
	// Leftover is how many messages the shard queues held at the end.
	Leftover int
	// Cursors are the groups' cursors (next seq) read from the store
	// after every receiver stopped; nil skips the rule that they passed
	// every message sent.
	Cursors map[string]uint64
	// LastFault is when the last fault ended (a SIGCONT, a heal, a
	// restart); zero: the last fault event of the harness's history.
	LastFault time.Time
	// Liveness bounds how long after max(LastFault, its send) a group's
	// last message may be handled (TTL + visibility + 10 s); zero skips
	// the rule.
	Liveness time.Duration
	// ResumeGrace exempts, from the exclusion and stale-delivery rules, a
	// delivery that began within ResumeGrace after its process was
	// continued from a SIGSTOP (counted in ScaleReport.StaleAfterResume):
	// ordered/scaleout hands out messages of shards it lost between the
	// SIGCONT and its keeper's fence (a finding, see
	// scaleout_finding_test.go). Zero exempts none.
	ResumeGrace time.Duration
	// MaxViolations bounds how many violations are collected (default 100).
	MaxViolations int
}

// ScaleReport is CheckScaleOut's verdict and the run's figures.
type ScaleReport struct {
	Violations []Violation
	Truncated  bool

	Groups       int
	Incarnations int // receiver incarnations
	Sent         int
	Deliveries   int
	Duplicates   int // deliveries of a message delivered before
	Overlaps     int // deliveries that began while a stopped process had one of the group open (allowed)
	// StaleAfterResume counts deliveries that broke the exclusion or the
	// stale-delivery rule within ScaleConfig.ResumeGrace after their
	// process's SIGCONT, and were let through.
	StaleAfterResume int
	Claims           int
	Commits          int
	Refused          int // writes the store refused (ErrFenced, ErrConflict)
	Acquires         int
	Fences           int // leases lost (fence changes)
	Revokes          int
	Faults           map[string]int
	// WorstFinish is the longest time from max(last fault, send) to the
	// handling of a group's last message.
	WorstFinish time.Duration
	// StoreOps is store calls per second per receiver, over the
	// receivers' recorded lifetimes.
	StoreOps float64
}

// OK reports whether no rule was broken.
func (r *ScaleReport) OK() bool { return len(r.Violations) == 0 }

// First returns the first violation, or nil.
func (r *ScaleReport) First() *Violation {
	if len(r.Violations) == 0 {
		return nil
	}
	return &r.Violations[0]
}

// Figures returns the run's figures on one line.
func (r *ScaleReport) Figures() string {
	return fmt.Sprintf("groups %d, receiver incarnations %d, sent %d, deliveries %d (duplicates %d, overlaps with a stopped owner %d, stale right after a SIGCONT %d), claims %d, commits %d (writes refused %d), acquires %d, fences %d, revokes %d, faults %v, worst finish %v, store ops %.1f/s per receiver, violations %d",
		r.Groups, r.Incarnations, r.Sent, r.Deliveries, r.Duplicates, r.Overlaps, r.StaleAfterResume, r.Claims, r.Commits, r.Refused, r.Acquires, r.Fences, r.Revokes,
		r.Faults, r.WorstFinish.Round(time.Millisecond), r.StoreOps, len(r.Violations))
}

// incKey names one incarnation of one process.
type incKey struct {
	proc string
	inc  int
}

// span is a stretch of time [from, to) in Unix nanoseconds.
type span struct{ from, to int64 }

const never = int64(1<<63 - 1)

// delivery is one hand-out to a handler, from its KindDelivered to its
// KindDone (or the end of its process).
type delivery struct {
	who        incKey
	ev         *Event
	begin, end int64
	done       bool // ended by a KindDone
}

// scaleChecker holds what CheckScaleOut assembles from the histories.
type scaleChecker struct {
	cfg   ScaleConfig
	rep   *ScaleReport
	plant string

	exit    map[incKey]int64  // when the incarnation ended (killed, exited)
	stops   map[incKey][]span // its SIGSTOP..SIGCONT spans
	deliv   map[string][]*delivery
	claims  map[string][]*Event
	writes  map[string][]*Event // claims and commits
	sent    map[key]*Event
	noSeq   []*Event
	lastHar int64
}

// CheckScaleOut checks the histories of a scale-out run (as Load returns
// them: senders, receivers and the harness's faults) and returns the
// violations, first found first, and the run's figures. Times are the
// events' T: one host's wall clock, shared by every process.
//
// A delivery of message (g, k) is open from its KindDelivered to its
// KindDone in the same incarnation, or to the incarnation's end (a
// SIGKILL, an exit) when it has none. The rules:
//   - exclusion: no delivery of g begins while another delivery of g is
//     open, unless the open one's process was stopped (SIGSTOP) at some
//     time while it was open: a lease cannot stop a paused process's
//     handler, so such overlaps are allowed and counted (Overlaps);
//   - order: the first delivery of (g, k), k > 1, begins after some
//     delivery of (g, k-1) ended with KindDone (RuleOrder; RuleGap when
//     k-1 was never handled), and a group has one epoch;
//   - duplicates: a message is delivered again only with a token above
//     every token it was delivered with before (RuleDuplicate for an equal
//     token, RuleStale for a lower one), and never after a commit of its
//     group past it with a token not above the delivery's had returned
//     (RuleDuplicate);
//   - stale delivery: no delivery of g with token t begins after a claim
//     of g with a token above t returned (RuleStale): the claimant holds a
//     newer lease of the shard, so the older one was lost and its owner
//     must deliver nothing more of it. With cfg.ResumeGrace, deliveries
//     that break this rule or exclusion within ResumeGrace after their
//     process's SIGCONT are counted (StaleAfterResume), not reported;
//   - fencing: the store accepts no write (claim or advance) of g's
//     cursor with token t that began (T0) after a claim of g with a token
//     above t had returned (T): the store linearizes the two, and the
//     claim's token must refuse the later write (RuleFence);
//   - no loss: every message a Send returned nil for was handled
//     (KindDone) with its payload (RuleLost, RulePayload), the final
//     cursor of its group is past it (RuleLost), and the queues are empty
//     at the end (RuleLeftover);
//   - liveness: each group's last message is handled within
//     cfg.Liveness of the later of the last fault and its send
//     (RuleLiveness).
func CheckScaleOut(hs []*History, cfg ScaleConfig) *ScaleReport {
	if cfg.MaxViolations <= 0 {
		cfg.MaxViolations = 100
	}
	c := &scaleChecker{cfg: cfg, rep: &ScaleReport{Faults: map[string]int{}}, plant: os.Getenv("INORDER_SCALEOUT_PLANT"),
		exit: map[incKey]int64{}, stops: map[incKey][]span{}, deliv: map[string][]*delivery{},
		claims: map[string][]*Event{}, writes: map[string][]*Event{}, sent: map[key]*Event{}}
	hs = slices.Clone(hs)
	SortHistories(hs)
	for _, h := range hs {
		if h.Role == RoleHarness {
			c.harness(h)
		}
	}
	var opsN, opsDur float64
	for _, h := range hs {
		switch h.Role {
		case RoleScaleSend, RoleSend:
			c.sender(h)
		case RoleScaleRecv:
			c.rep.Incarnations++
			n, d := c.receiver(h)
			opsN, opsDur = opsN+n, opsDur+d
		}
	}
	if opsDur > 0 {
		c.rep.StoreOps = opsN / opsDur
	}
	groups := make([]string, 0, len(c.deliv))
	for g := range c.deliv {
		groups = append(groups, g)
	}
	for k := range c.sent {
		if _, ok := c.deliv[k.group]; !ok {
			c.deliv[k.group] = nil
			groups = append(groups, k.group)
		}
	}
	sort.Strings(groups)
	c.rep.Groups = len(groups)
	handled := map[key]int64{} // first KindDone of each message
	payloads := map[key]string{}
	for _, g := range groups {
		c.group(g, handled, payloads)
	}
	c.fences(groups)
	c.final(handled, payloads)
	return c.rep
}

func (c *scaleChecker) fail(rule string, ev *Event, g string, epoch, seq uint64, format string, args ...any) {
	if c.plant == "off-"+rule {
		return // planted: the rule is disabled (INORDER_SCALEOUT_PLANT)
	}
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

func (c *scaleChecker) harness(h *History) {
	open := map[incKey]int64{} // stopped since
	for i := range h.Events {
		ev := &h.Events[i]
		who := incKey{ev.Target, ev.TInc}
		switch ev.Kind {
		case KindStop:
			open[who] = ev.T
		case KindCont:
			if from, ok := open[who]; ok {
				c.stops[who] = append(c.stops[who], span{from, ev.T})
				delete(open, who)
			}
		case KindKill, KindExit:
			if e, ok := c.exit[who]; !ok || ev.T < e {
				c.exit[who] = ev.T
			}
		}
		switch ev.Kind {
		case KindKill, KindStop, KindTerm, KindCut, KindJoin:
			c.rep.Faults[ev.Kind]++
		}
		if ev.Kind != KindExit && ev.T > c.lastHar {
			c.lastHar = ev.T
		}
	}
	for who, from := range open { // stopped until it was killed
		c.stops[who] = append(c.stops[who], span{from, never})
	}
}

func (c *scaleChecker) sender(h *History) {
	for i := range h.Events {
		ev := &h.Events[i]
		if ev.Kind != KindSent {
			continue
		}
		c.rep.Sent++
		if ev.Seq == 0 {
			c.noSeq = append(c.noSeq, ev)
			continue
		}
		k := key{ev.Group, ev.Epoch, ev.Seq}
		if prev, dup := c.sent[k]; dup {
			c.fail(RulePayload, ev, ev.Group, ev.Epoch, ev.Seq, "seq returned by two Sends (first %s at %s)", prev.Payload, prev.Pos())
			continue
		}
		c.sent[k] = ev
	}
}

// receiver collects one incarnation's deliveries and writes; it returns
// its store-call count and the seconds it covers.
func (c *scaleChecker) receiver(h *History) (ops, secs float64) {
	who := incKey{h.Proc, h.Inc}
	end, killed := c.exit[who]
	if !killed {
		end = never
	}
	type openKey struct {
		key
		token uint64
	}
	open := map[openKey]*delivery{}
	var first, lastOps int64
	for i := range h.Events {
		ev := &h.Events[i]
		if first == 0 {
			first = ev.T
		}
		switch ev.Kind {
		case KindDelivered:
			if ev.Unordered {
				continue
			}
			// A delivery without its end stays open until the process
			// ends.
			d := &delivery{who: who, ev: ev, begin: ev.T, end: end}
			open[openKey{key{ev.Group, ev.Epoch, ev.Seq}, ev.Token}] = d
			c.deliv[ev.Group] = append(c.deliv[ev.Group], d)
		case KindDone:
			k := openKey{key{ev.Group, ev.Epoch, ev.Seq}, ev.Token}
			d := open[k]
			if d == nil {
				c.fail(RuleMatch, ev, ev.Group, ev.Epoch, ev.Seq, "handler end without its delivery in this incarnation")
				continue
			}
			d.end, d.done = ev.T, true
			delete(open, k)
		case KindClaim, KindCommit:
			if ev.Err != "" {
				c.rep.Refused++ // the store refused it (ErrFenced, ErrConflict)
				continue
			}
			if ev.Kind == KindCommit {
				c.rep.Commits++
				c.writes[ev.Group] = append(c.writes[ev.Group], ev)
				continue
			}
			c.rep.Claims++
			c.claims[ev.Group] = append(c.claims[ev.Group], ev)
			c.writes[ev.Group] = append(c.writes[ev.Group], ev)
		case KindAcquire:
			c.rep.Acquires++
		case KindFence:
			c.rep.Fences++
		case KindRevoke:
			c.rep.Revokes++
		case KindOps:
			ops, lastOps = float64(ev.Seq), ev.T
		}
	}
	if lastOps > first {
		secs = float64(lastOps-first) / 1e9
	}
	return ops, secs
}

// resumedBefore reports whether who was continued from a SIGSTOP within
// cfg.ResumeGrace before t.
func (c *scaleChecker) resumedBefore(who incKey, t int64) bool {
	if c.cfg.ResumeGrace <= 0 {
		return false
	}
	for _, s := range c.stops[who] {
		// A stopped process writes nothing: an event inside the span
		// (which the harness records a little wider than the stop) came
		// after the SIGCONT.
		if s.from <= t && t-s.to <= int64(c.cfg.ResumeGrace) {
			return true
		}
	}
	return false
}

// stoppedDuring reports whether who was stopped at some time in [from, to].
func (c *scaleChecker) stoppedDuring(who incKey, from, to int64) bool {
	for _, s := range c.stops[who] {
		if s.from <= to && s.to >= from {
			return true
		}
	}
	return false
}

// group checks one group's deliveries: exclusion, order, duplicates and
// stale deliveries.
func (c *scaleChecker) group(g string, handled map[key]int64, payloads map[key]string) {
	ds := c.deliv[g]
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].begin < ds[j].begin })
	claims := c.claims[g]
	sort.SliceStable(claims, func(i, j int) bool { return claims[i].T < claims[j].T })
	commits := []*Event{}
	for _, w := range c.writes[g] {
		if w.Kind == KindCommit {
			commits = append(commits, w)
		}
	}
	sort.SliceStable(commits, func(i, j int) bool { return commits[i].T < commits[j].T })

	var epoch uint64
	var active []*delivery
	doneAt := map[uint64]int64{}  // seq -> first KindDone
	maxTok := map[uint64]uint64{} // seq -> highest token delivered with
	ci, cl := 0, 0
	var topClaim uint64              // highest token of the claims returned so far
	committed := map[uint64]uint64{} // token -> highest next committed with it, so far
	for _, d := range ds {
		ev, s := d.ev, d.ev.Seq
		c.rep.Deliveries++
		for cl < len(claims) && claims[cl].T < d.begin {
			topClaim = max(topClaim, claims[cl].Token)
			cl++
		}
		for ci < len(commits) && commits[ci].T < d.begin {
			committed[commits[ci].Token] = max(committed[commits[ci].Token], commits[ci].Seq)
			ci++
		}
		switch {
		case epoch == 0:
			epoch = ev.Epoch
		case ev.Epoch != epoch:
			c.fail(RuleEpoch, ev, g, ev.Epoch, s, "epoch %d after epoch %d (one sender epoch per group in this harness)", ev.Epoch, epoch)
			continue
		}
		// Exclusion.
		live := active[:0]
		for _, a := range active {
			if a.end > d.begin {
				live = append(live, a)
			}
		}
		active = live
		resumed := c.resumedBefore(d.who, d.begin)
		excused := false
		for _, a := range active {
			switch {
			case c.stoppedDuring(a.who, a.begin, d.begin):
				c.rep.Overlaps++
			case resumed:
				excused = true
			default:
				c.fail(RuleExclusion, ev, g, ev.Epoch, s, "began while %s/%d's delivery of seq %d (token %d, since %s) was open and its process was not stopped",
					a.who.proc, a.who.inc, a.ev.Seq, a.ev.Token, a.ev.Pos())
			}
		}
		active = append(active, d)
		// Stale: a newer lease claimed the group, or delivered the
		// message, before this began.
		prev, again := maxTok[s]
		switch {
		case topClaim <= ev.Token && (!again || prev <= ev.Token):
		case resumed:
			excused = true
		case topClaim > ev.Token:
			c.fail(RuleStale, ev, g, ev.Epoch, s, "delivered with token %d after a claim of the group with token %d returned", ev.Token, topClaim)
		default:
			c.fail(RuleStale, ev, g, ev.Epoch, s, "delivered again with token %d after a delivery with token %d", ev.Token, prev)
		}
		if excused {
			c.rep.StaleAfterResume++
		}
		// Order, and duplicates.
		if again {
			c.rep.Duplicates++
			if ev.Token == prev {
				c.fail(RuleDuplicate, ev, g, ev.Epoch, s, "delivered again with the same token %d", ev.Token)
			}
		} else if s > 1 {
			if at, ok := doneAt[s-1]; !ok {
				c.fail(RuleGap, ev, g, ev.Epoch, s, "first delivery of seq %d before seq %d was ever handled", s, s-1)
			} else if at > d.begin {
				c.fail(RuleOrder, ev, g, ev.Epoch, s, "first delivery of seq %d began before any delivery of seq %d ended", s, s-1)
			}
		}
		for tok, next := range committed {
			if tok <= ev.Token && next > s {
				c.fail(RuleDuplicate, ev, g, ev.Epoch, s, "delivered with token %d after a commit past it (next %d, token %d) returned", ev.Token, next, tok)
				break
			}
		}
		maxTok[s] = max(maxTok[s], ev.Token)
		if d.done {
			if at, ok := doneAt[s]; !ok || d.end < at {
				doneAt[s] = d.end
			}
		}
		k := key{g, ev.Epoch, s}
		if p, ok := payloads[k]; ok && p != ev.Payload {
			c.fail(RulePayload, ev, g, ev.Epoch, s, "delivered with payload %s before, now %s", p, ev.Payload)
		}
		payloads[k] = ev.Payload
	}
	for s, at := range doneAt {
		handled[key{g, epoch, s}] = at
	}
}

// fences checks that no write with a token below a claim's began after
// that claim returned.
func (c *scaleChecker) fences(groups []string) {
	for _, g := range groups {
		claims := c.claims[g]
		sort.SliceStable(claims, func(i, j int) bool { return claims[i].T < claims[j].T })
		ws := c.writes[g]
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].T0 < ws[j].T0 })
		cl := 0
		var top *Event
		for _, w := range ws {
			for cl < len(claims) && claims[cl].T < w.T0 {
				if top == nil || claims[cl].Token > top.Token {
					top = claims[cl]
				}
				cl++
			}
			if top != nil && w.Token < top.Token {
				c.fail(RuleFence, w, g, w.Epoch, w.Seq, "the store accepted a %s with token %d that began after a claim with token %d had returned (%s)",
					w.Kind, w.Token, top.Token, top.Pos())
			}
		}
	}
}

func (c *scaleChecker) final(handled map[key]int64, payloads map[key]string) {
	keys := make([]key, 0, len(c.sent))
	for k := range c.sent {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.group != b.group {
			return a.group < b.group
		}
		return a.seq < b.seq
	})
	last := map[string]key{} // the last seq sent per group
	byPayload := map[string]key{}
	for k, p := range payloads {
		byPayload[p] = k
	}
	for _, k := range keys {
		ev := c.sent[k]
		if _, ok := handled[k]; !ok {
			c.fail(RuleLost, ev, k.group, k.epoch, k.seq, "Send returned nil but no receiver handled the message")
		} else if p := payloads[k]; p != ev.Payload {
			c.fail(RulePayload, ev, k.group, k.epoch, k.seq, "sent payload %s, delivered %s", ev.Payload, p)
		}
		if c.cfg.Cursors != nil && c.cfg.Cursors[k.group] <= k.seq {
			c.fail(RuleLost, ev, k.group, k.epoch, k.seq, "the group's final cursor (next %d) is not past the message", c.cfg.Cursors[k.group])
		}
		if l, ok := last[k.group]; !ok || k.seq > l.seq {
			last[k.group] = k
		}
	}
	for _, ev := range c.noSeq {
		k, ok := byPayload[ev.Payload]
		if !ok {
			c.fail(RuleLost, ev, ev.Group, 0, 0, "SendBatch returned nil but payload %s was never delivered", ev.Payload)
			continue
		}
		if _, ok := handled[k]; !ok {
			c.fail(RuleLost, ev, k.group, k.epoch, k.seq, "SendBatch returned nil but no receiver handled payload %s", ev.Payload)
		}
	}
	base := c.lastHar
	if !c.cfg.LastFault.IsZero() {
		base = c.cfg.LastFault.UnixNano()
	}
	groups := make([]string, 0, len(last))
	for g := range last {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		k := last[g]
		at, ok := handled[k]
		if !ok {
			continue // lost, reported above
		}
		from := max(base, c.sent[k].T)
		took := time.Duration(at - from)
		c.rep.WorstFinish = max(c.rep.WorstFinish, took)
		if c.cfg.Liveness > 0 && took > c.cfg.Liveness {
			c.fail(RuleLiveness, c.sent[k], g, k.epoch, k.seq, "the group's last message was handled %v after the later of the last fault and its send, over the bound %v",
				took.Round(time.Millisecond), c.cfg.Liveness)
		}
	}
	if c.cfg.Leftover > 0 {
		c.fail(RuleLeftover, nil, "", 0, 0, "%d messages left in the shard queues", c.cfg.Leftover)
	}
}

// Failover is how long the shards of a receiver that was killed or
// stopped took to deliver again from another incarnation.
type Failover struct {
	Fault  string // KindKill or KindTerm
	Target string
	Shard  int
	// Acquired is the time from the fault to the shard's next acquire by
	// another incarnation; Delivered to its first delivery there.
	Acquired, Delivered time.Duration
}

// Failovers measures, for each SIGKILL and SIGTERM the harness sent to a
// receiver, each shard that receiver's incarnation owned at that moment:
// the time to the shard's next acquire and first delivery by another
// incarnation (the restarted member counts as another). Shards with no
// delivery after the fault are left out.
func Failovers(hs []*History) []Failover {
	recv := map[incKey]*History{}
	type shardEvent struct {
		who incKey
		t   int64
	}
	acquires := map[int][]shardEvent{}
	begins := map[int][]shardEvent{}
	var faults []*Event
	for _, h := range hs {
		switch h.Role {
		case RoleScaleRecv:
			who := incKey{h.Proc, h.Inc}
			recv[who] = h
			for i := range h.Events {
				ev := &h.Events[i]
				switch ev.Kind {
				case KindAcquire:
					acquires[ev.Shard] = append(acquires[ev.Shard], shardEvent{who, ev.T})
				case KindDelivered:
					begins[ev.Shard] = append(begins[ev.Shard], shardEvent{who, ev.T})
				}
			}
		case RoleHarness:
			for i := range h.Events {
				if ev := &h.Events[i]; ev.Kind == KindKill || ev.Kind == KindTerm {
					faults = append(faults, ev)
				}
			}
		}
	}
	for _, l := range []map[int][]shardEvent{acquires, begins} {
		for _, es := range l {
			sort.Slice(es, func(i, j int) bool { return es[i].t < es[j].t })
		}
	}
	next := func(es []shardEvent, who incKey, after int64) (int64, bool) {
		i := sort.Search(len(es), func(i int) bool { return es[i].t > after })
		for ; i < len(es); i++ {
			if es[i].who != who {
				return es[i].t, true
			}
		}
		return 0, false
	}
	var out []Failover
	for _, f := range faults {
		who := incKey{f.Target, f.TInc}
		h := recv[who]
		if h == nil {
			continue
		}
		owned := map[int]bool{}
		for _, ev := range h.Events {
			if ev.T > f.T {
				break
			}
			switch ev.Kind {
			case KindAcquire:
				owned[ev.Shard] = true
			case KindFence, KindRevoke, KindDrained:
				delete(owned, ev.Shard)
			}
		}
		shards := make([]int, 0, len(owned))
		for s := range owned {
			shards = append(shards, s)
		}
		sort.Ints(shards)
		for _, s := range shards {
			d, ok := next(begins[s], who, f.T)
			if !ok {
				continue
			}
			fo := Failover{Fault: f.Kind, Target: f.Target, Shard: s, Delivered: time.Duration(d - f.T)}
			if a, ok := next(acquires[s], who, f.T); ok {
				fo.Acquired = time.Duration(a - f.T)
			}
			out = append(out, fo)
		}
	}
	return out
}
