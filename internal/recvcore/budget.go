package recvcore

import (
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Memory charged per item, beyond the bytes of its bodies and strings. They
// are rounded up from the sizes of the structs, slice slots and map entries
// each item takes (TestMemoryBudget checks the heap against them).
const (
	msgCost   = 320 // the msg struct (240 B), its slot in a list, the headers of its strings' allocations
	groupCost = 448 // the group struct (320 B) and its map entry
	coldCost  = 288 // a working group's groupCold (256 B)
	seenCost  = 160
	slotCost  = 8 // one pointer in a group's slice
)

// budget is what the receiver may hold: memory (Config.MaxMemory), messages
// received and not deleted (Config.MaxHeld, counted as the queue counts
// them), and the rate of receipts not followed by a delete
// (Config.MaxUndeletedRate). The Core's makeRoom and shed keep within it.
type budget struct {
	mem            int // bytes charged
	live, peakLive int // receipts held (messages received and not deleted), now and peak

	// released holds the messages given back to the queue that stay
	// invisible until their time: received and not deleted, for the
	// service. relByID finds one by its message's ID: received again,
	// the message is visible again (its old receipt is stale).
	released relHeap
	relByID  map[string]*relEntry

	undelTokens float64 // receipts that may run ahead of their deletes
	undelAt     time.Time

	// fetchAfter holds the fetchers back after batches of which nothing
	// could be kept (without parking: all released), so that fetching does
	// not make the whole queue invisible while nothing moves.
	fetchAfter time.Time
	useless    int

	buffered, bufferedBytes, peakBuffered int // messages waiting for their turn

	holders holderHeap // the groups that hold messages (see Core.makeRoom)
}

// undeletedBurst is how many receipts may run ahead of their deletes before
// the rate bound applies: one second's worth, at least the cap.
func undeletedBurst(cfg *Config) float64 {
	return max(cfg.MaxUndeletedRate, float64(cfg.MaxHeld))
}

// Memory accounting. A message's cost is charged when the Core takes it and
// changed whenever it drops its body; a group's cost follows its slices.

func (b *budget) charge(m *msg) {
	m.cost = int32(msgCost + len(m.raw) + len(m.id) + len(m.receipt))
	b.mem += int(m.cost)
}

func (b *budget) recharge(m *msg) {
	b.mem -= int(m.cost)
	b.charge(m)
}

func (b *budget) uncharge(m *msg) {
	b.mem -= int(m.cost)
	m.cost = 0
}

func (b *budget) recost(g *group) {
	n := groupCost + len(g.name) + slotCost*cap(g.held) + settledCost*cap(g.settled) + 24*(cap(g.ack.Skipped)+cap(g.dur.Skipped))
	if !g.cold() {
		n += coldCost + slotCost*(cap(g.newer)+cap(g.pending)) + 32*cap(g.tickets)
	}
	b.mem += n - g.cost
	g.cost = n
}

// buffer and unbuffer count messages waiting for their turn.
func (b *budget) buffer(m *msg) {
	b.buffered++
	b.bufferedBytes += len(m.raw)
	b.peakBuffered = max(b.peakBuffered, b.buffered)
}

func (b *budget) unbuffer(m *msg) {
	b.buffered--
	b.bufferedBytes -= len(m.raw)
}

// received counts a new receipt.
func (b *budget) received() {
	b.undelTokens--
	b.live++
	b.peakLive = max(b.peakLive, b.live)
}

// addReleased counts a message given back to the queue until it is visible
// again. id is its message ID ("" when unknown).
func (b *budget) addReleased(until time.Time, receipt, id string) *relEntry {
	e := &relEntry{until: until, receipt: receipt, id: id}
	if id != "" {
		if old := b.relByID[id]; old != nil {
			b.released.remove(old)
		}
		if b.relByID == nil {
			b.relByID = make(map[string]*relEntry)
		}
		b.relByID[id] = e
	}
	b.released.push(e)
	return e
}

// popReleased takes the released message visible again first off the count.
func (b *budget) popReleased() *relEntry {
	e := b.released.pop()
	if b.relByID[e.id] == e {
		delete(b.relByID, e.id)
	}
	return e
}

// receivedAgain takes the released message id off the count, received
// again (the new receipt counts instead). It reports the entry, nil if
// there was none.
func (b *budget) receivedAgain(id string) *relEntry {
	e := b.relByID[id]
	if e == nil {
		return nil
	}
	delete(b.relByID, id)
	b.released.remove(e)
	return e
}

// refill adds the undeleted-rate tokens earned since the last event.
func (b *budget) refill(now time.Time, cfg *Config) {
	b.undelTokens = b.tokens(now, cfg)
	b.undelAt = now
}

// tokens returns the undeleted-rate tokens at now.
func (b *budget) tokens(now time.Time, cfg *Config) float64 {
	if b.undelAt.IsZero() || !now.After(b.undelAt) {
		return b.undelTokens
	}
	return min(undeletedBurst(cfg), b.undelTokens+cfg.MaxUndeletedRate*now.Sub(b.undelAt).Seconds())
}

// stillReleased counts the released messages not yet visible again at now
// (without expiring the others: Room changes nothing).
func (b *budget) stillReleased(now time.Time) int {
	expired := 0
	var walk func(i int)
	walk = func(i int) { // a heap: the expired ones are a subtree at the top
		if i >= len(b.released) || b.released[i].until.After(now) {
			return
		}
		expired++
		walk(2*i + 1)
		walk(2*i + 2)
	}
	walk(0)
	return len(b.released) - expired
}

// expireReleased forgets the released messages visible again.
func (c *Core) expireReleased(now time.Time) {
	b := &c.budget
	for len(b.released) > 0 && !b.released[0].until.After(now) {
		c.vis.unshorten(b.popReleased())
	}
}

// Available reports whether Next may have a message to hand out.
func (c *Core) Available() bool { return c.ring.len() > 0 && !c.closing }

// Room returns how many messages the fetchers may receive now: what is
// left of the cap on messages received and not deleted, of the memory
// budget, and of the rate of receipts not followed by a delete. It changes
// nothing.
func (c *Core) Room(now time.Time) int {
	b := &c.budget
	if c.closing || now.Before(b.fetchAfter) {
		return 0
	}
	room := c.cfg.MaxHeld - b.live - b.stillReleased(now)
	if !c.cfg.Park && b.buffered >= max(c.cfg.Window/2, c.cfg.MaxBatch) && (c.ring.len() > 0 || c.outstanding > 0) {
		// Without parking, what arrives beyond a group's window is given
		// back and received again: while much waits and delivery moves,
		// let delivery catch up first.
		return 0
	}
	if b.mem >= c.cfg.MaxMemory*15/16 && (c.reads.loading() || len(c.parks.q) > 0 || !c.parks.idle()) {
		// Nearly spent while cursors load or parks are on their way:
		// wait for them. What arrives meanwhile would push out the
		// loading groups' arrivals, which could only go back to the
		// queue, and parks free their bodies' memory once durable.
		return 0
	}
	if b.mem >= c.cfg.MaxMemory {
		// Spent: nothing more unless nothing moves, when one batch may
		// bring the message everything waits for.
		if c.moving() {
			return 0
		}
		room = min(room, c.reserve())
	}
	return max(0, min(room, int(b.tokens(now, &c.cfg))))
}

// reserve is the fetch room the Core keeps free when it must make room:
// one batch, so that the message a stuck group waits for can still come.
func (c *Core) reserve() int {
	return max(1, min(c.cfg.MaxBatch, c.cfg.MaxHeld/4))
}

// moving reports whether delivery is progressing: messages with the
// application, cursors being read, advances to write, or deletes queued
// will free room by themselves.
func (c *Core) moving() bool {
	return c.ring.len() > 0 || c.outstanding > 0 || c.deletes.q.len() > 0 || !c.deletes.idle() ||
		!c.commits.idle() || c.commits.dirty.len() > 0 || c.reads.loading()
}

// settle ends every event: it keeps the peak of held messages and makes
// room when the cap or the memory budget is short.
func (c *Core) settle(now time.Time) {
	c.budget.peakLive = max(c.budget.peakLive, c.budget.live)
	c.makeRoom(now)
	if len(c.scans.names) > 0 || c.scans.rescan {
		c.loadScanned(now)
	}
}

// makeRoom evicts held messages when the cap leaves less than a reserve of
// fetch room, or memory is over budget. The farthest from their group's
// next seq go first, those of blocked groups before all others; a group's
// next message is evicted only if the group is blocked. Evicted messages
// are parked in the store when it can (then deleted from the queue), else
// released (they come back). Nothing is evicted for the cap while delivery
// moves: the room it frees is enough, and a fast drain parks nothing. The
// groups that hold messages are found in a heap (budget.holders), never by
// walking every group.
func (c *Core) makeRoom(now time.Time) {
	if c.closing {
		return
	}
	c.expireReleased(now)
	b := &c.budget
	room := c.cfg.MaxHeld - b.live - len(b.released)
	need := 0
	if r := c.reserve(); room < r && !c.moving() {
		// Evict in chunks, so that a full cap costs one pass now and then.
		need = r - room + c.cfg.MaxHeld/8
	}
	if need == 0 && b.mem <= c.cfg.MaxMemory {
		return
	}
	for g := c.idle.head; g != nil && b.mem > c.cfg.MaxMemory; g = c.idle.head {
		c.becomeEvicted(g)
	}
	for g := range c.evictHeld(now, need) {
		b.recost(g)
		c.update(g, now)
	}
	if b.mem > c.cfg.MaxMemory {
		c.shed(now)
	}
}

// evictHeld evicts held messages until need of them held receipts and
// memory is back under 15/16 of the budget, the first to go first (the
// heap of holders), and returns the groups it took messages from.
func (c *Core) evictHeld(now time.Time, need int) map[*group]struct{} {
	b := &c.budget
	var touched map[*group]struct{}
	var skipped []*group
	for (need > 0 || b.mem > c.cfg.MaxMemory*15/16) && len(b.holders) > 0 {
		// Within the memory budget, only what holds a receipt is worth
		// evicting: a message read back from the park frees memory, not
		// the cap.
		receipts := b.mem <= c.cfg.MaxMemory*15/16
		top := b.holders[0]
		g := c.groups[top.name]
		if g == nil {
			b.holders.pop() // shed since
			continue
		}
		k, m := c.holdKey(g, receipts)
		switch {
		case k == 0 && receipts:
			b.holders.pop() // nothing of it frees the cap: looked at again next time
			skipped = append(skipped, g)
			continue
		case k == 0:
			b.holders.fixTop(g, 0)
			continue
		case k < top.key:
			b.holders.fixTop(g, k) // its key fell since it was pushed
			continue
		}
		if c.evict(now, m) {
			need--
		}
		if g.phase == phFresh && g.quiet() {
			// Emptied while it settled: dropped now, with the memory it
			// takes (an arrival reads its cursor again), or eviction
			// would go on to the groups that settle longest.
			b.holders.pop()
			delete(touched, g)
			c.drop(now, g)
			continue
		}
		if touched == nil {
			touched = make(map[*group]struct{})
		}
		touched[g] = struct{}{}
		k, _ = c.holdKey(g, receipts)
		b.holders.fixTop(g, k)
	}
	for _, g := range skipped {
		if k, _ := c.holdKey(g, false); k != 0 {
			b.holders.push(holder{g.name, k})
		} else {
			g.holding = false
		}
	}
	return touched
}

// Eviction scores: a blocked group's messages first, then the messages of a
// newer epoch, then the farthest from next.
const blockedBonus, newerBonus = 1 << 62, 1 << 61

// holdKey returns the score of the message of g to evict first, and that
// message (0 and nil: g has none to evict). With receipts, only messages
// that hold a receipt count (not those read back from the park).
func (c *Core) holdKey(g *group, receipts bool) (uint64, *msg) {
	if g.phase == phEvicted || g.cold() {
		return 0, nil
	}
	bonus := uint64(0)
	if g.blocked() {
		bonus = blockedBonus
	}
	var best uint64
	var pick *msg
	see := func(m *msg, score uint64) {
		if score > best && !(receipts && m.has(fStored)) {
			best, pick = score, m
		}
	}
	for i := len(g.held) - 1; i >= 0 && pick == nil; i-- {
		if m := g.held[i]; i > 0 || m.seq != g.next || bonus != 0 {
			see(m, bonus+(m.seq-g.next)) // (the next message frees room by itself, unless blocked)
		}
	}
	for _, m := range g.newer {
		see(m, bonus+newerBonus+m.seq)
	}
	switch {
	case (g.phase == phLoading || g.phase == phResolving) && c.reads.fails == 0:
		// While its cursor is on its way, what arrives is parked then:
		// released now, it would cost a visibility timeout and a receive
		// (fetching stops meanwhile, see Room).
	case g.phase == phFresh && receipts:
		// StartLowest settling: its arrivals choose where it starts, and
		// the settle time ends by itself.
	case g.phase == phFresh && !g.startAt.IsZero():
		// Over the memory budget, settling groups go last, the one that
		// settles longest first: evicted, a group starts settling again
		// when its messages come back, and a flood of new groups that
		// evicted each other in turn would never start.
		wait := uint64(max(g.startAt.Sub(c.now), 0) / time.Millisecond)
		for _, m := range g.pending {
			see(m, 1+wait)
		}
	default:
		for _, m := range g.pending {
			see(m, blockedBonus+m.seq)
		}
	}
	return best, pick
}

// holding notes that g holds messages: it joins the heap makeRoom takes
// them from. Entries of groups that hold nothing any more (or were shed)
// leave it lazily; once they outnumber the groups in memory, it is built
// again from them.
func (c *Core) holding(g *group) {
	if g.holding {
		return
	}
	g.holding = true
	b := &c.budget
	b.holders.push(holder{g.name, 1 << 63})
	if len(b.holders) > 2*len(c.groups)+64 {
		b.holders = b.holders[:0]
		for _, h := range c.groups {
			if h.holding = !h.cold() && h.buffered() > 0; h.holding {
				b.holders.push(holder{h.name, 1 << 63})
			}
		}
	}
}

// holder is a group that holds messages, by the score of the one to evict
// first when it was last looked at (a lazy max-heap: makeRoom looks again).
// It names the group: a shed group is not kept in memory by the heap.
type holder struct {
	name string
	key  uint64
}

type holderHeap []holder

func (h *holderHeap) push(x holder) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].key >= s[i].key {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *holderHeap) pop() holder {
	s := *h
	x := s[0]
	n := len(s) - 1
	s[0], s[n] = s[n], holder{}
	*h = s[:n]
	h.down()
	return x
}

