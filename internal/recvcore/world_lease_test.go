package recvcore_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// Scale-out, for TestWorld: up to three receiver processes share the
// stream set of the queue model and the store model, one owning it at a
// time through a lease whose fencing token only grows (shared/research
// scaleout.md 3.1, 3.7, 3.8). Every incarnation takes a new token; each one
// sees the store through a fence that mirrors ordered/scaleout/fence.go's
// fencedStore (fencedCursors, fencedAdvance). Moves, drawn by the case:
//
//	handover  the owner is drained (Close, its handlers finish, Flushed),
//	          then the next receiver takes a higher token and starts
//	loss      the owner's shard is stopped at once (lease expired, renew
//	          failed, fenced): its Core is abandoned, closed or not; its
//	          handlers may still finish (an ExactlyOnce one still runs its
//	          transaction), and its store calls in flight may still land,
//	          fail or never be heard of; the next receiver starts at once
//	stale     as loss, but the old shell keeps running a while without
//	          knowing (a pause longer than the lease): it receives, answers
//	          its Core, commits and reads through its fence with its old
//	          token, and learns when a read is fenced or its time is up; as
//	          the shell checks its lease deadline before a hand-out (3.1
//	          I4), it hands nothing out
//
// The properties, on top of TestWorld's (which hold across moves as they
// are: order per incarnation from the cursor it reads, durable-once,
// no-loss with AtMostOnce's crash allowance applied at a loss):
//
//	exclusion   no two receivers have an ordered hand-out of one group out at
//	            once, except a zombie's hand-out out at its loss; such a
//	            hand-out's ExactlyOnce transaction never lands after the
//	            newer owner took the stream (exclusion/zombie-commit)
//	fencing     no advance by an older token lands once a newer token's fence
//	            handed the stream's cursor to its Core (fencing/stale-write);
//	            the stored Owner never goes down (fencing/owner-lowered) and
//	            the cursor never moves back (fencing/cursor-back); tokens
//	            only grow, and the owner, holding the highest, is never
//	            fenced (fencing/token)
//	liveness    after the last move, healing ends every group within the
//	            bound of single-receiver runs plus a visibility timeout (a
//	            zombie's receipts hide messages for that long)
//
// worldLeases turns the moves on in one case of three (TestWorldKnownDefects
// replays its cases without them); TestWorldLeases runs them in every case.
// INORDER_WORLD_PLANT plants a bug in the fence, for the proof that the
// properties catch it: no-force (advances keep the Core's Owner),
// claim-lowers (a read claims a stream a newer owner holds), no-claim (a
// read hands the cursor on without claiming it), stale-hands-out (a stale
// shell hands out, as if it did not check its lease deadline), or several,
// comma-separated.
var (
	worldLeases       = true
	worldLeasesAlways = false
	worldPlant        = strings.Split(os.Getenv("INORDER_WORLD_PLANT"), ",")
)

// planted reports whether INORDER_WORLD_PLANT names bug.
func planted(bug string) bool { return slices.Contains(worldPlant, bug) }

// TestWorldLeases runs TestWorld's cases with lease moves in every one.
//
// go test ./internal/recvcore -run 'TestWorldLeases$' -rapid.checks=N [-v]
func TestWorldLeases(t *testing.T) {
	worldLeasesAlways = true
	t.Cleanup(func() { worldLeasesAlways = false })
	if f := flag.Lookup("rapid.checks"); raceEnabled && f != nil && f.Value.String() == f.DefValue {
		setFlag(t, "rapid.checks", "50") // CI's -race run: TestWorld has lease moves in a third of its cases too
	}
	worldStats.reset()
	rapid.Check(t, worldCase)
	worldStats.log(t)
}

// How the owner loses the streams.
const (
	moveHandover = iota
	moveLoss
	moveStale
)

var moveNames = [...]string{"handover", "loss", "stale owner"}

// setupLeases decides whether the case moves leases, from its own random
// source: a case without leases draws what it drew before they existed.
func (w *wm) setupLeases(seed uint64) {
	w.leaseRng = rand.New(rand.NewPCG(seed, 13)) // its own: a case without leases draws what it drew before
	on := w.leaseRng.IntN(3) == 0
	if !(worldLeasesAlways || worldLeases && on) {
		return
	}
	w.leases = true
	w.procs = 2 + w.leaseRng.IntN(2)
	w.st.taken = map[string]uint64{}
	w.st.watch = w.watchCursor
}

// takeToken takes the next token for an incarnation that starts.
func (w *wm) takeToken() {
	if !w.leases {
		return
	}
	last := w.tokens
	w.tokens++
	w.token = w.tokens
	if w.token <= last {
		w.violate("fencing/token", nil, "life %d: token %d taken after %d", w.life, w.token, last)
	}
}

