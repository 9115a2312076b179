package recvcore_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// TestWorld checks the receive core against a model of the world, not of
// itself (DESIGN.md "The receive core", last point): a queue that behaves
// as MNS does (world_queue_test.go), a store as seqstore documents it
// (world_store_test.go), a dead-letter queue that records what it got,
// senders, an application, and incarnations of the receiver: clean Closes
// (with and without a deadline), Closes whose ctx ends, and crashes, each
// followed by a new Core over the same queue and store
// (world_life_test.go, with the phases aimed at the service's throttling
// rules and the end of a run). What it checks is what the README and the
// package documentation promise per mode, with the truth taken from the
// world, never from the Core's Stats or internals:
//
//	order                 per group and incarnation, a jump only across a reported skip or epoch switch;
//	                      an incarnation's first hand-out at the stored cursor; a tagged message handed
//	                      out Unordered was reported late
//	one-out               at most one message out per group
//	payload               what is handed out or dead-lettered is what the sender sent
//	commit-before-delete  the last copy of a tagged message is deleted only when the store's cursor says
//	                      it was handled, it is parked, or it was settled Unordered or dead-lettered
//	park-drop             an advance drops from the park only what its cursor says was handled
//	amo-once              AtMostOnce never hands a message out twice, in any incarnation, Unordered copies
//	                      included
//	durable-once          no mode hands out again a message whose handling is durable in the store
//	skip-honest           a skipped range in the store never covers a message durably handled
//	recoverable           at every end of an incarnation (clean Close, Close whose ctx ended, crash), every
//	                      message not settled (nor lost to the crash, AtMostOnce) has a copy in the queue
//	                      or the park and a cursor that lets the next incarnation deliver it
//	close-flushes         a clean Close reaches Flushed
//	close-durable         after a clean Close, everything acknowledged is durable in the store
//	no-loss, liveness     once faults stop, every group whose messages are all present is delivered to its
//	                      end within a bound (10 minutes), and nothing is lost (AtMostOnce: except to a
//	                      crash, or a Close whose ctx ended, while it was out)
//	cap                   the queue's own count of messages received and not deleted (by this
//	                      incarnation, with handles it was told) stays within MaxHeld
//	hold                  no message is held received-and-not-deleted past the hold limit (30 minutes,
//	                      or Config.MaxHold once the Core has one)
//	memory                Stats().Memory within MaxMemory plus one receive batch's worth
//	syncack, amo-await    a ticket resolves only once the store's cursor is past the message (for an
//	                      AtMostOnce Unordered hand-out: once the queue deleted it)
//	amo-unordered-drop    an AtMostOnce Unordered hand-out that fails leaves its message to someone
//	startlowest[-skip|-tie]  StartLowest starts at the lowest seq seen in its settle time, and reports the
//	                      seqs present that it passes over
//	stale-settle          a Delivery already settled cannot settle anything again
//	settle-current        the current hand-out can be settled
//	receipt-fresh         no request uses a handle older than one the Core was given by ChangeVisibility
//	held-lapse            a message out or acknowledged and waiting for its commit keeps its visibility
//	idle-reads            an idle receiver reads its store a bounded number of times
//	dlq-justified         only poison, late and untagged messages are dead-lettered (a poison message
//	                      under PoisonBlock when the operator asked: DeadLetterHead)
//	repair-durable        the operator's repairs (world_repair_test.go: SkipHole, StartAt, DeadLetterHead on
//	                      the stuck groups the Core lists) resolve only once their effect is in the store
//	no-spin, no-panic     a due deadline is acted on; no call panics
//	exclusion, fencing    with leases (world_lease_test.go, one case in three): up to three receivers, one
//	                      owning the streams at a time, moved by handover, loss or a stale owner; no two
//	                      hand out one group at once, no older token's write lands, cursors and their
//	                      Owner never go back; liveness holds within its bound plus a visibility timeout
//
// A property's name carries, after a slash, the mechanism a violation was
// attributed to (memory/flood, cap/failed-delete, ...). Properties that
// today's code is known to break (worldKnownFailing) are checked but only
// counted unless INORDER_WORLD_STRICT names them (a comma-separated list,
// or "all"): the test stays green for CI, and -v shows what is still
// broken and how often. INORDER_WORLD_TRACE=1 traces a case step by step
// (with -rapid.seed or -rapid.failfile, and -rapid.checks=1).
//
// go test ./internal/recvcore -run 'TestWorld$' -rapid.checks=N [-v]
func TestWorld(t *testing.T) {
	worldStats.reset()
	rapid.Check(t, worldCase)
	worldStats.log(t)
}

// worldKnownFailing lists the properties (with the mechanism after the
// slash) that still fail, each with what breaks it. They are counted, not
// enforced, unless INORDER_WORLD_STRICT names them. Take a line out once
// its defect is fixed.
//
// The model was written against 3ffb92a, where 35 properties failed: the
// defects of shared/regressions/review2 (recoverable/no-skip,
// recoverable/parked, commit-before-delete/parked-owed,
// recoverable/unordered, startlowest, startlowest-skip, skip-honest,
// durable-once, amo-once, no-panic, hold, memory/flood, cap/failed-delete,
// receipt-fresh, cap/extension-race, cap/consequence, idle-reads,
// stale-settle, held-lapse) and ones it found (amo-unordered-drop, payload,
// the older-epoch demotion, no-loss/conflict, park-drop,
// liveness/eo-dead-letter, liveness/poison, no-spin/closing,
// close-flushes/reads, memory/delete-burst, liveness/parked-no-cursor).
// Those are fixed and enforced; worldDefectSeeds replays a case of each.
var worldKnownFailing = map[string]string{
	// Open.
	"liveness/startlowest":      "under a flood of new StartLowest groups and a memory budget far below it, a group's lone redelivered arrival settles for up to 10 extra rounds (the dequeue count reflects the Core's own evictions) and is evicted meanwhile: it starts late, past the model's healing bound",
	"liveness/flood":            "kin of ShedRescanChurnWhileIdle: under a flood, groups shed before GapTimeout re-settle their hole each time they come back, past the model's healing bound",
	"memory/flood":              "rare (1 in about 20,000 cases of a long run): a flood of new groups with parking, shed and re-loaded while their parks are read, holds 3.4 times a 16 KiB budget (56 KB, 63 groups in memory, 32 unparks queued); not yet understood",
	"liveness/older-epoch":      "rare (1 in about 20,000 cases of a long run, and the case did not replay): after healing, a flood group's message of an older epoch below a newer stored cursor was not delivered",
	"liveness/parked-no-cursor": "rare (1 in about 10,000 cases of a long run, flood with parking and restarts): after healing, a handled message is still in the queue (not deleted) in a group whose cursor was stored late",
	"recoverable/no-skip":       "rare: AtMostOnce, a Close with a deadline: a hand-out refused at Close after its commit went out needs a skip mark; when a second receiver's write conflicts with it, the deadline ends before the re-read and rewrite (the skip is reported, ReportSkip, not marked)",

	// Documented or by design.
	"amo-once/forgotten":     "Stats.Forgotten: a copy of a late or untagged message handed out again once the dedup set was trimmed to fit MaxMemory",
	"amo-uncertain-conflict": "inherent: AtMostOnce, second receiver: the commit of a hand-out has an unknown outcome (applied), and the other receiver moved the cursor past it; the Core cannot tell its write from the other's, and refuses the hand-out rather than risk a second one",
	"amo-unordered-drop":     "inherent (1 in about 5,000 cases): AtMostOnce Unordered, a delete whose outcome is unknown, retried and found stale with an answer that came too near the end of the visibility to tell our own applied delete from a receipt gone stale; the Core refuses the hand-out (a duplicate would break AtMostOnce), and the message is lost unless it comes back",
	"amo-once/older-epoch":   "a copy of a late message of an older epoch handed out again by a later incarnation (the dedup set lives as long as one Core; a skipped seq's hand-out is carved out of its range, an older epoch has no range to carve)",
}

var (
	worldTrace  = os.Getenv("INORDER_WORLD_TRACE") != ""
	worldStrict = func() map[string]bool {
		m := map[string]bool{}
		for _, p := range strings.Split(os.Getenv("INORDER_WORLD_STRICT"), ",") {
			if p = strings.TrimSpace(p); p != "" {
				m[p] = true
			}
		}
		return m
	}()
)

// enforced reports whether a violation of prop fails the test.
func enforced(prop string) bool {
	if worldStrict["all"] || worldStrict[prop] {
		return true
	}
	_, known := worldKnownFailing[prop]
	return !known
}

// worldStats counts the violations of properties not enforced, over a run.
var worldStats = &violationCounts{}

type violationCounts struct {
	mu    sync.Mutex
	cases int
	n     map[string]int // cases with at least one violation, by property
	first map[string]string
	// memOver: per case (floods aside), the most Stats().Memory went over
	// MaxMemory.
	memOver []int
	// repairs: the operator's repairs (world_repair_test.go), by action and
	// outcome ("refused", "done", "failed").
	repairs map[string]int
	// leases: what the lease moves did (world_lease_test.go), by event.
	leases map[string]int
}

func (v *violationCounts) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cases, v.n, v.first, v.memOver, v.repairs, v.leases = 0, map[string]int{}, map[string]string{}, nil, map[string]int{}, map[string]int{}
}

func (v *violationCounts) leased(event string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.leases == nil {
		v.leases = map[string]int{}
	}
	v.leases[event]++
}

func (v *violationCounts) repaired(action, outcome string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.repairs == nil {
		v.repairs = map[string]int{}
	}
	v.repairs[action+" "+outcome]++
}

func (v *violationCounts) add(prop, msg string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.n == nil {
		v.n, v.first = map[string]int{}, map[string]string{}
	}
	v.n[prop]++
	if _, ok := v.first[prop]; !ok {
		v.first[prop] = msg
	}
}

func (v *violationCounts) log(t *testing.T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	props := make([]string, 0, len(v.n))
	for p := range v.n {
		props = append(props, p)
	}
	sort.Strings(props)
	if n := len(v.memOver); n > 0 {
		slices.Sort(v.memOver)
		t.Logf("memory over the budget, per case (floods aside): median %d, p99 %d, max %d bytes", v.memOver[n/2], v.memOver[n*99/100], v.memOver[n-1])
	}
	if len(v.repairs) > 0 {
		t.Logf("the operator's repairs: %v", v.repairs)
	}
	if len(v.leases) > 0 {
		t.Logf("lease moves and what followed: %v", v.leases)
	}
	for _, p := range props {
		t.Logf("not enforced: %-18s broken in %d of %d cases (%s); first: %s", p, v.n[p], v.cases, worldKnownFailing[p], v.first[p])
	}
}

func worldCase(t *rapid.T) { runWorld(t) }

