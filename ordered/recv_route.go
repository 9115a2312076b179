package ordered

import (
	"context"
	"slices"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/reorder"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore"
)

// fetchLoop long-polls the driver and routes what arrives. It pauses while
// the ready ring is long (the application is behind), so that memory holds
// what the application can take soon.
func (r *receiver) fetchLoop() {
	ctx := r.fetchCtx
	failures, useless, probes := 0, 0, 0
	for ctx.Err() == nil {
		if !r.waitRoom(ctx) {
			return
		}
		// Much held and nothing deliverable: the missing message may be
		// in the queue, so keep fetching, but slowly, so as not to run far
		// beyond the window while it comes.
		if r.probing() {
			probes++
			if !sleepCtx(ctx, min(r.q.opts.Retry.backoff(probes), maxProbeDelay)) {
				return
			}
		} else {
			probes = 0
		}
		msgs, err := r.q.drvReceive(ctx, r.q.limits.MaxBatch, r.o.Wait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			r.log.WarnContext(ctx, "ordered: receive failed", "err", err, "failures", failures)
			if !sleepCtx(ctx, r.q.opts.Retry.backoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		if len(msgs) == 0 {
			continue
		}
		// A batch of which nothing could be kept (all beyond the window
		// or the byte bound) means fetching runs ahead of delivery: back
		// off instead of making the whole queue invisible.
		if r.arrive(ctx, msgs) {
			useless = 0
		} else {
			useless++
			if !sleepCtx(ctx, min(r.q.opts.Retry.backoff(useless), maxProbeDelay)) {
				return
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *receiver) waitRoom(ctx context.Context) bool {
	for {
		r.mu.Lock()
		// Pause while the application has plenty to take (groups ready,
		// messages deliverable), and while much is held and something is
		// still moving: fetching far ahead of delivery only brings messages
		// beyond the window, which then stay invisible for a whole
		// visibility timeout. When nothing moves, fetch anyway: the missing
		// message that unblocks everything may be in the queue.
		n := r.ring.len()
		moving := n > 0 || r.readyMsg > 0 || len(r.out) > 0
		full := n >= r.highWater || r.readyMsg >= r.readyHigh ||
			moving && (r.bufMsgs >= r.holdHigh || r.bufBytes >= r.o.MaxBufferedBytes)
		r.mu.Unlock()
		if !full {
			signal(r.room) // pass the baton to another waiting fetcher
			return true
		}
		select {
		case <-r.room:
		case <-ctx.Done():
			return false
		}
	}
}

// maxProbeDelay caps the pauses of a fetcher that runs ahead of delivery:
// long enough to let a missing message arrive through another fetch, short
// enough not to delay a hole's filling when the queue holds a backlog.
const maxProbeDelay = 5 * time.Millisecond

func (r *receiver) probing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bufMsgs >= r.holdHigh && r.ring.len() == 0 && r.readyMsg == 0 && len(r.out) == 0
}

// deadItem is a message to send to the dead-letter queue.
type deadItem struct {
	e       *entry
	group   string
	reason  error
	poison  bool // a poison message of a group: settle it as an Ack would
	settled bool // AtMostOnce: already committed
}

// arrive decodes a batch from the driver and routes each message.
func (r *receiver) arrive(ctx context.Context, msgs []*driver.Message) (useful bool) {
	type decoded struct {
		e     *entry
		group string
		ok    bool
	}
	ds := make([]decoded, len(msgs))
	for i, m := range msgs {
		h, payload, ok := envelope.Parse(m.Body)
		e := &entry{
			body: m.Body, payload: payload, id: m.ID, receipt: m.Receipt, dequeue: m.DequeueCount,
			nextVisible: m.NextVisible, size: len(m.Body), redelivered: m.DequeueCount > 1,
		}
		if ok {
			e.epoch, e.seq = h.Epoch, h.Seq
		} else {
			e.payload = m.Body
		}
		ds[i] = decoded{e: e, group: h.Group, ok: ok}
	}
	var load []*group
	var dead []deadItem
	r.mu.Lock()
	now := time.Now()
	notKept := r.st.NotKept
	for _, d := range ds {
		e := d.e
		r.st.Received++
		if e.redelivered {
			r.st.Redelivered++
			if r.hooks.OnRedeliver != nil {
				r.hooks.OnRedeliver(Event{Group: d.group, Epoch: e.epoch, Seq: e.seq, ID: e.id, DequeueCount: e.dequeue})
			}
		}
		if !d.ok {
			r.untaggedLocked(e, &dead)
			continue
		}
		g := r.groups[d.group]
		if g == nil {
			g = &group{name: d.group, flags: gLoading}
			r.groups[d.group] = g
			load = append(load, g)
		} else if g.has(gIdle) {
			r.idle.remove(g)
			g.clear(gIdle)
		}
		if g.has(gLoading) {
			x := g.extra()
			if i := indexOf(x.waiting, e); i >= 0 {
				r.swapLocked(x.waiting[i], e)
			} else if len(x.waiting) < r.o.Window && r.canHold(e) {
				x.waiting = append(x.waiting, e)
				r.holdLocked(e)
			} else {
				r.st.NotKept++
			}
			continue
		}
		r.routeLocked(g, e, now, &dead)
	}
	useful = r.st.NotKept-notKept < int64(len(ds))
	r.mu.Unlock()
	if len(load) > 0 {
		r.load(ctx, load)
	}
	if len(dead) > 0 {
		r.deadLetter(ctx, dead)
	}
	return useful
}

func indexOf(es []*entry, e *entry) int {
	return slices.IndexFunc(es, func(o *entry) bool { return o.epoch == e.epoch && o.seq == e.seq })
}

// load reads the cursors of new groups (one store call; a stream that
// fails, corrupt say, fails alone) and routes the arrivals that waited for
// them.
func (r *receiver) load(ctx context.Context, gs []*group) {
	streams := make([]seqstore.Stream, len(gs))
	for i, g := range gs {
		streams[i] = r.streamOf(g)
	}
	curs, err := r.q.storeCursors(ctx, streams)
	errs := make([]error, len(gs))
	for i := range gs {
		errs[i] = seqstore.Failed(err, i, len(gs))
	}
	var dead []deadItem
	r.mu.Lock()
	now := time.Now()
	for i, g := range gs {
		var waiting []*entry
		if g.x != nil {
			waiting, g.x.waiting = g.x.waiting, nil
		}
		for _, e := range waiting {
			r.unholdLocked(e)
		}
		if errs[i] != nil {
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "ordered: read cursor", "group", g.name, "err", errs[i])
			}
			// Forget the group: its messages were not deleted and come back.
			delete(r.groups, g.name)
			g.set(gEvicted)
			continue
		}
		c := curs[i]
		g.clear(gLoading)
		g.dur, g.ack = c, cloneCursor(c)
		g.epoch, g.next = c.Epoch, max(c.Next, 1)
		if c.Next == 0 {
			g.set(gFresh)
		}
		for _, e := range waiting {
			r.routeLocked(g, e, now, &dead)
		}
		r.updateLocked(g, now)
	}
	r.mu.Unlock()
	if len(dead) > 0 {
		r.deadLetter(ctx, dead)
	}
}

func (r *receiver) canHold(e *entry) bool {
	return r.bufBytes+e.size <= r.o.MaxBufferedBytes
}

func (r *receiver) holdLocked(e *entry) {
	r.bufMsgs++
	r.bufBytes += e.size
	r.st.MaxBuffered = max(r.st.MaxBuffered, r.bufMsgs)
}

func (r *receiver) unholdLocked(e *entry) {
	r.bufMsgs--
	r.bufBytes -= e.size
}

// swapLocked keeps the newest receipt of a message held twice.
func (r *receiver) swapLocked(held, e *entry) {
	held.receipt = e.receipt
	held.nextVisible = e.nextVisible
	held.dequeue = max(held.dequeue, e.dequeue)
	held.redelivered = true
}

// routeLocked applies the routing rules of DESIGN.md "Receiving" to one
// arrival of a loaded group.
func (r *receiver) routeLocked(g *group, e *entry, now time.Time, dead *[]deadItem) {
	e.g = g
	switch {
	case g.has(gConflict | gResolving):
		// The group re-reads its cursor; the message comes back later.
		r.st.NotKept++
	case g.has(gFresh):
		r.freshLocked(g, e, now, dead)
	case e.epoch < g.epoch:
		r.olderLocked(g, e, now, dead)
	case e.epoch > g.epoch:
		r.newerLocked(g, e, now)
	default:
		r.currentLocked(g, e, now, dead)
	}
	r.updateLocked(g, now)
}

// freshLocked handles an arrival for a group without a stored cursor.
func (r *receiver) freshLocked(g *group, e *entry, now time.Time, dead *[]deadItem) {
	if r.o.Start == StartFirst {
		g.clear(gFresh)
		g.epoch, g.next = e.epoch, 1
		r.currentLocked(g, e, now, dead)
		return
	}
	x := g.extra()
	if x.startAt.IsZero() {
		x.startAt = now.Add(r.o.StartSettle)
		x.startEpoch, x.startLow = e.epoch, e.seq
		r.addTimerLocked(timer{at: x.startAt, g: g, kind: tStart})
	} else if e.epoch < x.startEpoch || e.epoch == x.startEpoch && e.seq < x.startLow {
		x.startEpoch, x.startLow = e.epoch, e.seq
	}
	if i := indexOf(x.pending, e); i >= 0 {
		r.swapLocked(x.pending[i], e)
		return
	}
	if len(x.pending) < r.o.Window && r.canHold(e) {
		x.pending = append(x.pending, e)
		r.holdLocked(e)
		return
	}
	r.st.NotKept++
}

// startLocked ends the StartLowest settle time of a fresh group.
func (r *receiver) startLocked(g *group, now time.Time) {
	if !g.has(gFresh) || g.x == nil || g.x.startAt.IsZero() {
		return
	}
	x := g.x
	g.clear(gFresh)
	g.epoch, g.next = x.startEpoch, x.startLow
	g.ack.Epoch, g.ack.Next = x.startEpoch, x.startLow
	if x.startLow > 1 {
		// The seqs below the start were never seen here: one that arrives
		// later is a late arrival (reported, dead-lettered or handed out
		// Unordered), not a duplicate to delete, as the gap policy's
		// skipped ranges are.
		addSkipped(&g.ack, seqstore.Range{Epoch: x.startEpoch, First: 1, Last: x.startLow - 1})
	}
	x.startAt = time.Time{}
	pending := x.pending
	x.pending = nil
	r.markDirtyLocked(g)
	var dead []deadItem
	for _, e := range pending {
		r.unholdLocked(e)
		r.routeLocked(g, e, now, &dead)
	}
	for _, d := range dead { // a start never makes late arrivals; be safe
		r.looseLocked(d.e)
	}
}

// olderLocked handles an arrival of an epoch older than the group's.
func (r *receiver) olderLocked(g *group, e *entry, now time.Time, dead *[]deadItem) {
	if g.ack.Next == 0 && g.out == nil && !g.has(gStarted) {
		// A fresh group adopted the epoch of its first arrival, and an
		// older one shows up before anything was handed out: start with
		// the older epoch, the newer one follows it.
		r.demoteLocked(g, e.epoch, now)
		r.currentLocked(g, e, now, dead)
		return
	}
	// A switch to a newer epoch records Range{old, next, MaxSeq}: seqs of
	// the old epoch below next were handled, the others are late.
	dup := false
	for _, rg := range g.ack.Skipped {
		if rg.Contains(e.epoch, e.seq) {
			r.lateLocked(e, dead)
			return
		}
		if rg.Epoch == e.epoch && rg.Last == seqstore.MaxSeq && e.seq < rg.First {
			dup = true
		}
	}
	if dup {
		r.dupLocked(g, e)
		return
	}
	r.lateLocked(e, dead)
}

// demoteLocked makes a fresh group start with an older epoch: what it holds
// of its current epoch waits as a newer epoch.
func (r *receiver) demoteLocked(g *group, epoch uint64, now time.Time) {
	x := g.extra()
	if g.buf != nil {
		g.buf.Reset(1, func(_ uint64, e *entry) { x.newer = append(x.newer, e) }) // still held
		r.readyMsg -= int(g.run)
		g.run = 0
		g.buf = nil
	}
	if len(x.newer) > 0 && x.newerSince.IsZero() {
		x.newerSince = now
		r.addTimerLocked(timer{at: now.Add(r.o.GapTimeout), g: g, kind: tEpoch})
	}
	g.epoch, g.next = epoch, 1
	x.farLow = 0
	r.clearGapLocked(g)
}

// newerLocked buffers an arrival of a newer epoch until the group switches.
func (r *receiver) newerLocked(g *group, e *entry, now time.Time) {
	x := g.extra()
	if i := indexOf(x.newer, e); i >= 0 {
		r.swapLocked(x.newer[i], e)
		return
	}
	if len(x.newer) >= r.o.Window || !r.canHold(e) {
		r.st.NotKept++
		return
	}
	x.newer = append(x.newer, e)
	r.holdLocked(e)
	if x.newerSince.IsZero() {
		x.newerSince = now
		r.addTimerLocked(timer{at: now.Add(r.o.GapTimeout), g: g, kind: tEpoch})
	}
}

// currentLocked handles an arrival of the group's current epoch.
func (r *receiver) currentLocked(g *group, e *entry, now time.Time, dead *[]deadItem) {
	for _, rg := range g.ack.Skipped {
		if rg.Contains(e.epoch, e.seq) {
			r.lateLocked(e, dead)
			return
		}
	}
	next := g.nextSeq()
	if e.seq < next {
		if o := g.out; o != nil && o.epoch == e.epoch && o.seq == e.seq {
			r.swapLocked(o, e)
			return
		}
		r.dupLocked(g, e)
		return
	}
	if g.buf == nil {
		g.buf = reorder.New[*entry](next, r.o.Window, r.o.MaxBufferedBytes)
	}
	if held, ok := g.buf.Get(e.seq); ok {
		r.swapLocked(held, e)
		return
	}
	if e.seq != next && !r.canHold(e) {
		r.notKeptLocked(g, e)
		return
	}
	switch res, _ := g.buf.Insert(e.seq, e, e.size); res {
	case reorder.Ready, reorder.Buffered:
		r.holdLocked(e)
		r.extendRunLocked(g)
	default:
		r.notKeptLocked(g, e)
	}
}

// notKeptLocked drops an arrival too far ahead from memory: it is not
// deleted, it comes back after its visibility timeout.
func (r *receiver) notKeptLocked(g *group, e *entry) {
	r.st.NotKept++
	if len(r.shortq) < maxShorten {
		r.shortq = append(r.shortq, extension{e: e, receipt: e.receipt})
		signal(r.keeperWake)
	}
	x := g.extra()
	if x.farLow == 0 || e.seq < x.farLow {
		x.farLow = e.seq
	}
}

// dupLocked handles a copy of a message already handed out: it is deleted
// once the cursor past it is durable, and never delivered again.
func (r *receiver) dupLocked(g *group, e *entry) {
	e.dup = true
	r.st.Duplicates++
	if r.hooks.OnDuplicate != nil {
		r.hooks.OnDuplicate(Event{Group: g.name, Epoch: e.epoch, Seq: e.seq, ID: e.id, DequeueCount: e.dequeue})
	}
	if below(g.dur, e.epoch, e.seq) {
		r.reapLocked(e)
		return
	}
	g.unflushed = append(g.unflushed, e)
	r.markDirtyLocked(g)
}

// lateLocked handles a late arrival: dead-lettered if a DLQ is configured,
// else handed out flagged Unordered. Never deleted unseen.
func (r *receiver) lateLocked(e *entry, dead *[]deadItem) {
	r.st.Stale++
	g := e.g
	e.stale = true
	if r.hooks.OnStale != nil {
		r.hooks.OnStale(Event{Group: g.name, Epoch: e.epoch, Seq: e.seq, ID: e.id, DequeueCount: e.dequeue})
	}
	if r.o.DeadLetter != nil {
		e.group = g.name
		*dead = append(*dead, deadItem{e: e, group: g.name, reason: errLate})
		return
	}
	r.looseLocked(e)
}

// untaggedLocked applies the untagged policy.
func (r *receiver) untaggedLocked(e *entry, dead *[]deadItem) {
	r.st.Untagged++
	if r.hooks.OnUntagged != nil {
		r.hooks.OnUntagged(Event{ID: e.id, DequeueCount: e.dequeue})
	}
	switch r.o.Untagged {
	case UntaggedDeliver:
		r.looseLocked(e)
	case UntaggedDeadLetter:
		*dead = append(*dead, deadItem{e: e, reason: errUntagged})
	case UntaggedReject:
		// Left in the queue: it comes back after its visibility timeout.
	}
}

// looseLocked queues an Unordered message for hand-out.
func (r *receiver) looseLocked(e *entry) {
	e.looseGroup()
	r.holdLocked(e)
	r.ring.push(ringItem{e: e})
	signal(r.avail)
}

// looseGroup detaches an Unordered message from its group's order, keeping
// the group's name for the Message.
func (e *entry) looseGroup() {
	if e.g != nil {
		e.group = e.g.name
		e.g = nil
	}
}

// extendRunLocked counts the messages that became deliverable in a row
// after the group's run.
func (r *receiver) extendRunLocked(g *group) {
	next := g.buf.Next()
	for {
		if _, ok := g.buf.Get(next + uint64(g.run)); !ok {
			return
		}
		g.run++
		r.readyMsg++
	}
}

// resetRunLocked recounts the run after the buffer's next moved.
func (r *receiver) resetRunLocked(g *group) {
	r.readyMsg -= int(g.run)
	g.run = 0
	r.extendRunLocked(g)
}