// fixTop sets the key of the top, g, to k (0: drops it) and restores the
// heap.
func (h *holderHeap) fixTop(g *group, k uint64) {
	if k == 0 {
		g.holding = false
		h.pop()
		return
	}
	(*h)[0].key = k
	h.down()
}

func (h holderHeap) down() {
	n := len(h)
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h[l].key > h[m].key {
			m = l
		}
		if r < n && h[r].key > h[m].key {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// evict takes m out of its group's memory: parked when the store can, else
// released (or, read back from the park already, forgotten). It reports
// whether that freed a receipt.
func (c *Core) evict(now time.Time, m *msg) bool {
	g, stored := m.g, m.has(fStored)
	c.unhold(m)
	switch {
	case c.canPark(g, m):
		c.toPark(g, m)
	case stored:
		// Parked already: forget it here, read it back later.
		g.knowParked(m.seq)
		c.gone(m)
	default:
		if c.parkable(g, m) {
			c.parkFull(g, m)
		}
		if g.phase == phActive && m.epoch == g.epoch {
			g.noteFar(m.seq, now)
		}
		c.release(m, now)
	}
	return !stored
}

// shed drops from memory the groups that hold nothing there, until the
// budget holds: idle ones first, then quiet ones (waiting on a hole, a
// failed store call), oldest first, from their lists (no walk over every
// group). Their cursors are in the store, their parked messages in the
// park, and the rest comes back from the queue; a group is loaded again
// when its next message arrives. Under a flood of groups this bounds their
// state. Nothing is shed while parks are on their way: once durable, their
// bodies leave memory by themselves. A group with parks and no stored
// cursor has its cursor written first (its epoch and next seq), so that
// loaded again it finds its parks. One shed with parked messages may have
// none left in the queue to load it again: the park's streams are listed
// again, after a backoff (see scanLane).
func (c *Core) shed(now time.Time) {
	if len(c.parks.q) > 0 || !c.parks.idle() {
		return
	}
	for c.budget.mem > c.cfg.MaxMemory*15/16 {
		g := c.idle.head
		if g == nil {
			g = c.quiet.head
		}
		if g == nil {
			return
		}
		c.unlist(g)
		switch {
		case !g.cold() && !g.quiet():
			// Busy again since it was listed: relisted when it is done.
		case !g.cold() && g.park.known() && !g.hasCursor():
			c.pin(g)
		default:
			c.drop(now, g)
		}
	}
}

// pin writes the cursor of g, a group without a stored cursor that parks
// (or parked, before a conflict): its epoch and next seq. Once durable, g
// may park, and is quiet again and can be shed.
func (c *Core) pin(g *group) {
	if c.cfg.Mode == ExactlyOnce {
		// The application writes every cursor past what it handled. On a
		// queue that orders each group itself (ParkEarly), an early first
		// arrival must park, and a park needs a stored cursor: the Core
		// writes this one while nothing is out, and hands nothing out
		// until it is durable (forceCommit), so that the next hand-out's
		// CursorAdvance starts from it.
		if !c.cfg.ParkEarly || g.out != nil || g.hasCursor() || g.forced {
			return
		}
		if g.ack.Epoch == 0 && g.ack.Next == 0 {
			g.ack = seqstore.Cursor{Epoch: g.epoch, Next: g.next, Owner: g.dur.Owner}
		}
		c.forceCommit(g) // g.ack keeps what the start skipped (StartLowest)
		return
	}
	if g.ack.Epoch == 0 && g.ack.Next == 0 {
		g.ack.Epoch, g.ack.Next = g.epoch, g.next
		if m := g.out; m != nil && m.epoch == g.epoch {
			g.ack.Next = m.seq // out, not acknowledged
		}
	}
	c.markDirty(g)
}

// drop sheds g.
func (c *Core) drop(now time.Time, g *group) {
	if !g.cold() {
		c.clearStuck(g, g.stuck)
	}
	// (A cold group knows of no parked seq, or it would not be cold: only
	// probed is left to look at.)
	if c.cfg.Park && (!g.probed || !g.cold() && g.park.known()) {
		c.scans.rescan = true
	}
	c.becomeEvicted(g)
}
