package recvcore_test

import (
	"errors"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// The operator of the world: now and then it repairs a stuck group, as the
// status page offers (repair.go). Which group and what it does come from
// the Core (its stuck groups, as the page shows them); what a repair must
// have done when its ticket resolves is judged against the world:
//
//	repair-durable   a repair's ticket resolves without error only once its effect is in the store:
//	                 SkipHole's range (or the cursor past it), StartAt's start, DeadLetterHead's
//	                 copy in the dead-letter queue and the cursor past the message
//
// The other properties hold with repairs as without: a skip or a start is
// reported (order), and a poison message dead-lettered on request is
// justified (dlq-justified).

// worldRepairs turns the operator on (TestWorldKnownDefects replays cases
// found without it).
var worldRepairs = true

// wrepair is a repair waiting for its ticket.
type wrepair struct {
	action string
	group  string
	key    mkey // DeadLetterHead: the message; StartAt: where it starts; SkipHole: the first seq missing
	skips  int  // SkipHole: the group's skips reported before it
}

// repair repairs one stuck group, if any, with a repair that applies.
func (w *wm) repair() {
	stuck, _ := w.core.StuckStatus(8)
	if len(stuck) == 0 {
		return
	}
	g := stuck[w.repairRng.IntN(len(stuck))]
	r := wrepair{group: g.Group}
	var tk recvcore.Ticket
	var err error
	switch {
	case g.Unstarted && w.repairRng.IntN(2) == 0:
		// Start at the lowest seq held, or one past the seq waited on.
		seq := g.Next + 1
		if len(g.HeldRanges) > 0 {
			seq = g.HeldRanges[0].First
		}
		r.action, r.key = recvcore.ActionStartAt, mkey{group: g.Group, epoch: g.Epoch, seq: seq}
		tk, err = w.core.StartAt(w.now, g.Group, g.Epoch, seq)
	case g.Reason == "gap":
		r.action, r.key, r.skips = recvcore.ActionSkipHole, mkey{group: g.Group, epoch: g.Epoch, seq: g.Next}, len(w.skips[g.Group])
		tk, err = w.core.SkipHole(w.now, g.Group)
	case g.Reason == "poison":
		r.action, r.key = recvcore.ActionDeadLetterHead, mkey{group: g.Group, epoch: g.Epoch, seq: g.Next}
		tk, err = w.core.DeadLetterHead(w.now, g.Group)
		if err == nil {
			w.repairDead[r.key] = true
		}
	default:
		r.action = recvcore.ActionReread
		tk, err = w.core.Reread(w.now, g.Group)
	}
	w.logf("repair %s %s: ticket %d, %v", r.action, g.Group, tk, err)
	switch {
	case err == nil:
		w.repairs[tk] = r
		worldStats.repaired(r.action, "accepted")
	case errors.Is(err, recvcore.ErrNotStuck) || errors.Is(err, recvcore.ErrNoDeadLetter):
		worldStats.repaired(r.action, "refused")
		// Refused: the page offered what the group's state no longer
		// allows (its poison message is out again, ...), or there is no
		// dead-letter queue.
	default:
		w.t.Fatalf("life %d: repair %s of %s: unexpected error %v", w.life, r.action, g.Group, err)
	}
}

// repaired checks a repair whose ticket resolved with err.
func (w *wm) repaired(r wrepair, err error) {
	w.logf("repaired %s %s: %v", r.action, r.group, err)
	if err != nil {
		worldStats.repaired(r.action, "failed: "+brief(err.Error()))
	} else {
		worldStats.repaired(r.action, "done")
	}
	if err != nil || w.contested[r.group] {
		return // a failed wait, or a cursor someone else moves too
	}
	c := w.st.cursor(r.group)
	k := r.key
	switch r.action {
	case recvcore.ActionSkipHole:
		// The skip reported since (none: the missing seq turned up, in
		// the park, and nothing was skipped) is in the store's cursor.
		for _, s := range w.skips[r.group][min(r.skips, len(w.skips[r.group])):] {
			if s.Contains(k.epoch, k.seq) && !c.Below(s.Epoch, s.Last) {
				prop := "repair-durable"
				for _, p := range w.repairs {
					if p.group == r.group && p.action == recvcore.ActionStartAt {
						prop += "/superseded" // a StartAt's clearGap ended the SkipHole
					}
				}
				w.violate(prop, []mkey{k}, "life %d: SkipHole of %s (skipped %d..%d) resolved while the store's cursor is %s",
					w.life, k, s.First, s.Last, cursor(c))
			}
		}
	case recvcore.ActionStartAt:
		marked := k.seq == 1 || len(c.Skipped) == seqstore.MaxSkipped
		for _, s := range c.Skipped {
			marked = marked || s.Epoch == k.epoch && s.First <= 1 && s.Last >= k.seq-1
		}
		if !c.Below(k.epoch, k.seq-1) || c.Epoch == k.epoch && !marked {
			w.violate("repair-durable", []mkey{k}, "life %d: StartAt %s resolved while the store's cursor is %s", w.life, k, cursor(c))
		}
	case recvcore.ActionDeadLetterHead:
		if !w.dead[k] || !c.Below(k.epoch, k.seq) {
			w.violate("repair-durable", []mkey{k}, "life %d: DeadLetterHead of %s resolved (dead-lettered %v) while the store's cursor is %s",
				w.life, k, w.dead[k], cursor(c))
		}
	}
}

// brief shortens an error for the counts of outcomes.
func brief(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}
