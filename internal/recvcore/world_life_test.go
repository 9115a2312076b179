package recvcore_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/inorder/inorder/internal/recvcore"
)

// Incarnations, phases and the end of a run, for TestWorld.

// How an incarnation ends.
const (
	endClean    = iota // Close, then its actions until Flushed
	endDeadline        // Close, then its actions until Flushed or a deadline
	endCtx             // Close whose ctx ends at once: in-flight outcomes are lost
	endCrash           // the process dies with everything in flight
)

var endNames = [...]string{"clean close", "close with a deadline", "close whose ctx ended", "crash"}

// end ends the incarnation as kind says, checks what it left in the queue
// and the store, and starts the next one over the same queue and store.
func (w *wm) end(kind int) {
	w.logf("end: %s", endNames[kind])
	clean := false
	if kind != endCrash {
		w.closing = true
		w.core.Close(w.now)
		w.collect()
		// The Receives waiting for a ticket wake on the close: a resolved
		// one may still be taken (select picks either), the others give up.
		for _, o := range slices.Clone(w.outs) {
			switch {
			case o.state == dAwait, o.state == dResolved && w.rng.IntN(2) == 0:
				w.abandon(o)
			case o.state == dResolved:
				w.give(o)
			}
		}
		w.collect()
		if kind != endCtx {
			// Run waits for the handlers that hold a message: each
			// finishes; a Receive user may drop its message instead.
			for _, o := range slices.Clone(w.outs) {
				if o.state != dGiven {
					continue
				}
				switch r := w.rng.IntN(10); {
				case r < 7:
					w.settleOne(o, true)
				case r < 8:
					w.settleOne(o, false)
				default:
					o.state = dDone
					w.dropOut(o)
				}
				w.collect()
			}
			clean = w.flush(kind == endDeadline)
		}
	}
	if clean {
		w.checkCloseDurable()
	} else if w.cfg.Mode == recvcore.AtMostOnce {
		// A crash may lose what was handed out and not yet given.
		for _, o := range w.nexted {
			if w.given[o.key] == 0 {
				w.excused[o.key] = true
			}
		}
	}
	w.lose()
	w.checkRecoverable(endNames[kind])
	w.start()
}

// closeDuringHandOut closes the Core around an AtMostOnce hand-out: its
// commit (or delete) lands or not, its Receive gives up or not, then a
// clean Close, or one with a deadline.
func (w *wm) closeDuringHandOut() {
	var ws []*wdel
	for _, o := range w.outs {
		if o.state == dAwait || o.state == dResolved {
			ws = append(ws, o)
		}
	}
	if len(ws) == 0 {
		return
	}
	o := ws[w.rng.IntN(len(ws))]
	w.logf("close during the hand-out of %s", o.key)
	if w.rng.IntN(2) == 0 {
		w.abandon(o) // the Receive's ctx ended first
	}
	for range w.rng.IntN(4) {
		w.doOne()
		w.collect()
	}
	w.end([]int{endClean, endDeadline}[w.rng.IntN(2)])
}

// flush runs a closing Core's actions until it is Flushed, or until a
// deadline when there is one; it reports whether Flushed was reached.
func (w *wm) flush(deadline bool) bool {
	limit := 4000
	if deadline {
		limit = w.rng.IntN(40)
	}
	for i := 0; i < limit; i++ {
		if w.core.Flushed() {
			return true
		}
		for range 1 + w.rng.IntN(4) {
			w.doOne()
			w.collect()
		}
		w.advance(50 * time.Millisecond)
		w.collect()
		w.checkStep()
	}
	if w.core.Flushed() {
		return true
	}
	if !deadline {
		prop := "close-flushes"
		if len(w.reads) > 0 {
			prop += "/reads" // a closing Core goes on re-reading the cursors of groups stuck on a hole
		}
		w.violate(prop, nil, "life %d: a closing Core is not Flushed after %d rounds (%d reads in flight)\n%s", w.life, limit, len(w.reads), w.core.Dump())
	}
	return false
}