// leaseStep lets the zombies act, and sometimes moves the lease.
func (w *wm) leaseStep() {
	for _, z := range slices.Clone(w.zombies) {
		if w.leaseRng.IntN(2) == 0 {
			w.zombieAct(z)
		}
	}
	if w.leaseRng.IntN(60) == 0 && len(w.zombies) < w.procs-1 {
		w.move([]int{moveHandover, moveHandover, moveLoss, moveLoss, moveStale}[w.leaseRng.IntN(5)])
	}
}

// move hands the streams to the next receiver, as kind says.
func (w *wm) move(kind int) {
	w.moves++
	worldStats.leased(moveNames[kind])
	w.logf("move: %s (%d zombies)", moveNames[kind], len(w.zombies))
	if kind == moveHandover {
		w.end(endClean) // drained, released; the next one starts with a higher token
		return
	}
	z := w.recv
	for _, o := range z.outs {
		o.atLoss = true
	}
	if kind == moveStale {
		z.stale = true
		z.staleFor = 5 + w.leaseRng.IntN(60)
	}
	w.zombies = append(w.zombies, &z)
	if kind == moveLoss {
		w.as(&z, w.stop)
	} else if w.cfg.Mode == recvcore.AtMostOnce {
		w.excuseUngiven()
	}
	w.start()
}

// as runs f for zombie z: z's incarnation is swapped in as the world's.
func (w *wm) as(z *recv, f func()) {
	w.recv, *z = *z, w.recv
	w.acting = z
	defer func() { w.recv, *z, w.acting = *z, w.recv, nil }()
	f()
}

// stop stops the shard of the incarnation in place (a zombie's): the
// Receives waiting for a ticket end with ErrFenced; the Core is closed or
// not (the shell may give its held messages back before it drops them);
// from then on nothing it asks for is executed, and its handlers' Acks get
// ErrFenced. Its store calls in flight stay in flight.
func (w *wm) stop() {
	w.logf("stop the shard of life %d (token %d)", w.life, w.token)
	for _, o := range slices.Clone(w.outs) {
		if o.state == dAwait || o.state == dResolved {
			w.abandon(o)
		}
	}
	if w.rng.IntN(2) == 0 {
		w.closing = true
		w.core.Close(w.now)
		w.collect()
	}
	if w.cfg.Mode == recvcore.AtMostOnce {
		w.excuseUngiven()
	}
	w.stale, w.stopped = false, true
}

// excuseUngiven: AtMostOnce may lose what an incarnation handed out and
// did not give, as at a crash.
func (w *wm) excuseUngiven() {
	for _, o := range w.nexted {
		if w.given[o.key] == 0 {
			w.excused[o.key] = true
		}
	}
}

// zombieAct has zombie z do one thing.
func (w *wm) zombieAct(z *recv) {
	w.as(z, func() {
		if w.stale {
			w.staleFor--
			switch w.rng.IntN(6) {
			case 0:
				w.fetch()
				if planted("stale-hands-out") {
					w.next() // planted: no lease deadline check before a hand-out
				}
			case 1, 2:
				w.doOne()
			case 3:
				w.settle(false)
			case 4:
				w.core.Tick(w.now)
			case 5:
				w.appMisc()
			}
			w.collect()
			if w.staleFor <= 0 || w.fenced {
				w.stop()
			}
			return
		}
		var given []*wdel
		for _, o := range w.outs {
			if o.state == dGiven {
				given = append(given, o)
			}
		}
		inFlight := len(w.reads) + len(w.commits) + len(w.deletes) + len(w.vis) + len(w.deads) + len(w.parks) + len(w.unparks) + len(w.scans) + len(w.requeues)
		switch r := w.rng.IntN(8); {
		case inFlight+len(given) == 0 || r == 0:
			w.retire()
		case r < 5 && inFlight > 0:
			w.doOne()
		case len(given) > 0:
			w.zombieSettle(given[w.rng.IntN(len(given))])
		}
	})
}