// runWorld runs one case and returns its world.
func runWorld(t *rapid.T) (w *wm) {
	worldStats.mu.Lock()
	worldStats.cases++
	worldStats.mu.Unlock()
	w = newWorldModel(t)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if strings.HasPrefix(fmt.Sprintf("%T", r), "rapid.") {
			panic(r) // a failure reported through t
		}
		// The case ends here whether or not the property is enforced:
		// nothing sound is left to check.
		w.record("no-panic", nil, fmt.Sprintf("life %d: the Core panicked: %v, in %s", w.life, r, panicSite()))
	}()
	w.run()
	if !w.flood {
		worldStats.mu.Lock()
		worldStats.memOver = append(worldStats.memOver, w.memOver)
		worldStats.mu.Unlock()
	}
	return w
}

// panicSite names the Core's function that panicked, from the stack of a
// deferred recover.
func panicSite() string {
	var fs []string
	for _, line := range strings.Split(string(debug.Stack()), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), "github.com/inorder/inorder/internal/recvcore."); ok && len(fs) < 2 {
			fs = append(fs, f[:strings.IndexByte(f, '(')+strings.IndexByte(f[strings.IndexByte(f, '(')+1:], '(')+1])
		}
	}
	return strings.Join(fs, " from ")
}

// Timing of the world (virtual time).
const (
	worldVisibility = 30 * time.Second
	worldGapTimeout = 5 * time.Second
	worldHoldLimit  = 30 * time.Minute // the service's rule
)

// wm is the world: queue, store, dead-letter queue, senders, the
// application, and the receiver's current incarnation.
type wm struct {
	t   *rapid.T
	rng *rand.Rand
	cfg recvcore.Config
	now time.Time

	q  *mnsQueue
	st *refStore

	// the receiver that owns the streams now (its Core, its shell's
	// in-flight actions, its application); world_lease_test.go swaps in
	// the older owners (zombies) to act for them
	recv
	lives int // incarnations started, over all receivers

	// leases (world_lease_test.go)
	leases   bool
	leaseRng *rand.Rand
	procs    int     // receiver processes
	tokens   uint64  // the lease counter: the last token taken
	zombies  []*recv // older owners still acting
	acting   *recv   // the zombie swapped in (as), whose recv holds the owner's meanwhile
	moves    int
	zombieTx *wdel // a zombie's ExactlyOnce transaction is being applied
	// staleParked: parked by a zombie (commit-before-delete/stale-park)
	staleParked map[mkey]bool

	// scenario
	scenario  string
	holdLimit time.Duration
	poison    map[string]bool // the application always nacks these groups' ordered messages
	holed     map[string]bool // a seq of the group is never sent: under GapWait it never ends
	flood     bool
	promptVis bool // visibility changes are executed as soon as asked, as a shell does
	lapseChk  bool // held-lapse is checked (nothing else excuses a lapse in this case)
	bodyIDs   map[string]string
	ids       int

	// faults (per mille); 0 once healed
	fLostRecv, fDelBefore, fDelAfter, fVisFail, fVisAfter                         int
	fReadFail, fWriteBefore, fWriteAfter, fWriteTransient, fParkFail              int
	fParkAfter, fDeadFail, fOther, fAppNack, fStaleAck, fAbandon, fReturn, fCrash int
	deleteOutage, storeOutage                                                     bool
	// fWriteCorrupt: a commit that fails for good for one of its groups
	// (seqstore.ErrCorrupt: the group stops, its cursor read again after
	// RetryMax), drawn from corruptRng so that the cases without one run
	// as they did before it was added (seed-anchored mutant rows).
	fWriteCorrupt int
	corruptRng    *rand.Rand

	// truth, over all incarnations
	sent       map[mkey]bool
	given      map[mkey]int  // times the application got it
	givenLife  map[mkey]int  // the incarnation that first gave it
	acked      map[mkey]bool // acknowledged (AtMostOnce: given), in order or Unordered
	ackedUnord map[mkey]bool // acknowledged as an Unordered hand-out
	ackedOrd   map[mkey]bool // acknowledged in order (ExactlyOnce: its advance applied)
	durable    map[mkey]bool // handled, and the store's cursor says so: never to be handed out again
	dead       map[mkey]bool
	excused    map[mkey]bool // AtMostOnce: out when its incarnation crashed
	other      map[mkey]bool // handled by the second receiver
	contested  map[string]bool
	tainted    map[mkey]bool // broke a property that is not enforced: later checks leave it alone
	uncertain  map[mkey]bool // AtMostOnce: an advance past it applied, and reported failed
	everParked map[mkey]bool
	memOver    int        // the most memory went over the budget
	readsN     [3]int     // streams read, park queries and scans asked, for idle-reads
	repairRng  *rand.Rand // the operator's (world_repair_test.go)
	lateRep    map[mkey]bool
	broken     map[string]bool
	repairDead map[mkey]bool // poison messages an operator asked to dead-letter (DeadLetterHead)

}

// recv is one incarnation of a receiver: its Core, what its shell has in
// flight, what its application holds.
type recv struct {
	core *recvcore.Core
	life int
	// token is its lease's fencing token (world_lease_test.go); 0 when the
	// run has no leases and the Core sees the store as it is.
	token uint64
	// stale: a zombie whose shell still runs, not knowing it lost the
	// lease; stopped: a zombie whose shard was stopped (it hands out
	// nothing, and what it asks for is never executed).
	stale, stopped bool
	staleFor       int  // a stale shell's acts left before it learns
	fenced         bool // a read through its fence showed a newer owner

	// the shell's in-flight actions
	reads    []recvcore.Read
	commits  []recvcore.Commit
	deletes  []recvcore.Delete
	vis      []recvcore.ChangeVisibility
	deads    []recvcore.DeadLetter
	parks    []recvcore.Park
	unparks  []recvcore.Unpark
	scans    []recvcore.Scan
	requeues []recvcore.Requeue

	// the application, this incarnation
	outs      []*wdel                   // handed out and not finished
	finished  []*wdel                   // settled by the application (for stale settles)
	byTicket  map[recvcore.Ticket]*wdel // AtMostOnce waits
	syncWaits map[recvcore.Ticket]mkey  // SyncAck tickets
	nexted    []*wdel                   // every hand-out of this incarnation

	closing  bool         // this incarnation's Core was closed
	bursting bool         // the Core asked for many deletes at once, and they are not all done
	nacks    map[mkey]int // application nacks, this incarnation

	// the operator (world_repair_test.go)
	repairs map[recvcore.Ticket]wrepair // this incarnation's repairs waiting

	// this incarnation
	lastOrd   map[string]mkey
	skips     map[string][]seqstore.Range
	epochRep  map[string][]uint64
	fresh     map[string]*freshGroup // StartLowest: groups with no stored cursor
	ackedLife map[mkey]bool
	failedGrp map[string]bool     // stopped for good, its cursor not read since (see stoppedForGood)
	stopKept  map[string]bool     // AtLeastOnce: stopped, kept what it acknowledged; no commit of the group succeeded since
	adopts    map[string]bool     // stopped keeping nothing: its next cursor read is adopted (rolledBack)
	rollback  map[string]rollback // where a group that adopted its stored cursor goes on: its next ordered hand-out
	delFail   map[string]bool     // handles whose delete failed with a retryable error
	raced     map[string]string   // message id: the handle a ChangeVisibility gave while a delete of the old one was in flight
	lateCV    map[string]string   // message id: the handle an extension gave some time after the Core asked for it
}

// wdel is one hand-out, as the application tracks it.
type wdel struct {
	d     recvcore.Delivery
	key   mkey
	life  int
	state int
	txed  bool // ExactlyOnce: its advance was applied in the application's transaction
	// atLoss: out when its receiver lost the lease (world_lease_test.go)
	atLoss bool
}

const (
	dAwait    = iota + 1 // AtMostOnce: waiting for its ticket
	dResolved            // the ticket resolved; the Receive has not taken it yet
	dGiven               // the application has it
	dDone                // settled, abandoned or dropped
)

// freshGroup is what the world saw of a StartLowest group with no stored
// cursor in this incarnation.
type freshGroup struct {
	readAt   time.Time // its cursor read found none: the settle time starts
	arrivals []mkey    // arrivals, with their time and dequeue count
	at       []time.Time
	dequeue  []int
	started  bool
	// stopped: a store error stopped the group for good before it
	// started (see stoppedForGood); what arrives until a read finds no
	// cursor again is released, not held for the settle.
	stopped bool
}

// stoppedForGood records that a store error stops group for good (a
// cursor read, or a commit when write, refused with ErrCorrupt): the Core
// (becomeFailed) lets go of what the group holds, and of each arrival
// until a read of its cursor succeeds.
//
// A StartLowest group whose cursor was never read (its load read refused)
// forgets what it saw: read again and finding no cursor, its settle time
// starts at its first arrival after that read. Kept, the arrivals from
// before would make the model's settle start at that read and leave out a
// lower seq that came back (redelivered) later within the Core's settle
// time (INORDER_REV_READCORRUPT=30 seed 21: j0's load read refused, the
// Core started at j0/5/1, seen 3s after the read that found no cursor).
//
// AtLeastOnce (keepsAcked; README "A store that refuses a group for good";
// review of a13399d, B): a group stopped while running, with what it
// acknowledged or skipped not durable, keeps it, once. Stopped again
// before a commit of the group succeeded (its reread refused too, or the
// write of what it kept), or stopped with nothing kept, it keeps nothing:
// what was acknowledged is given back, no longer waiting for its commit,
// and can be delivered again (held-lapse, seed 21 with
// INORDER_REV_READCORRUPT=30: s/9/17, its commit and then its reread
// refused). A group that keeps nothing, in every mode, adopts its next
// cursor read as it is (rolledBack). (The Core also ends a keep once
// someone else's cursor moves it on; the model does not follow that,
// contested groups aside.)
func (w *wm) stoppedForGood(group string, write bool) {
	alo := w.cfg.Mode == recvcore.AtLeastOnce
	keep := alo && !w.failedGrp[group] && !w.stopKept[group] && (write || w.aheadOfStore(group))
	if alo && !keep {
		for k := range w.ackedLife {
			if k.group == group && !handledBy(w.st.cursor(group), k) {
				delete(w.ackedLife, k)
			}
		}
	}
	if !keep {
		w.adopts[group] = true
	}
	w.stopKept[group] = keep
	w.failedGrp[group] = true
	if write || w.cfg.Start != recvcore.StartLowest || w.st.cursors[group].Next != 0 {
		return
	}
	if f := w.fresh[group]; f == nil || f.readAt.IsZero() && !f.started {
		w.fresh[group] = &freshGroup{stopped: true}
	}
}

// aheadOfStore reports whether group acknowledged or reported skipped in
// this incarnation what its stored cursor does not hold: the Core's
// acknowledged cursor is ahead of its durable one.
func (w *wm) aheadOfStore(group string) bool {
	c := w.st.cursor(group)
	for k := range w.ackedLife {
		if k.group == group && !handledBy(c, k) {
			return true
		}
	}
	for _, r := range w.skips[group] {
		if r.Epoch > c.Epoch || r.Epoch == c.Epoch && r.Last >= c.Next {
			return true
		}
	}
	return false
}

// rollback is where a group that adopted its stored cursor goes on
// (rolledBack): from cur, or after out, the hand-out the application holds
// at it.
type rollback struct {
	cur seqstore.Cursor
	out mkey
}