// lose drops the incarnation's in-flight actions: each took effect or not,
// and nobody hears which.
func (w *wm) lose() {
	half := func() bool { return w.rng.IntN(2) == 0 }
	for _, c := range w.commits {
		if half() {
			_ = w.fencedAdvance(c.Advances)
		}
	}
	for _, p := range w.parks {
		if half() && w.st.parkAll(p.Entries) == nil {
			w.noteParked(p.Entries)
		}
	}
	for _, d := range w.deletes {
		for _, r := range d.Receipts {
			if m, ok := w.q.valid(r, w.now); ok && half() {
				w.checkDelete(m)
				w.q.remove(m)
			}
		}
	}
	for _, v := range w.vis {
		if m, ok := w.q.valid(v.Receipt, w.now); ok && half() {
			w.q.changeVisibility(m, w.now, v.Timeout)
			m.seen, m.byCV = false, false
		}
	}
	for _, d := range w.deads {
		for _, b := range d.Bodies {
			if half() {
				w.deadLetter(b)
			}
		}
	}
	for _, r := range w.requeues {
		for _, b := range r.Bodies {
			if half() {
				w.sendBack(b)
			}
		}
	}
	w.reads, w.commits, w.deletes, w.vis, w.deads, w.parks, w.unparks, w.scans, w.requeues = nil, nil, nil, nil, nil, nil, nil, nil, nil
}

// checkCloseDurable: after a clean Close (Close returned nil), everything
// acknowledged in order is durable in the store.
func (w *wm) checkCloseDurable() {
	for _, k := range sortedKeys(w.ackedLife) {
		if w.contested[k.group] || w.tainted[k] || w.dead[k] {
			continue
		}
		if c := w.st.cursor(k.group); !c.Below(k.epoch, k.seq) {
			w.violate("close-durable", []mkey{k}, "life %d: %s was acknowledged, and after a clean Close the store's cursor is %s", w.life, k, cursor(c))
		}
	}
}

// settled reports whether k needs nothing more from any incarnation.
func (w *wm) settled(k mkey) bool {
	switch {
	case w.dead[k], w.other[k], w.excused[k], w.tainted[k]:
		return true
	case w.cfg.Mode == recvcore.AtMostOnce:
		return w.given[k] > 0
	case w.ackedUnord[k]:
		return true
	}
	// Acknowledged in order, and the store's cursor passed it (a skip mark
	// over it is skip-honest's business).
	return w.ackedOrd[k] && (w.durable[k] || w.st.cursor(k.group).Below(k.epoch, k.seq))
}

// amoUncertain reports whether k's loss is AtMostOnce's to take: a second
// receiver moved the cursor past k after this receiver's commit of k's
// hand-out applied with an unknown outcome. The Core cannot tell its own
// write from the other's; handing k out could give it twice.
func (w *wm) amoUncertain(k mkey) bool {
	return w.cfg.Mode == recvcore.AtMostOnce && w.contested[k.group] && w.uncertain[k]
}

// checkRecoverable: what an incarnation leaves behind lets the next one
// deliver every message not settled: a copy of it is in the queue or the
// park, and the stored cursor does not say it was handled.
func (w *wm) checkRecoverable(how string) {
	for _, k := range sortedKeys(w.sent) {
		if !w.sent[k] || w.settled(k) {
			continue
		}
		c := w.st.cursor(k.group)
		switch {
		case k.tagged() && handledBy(c, k):
			prop := "recoverable/no-skip"
			if w.amoUncertain(k) {
				prop = "amo-uncertain-conflict"
			}
			w.violate(prop, []mkey{k}, "life %d, after a %s: the store's cursor %s is past %s with no skip mark, and it was never settled (given %d): the next incarnation deletes it as a duplicate",
				w.life, how, cursor(c), k, w.given[k])
		case !w.q.present(k) && !(k.tagged() && w.st.parked(k)):
			prop := "recoverable"
			switch {
			case w.handedUnordered(k):
				prop = "recoverable/unordered" // deleted for an AtMostOnce Unordered hand-out that never happened
			case w.everParked[k]:
				prop = "recoverable/parked" // its body was only in the park, and the park dropped it
			}
			w.violate(prop, []mkey{k}, "life %d, after a %s: no copy of %s is left in the queue or the park, and it was never settled (given %d, cursor %s)",
				w.life, how, k, w.given[k], cursor(c))
		}
	}
}