// zombieSettle: a stopped shard's handler finishes. An ExactlyOnce one
// runs its transaction, whose advance carries the Owner of the cursor its
// Core read; the Ack gets ErrFenced, and the shell takes the hand-out back
// (Disown: given back if the Core is closed, else at its Close; nothing it
// asks for is executed from now on).
func (w *wm) zombieSettle(o *wdel) {
	defer func() {
		if w.cfg.Mode == recvcore.AtMostOnce {
			return
		}
		err := w.core.Disown(w.now, &o.d)
		worldStats.leased(fmt.Sprintf("zombie hand-out disowned %v", err == nil))
		if err != nil {
			w.violate("settle-current", []mkey{o.key}, "life %d: Disown of the hand-out %s out at the loss: %v", w.life, delivery(o.d), err)
		}
		w.collect()
	}()
	d, k := &o.d, o.key
	if w.cfg.Mode == recvcore.ExactlyOnce && !d.Unordered && !o.txed && !w.poison[d.Group] {
		w.zombieTx = o
		err := w.applyAdvance([]seqstore.Advance{d.Advance})
		w.zombieTx = nil
		w.logf("zombie tx of %s: %v", k, err)
		worldStats.leased(fmt.Sprintf("zombie transaction landed %v", err == nil))
		if err == nil {
			o.txed = true
			w.ackedOrd[k], w.acked[k] = true, true
			w.noteDurable(k)
		}
	}
	w.finish(o)
}

// retire ends a stopped zombie: what it had in flight landed or not, and
// nobody heard; it is gone.
func (w *wm) retire() {
	w.logf("retire life %d", w.life)
	if !w.stopped {
		w.stop()
	}
	w.lose()
	for _, o := range slices.Clone(w.outs) {
		o.state = dDone
		w.dropOut(o)
	}
	w.zombies = slices.DeleteFunc(w.zombies, func(z *recv) bool { return z == w.acting })
}

// retireAll ends every zombie: the moves are over.
func (w *wm) retireAll() {
	for len(w.zombies) > 0 {
		z := w.zombies[0]
		w.as(z, w.retire)
		// (as swaps z back in after retire dropped it from the list)
	}
}

// checkExclusion: when a receiver hands out an ordered message of a group,
// no other receiver has one of that group out, unless it was out at that
// receiver's loss. (For a zombie swapped in, w.zombies holds the owner.)
func (w *wm) checkExclusion(o *wdel) {
	if o.d.Unordered {
		return
	}
	for _, z := range w.zombies {
		for _, x := range z.outs {
			if x.state == dDone || x.d.Unordered || x.d.Group != o.d.Group || x.atLoss {
				continue
			}
			how := "the owner's"
			if z.token < w.token {
				how = "handed out after that receiver's loss"
			}
			w.violate("exclusion", []mkey{o.key}, "life %d (token %d): group %s: %s handed out while life %d (token %d) has %s out (%s)",
				w.life, w.token, o.d.Group, o.key, z.life, z.token, x.key, how)
		}
	}
}

// The fence: it mirrors ordered/scaleout/fence.go's fencedStore (a shard's
// store while its receiver holds the lease with token), without the shard
// filter (one shard here).

// fencedCursors reads the cursors and claims for the token every one that
// an older owner holds (or none does); a stream that a newer owner claimed
// fails with ErrFenced and fences the shard (w.fenced).
func (w *wm) fencedCursors(streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	curs := w.st.read(streams)
	errs := make([]error, len(streams))
	failed := false
	for i, st := range streams {
		c := curs[i]
		switch {
		case c.Owner == w.token:
		case planted("no-claim"):
			// planted: the cursor goes to the Core unclaimed
		case seqstore.Fenced(c, w.token) && !planted("claim-lowers"):
			errs[i] = fmt.Errorf("%w: %s is claimed by token %d, above this receiver's %d", seqstore.ErrFenced, st, c.Owner, w.token)
		default:
			curs[i], errs[i] = w.claim(st)
		}
		if errs[i] != nil {
			failed = true
			if errors.Is(errs[i], seqstore.ErrFenced) {
				w.fence(errs[i])
			}
			continue
		}
		// From here on this token's Core acts on the stream: an older
		// token's advance must not land.
		w.st.taken[st.Group] = max(w.st.taken[st.Group], w.token)
	}
	if !failed {
		return curs, nil
	}
	return curs, &seqstore.BatchError{Errs: errs}
}

// fence stops the shard once a read showed a newer owner.
func (w *wm) fence(err error) {
	if w.fenced {
		return
	}
	w.fenced = true
	w.logf("fenced: %v", err)
	worldStats.leased("a read fenced a stale shell")
	if !w.stale && !w.stopped {
		w.violate("fencing/token", nil, "life %d: the owner (token %d, the highest taken: %d) is fenced: %v", w.life, w.token, w.tokens, err)
	}
}