// rolledBack: group, stopped keeping nothing (stoppedForGood), read its
// cursor cur: the Core adopts it (becomeLoaded), and hands out from it
// again, or after the hand-out the application holds at it. What it handed
// out past cur and acknowledged, or skipped with a write the store refused
// (a SkipHole), comes again, in order from cur: its next ordered hand-out
// may follow cur as the first of an incarnation would (give), as well
// as the group's last one (seed 21 with INORDER_REV_READCORRUPT=30: g0's
// SkipHole of 100/9 and the Ack of 100/10, then its reread, refused; read
// again, the stored cursor 100/9; 100/9 arrives and is handed out after
// 100/11). In ExactlyOnce mode, a dead letter's advance refused for good
// is not written: read again, the cursor is behind the dead letter, which
// is handed out again, as README "A store that refuses a group for good"
// says (the package's TestWorld, a random seed: g0/1100/1, its advance
// refused, handed out again at attempt 1 after its own dead-lettering).
func (w *wm) rolledBack(group string, cur seqstore.Cursor) {
	delete(w.adopts, group)
	rb := rollback{cur: cur}
	for _, o := range w.outs {
		if o.state != dDone && !o.d.Unordered && o.key == (mkey{group: group, epoch: cur.Epoch, seq: cur.Next}) {
			rb.out = o.key
		}
	}
	w.rollback[group] = rb
}

func newWorldModel(t *rapid.T) *wm {
	seed := rapid.Uint64().Draw(t, "seed")
	w := &wm{
		t:           t,
		now:         time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		rng:         rand.New(rand.NewPCG(seed, 7)),
		corruptRng:  rand.New(rand.NewPCG(seed, 11)),
		repairRng:   rand.New(rand.NewPCG(seed, 11)), // its own: the other draws stay as they were
		repairDead:  map[mkey]bool{},
		q:           newMNSQueue(worldVisibility),
		st:          newRefStore("q"),
		holdLimit:   worldHoldLimit,
		poison:      map[string]bool{},
		holed:       map[string]bool{},
		bodyIDs:     map[string]string{},
		sent:        map[mkey]bool{},
		given:       map[mkey]int{},
		givenLife:   map[mkey]int{},
		acked:       map[mkey]bool{},
		ackedUnord:  map[mkey]bool{},
		ackedOrd:    map[mkey]bool{},
		durable:     map[mkey]bool{},
		dead:        map[mkey]bool{},
		excused:     map[mkey]bool{},
		other:       map[mkey]bool{},
		contested:   map[string]bool{},
		tainted:     map[mkey]bool{},
		uncertain:   map[mkey]bool{},
		everParked:  map[mkey]bool{},
		staleParked: map[mkey]bool{},
		lateRep:     map[mkey]bool{},
		broken:      map[string]bool{},
	}
	w.scenario = rapid.SampledFrom([]string{"mixed", "mixed", "mixed", "mixed", "flood", "skips", "startlowest", "stall", "outage"}).Draw(t, "scenario")
	w.cfg = recvcore.Config{
		Queue:             "q",
		Mode:              recvcore.Mode(rapid.IntRange(0, 2).Draw(t, "mode")),
		GapPolicy:         recvcore.GapPolicy(rapid.IntRange(0, 1).Draw(t, "gap")),
		GapTimeout:        worldGapTimeout,
		Start:             recvcore.StartPolicy(rapid.IntRange(0, 1).Draw(t, "start")),
		StartSettle:       2 * time.Second,
		Untagged:          recvcore.UntaggedDeliver,
		MaxAttempts:       rapid.IntRange(2, 4).Draw(t, "maxAttempts"),
		RetryInitial:      100 * time.Millisecond,
		RetryMax:          2 * time.Second,
		Window:            rapid.SampledFrom([]int{2, 4, 8, 64}).Draw(t, "window"),
		MaxHeld:           rapid.SampledFrom([]int{8, 16, 48, 400}).Draw(t, "maxHeld"),
		MaxMemory:         rapid.SampledFrom([]int{8 << 10, 32 << 10, 1 << 20}).Draw(t, "maxMemory"),
		MaxUndeletedRate:  1000,
		MaxBatch:          rapid.SampledFrom([]int{4, 16}).Draw(t, "maxBatch"),
		MaxAdvances:       rapid.IntRange(1, 8).Draw(t, "maxAdvances"),
		MaxParks:          4,
		CommitInterval:    rapid.SampledFrom([]time.Duration{0, 5 * time.Millisecond}).Draw(t, "commitInterval"),
		ReapInterval:      200 * time.Millisecond,
		Visibility:        worldVisibility,
		VisibilityMargin:  10 * time.Second,
		VisibilityExtend:  worldVisibility,
		ShortVisibility:   time.Second,
		MaxVisibilityRate: rapid.SampledFrom([]float64{5, 1000}).Draw(t, "visRate"),
		IdleEvict:         20 * time.Second,
		Park:              rapid.Bool().Draw(t, "park"),
		MaxEpochAhead:     24 * time.Hour,
	}
	if rapid.Bool().Draw(t, "deadLetter") {
		w.cfg.DeadLetter = true
		w.cfg.Poison = recvcore.PoisonPolicy(rapid.IntRange(0, 1).Draw(t, "poisonPolicy"))
		w.cfg.Untagged = recvcore.UntaggedPolicy(rapid.IntRange(0, 1).Draw(t, "untaggedPolicy"))
	}
	// A Core that takes a hold limit is held to its own.
	if f := reflect.ValueOf(&w.cfg).Elem().FieldByName("MaxHold"); f.IsValid() && f.Type() == reflect.TypeOf(time.Duration(0)) {
		w.holdLimit = 20 * time.Minute
		f.Set(reflect.ValueOf(w.holdLimit))
	}
	w.promptVis = rapid.Bool().Draw(t, "promptVis")
	faults := rapid.IntRange(0, 2).Draw(t, "faults") // none, some, many
	if faults > 0 {
		k := faults
		w.fLostRecv, w.fDelBefore, w.fDelAfter = 10*k, 25*k, 15*k
		w.fReadFail, w.fWriteBefore, w.fWriteAfter, w.fWriteTransient = 30*k, 25*k, 25*k, 15*k
		w.fParkFail, w.fParkAfter, w.fDeadFail = 30*k, 20*k, 50*k
		w.fWriteCorrupt = 5 * k
		if rapid.Bool().Draw(t, "visFaults") {
			w.fVisFail, w.fVisAfter = 20*k, 10*k
		}
		if w.cfg.Mode != recvcore.ExactlyOnce && rapid.IntRange(0, 3).Draw(t, "secondReceiver") == 0 {
			w.fOther = 5 * k
		}
	}
	w.fAppNack, w.fStaleAck, w.fAbandon, w.fReturn = 50, 20, 60, 30
	w.fCrash = rapid.SampledFrom([]int{0, 3, 10}).Draw(t, "restarts")
	w.scene()
	w.lapseChk = w.promptVis && w.cfg.MaxVisibilityRate >= 1000 && w.fVisFail == 0 && w.fVisAfter == 0
	w.setupLeases(seed)
	w.start()
	return w
}

// scene sends the scenario's messages.
func (w *wm) scene() {
	t := w.t
	switch w.scenario {
	case "flood":
		// Floods of new groups, each with a message that is not seq 1,
		// under a small budget. Variant "far": seq 1 and a seq beyond the
		// window (parked), the seqs between never sent.
		w.flood = true
		w.cfg.MaxMemory = rapid.SampledFrom([]int{16 << 10, 64 << 10}).Draw(t, "floodMemory")
		w.cfg.MaxHeld = rapid.SampledFrom([]int{64, 400}).Draw(t, "floodHeld")
		w.cfg.MaxBatch = 16
		far := rapid.Bool().Draw(t, "far")
		n := rapid.IntRange(100, 1200).Draw(t, "floodGroups")
		for i := range n {
			g := fmt.Sprintf("f%04d", i)
			if far {
				w.sendTagged(mkey{group: g, epoch: 7, seq: 1}, true)
				w.sendTagged(mkey{group: g, epoch: 7, seq: uint64(w.cfg.Window) + 3}, true)
				w.holed[g] = true
				continue
			}
			w.sendTagged(mkey{group: g, epoch: 7, seq: 2}, true)
			if w.rng.IntN(2) == 0 {
				w.sendTagged(mkey{group: g, epoch: 7, seq: 1}, false) // late: sent at heal
			} else {
				w.holed[g] = true
			}
		}
		w.sendGroups(rapid.IntRange(0, 2).Draw(t, "groups"))
	case "skips":
		// One group loses every other seq: more holes than a cursor keeps
		// skipped ranges. Copies of the seqs it delivered come back late.
		w.cfg.GapPolicy = recvcore.GapSkip
		n := uint64(rapid.IntRange(34, 44).Draw(t, "skipsN"))
		for s := uint64(1); s <= n; s++ {
			k := mkey{group: "s", epoch: 9, seq: s}
			if s%2 == 0 && s < n {
				w.sent[k] = false // never sent: not a message to deliver
				continue
			}
			w.sendTagged(k, true)
			if w.rng.IntN(3) == 0 {
				w.sendTagged(k, false) // a duplicate send that arrives late
			}
		}
		w.sendGroups(rapid.IntRange(0, 2).Draw(t, "groups"))
	case "startlowest":
		// Receivers joining running streams: each group's backlog starts
		// above 1, shuffled by the queue.
		w.cfg.Start = recvcore.StartLowest
		w.cfg.MaxHeld, w.cfg.Window, w.cfg.MaxMemory = 400, 64, 1<<20 // the settle keeps all it sees
		for gi := range rapid.IntRange(1, 4).Draw(t, "groups") {
			g := fmt.Sprintf("j%d", gi)
			lo := uint64(rapid.IntRange(1, 40).Draw(t, "lo"))
			n := uint64(rapid.IntRange(1, 30).Draw(t, "n"))
			for s := lo; s < lo+n; s++ {
				w.sendTagged(mkey{group: g, epoch: 5, seq: s}, true)
			}
		}
	case "stall":
		// A group stuck on a hole (seq 1 never sent) while others go on.
		w.cfg.GapPolicy = recvcore.GapWait
		w.sendGroups(rapid.IntRange(1, 3).Draw(t, "groups"))
		w.holed["h"] = true
		w.sent[mkey{group: "h", epoch: 3, seq: 1}] = false
		for s := uint64(2); s <= 4; s++ {
			w.sendTagged(mkey{group: "h", epoch: 3, seq: s}, true)
		}
	case "outage":
		// Outages of deletes or of the store; what the receiver holds
		// keeps its visibility (prompt changes, a rate that suffices).
		w.promptVis, w.cfg.MaxVisibilityRate = true, 1000
		w.fVisFail, w.fVisAfter = 0, 0
		w.sendGroups(rapid.IntRange(1, 4).Draw(t, "groups"))
	default:
		w.sendGroups(rapid.IntRange(1, 5).Draw(t, "groups"))
	}
	for range rapid.IntRange(0, 3).Draw(t, "untagged") {
		w.ids++
		id := fmt.Sprintf("id%d", w.ids)
		body := []byte(fmt.Sprintf("plain-%d", w.ids))
		k := mkey{id: id}
		w.q.add(id, body, k, w.rng.IntN(8) != 0)
		w.sent[k] = true
		w.bodyIDs[string(body)] = id
	}
	if rapid.IntRange(0, 3).Draw(t, "poisonGroup") == 0 {
		w.poison["g0"] = true
	}
	for _, m := range w.q.msgs {
		if m.sent && w.rng.IntN(15) == 0 {
			m.sent = false // held back: arrives late
		}
	}
}