func compareKeys(a, b mkey) int {
	return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.epoch, b.epoch), cmp.Compare(a.seq, b.seq), cmp.Compare(a.id, b.id))
}

// handedUnordered reports whether this incarnation handed k out Unordered.
func (w *wm) handedUnordered(k mkey) bool {
	for _, o := range w.nexted {
		if o.key == k && o.d.Unordered {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[mkey]V) []mkey {
	ks := make([]mkey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, compareKeys)
	return ks
}

// Phases aimed at the service's throttling rules and at idle costs.

// calmRound is one round of a healthy shell and application: fetch, hand
// out, settle, execute every action, then time passes.
func (w *wm) calmRound(dt time.Duration) {
	for range 2 {
		w.fetch()
		w.collect()
	}
	for range 6 {
		w.next()
	}
	for _, o := range slices.Clone(w.outs) {
		if o.state == dResolved {
			w.give(o)
		}
	}
	for _, o := range slices.Clone(w.outs) {
		if o.state == dGiven {
			w.settleOne(o, true)
			w.collect()
		}
	}
	for i := 0; w.doOne(); i++ {
		w.collect()
		if i > 20000 {
			w.t.Fatalf("life %d: the Core keeps asking for actions without end\n%s", w.life, w.core.Dump())
		}
	}
	w.advance(dt)
	w.collect()
	w.checkStep()
}

// quiet turns the faults off and returns what turns them on again.
func (w *wm) quiet() func() {
	saved := [...]int{w.fLostRecv, w.fDelBefore, w.fDelAfter, w.fVisFail, w.fVisAfter, w.fReadFail, w.fWriteBefore,
		w.fWriteAfter, w.fWriteTransient, w.fParkFail, w.fParkAfter, w.fDeadFail, w.fOther}
	w.fLostRecv, w.fDelBefore, w.fDelAfter, w.fVisFail, w.fVisAfter, w.fReadFail, w.fWriteBefore = 0, 0, 0, 0, 0, 0, 0
	w.fWriteAfter, w.fWriteTransient, w.fParkFail, w.fParkAfter, w.fDeadFail, w.fOther = 0, 0, 0, 0, 0, 0
	corrupt := w.fWriteCorrupt
	w.fWriteCorrupt = 0
	return func() {
		w.fWriteCorrupt = corrupt
		w.fLostRecv, w.fDelBefore, w.fDelAfter, w.fVisFail, w.fVisAfter, w.fReadFail, w.fWriteBefore = saved[0], saved[1], saved[2], saved[3], saved[4], saved[5], saved[6]
		w.fWriteAfter, w.fWriteTransient, w.fParkFail, w.fParkAfter, w.fDeadFail, w.fOther = saved[7], saved[8], saved[9], saved[10], saved[11], saved[12]
	}
}

// stall runs a healthy receiver for longer than the hold limit while a
// group is stuck (on a hole under GapWait, or on a poison message under
// PoisonBlock): its messages must not stay received-and-not-deleted past
// the limit.
func (w *wm) stall() {
	w.logf("phase: stall for %v", w.holdLimit+2*time.Minute)
	defer w.quiet()()
	end := w.now.Add(w.holdLimit + 2*time.Minute)
	for w.now.Before(end) {
		w.calmRound(time.Duration(1000+w.rng.IntN(3000)) * time.Millisecond)
	}
}

// outage fails every delete, or every store call, for a while, with the
// application going on: the cap counts what the queue counts, and what
// the receiver holds keeps its visibility.
func (w *wm) outage(deletes, store bool) {
	d := time.Duration(20+w.rng.IntN(40)) * time.Second
	if store {
		d = time.Duration(40+w.rng.IntN(60)) * time.Second
	}
	w.logf("phase: outage of deletes %v store %v for %v", deletes, store, d)
	w.deleteOutage, w.storeOutage = deletes, store
	defer func() { w.deleteOutage, w.storeOutage = false, false }()
	end := w.now.Add(d)
	for w.now.Before(end) {
		w.calmRound(time.Duration(100+w.rng.IntN(400)) * time.Millisecond)
	}
}

// idle lets the receiver deliver what it can, then counts its store reads
// while nothing new is sent: by design, a group stuck on a hole re-reads
// its cursor and its park once per GapTimeout; what arrives may load a
// group. Anything beyond is churn.
func (w *wm) idle() {
	defer w.quiet()()
	settle := w.now.Add(20 * time.Second)
	for w.now.Before(settle) {
		w.calmRound(250 * time.Millisecond)
	}
	const span = 60 * time.Second
	reads0, recv0 := w.readsN, w.q.receipts
	end := w.now.Add(span)
	for w.now.Before(end) {
		w.calmRound(250 * time.Millisecond)
	}
	var by [3]int
	for i := range by {
		by[i] = w.readsN[i] - reads0[i]
	}
	reads, received := by[0]+by[1]+by[2], w.q.receipts-recv0
	stuck := len(w.groupsWaiting())
	bound := 2*(stuck+1)*int(span/w.cfg.GapTimeout+1) + 4*received + 20
	w.logf("phase: idle: %d reads in %v (%d groups waiting, %d receives), bound %d", reads, span, stuck, received, bound)
	if reads > bound {
		w.violate("idle-reads", nil, "life %d: idle for %v with %d receives: %d cursor reads, %d park queries and %d park scans, bound %d in all (%d groups waiting on a hole)",
			w.life, span, received, by[0], by[1], by[2], bound, stuck)
	}
}

// groupsWaiting lists the groups with a message not settled yet: each may
// wait on a hole (a message held back or never sent), or on a poison one.
func (w *wm) groupsWaiting() map[string]bool {
	gs := map[string]bool{}
	for k, sent := range w.sent {
		if sent && k.tagged() && !w.settled(k) {
			gs[k.group] = true
		}
	}
	return gs
}

// The end of a run.

// exempt reports whether k's group may never end: it waits on a hole under
// GapWait, or on a poison message under PoisonBlock.
func (w *wm) exempt(k mkey) bool {
	if !k.tagged() {
		return false
	}
	if w.holed[k.group] && w.cfg.GapPolicy == recvcore.GapWait {
		return true
	}
	return w.poison[k.group] && w.cfg.Poison == recvcore.PoisonBlock && w.cfg.Mode != recvcore.AtMostOnce
}

// heal stops every fault and runs the world until it is quiet: every group
// whose messages are all present must be delivered to its end within the
// bound, and nothing may be lost.
func (w *wm) heal() {
	w.quiet()
	w.fCrash, w.fAppNack, w.fStaleAck, w.fAbandon, w.fReturn = 0, 0, 0, 0, 0
	w.deleteOutage, w.storeOutage = false, false
	w.retireAll()
	for _, m := range w.q.msgs {
		m.sent = true
	}
	rounds := int(w.healBound() / (500 * time.Millisecond))
	for range rounds {
		w.calmRound(500 * time.Millisecond)
		if w.missing(false) == "" {
			return
		}
	}
	w.missing(true)
}

// missing describes what is not done yet; with report, it reports each
// thing as the property it breaks.
func (w *wm) missing(report bool) string {
	var miss []string
	lost := func(k mkey, what string) {
		miss = append(miss, what)
		if report {
			prop := "no-loss"
			switch {
			case w.amoUncertain(k):
				prop = "amo-uncertain-conflict"
			case w.contested[k.group]:
				prop = "no-loss/conflict"
			}
			w.violate(prop, []mkey{k}, "life %d: %s", w.life, what)
		}
	}
	stuck := func(k mkey, what string) {
		miss = append(miss, what)
		if report {
			prop := "liveness"
			switch {
			case k.tagged() && w.demoted(k.group):
				prop = "liveness/older-epoch" // consumed below a newer epoch's durable cursor
			case k.tagged() && w.st.cursor(k.group).Next == 0 && w.onlyParked(k.group):
				prop = "liveness/parked-no-cursor" // the README's known limitation
			case k.tagged() && w.cfg.Start == recvcore.StartLowest && w.st.cursor(k.group).Next == 0:
				prop = "liveness/startlowest" // a group that never started
			case w.flood:
				prop = "liveness/flood" // groups shed under memory pressure before their hole's timeout acts
			case w.cfg.Mode == recvcore.ExactlyOnce && w.deadIn(k.group):
				prop = "liveness/eo-dead-letter"
			case len(w.poison) > 0 && w.cfg.Poison == recvcore.PoisonBlock && w.cfg.Mode != recvcore.AtMostOnce:
				prop = "liveness/poison" // duplicate entries of the poisoned group fill the cap
			}
			w.violate(prop, []mkey{k}, "life %d: after healing for a bound: %s\n%s", w.life, what, w.core.Dump())
		}
	}
	var keys []mkey
	if report {
		keys = sortedKeys(w.sent)
	} else {
		for k := range w.sent {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if !w.sent[k] || w.settled(k) {
			continue
		}
		// A copy the application is being handed (or holds) is not lost.
		present := w.q.present(k) || k.tagged() && w.st.parked(k) ||
			slices.ContainsFunc(w.outs, func(o *wdel) bool { return o.key == k && o.state != dDone })
		switch {
		case !present:
			lost(k, fmt.Sprintf("%s was never settled (given %d) and no copy is left", k, w.given[k]))
		case !w.exempt(k):
			stuck(k, fmt.Sprintf("%s not delivered (given %d, cursor %s)", k, w.given[k], cursor(w.st.cursor(k.group))))
		}
		if len(miss) > 0 && !report {
			return miss[0]
		}
	}
	if len(miss) == 0 {
		for _, m := range w.q.msgs {
			if !m.deleted && !w.exempt(m.key) && !w.tainted[m.key] {
				stuck(m.key, fmt.Sprintf("%s (id %s) is handled and still in the queue", m.key, m.id))
				break
			}
		}
		for pk := range w.st.park {
			k := mkey{group: pk.group, epoch: pk.epoch, seq: pk.seq}
			if !w.exempt(k) && !w.tainted[k] {
				stuck(k, fmt.Sprintf("%s is handled and still parked", k))
				break
			}
		}
	}
	if len(miss) == 0 {
		return ""
	}
	return fmt.Sprint(miss)
}

// demoted reports whether group has messages to deliver of an epoch older
// than its stored cursor's, of which the cursor keeps no record (an epoch
// switch records Range{old, next, MaxSeq}): the group went back to that
// epoch below its durable cursor.
func (w *wm) demoted(group string) bool {
	c := w.st.cursor(group)
	for k, sent := range w.sent {
		if !sent || k.group != group || k.epoch >= c.Epoch || w.settled(k) && !w.tainted[k] {
			continue
		}
		recorded := false
		for _, r := range c.Skipped {
			recorded = recorded || r.Epoch == k.epoch
		}
		if !recorded {
			return true
		}
	}
	return false
}

// onlyParked reports whether every message of group not settled is in the
// park only: no copy is left in the queue to start the group again.
func (w *wm) onlyParked(group string) bool {
	for k, sent := range w.sent {
		if sent && k.group == group && !w.settled(k) && (w.q.present(k) || !w.st.parked(k)) {
			return false
		}
	}
	return true
}

// deadIn reports whether a message of group was dead-lettered: in
// ExactlyOnce mode the Core, not the application, moves the cursor past it.
func (w *wm) deadIn(group string) bool {
	for k := range w.dead {
		if k.group == group {
			return true
		}
	}
	return false
}

// settleOne finishes o: an Ack, or a Nack when the application fails it (a
// poisoned group's messages always).
func (w *wm) settleOne(o *wdel, heal bool) {
	d, k := &o.d, o.key
	// Once its transaction committed (ExactlyOnce), the application acks.
	nack := !o.txed && (w.poison[d.Group] && !d.Unordered || !heal && w.chance(w.fAppNack))
	if nack {
		w.logf("nack %s", delivery(*d))
		if err := w.core.Nack(w.now, d, errors.New("handler failed")); err != nil {
			w.violate("settle-current", []mkey{k}, "life %d: Nack of the current hand-out %s: %v", w.life, delivery(*d), err)
		}
		w.nacks[k]++
		w.finish(o)
		return
	}
	w.ack(o, heal)
}