// claim is seqstore.Claim over the model's store: a compare-and-set of the
// Owner alone, refused when a newer owner holds the stream. Its write may
// fail, or land and be reported failed.
func (w *wm) claim(s seqstore.Stream) (seqstore.Cursor, error) {
	c := w.st.cursor(s.Group)
	if seqstore.Fenced(c, w.token) && !planted("claim-lowers") {
		return seqstore.Cursor{}, fmt.Errorf("%w: %s is claimed by token %d, above %d", seqstore.ErrFenced, s, c.Owner, w.token)
	}
	if c.Owner == w.token {
		return c, nil
	}
	if w.storeOutage || w.chance(w.fWriteBefore) {
		return seqstore.Cursor{}, errors.New("claim: connection reset")
	}
	to := c
	to.Owner = w.token
	if err := seqstore.Failed(w.st.advance([]seqstore.Advance{{Stream: s, From: c, To: to}}), 0, 1); err != nil {
		return seqstore.Cursor{}, err
	}
	w.logf("claimed %s for token %d", s.Group, w.token)
	if c.Owner != 0 {
		worldStats.leased("claims from an older token")
	}
	if w.chance(w.fWriteAfter) {
		return seqstore.Cursor{}, errors.New("claim: timeout after the write")
	}
	return w.st.cursor(s.Group), nil
}

// fencedParkCheck mirrors fencedStore.Park (ordered/scaleout/fence.go), the
// fix of commit-before-delete/stale-park: after a park, re-read the cursors
// of its streams, and report ErrFenced (the entries stay; the caller keeps
// the queue copies) when a newer owner claimed one. A newer owner that
// claimed after the re-read reads its park after the entries landed; one
// that claimed before is seen. INORDER_WORLD_PLANT=no-park-recheck takes it
// out.
func (w *wm) fencedParkCheck(entries []seqstore.Parked) error {
	if w.token == 0 || planted("no-park-recheck") {
		return nil
	}
	for _, e := range entries {
		if c := w.st.cursor(e.Stream.Group); seqstore.Fenced(c, w.token) {
			err := fmt.Errorf("%w: %s is claimed by token %d, above this receiver's %d", seqstore.ErrFenced, e.Stream, c.Owner, w.token)
			w.fence(err)
			return err
		}
	}
	return nil
}

// fencedAdvance writes the batch with the token as the owner in From and
// To, so that a cursor a newer owner claimed refuses it.
func (w *wm) fencedAdvance(batch []seqstore.Advance) error {
	if w.token != 0 && !planted("no-force") {
		fenced := make([]seqstore.Advance, len(batch))
		for i, a := range batch {
			a.From.Owner, a.To.Owner = w.token, w.token
			fenced[i] = a
		}
		batch = fenced
	}
	err := w.applyAdvance(batch)
	if w.stale || w.stopped {
		worldStats.leased(fmt.Sprintf("zombie advance landed %v", err == nil))
	}
	return err
}

// readCursors is the Core's read of its cursors, through its fence when it
// holds a lease.
func (w *wm) readCursors(streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	if w.token == 0 {
		return w.st.read(streams), nil
	}
	return w.fencedCursors(streams)
}

// checkFencing: an advance that landed was written by the newest token
// that took its streams.
func (w *wm) checkFencing(batch []seqstore.Advance) {
	if !w.leases {
		return
	}
	for _, a := range batch {
		t := w.st.taken[a.Stream.Group]
		if w.token >= t {
			continue
		}
		prop, what := "fencing/stale-write", "an advance"
		if w.zombieTx != nil {
			prop, what = "exclusion/zombie-commit", fmt.Sprintf("the transaction of %s, out at its loss,", w.zombieTx.key)
		}
		w.violate(prop, nil, "life %d (token %d): %s landed on %s (%s -> %s) after token %d took the stream",
			w.life, w.token, what, a.Stream.Group, cursor(a.From), cursor(a.To), t)
	}
}

// watchCursor: a stored cursor never moves back, and its Owner never goes
// down.
func (w *wm) watchCursor(group string, old, c seqstore.Cursor) {
	if c.Owner < old.Owner {
		w.violate("fencing/owner-lowered", nil, "life %d (token %d): the cursor of %s went from owner %d to %d (%s -> %s)",
			w.life, w.token, group, old.Owner, c.Owner, cursor(old), cursor(c))
	}
	if c.Epoch < old.Epoch || c.Epoch == old.Epoch && c.Next < old.Next {
		w.violate("fencing/cursor-back", nil, "life %d (token %d): the cursor of %s moved back from %s to %s",
			w.life, w.token, group, cursor(old), cursor(c))
	}
}

// healBound is how long healing may take: TestWorld's bound, and with
// leases a visibility timeout more (a zombie's receipts hide messages).
func (w *wm) healBound() time.Duration {
	d := 10 * time.Minute
	if w.leases {
		d += worldVisibility
	}
	return d
}