// sendGroups sends n ordinary groups: shuffled (the queue picks at random),
// duplicate sends, sender resets, and sometimes a seq never sent.
func (w *wm) sendGroups(n int) {
	t := w.t
	for gi := range n {
		g := fmt.Sprintf("g%d", gi)
		epoch := uint64(100 + gi)
		last := uint64(rapid.IntRange(1, 25).Draw(t, "n"))
		hole := uint64(0)
		if rapid.IntRange(0, 5).Draw(t, "hole") == 0 {
			hole = 1 + uint64(w.rng.IntN(int(last)))
			w.holed[g] = true
		}
		for s := uint64(1); s <= last; s++ {
			if s == hole {
				w.sent[mkey{group: g, epoch: epoch, seq: s}] = false
				continue
			}
			w.sendTagged(mkey{group: g, epoch: epoch, seq: s}, true)
			if w.rng.IntN(10) == 0 {
				w.sendTagged(mkey{group: g, epoch: epoch, seq: s}, w.rng.IntN(2) == 0)
			}
		}
		if rapid.IntRange(0, 5).Draw(t, "reset") == 0 {
			for s := uint64(1); s <= 4; s++ {
				w.sendTagged(mkey{group: g, epoch: epoch + 1000, seq: s}, true)
			}
		}
	}
}

func (w *wm) sendTagged(k mkey, now bool) {
	w.ids++
	id := fmt.Sprintf("id%d", w.ids)
	body := envelope.Append(nil, envelope.Header{Group: k.group, Epoch: k.epoch, Seq: k.seq}, []byte(k.String()))
	w.q.add(id, body, k, now)
	w.sent[k] = true
}

// start begins an incarnation: a new Core over the same queue and store.
func (w *wm) start() {
	w.cfg.Seed = w.rng.Uint64()
	c, err := recvcore.New(w.cfg)
	if err != nil {
		w.t.Fatalf("New: %v", err)
	}
	w.recv = recv{core: c}
	w.lives++
	w.life = w.lives
	w.takeToken()
	w.reads, w.commits, w.deletes, w.vis, w.deads, w.parks, w.unparks, w.scans, w.requeues = nil, nil, nil, nil, nil, nil, nil, nil, nil
	w.outs, w.finished, w.nexted = nil, nil, nil
	w.byTicket = map[recvcore.Ticket]*wdel{}
	w.syncWaits = map[recvcore.Ticket]mkey{}
	w.nacks = map[mkey]int{}
	w.lastOrd = map[string]mkey{}
	w.skips = map[string][]seqstore.Range{}
	w.epochRep = map[string][]uint64{}
	w.fresh = map[string]*freshGroup{}
	w.ackedLife = map[mkey]bool{}
	w.failedGrp = map[string]bool{}
	w.stopKept = map[string]bool{}
	w.adopts = map[string]bool{}
	w.rollback = map[string]rollback{}
	w.closing = false
	w.delFail = map[string]bool{}
	w.raced = map[string]string{}
	w.lateCV = map[string]string{}
	w.repairs = map[recvcore.Ticket]wrepair{}
	w.logf("start life %d", w.life)
}

func (w *wm) chance(perMille int) bool { return perMille > 0 && w.rng.IntN(1000) < perMille }

func (w *wm) logf(format string, args ...any) {
	if worldTrace {
		w.t.Logf("%s L%d "+format, append([]any{w.now.Format("15:04:05.000"), w.life}, args...)...)
	}
}

// violate reports a broken property: a failure when it is enforced, else
// a count, and the keys involved are left alone by later checks.
func (w *wm) violate(prop string, keys []mkey, format string, args ...any) {
	w.record(prop, keys, fmt.Sprintf(format, args...))
}

func (w *wm) record(prop string, keys []mkey, msg string) {
	if enforced(prop) {
		w.t.Fatalf("[%s] %s", prop, msg)
	}
	for _, k := range keys {
		w.tainted[k] = true
	}
	if !w.broken[prop] {
		w.broken[prop] = true
		worldStats.add(prop, firstLine(msg))
	}
	w.logf("VIOLATION (not enforced) [%s] %s", prop, msg)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// payload is the payload the sender sent for k (id for an untagged one).
func (w *wm) payload(k mkey, id string) string {
	if k.tagged() {
		return k.String()
	}
	if m := w.q.byID[id]; m != nil {
		return string(m.body)
	}
	return ""
}

// keyOf names the message of a Delivery.
func (w *wm) keyOf(d recvcore.Delivery) mkey {
	if m := w.q.byID[d.ID]; m != nil {
		return m.key
	}
	return mkey{group: d.Group, epoch: d.Epoch, seq: d.Seq}
}

// The run.

func (w *wm) run() {
	steps := rapid.IntRange(100, 800).Draw(w.t, "steps")
	if w.flood {
		steps = rapid.IntRange(100, 300).Draw(w.t, "floodSteps")
	}
	phaseAt := -1
	if w.scenario == "stall" || w.scenario == "outage" || w.flood {
		phaseAt = rapid.IntRange(0, steps-1).Draw(w.t, "phaseAt")
	}
	for i := range steps {
		if i == phaseAt {
			switch {
			case w.scenario == "stall":
				w.stall()
			case w.scenario == "outage" && w.rng.IntN(2) == 0:
				w.outage(true, false)
			case w.scenario == "outage":
				w.outage(false, true)
			case w.flood:
				w.idle()
			}
		}
		w.step()
	}
	w.heal()
	w.end(rapid.IntRange(0, 2).Draw(w.t, "finalEnd"))
	w.heal()
}

func (w *wm) step() {
	switch w.rng.IntN(16) {
	case 0, 1, 2:
		w.fetch()
	case 3, 4:
		w.next()
	case 5, 6:
		w.settle(false)
	case 7, 8, 9, 10:
		w.doOne()
	case 11:
		w.advance(time.Duration(w.rng.IntN(3000)) * time.Millisecond)
	case 12:
		w.appMisc()
	case 13:
		w.release()
	case 14:
		if w.chance(w.fOther * 20) {
			gs := slices.Sorted(func(yield func(string) bool) {
				for g := range w.st.cursors {
					if !yield(g) {
						return
					}
				}
			})
			if len(gs) > 0 {
				w.otherReceiver(gs[w.rng.IntN(len(gs))])
			}
		}
	case 15:
		switch {
		case w.chance(w.fCrash * 10):
			w.end(w.rng.IntN(4))
		case w.chance(w.fCrash * 10):
			w.closeDuringHandOut()
		}
	}
	if worldRepairs && w.repairRng.IntN(40) == 0 {
		w.repair()
	}
	if w.leases {
		w.leaseStep()
	}
	w.collect()
	w.checkStep()
}

// release lets the senders' held-back messages go into the queue.
func (w *wm) release() {
	for _, m := range w.q.msgs {
		if !m.sent && w.rng.IntN(4) == 0 && !w.flood {
			m.sent = true
		}
	}
}

// fetch is one receive as a fetcher makes it: as many as the Core has
// room for, one batch at most.
func (w *wm) fetch() {
	n := min(w.core.Room(w.now), w.cfg.MaxBatch)
	if n <= 0 {
		return
	}
	in := w.q.receive(w.now, n, w.life, w.rng, func(*qMsg) bool { return w.chance(w.fLostRecv) })
	if len(in) == 0 {
		return
	}
	for _, x := range in {
		w.noteArrival(x)
	}
	if worldTrace {
		var s []string
		for _, x := range in {
			s = append(s, fmt.Sprintf("%s:%s=%s", x.ID, x.Receipt, w.q.byID[x.ID].key))
		}
		w.logf("arrive %v", s)
	}
	w.core.Arrive(w.now, in)
}

// noteArrival records what StartLowest saw of a group with no cursor.
func (w *wm) noteArrival(x recvcore.Incoming) {
	m := w.q.byID[x.ID]
	if w.cfg.Start != recvcore.StartLowest || !m.key.tagged() {
		return
	}
	f := w.fresh[m.key.group]
	if f == nil {
		if w.st.cursors[m.key.group].Next != 0 {
			return
		}
		f = &freshGroup{}
		w.fresh[m.key.group] = f
	}
	if !f.started && !f.stopped {
		f.arrivals = append(f.arrivals, m.key)
		f.at = append(f.at, w.now)
		f.dequeue = append(f.dequeue, x.DequeueCount)
	}
}

// advance moves the clock by d, stopping at each deadline the Core gives
// on the way, as the shell's keeper does.
func (w *wm) advance(d time.Duration) {
	target := w.now.Add(d)
	for range 200 {
		at, ok := w.core.Deadline()
		if !ok || !at.After(w.now) || !at.Before(target) {
			break
		}
		w.now = at
		w.core.Tick(w.now)
		w.collect()
	}
	w.now = target
	w.core.Tick(w.now)
}

// collect takes the Core's Ready batch: actions join the shell's in-flight
// lists, reports and resolutions are checked at once.
func (w *wm) collect() bool {
	if w.stopped {
		return false // a stopped shard's shell executes nothing new
	}
	rd := w.core.Ready(w.now)
	if worldTrace && !rd.Empty() {
		w.logf("ready:\n%s", describe(rd))
	}
	w.reads = append(w.reads, rd.Reads...)
	w.commits = append(w.commits, rd.Commits...)
	w.deletes = append(w.deletes, rd.Deletes...)
	w.vis = append(w.vis, rd.Visibility...)
	w.deads = append(w.deads, rd.DeadLetters...)
	w.parks = append(w.parks, rd.Parks...)
	w.unparks = append(w.unparks, rd.Unparks...)
	w.scans = append(w.scans, rd.Scans...)
	w.requeues = append(w.requeues, rd.Requeues...)
	for _, r := range rd.Reads {
		w.readsN[0] += len(r.Streams)
	}
	for _, u := range rd.Unparks {
		w.readsN[1] += len(u.Queries)
	}
	w.readsN[2] += len(rd.Scans)
	burst := 0
	for _, d := range rd.Deletes {
		w.checkFresh("delete", d.Receipts)
		burst += len(d.Receipts)
	}
	if burst >= 2*w.cfg.MaxBatch {
		w.bursting = true // a commit let many deletes go at once
	}
	for _, v := range rd.Visibility {
		w.checkFresh("visibility change", []string{v.Receipt})
	}
	for _, r := range rd.Reports {
		switch r.Kind {
		case recvcore.ReportSkip:
			w.skips[r.Group] = append(w.skips[r.Group], seqstore.Range{Epoch: r.Epoch, First: r.Seq, Last: r.Last})
		case recvcore.ReportEpoch:
			w.epochRep[r.Group] = append(w.epochRep[r.Group], r.Epoch)
		case recvcore.ReportLate:
			w.lateRep[mkey{group: r.Group, epoch: r.Epoch, seq: r.Seq}] = true
		}
	}
	for _, res := range rd.Resolved {
		w.resolved(res)
	}
	if w.promptVis {
		for len(w.vis) > 0 {
			w.doVisibility(w.vis[0])
			w.vis = w.vis[1:]
		}
	}
	return !rd.Empty()
}

// checkFresh: a delete or visibility change never uses a handle older than
// one the Core was given by a ChangeVisibility of the same message, still
// valid: it fails as stale, and the message stays invisible under the
// handle the Core dropped (uncounted, and back later).
func (w *wm) checkFresh(what string, receipts []string) {
	for _, r := range receipts {
		m := w.q.byReceipt[r]
		if m == nil {
			w.t.Fatalf("%s of a handle never issued: %q", what, r)
		}
		if w.raced[m.id] == r {
			delete(w.raced, m.id) // the Core went on with the new handle
		}
		if m.receipt != r && !m.deleted && m.visibleAt.After(w.now) && m.byCV && m.seen && m.holder == w.life {
			w.violate("receipt-fresh", []mkey{m.key}, "life %d: %s of %s (id %s) with handle %s, while the Core was given its newer handle %s by a ChangeVisibility",
				w.life, what, m.key, m.id, r, m.receipt)
		}
	}
}

// The application.

func (w *wm) next() {
	d, ok := w.core.Next(w.now)
	if !ok {
		return
	}
	k := w.keyOf(d)
	w.logf("next %s key=%s", delivery(d), k)
	w.collect() // the reports that explain d come first
	o := &wdel{d: d, key: k, life: w.life}
	w.nexted = append(w.nexted, o)
	w.checkNext(o)
	w.outs = append(w.outs, o)
	if d.Await != 0 {
		o.state = dAwait
		w.byTicket[d.Await] = o
		return
	}
	if w.cfg.Mode != recvcore.AtMostOnce && w.chance(w.fReturn) {
		// A Run worker handed d as it left: the application never sees
		// it, and it comes again as the same attempt.
		w.logf("return %s", delivery(d))
		o.state = dDone
		w.dropOut(o)
		if err := w.core.Return(w.now, &o.d); err != nil {
			w.violate("settle-current", []mkey{k}, "life %d: Return of the current hand-out %s: %v", w.life, delivery(d), err)
		}
		return
	}
	w.give(o)
}

// resolved handles a ticket's resolution.
func (w *wm) resolved(res recvcore.Resolution) {
	if r, ok := w.repairs[res.Ticket]; ok {
		delete(w.repairs, res.Ticket)
		w.repaired(r, res.Err)
		return
	}
	if k, ok := w.syncWaits[res.Ticket]; ok {
		delete(w.syncWaits, res.Ticket)
		if res.Err == nil && !w.contested[k.group] {
			if c := w.st.cursor(k.group); !c.Below(k.epoch, k.seq) {
				w.violate("syncack", []mkey{k}, "life %d: SyncAck of %s resolved while the store's cursor is %s", w.life, k, cursor(c))
			}
		}
		return
	}
	if res.Err != nil {
		// Whether or not a Receive still waits for it: an AtMostOnce
		// Unordered hand-out that fails must leave its message to someone.
		for _, o := range w.nexted {
			if o.d.Await != res.Ticket || !o.d.Unordered {
				continue
			}
			if m := w.q.byID[o.d.ID]; m != nil && m.deleted && !w.dead[o.key] && w.given[o.key] == 0 {
				w.violate("amo-unordered-drop", []mkey{o.key}, "life %d: the AtMostOnce Unordered hand-out of %s failed (%v) after its own delete took effect: the message is gone and nobody gets it",
					w.life, o.key, res.Err)
			}
		}
	}
	o := w.byTicket[res.Ticket]
	if o == nil {
		return
	}
	delete(w.byTicket, res.Ticket)
	if res.Err != nil {
		w.logf("ticket %d of %s: %v", res.Ticket, o.key, res.Err)
		o.state = dDone
		w.dropOut(o)
		return
	}
	w.checkAwait(o)
	o.state = dResolved
	if w.rng.IntN(4) != 0 {
		w.give(o)
	}
}

// checkAwait: an AtMostOnce hand-out goes to the application only once its
// cursor advance is durable (an Unordered one: once deleted, or once the
// store's cursor says a copy of it is a duplicate: carved out of its
// skipped range).
func (w *wm) checkAwait(o *wdel) {
	k := o.key
	if o.d.Unordered {
		if m := w.q.byID[o.d.ID]; m != nil && !m.deleted && !w.carved(k) {
			w.violate("amo-await", []mkey{k}, "life %d: AtMostOnce Unordered %s released to the application before its delete", w.life, k)
		}
		return
	}
	if c := w.st.cursor(k.group); !c.Below(k.epoch, k.seq) && !w.contested[k.group] {
		w.violate("amo-await", []mkey{k}, "life %d: AtMostOnce %s released to the application while the store's cursor is %s", w.life, k, cursor(c))
	}
}

// carved reports whether the store's cursor of k's group is past k and no
// skipped range of it holds k.
func (w *wm) carved(k mkey) bool {
	if !k.tagged() {
		return false
	}
	c := w.st.cursor(k.group)
	if !c.Below(k.epoch, k.seq) {
		return false
	}
	for _, r := range c.Skipped {
		if r.Contains(k.epoch, k.seq) {
			return false
		}
	}
	return true
}

func (w *wm) dropOut(o *wdel) {
	w.outs = slices.DeleteFunc(w.outs, func(x *wdel) bool { return x == o })
}

// checkNext checks a hand-out as the Core makes it: one out per group,
// order at the start of an incarnation, StartLowest's start.
func (w *wm) checkNext(o *wdel) {
	d, k := o.d, o.key
	w.checkExclusion(o)
	if m := w.q.byID[d.ID]; m != nil && m.key.tagged() && !d.Unordered && (m.key.group != d.Group || m.key.epoch != d.Epoch || m.key.seq != d.Seq) {
		w.t.Fatalf("life %d: delivery %s carries queue message %s of %s", w.life, delivery(d), d.ID, m.key)
	}
	if want := w.payload(k, d.ID); string(d.Body) != want {
		w.violate("payload", []mkey{k}, "life %d: %s handed out with payload %q, sent %q (attempt %d, Unordered %v)", w.life, k, d.Body, want, d.Attempt, d.Unordered)
	}
	for _, x := range w.outs {
		if x.state == dDone {
			continue
		}
		if !d.Unordered && !x.d.Unordered && x.d.Group == d.Group {
			w.violate("one-out", []mkey{k}, "life %d: group %s: %s handed out while %s is out", w.life, d.Group, k, x.key)
		}
		if d.Unordered && x.d.Unordered && x.key == k {
			w.violate("amo-once", []mkey{k}, "life %d: Unordered %s handed out while a copy of it is out", w.life, k)
		}
	}
	if d.Unordered || w.contested[d.Group] {
		return
	}
	if f := w.fresh[d.Group]; f != nil && !f.started {
		f.started = true
		w.checkStartLowest(f, k)
	}
}

// checkStartLowest: StartLowest starts at the lowest seq seen of the lowest
// epoch seen during the settle time, and reports what it passes over. Two
// rules of the README refine it: while all it saw is one copy received
// before, it settles again (up to ten times); and it passes over a lone
// stale copy, received before and more than Window below the next seq seen.
func (w *wm) checkStartLowest(f *freshGroup, k mkey) {
	if f.readAt.IsZero() || w.scenario != "startlowest" {
		// Elsewhere a small cap or window may evict what the settle
		// collects: the start is then the Core's guess.
		return
	}
	// The settle starts when the group, found with no cursor, holds its
	// first arrival.
	begin := time.Time{}
	for _, at := range f.at {
		if !at.After(f.readAt) {
			begin = f.readAt
			break
		}
		if begin.IsZero() || at.Before(begin) {
			begin = at
		}
	}
	var seen []mkey
	var lowDequeue int
	for end, round := begin.Add(w.cfg.StartSettle), 0; ; end, round = end.Add(w.cfg.StartSettle), round+1 {
		seen, lowDequeue = f.seenBefore(end)
		if round == 10 || !(len(seen) == 1 && lowDequeue > 1) {
			break // (one copy received before, alone: the Core settles again)
		}
	}
	if len(seen) == 0 {
		return
	}
	low := seen[0]
	for _, a := range seen {
		if a.epoch < low.epoch || a.epoch == low.epoch && a.seq < low.seq {
			low = a
		}
	}
	if lowDequeue > 1 {
		// A lone stale copy is passed over: the next seq seen starts.
		next := mkey{}
		for _, a := range seen {
			if a.epoch == low.epoch && a.seq > low.seq && (next.seq == 0 || a.seq < next.seq) {
				next = a
			}
		}
		if next.seq != 0 && next.seq-low.seq > uint64(w.cfg.Window) {
			low = next
		}
	}
	if k.epoch == low.epoch && (k.seq == low.seq || k.seq > low.seq && w.covered(k.group, k.epoch, low.seq, k.seq-1)) {
		// Started right; what lies below is reported?
	} else {
		// What the wrong start passes over is its doing, whatever follows.
		passed := []mkey{k}
		for s := uint64(1); s < k.seq; s++ {
			passed = append(passed, mkey{group: k.group, epoch: k.epoch, seq: s})
		}
		w.violate("startlowest", passed, "life %d: StartLowest group %s starts at %s, the lowest seq seen in the settle time is %s (seen %v)",
			w.life, k.group, k, low, seen)
		// The sub-case of the rule that a densest-run start keeps: when
		// no run of consecutive seqs seen is longer than the lowest seq's,
		// the start is the lowest (a tie goes to the lowest).
		// (Only when the Core could keep all it saw: at most Window
		// distinct seqs.)
		one := true
		have := map[uint64]bool{}
		for _, a := range seen {
			one = one && a.epoch == low.epoch
			have[a.seq] = true
		}
		run := func(s uint64) int {
			n := 0
			for have[s+uint64(n)] {
				n++
			}
			return n
		}
		longest := true
		for _, a := range seen {
			if !have[a.seq-1] && run(a.seq) > run(low.seq) {
				longest = false
			}
		}
		if one && longest && len(have) <= w.cfg.Window {
			w.violate("startlowest-tie", []mkey{k}, "life %d: StartLowest group %s starts at %s although the lowest seq seen, %s, begins a run as long as any (seen %v)",
				w.life, k.group, k, low, seen)
		}
	}
	for s := uint64(1); s < k.seq; s++ {
		b := mkey{group: k.group, epoch: k.epoch, seq: s}
		if (w.q.present(b) || w.st.parked(b)) && w.given[b] == 0 && !w.covered(k.group, k.epoch, s, s) {
			w.violate("startlowest-skip", []mkey{b}, "life %d: StartLowest group %s starts at %s and passes over %s, present in the queue, with no skip reported",
				w.life, k.group, k, b)
			break
		}
	}
}

// seenBefore returns the distinct arrivals of f before end, and the dequeue
// count of the lowest (of the lowest epoch): the largest of its copies'.
func (f *freshGroup) seenBefore(end time.Time) ([]mkey, int) {
	var seen []mkey
	dq := map[mkey]int{}
	for i, a := range f.arrivals {
		if f.at[i].Before(end) {
			if _, dup := dq[a]; !dup {
				seen = append(seen, a)
			}
			dq[a] = max(dq[a], f.dequeue[i])
		}
	}
	if len(seen) == 0 {
		return nil, 0
	}
	low := seen[0]
	for _, a := range seen {
		if a.epoch < low.epoch || a.epoch == low.epoch && a.seq < low.seq {
			low = a
		}
	}
	return seen, dq[low]
}

// give hands a delivery to the application and checks it as it sees it.
func (w *wm) give(o *wdel) {
	d, k := o.d, o.key
	o.state = dGiven
	w.logf("give %s", delivery(d))
	if w.durable[k] && !w.tainted[k] && !w.contested[k.group] {
		w.violate("durable-once", []mkey{k}, "life %d: %s handed out again although its handling is durable in the store (cursor %s)",
			w.life, k, cursor(w.st.cursor(k.group)))
	}
	if w.cfg.Mode == recvcore.AtMostOnce && w.given[k] > 0 && !w.tainted[k] && !w.contested[k.group] {
		prop := "amo-once"
		switch {
		case d.Unordered && w.givenLife[k] < w.life && w.st.cursor(k.group).Epoch > k.epoch:
			prop += "/older-epoch" // late by its epoch: nothing durable says it was handed out
		case d.Unordered && w.givenLife[k] < w.life:
			prop += "/across-lives" // a skipped seq's hand-out is carved out of its range first
		case d.Unordered && w.core.Stats().Forgotten > 0:
			prop += "/forgotten" // (attribution only) the dedup set was trimmed to fit MaxMemory
		}
		w.violate(prop, []mkey{k}, "life %d: AtMostOnce: %s handed out a second time (Unordered %v; first in life %d)", w.life, k, d.Unordered, w.givenLife[k])
	}
	if w.given[k] == 0 {
		w.givenLife[k] = w.life
	}
	w.given[k]++
	if w.cfg.Mode == recvcore.AtMostOnce {
		w.acked[k] = true
		if d.Unordered {
			w.ackedUnord[k] = true
		} else {
			w.ackedOrd[k] = true
			w.ackedLife[k] = true
		}
		w.noteDurable(k)
	}
	if d.Unordered {
		if k.tagged() && !w.lateRep[k] && !w.tainted[k] {
			w.violate("order", []mkey{k}, "life %d: tagged %s handed out Unordered with no late report", w.life, k)
		}
		return
	}
	if w.contested[d.Group] {
		w.lastOrd[d.Group] = k
		return
	}
	last, ok := w.lastOrd[d.Group]
	if !ok {
		// The first in this incarnation: at the stored cursor.
		c := w.st.cursor(d.Group)
		switch {
		case c.Next == 0:
			if w.cfg.Start == recvcore.StartLowest {
				last = k // checked by startlowest
			} else {
				last = mkey{group: d.Group, epoch: k.epoch, seq: 0}
			}
		case w.cfg.Mode == recvcore.AtMostOnce && c.Below(k.epoch, k.seq):
			last = mkey{group: d.Group, epoch: k.epoch, seq: k.seq - 1} // committed before it was given
		default:
			last = mkey{group: d.Group, epoch: c.Epoch, seq: c.Next - 1}
		}
		if last != k {
			w.checkOrder(d.Group, last, k, d.Attempt, true)
		}
	} else if !w.resumes(d.Group, k, d.Attempt) {
		w.checkOrder(d.Group, last, k, d.Attempt, false)
	}
	w.lastOrd[d.Group] = k
}

// resumes reports whether k, the group's first ordered hand-out since it
// adopted its stored cursor (rolledBack), follows that cursor.
func (w *wm) resumes(group string, k mkey, attempt int) bool {
	rb, ok := w.rollback[group]
	if !ok {
		return false
	}
	delete(w.rollback, group)
	base := mkey{group: group, epoch: rb.cur.Epoch, seq: rb.cur.Next - 1}
	switch {
	case rb.cur.Next == 0 && w.cfg.Start == recvcore.StartLowest:
		return true // settled again
	case rb.cur.Next == 0:
		base = mkey{group: group, epoch: k.epoch}
	case rb.out != mkey{}:
		base = rb.out
	}
	return w.follows(group, base, k, attempt, true)
}

// checkOrder: k may follow last within one incarnation: the next seq, the
// same one again (a retry), or a jump a reported skip or epoch switch
// explains (or, at the start, the stored cursor's skips).
func (w *wm) checkOrder(group string, last, k mkey, attempt int, first bool) {
	if w.follows(group, last, k, attempt, first) || w.tainted[k] {
		return
	}
	prop := "order"
	if c := w.st.cursor(group); k.epoch < c.Epoch {
		prop += "/older-epoch"
	}
	w.violate(prop, []mkey{k}, "life %d: group %s: %s handed out after %s (first of the incarnation %v; skips %v, epochs %v, stored cursor %s)",
		w.life, group, k, last, first, w.skips[group], w.epochRep[group], cursor(w.st.cursor(group)))
}

// follows reports whether k may follow last (checkOrder).
func (w *wm) follows(group string, last, k mkey, attempt int, first bool) bool {
	if k == last && (attempt > 1 || first) {
		return true
	}
	if k.epoch == last.epoch && k.seq > last.seq && (k.seq == last.seq+1 || w.covered(group, k.epoch, last.seq+1, k.seq-1)) {
		return true
	}
	return k.epoch > last.epoch && (slices.Contains(w.epochRep[group], k.epoch) || first) && (k.seq == 1 || w.covered(group, k.epoch, 1, k.seq-1))
}

// covered reports whether the seqs first..last of epoch were reported
// skipped in this incarnation or are skipped in the stored cursor.
func (w *wm) covered(group string, epoch, first, last uint64) bool {
	c := w.st.cursor(group)
	for s := first; s <= last; s++ {
		ok := false
		for _, r := range append(slices.Clone(w.skips[group]), c.Skipped...) {
			if r.Contains(epoch, s) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// settle has the application finish one hand-out it holds.
func (w *wm) settle(heal bool) {
	var given []*wdel
	for _, o := range w.outs {
		if o.state == dGiven {
			given = append(given, o)
		}
	}
	if len(given) > 0 {
		w.settleOne(given[w.rng.IntN(len(given))], heal)
	}
}

// ack acknowledges o (sometimes with SyncAck); in ExactlyOnce mode the
// application's transaction applies the advance first.
func (w *wm) ack(o *wdel, heal bool) {
	d, k := &o.d, o.key
	if w.cfg.Mode == recvcore.ExactlyOnce && !d.Unordered && !o.txed {
		if w.stale {
			w.zombieTx = o // a stale shell's handler: its hand-out was out at the loss
		}
		err := w.applyAdvance([]seqstore.Advance{d.Advance})
		w.zombieTx = nil
		if err != nil {
			w.logf("advance tx of %s: %v", k, err)
			if err := w.core.Nack(w.now, d, fmt.Errorf("tx: %w", err)); err != nil {
				w.violate("settle-current", []mkey{k}, "life %d: Nack after a failed transaction %s: %v", w.life, delivery(*d), err)
			}
			w.finish(o)
			return
		}
		o.txed = true
		w.ackedOrd[k], w.acked[k] = true, true
		w.noteDurable(k)
		if !heal && w.rng.IntN(5) == 0 {
			return // acked later: a crash in between loses only the Ack
		}
	}
	sync := w.rng.IntN(3) == 0
	w.logf("ack %s sync=%v", delivery(*d), sync)
	tk, err := w.core.Ack(w.now, d, sync)
	if err != nil {
		w.violate("settle-current", []mkey{k}, "life %d: Ack of the current hand-out %s: %v", w.life, delivery(*d), err)
		w.finish(o)
		return
	}
	w.acked[k] = true
	if d.Unordered {
		w.ackedUnord[k] = true
	} else {
		w.ackedOrd[k] = true
		w.ackedLife[k] = true
		w.noteDurable(k)
	}
	if tk != 0 && !d.Unordered {
		w.syncWaits[tk] = k
	}
	w.finish(o)
}

func (w *wm) finish(o *wdel) {
	o.state = dDone
	w.dropOut(o)
	w.finished = append(w.finished, o)
}

// appMisc: the application takes a resolved hand-out, gives up on an
// AtMostOnce wait, or settles a stale Delivery by mistake.
func (w *wm) appMisc() {
	switch w.rng.IntN(3) {
	case 0:
		for _, o := range w.outs {
			if o.state == dResolved {
				w.give(o)
				return
			}
		}
	case 1:
		if w.chance(w.fAbandon * 10) {
			var ws []*wdel
			for _, o := range w.outs {
				if o.state == dAwait || o.state == dResolved {
					ws = append(ws, o)
				}
			}
			if len(ws) > 0 {
				w.abandon(ws[w.rng.IntN(len(ws))])
			}
		}
	case 2:
		if w.chance(w.fStaleAck*10) && len(w.finished) > 0 {
			// Most likely by mistake: an earlier attempt of a message
			// that is out again.
			o := w.finished[w.rng.IntN(len(w.finished))]
			for _, f := range w.finished {
				for _, x := range w.outs {
					if x.key == f.key && x.state == dGiven && w.rng.IntN(2) == 0 {
						o = f
					}
				}
			}
			w.staleSettle(o)
		}
	}
}

// abandon: the Receive waiting for o's ticket gives up (its ctx ended, or
// the Queue closes).
func (w *wm) abandon(o *wdel) {
	w.logf("abandon %s", delivery(o.d))
	delete(w.byTicket, o.d.Await)
	o.state = dDone
	w.dropOut(o)
	_ = w.core.Abandon(w.now, &o.d)
}

// staleSettle acks a Delivery the application already settled: it must be
// refused, and must not settle the message's current hand-out.
func (w *wm) staleSettle(o *wdel) {
	d := o.d
	_, err := w.core.Ack(w.now, &d, false)
	if err != nil {
		return
	}
	w.violate("stale-settle", []mkey{o.key}, "life %d: Ack of a Delivery already settled (%s) was accepted", w.life, delivery(d))
	// What the Core did: the current hand-out of the message is settled.
	for _, x := range w.outs {
		if x.key == o.key && x.state == dGiven {
			w.acked[x.key] = true
			if x.d.Unordered {
				w.ackedUnord[x.key] = true
			}
			w.finish(x)
			return
		}
	}
}

// noteDurable records k as durably handled when the store's cursor says so.
func (w *wm) noteDurable(k mkey) {
	if k.tagged() && w.ackedOrd[k] && handledBy(w.st.cursor(k.group), k) {
		w.durable[k] = true
	}
}

// checkSkips: the store's skipped ranges of group never cover a message
// handled (it would come back as a late arrival, delivered twice).
func (w *wm) checkSkips(group string) {
	if w.contested[group] {
		return
	}
	c := w.st.cursor(group)
	// Handled: durably, or acknowledged in order by this incarnation (the
	// write that marks it skipped may be the one that passes it). What an
	// earlier incarnation acknowledged without making it durable may be
	// skipped: it comes back as a late arrival, which at-least-once allows.
	handled := maps.Clone(w.durable)
	maps.Copy(handled, w.ackedLife)
	for k := range handled {
		if k.group == group && skipMarked(c, k) && !w.tainted[k] {
			w.violate("skip-honest", []mkey{k}, "life %d: the stored cursor %s of %s marks %s skipped, which was handled and durable",
				w.life, cursor(c), group, k)
		}
	}
	for k := range w.ackedOrd {
		if k.group == group {
			w.noteDurable(k)
		}
	}
}

// The second receiver by mistake: it handles the group's next message and
// moves the cursor past it.
func (w *wm) otherReceiver(group string) {
	c := w.st.cursor(group)
	if c.Next == 0 {
		return
	}
	k := mkey{group: group, epoch: c.Epoch, seq: c.Next}
	w.logf("other receiver handles %s", k)
	w.other[k] = true
	w.contested[group] = true
	c.Next++
	w.st.set(group, c)
}

// Executing the shell's in-flight actions.

// doOne completes one in-flight action, chosen at random, with an outcome
// drawn from the fault rates.
func (w *wm) doOne() bool {
	var kinds []int
	for i, n := range []int{len(w.reads), len(w.commits), len(w.deletes), len(w.vis), len(w.deads), len(w.parks), len(w.unparks), len(w.scans), len(w.requeues)} {
		if n > 0 {
			kinds = append(kinds, i)
		}
	}
	if len(kinds) == 0 {
		return false
	}
	switch kinds[w.rng.IntN(len(kinds))] {
	case 0:
		w.doRead(take(&w.reads, w.rng))
	case 1:
		w.doCommit(take(&w.commits, w.rng))
	case 2:
		w.doDelete(take(&w.deletes, w.rng))
	case 3:
		w.doVisibility(take(&w.vis, w.rng))
	case 4:
		w.doDead(take(&w.deads, w.rng))
	case 5:
		w.doPark(take(&w.parks, w.rng))
	case 6:
		w.doUnpark(take(&w.unparks, w.rng))
	case 7:
		w.doScan(take(&w.scans, w.rng))
	case 8:
		w.doRequeue(take(&w.requeues, w.rng))
	}
	return true
}

// doRequeue sends bodies back to the queue (the Core's Close does, for the
// AtMostOnce messages whose only copy it held): each is a new queue message
// of the same application message.
func (w *wm) doRequeue(r recvcore.Requeue) {
	errs := make([]error, len(r.Bodies))
	for i, b := range r.Bodies {
		if w.chance(w.fDeadFail) {
			errs[i] = errors.New("send: 503")
			continue
		}
		w.sendBack(b)
	}
	w.core.Requeued(w.now, r.ID, errs)
}

// sendBack puts b on the queue as a new message of the application message
// it carries.
func (w *wm) sendBack(b []byte) {
	var k mkey
	if id, ok := w.bodyIDs[string(b)]; ok {
		k = mkey{id: id}
	} else if h, _, ok := envelope.Parse(b); ok {
		k = mkey{group: h.Group, epoch: h.Epoch, seq: h.Seq}
	} else {
		w.violate("payload", nil, "life %d: a body sent back that was never sent: %q", w.life, b)
		return
	}
	w.ids++
	w.q.add(fmt.Sprintf("id%d", w.ids), b, k, true)
	w.logf("sent back %s", k)
}

func take[T any](s *[]T, rng *rand.Rand) T {
	i := rng.IntN(len(*s))
	v := (*s)[i]
	*s = slices.Delete(*s, i, i+1)
	return v
}

func (w *wm) doRead(r recvcore.Read) {
	if w.chance(w.fReadFail) || w.storeOutage {
		w.core.Read(w.now, r.ID, nil, errors.New("read timeout"))
		return
	}
	if revReadCorrupt > 0 && w.fWriteCorrupt > 0 && w.corruptRng.IntN(1000) < revReadCorrupt {
		// Review of a13399d: a read failing for good for one stream.
		errs := make([]error, len(r.Streams))
		i := w.corruptRng.IntN(len(errs))
		errs[i] = seqstore.ErrCorrupt
		w.stoppedForGood(r.Streams[i].Group, false)
		w.core.Read(w.now, r.ID, nil, seqstore.Abort(errs))
		return
	}
	curs, err := w.readCursors(r.Streams)
	for i, s := range r.Streams {
		if seqstore.Failed(err, i, len(r.Streams)) != nil {
			continue
		}
		delete(w.failedGrp, s.Group)
		if w.adopts[s.Group] {
			w.rolledBack(s.Group, curs[i])
		}
		if f := w.fresh[s.Group]; curs[i].Next == 0 && w.cfg.Start == recvcore.StartLowest {
			if f == nil {
				f = &freshGroup{}
				w.fresh[s.Group] = f
			}
			if f.readAt.IsZero() && !f.started {
				f.readAt, f.stopped = w.now, false
			}
		}
	}
	w.core.Read(w.now, r.ID, curs, err)
}

func (w *wm) doCommit(cm recvcore.Commit) {
	if w.chance(w.fOther * 10) {
		w.otherReceiver(cm.Advances[w.rng.IntN(len(cm.Advances))].Stream.Group)
	}
	var err error
	switch {
	case w.fWriteCorrupt > 0 && w.corruptRng.IntN(1000) < w.fWriteCorrupt:
		errs := make([]error, len(cm.Advances))
		i := w.corruptRng.IntN(len(errs))
		errs[i] = seqstore.ErrCorrupt
		err = seqstore.Abort(errs)
		w.stoppedForGood(cm.Advances[i].Stream.Group, true)
	case w.storeOutage || w.chance(w.fWriteBefore):
		err = errors.New("connection reset") // not applied; the Core cannot tell
	case w.chance(w.fWriteTransient):
		errs := make([]error, len(cm.Advances))
		errs[w.rng.IntN(len(errs))] = errors.New("lock timeout")
		err = seqstore.Abort(errs)
	case w.chance(w.fWriteAfter):
		if err = w.fencedAdvance(cm.Advances); err == nil {
			err = errors.New("timeout after the write") // applied, reported failed
			for _, a := range cm.Advances {
				if a.To.Next > 1 {
					w.uncertain[mkey{group: a.Stream.Group, epoch: a.To.Epoch, seq: a.To.Next - 1}] = true
				}
			}
		}
	default:
		err = w.fencedAdvance(cm.Advances)
	}
	w.logf("commit #%d: %v", cm.ID, err)
	if err == nil {
		for _, a := range cm.Advances {
			delete(w.stopKept, a.Stream.Group) // what the Core kept is durable
		}
	}
	w.core.Committed(w.now, cm.ID, err)
}

// checkParkDrop: an advance drops from the park only what its cursor
// records as handled; a parked message the cursor would deliver (late by
// its epoch, or skipped) has no other copy (it left the queue when parked).
func (w *wm) checkParkDrop(before map[parkKey][]byte) {
	for pk := range before {
		if _, ok := w.st.park[pk]; ok {
			continue
		}
		k := mkey{group: pk.group, epoch: pk.epoch, seq: pk.seq}
		if w.settled(k) || handledBy(w.st.cursor(k.group), k) || w.q.present(k) || w.contested[k.group] {
			continue
		}
		prop := "park-drop"
		if w.staleParked[k] {
			prop += "/stale-park" // parked by a stale owner after the newer one read the park
		}
		w.violate(prop, []mkey{k}, "life %d: an advance to %s dropped parked %s, which nobody handled and which has no copy left in the queue",
			w.life, cursor(w.st.cursor(k.group)), k)
	}
}

// applyAdvance writes a batch and checks what the new cursors say.
func (w *wm) applyAdvance(batch []seqstore.Advance) error {
	before := maps.Clone(w.st.park)
	err := w.st.advance(batch)
	if err == nil {
		w.checkFencing(batch)
		w.checkParkDrop(before)
	}
	if err == nil {
		for _, a := range batch {
			w.checkSkips(a.Stream.Group)
		}
	}
	return err
}

func (w *wm) doDelete(d recvcore.Delete) {
	res := make([]recvcore.DeleteResult, len(d.Receipts))
	for i, r := range d.Receipts {
		m, ok := w.q.valid(r, w.now)
		if !ok {
			res[i] = recvcore.DeleteResult{Err: errors.New("404 MessageNotExist"), Stale: true}
			continue
		}
		w.checkDelete(m)
		switch {
		case w.deleteOutage || w.chance(w.fDelBefore):
			res[i] = recvcore.DeleteResult{Err: errors.New("503 before"), Retry: true}
			w.delFail[r] = true
		case w.chance(w.fDelAfter):
			w.q.remove(m)
			res[i] = recvcore.DeleteResult{Err: errors.New("503 after"), Retry: true}
		default:
			w.q.remove(m)
		}
	}
	if worldTrace {
		var out []string
		for i, r := range d.Receipts {
			out = append(out, fmt.Sprintf("%s:%v", r, res[i].Err))
		}
		w.logf("delete #%d: %v", d.ID, out)
	}
	w.core.Deleted(w.now, d.ID, res)
}

// checkDelete: commit before delete, always. The last copy of a tagged
// message goes only when the store's cursor says it was handled, when the
// store holds it parked, or when it was settled Unordered or
// dead-lettered; an untagged one only once settled, dead-lettered, or
// (AtMostOnce) on its way out.
func (w *wm) checkDelete(m *qMsg) {
	k := m.key
	if w.dead[k] || w.acked[k] && (!k.tagged() || w.lateRep[k]) {
		return
	}
	for _, o := range w.nexted {
		if o.key == k && o.d.Unordered && o.d.Await != 0 {
			return // AtMostOnce: deleted before it is handed out (recoverable checks the rest)
		}
	}
	for _, x := range w.q.byKey[k] {
		if x != m && !x.deleted {
			return // another copy of the message stays (a duplicate send)
		}
	}
	if k.tagged() {
		if w.st.parked(k) || handledBy(w.st.cursor(k.group), k) {
			return
		}
		if w.contested[k.group] {
			return
		}
	}
	if w.tainted[k] {
		return
	}
	prop := "commit-before-delete"
	switch c := w.st.cursor(k.group); {
	case k.tagged() && k.epoch < c.Epoch:
		prop += "/older-epoch" // consumed below a newer epoch's durable cursor, with no record of it
	case k.tagged() && skipMarked(c, k) && w.everParked[k] && w.cfg.Mode == recvcore.AtMostOnce:
		prop += "/parked-owed" // a copy deleted for the park, and the commit past the owed hand-out dropped the park
	case k.tagged() && w.staleParked[k]:
		prop += "/stale-park" // a stale owner's park landed after the newer owner read the park, and its advance dropped it
	}
	if w.amoUncertain(k) {
		prop = "amo-uncertain-conflict" // the refused hand-out's copy, skipped with it
	}
	w.violate(prop, []mkey{k}, "life %d: deleted %s (id %s) with the store's cursor at %s, not parked, not settled (given %d, acked %v)",
		w.life, k, m.id, cursor(w.st.cursor(k.group)), w.given[k], w.acked[k])
}

func (w *wm) doVisibility(v recvcore.ChangeVisibility) {
	m, ok := w.q.valid(v.Receipt, w.now)
	if !ok {
		w.core.Visibility(w.now, v.ID, "", recvcore.NotApplied(errors.New("404 MessageNotExist")))
		return
	}
	switch {
	case w.chance(w.fVisFail):
		w.core.Visibility(w.now, v.ID, "", errors.New("503 before"))
	case w.chance(w.fVisAfter):
		w.q.changeVisibility(m, w.now, v.Timeout) // applied, the new handle lost
		m.cvLost = m.seen || m.cvLost
		m.seen, m.byCV = false, false
		w.core.Visibility(w.now, v.ID, "", errors.New("timeout after"))
	default:
		r := w.q.changeVisibility(m, w.now, v.Timeout)
		m.seen, m.byCV, m.holder, m.cvLost = true, true, w.life, false
		for _, d := range w.deletes {
			if slices.Contains(d.Receipts, v.Receipt) {
				// A delete with the old handle is in flight: it will fail
				// as stale, and the Core must use the new handle.
				w.raced[m.id] = r
			}
		}
		w.logf("visibility #%d: %s %s -> %s until %s", v.ID, m.key, v.Receipt, r, m.visibleAt.Format("04:05.000"))
		if !w.promptVis && v.Timeout == w.cfg.VisibilityExtend {
			w.lateCV[m.id] = r
		}
		w.core.Visibility(w.now, v.ID, r, nil)
	}
}

func (w *wm) doDead(d recvcore.DeadLetter) {
	errs := make([]error, len(d.Bodies))
	for i, b := range d.Bodies {
		if w.chance(w.fDeadFail) {
			errs[i] = errors.New("dlq: 503")
			continue
		}
		w.deadLetter(b)
	}
	w.core.DeadLettered(w.now, d.ID, errs)
}

// deadLetter records a body the dead-letter queue received, and checks the
// Core may send it there: a poison message under PoisonDeadLetter, a late
// arrival, an untagged body under UntaggedDeadLetter.
func (w *wm) deadLetter(b []byte) {
	var k mkey
	poison := func(k mkey) bool {
		return w.cfg.Poison == recvcore.PoisonDeadLetter && (w.nacks[k] >= w.cfg.MaxAttempts || w.cfg.Mode == recvcore.AtMostOnce && w.nacks[k] > 0) ||
			w.repairDead[k]
	}
	if id, ok := w.bodyIDs[string(b)]; ok {
		k = mkey{id: id}
		if w.cfg.Untagged != recvcore.UntaggedDeadLetter && !poison(k) {
			w.violate("dlq-justified", []mkey{k}, "life %d: untagged %s dead-lettered under UntaggedDeliver, not poison (nacks %d)", w.life, k, w.nacks[k])
		}
	} else {
		h, _, ok := envelope.Parse(b)
		if !ok {
			w.violate("payload", nil, "life %d: dead letter of a body never sent: %q", w.life, b)
			return
		}
		k = mkey{group: h.Group, epoch: h.Epoch, seq: h.Seq}
		c := w.st.cursor(k.group)
		late := skipMarked(c, k) || c.Epoch > k.epoch
		if !poison(k) && !late && !w.contested[k.group] && !w.tainted[k] {
			w.violate("dlq-justified", []mkey{k}, "life %d: %s dead-lettered: neither poison (nacks %d) nor late (stored cursor %s)", w.life, k, w.nacks[k], cursor(c))
		}
	}
	w.logf("dead-lettered %s", k)
	w.dead[k] = true
}

func (w *wm) doPark(p recvcore.Park) {
	var err error
	switch {
	case w.storeOutage || w.chance(w.fParkFail):
		err = errors.New("park: connection reset")
	case w.chance(w.fParkAfter):
		if err = w.st.parkAll(p.Entries); err == nil {
			err = errors.New("park: timeout after the write")
		}
	default:
		err = w.st.parkAll(p.Entries)
		if err == nil {
			err = w.fencedParkCheck(p.Entries)
		}
	}
	if _, known := err.(*seqstore.BatchError); err == nil || !known && w.st.parked(mkey{group: p.Entries[0].Stream.Group, epoch: p.Entries[0].Epoch, seq: p.Entries[0].Seq}) {
		w.noteParked(p.Entries)
	}
	w.core.Parked(w.now, p.ID, err)
}

func (w *wm) noteParked(entries []seqstore.Parked) {
	for _, e := range entries {
		k := mkey{group: e.Stream.Group, epoch: e.Epoch, seq: e.Seq}
		w.everParked[k] = true
		if w.stale || w.stopped {
			w.staleParked[k] = true
		}
	}
}

func (w *wm) doUnpark(u recvcore.Unpark) {
	if w.storeOutage || w.chance(w.fReadFail) {
		w.core.Unparked(w.now, u.ID, nil, errors.New("unpark: timeout"))
		return
	}
	w.core.Unparked(w.now, u.ID, w.st.unpark(u.Queries), nil)
}

func (w *wm) doScan(s recvcore.Scan) {
	if w.storeOutage || w.chance(w.fReadFail) {
		w.core.Scanned(w.now, s.ID, nil, errors.New("scan: timeout"))
		return
	}
	w.core.Scanned(w.now, s.ID, w.st.parkedStreams(), nil)
}

// Checks after every step.

func (w *wm) checkStep() {
	// A due deadline is one that Tick and Ready act on: else the shell
	// would spin.
	for range 1000 {
		at, ok := w.core.Deadline()
		if !ok || at.After(w.now) {
			break
		}
		w.core.Tick(w.now)
		if !w.collect() {
			if at, ok := w.core.Deadline(); ok && !at.After(w.now) {
				prop := "no-spin"
				if w.closing {
					prop = "no-spin/closing"
				}
				w.violate(prop, nil, "life %d: deadline %v is due at %v, and Tick and Ready did nothing about it\n%s", w.life, at, w.now, w.core.Dump())
			}
			break
		}
	}
	if len(w.deletes) == 0 {
		w.bursting = false
	}
	w.checkCap()
	if m := w.q.overHold(w.now, w.holdLimit); m != nil && !w.tainted[m.key] {
		w.violate("hold", []mkey{m.key}, "life %d: %s (id %s) received and not deleted for %v, over the hold limit %v (holder life %d, dequeues %d)",
			w.life, m.key, m.id, w.now.Sub(m.heldSince), w.holdLimit, m.holder, m.dequeue)
	}
	mem := w.core.Stats().Memory
	if over := mem - w.cfg.MaxMemory; over > w.memOver {
		w.memOver = over
	}
	if mem > w.cfg.MaxMemory+w.memSlack() {
		prop := "memory"
		switch {
		case w.flood:
			prop = "memory/flood"
		case w.bursting:
			prop = "memory/delete-burst" // settled entries re-charged as whole messages for their deletes
		}
		if !w.broken[prop] {
			w.violate(prop, nil, "life %d: memory %d over the budget %d (+ slack %d), %d groups in memory\n%s",
				w.life, mem, w.cfg.MaxMemory, w.memSlack(), w.core.Stats().Groups, w.core.Dump())
		}
	}
	if w.lapseChk {
		w.checkLapse()
	}
}

// memSlack is what memory may exceed the budget by: one receive batch of
// new groups, as the Core lets one batch in when nothing moves.
func (w *wm) memSlack() int {
	return w.cfg.MaxBatch * 2 << 10
}

// checkCap: the queue's own count of received-and-not-deleted messages of
// this incarnation stays within the cap.
func (w *wm) checkCap() {
	n := w.q.undeleted(w.now, w.life)
	if n <= w.cfg.MaxHeld {
		return
	}
	// Attribute the excess: receipts whose delete failed and that the
	// Core no longer counts are one known defect.
	failed, taint, late := 0, 0, 0
	var held []string
	for _, m := range w.q.msgs {
		if m.held(w.now) && m.holder == w.life && (m.seen || m.cvLost) {
			switch {
			case w.delFailed(m):
				failed++
			case w.tainted[m.key], w.raced[m.id] == m.receipt && m.receipt != "":
				taint++
			case w.lateCV[m.id] == m.receipt:
				late++
			}
			held = append(held, fmt.Sprintf("%s(%s %s until %s)", m.key, m.id, m.receipt, m.visibleAt.Format("04:05.000")))
		}
	}
	prop := "cap"
	switch {
	case n-failed <= w.cfg.MaxHeld:
		prop = "cap/failed-delete"
	case n-failed-taint <= w.cfg.MaxHeld:
		prop = "cap/consequence" // of another broken property (receipt-fresh, ...)
	case n-failed-taint-late <= w.cfg.MaxHeld:
		prop = "cap/extension-race" // a late extension result the Core ignored
	}
	if os.Getenv("INORDER_WORLD_CAPDEBUG") != "" {
		rel := recvcore.ReleasedIDs(w.core)
		for _, m := range w.q.msgs {
			if m.held(w.now) && m.holder == w.life && (m.seen || m.cvLost) && rel[m.id] == "" {
				w.logf("capdebug: not released: %s %s %s until %s seen=%v cvLost=%v", m.key, m.id, m.receipt, m.visibleAt.Format("04:05.000"), m.seen, m.cvLost)
			}
		}
		w.logf("capdebug: released entries without id: %q", rel[""])
	}
	if !w.broken[prop] {
		w.violate(prop, nil, "life %d: the queue holds %d messages received and not deleted by this receiver (%d of them after a failed delete), cap %d: %v\n%s",
			w.life, n, failed, w.cfg.MaxHeld, held, w.core.Dump())
	}
}

// delFailed reports whether a delete of m's current handle failed (a
// retryable error) in this incarnation.
func (w *wm) delFailed(m *qMsg) bool { return w.delFail[m.receipt] }

// checkLapse: a message out to the application, or acknowledged and waiting
// for its commit, keeps its visibility while the budget allows (here it
// always does: prompt changes, no faults on them, a high rate).
func (w *wm) checkLapse() {
	check := func(id string, why string) {
		m := w.q.byID[id]
		if m == nil || m.deleted || m.holder != w.life || !m.seen || m.visibleAt.After(w.now) || m.heldSince.IsZero() || w.tainted[m.key] {
			return
		}
		w.violate("held-lapse", []mkey{m.key}, "life %d: %s (id %s), %s, became visible again at %v",
			w.life, m.key, m.id, why, m.visibleAt)
	}
	for _, o := range w.outs {
		if o.state == dGiven {
			check(o.d.ID, "out to the application")
		}
	}
	for _, o := range w.finished {
		k := o.key
		if w.ackedLife[k] && !o.d.Unordered && w.cfg.Mode == recvcore.AtLeastOnce && !handledBy(w.st.cursor(k.group), k) {
			check(o.d.ID, "acknowledged and waiting for its commit")
		}
	}
}
