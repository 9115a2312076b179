package recvcore_test

// Review 17: attacks on the AtMostOnce carve (carve.go, commits ada22e8 and
// 14bf11d). r17Run drives Cores over one memstore and a small queue model,
// life after life, with random interleavings of arrivals (duplicate sends
// under other queue ids, groups' holes skipped by GapSkip and filled late),
// hand-outs, Receives that give up (Abandon) before or after their Await
// resolved, Acks and Nacks, ambiguous and transient commit failures, and
// clean Closes; it checks that no seq reaches the application twice and,
// once everything was received in a last life, that every seq reached it
// (nothing is lost by a clean Close).
//
// The corrupt variant adds commits that fail for good (seqstore.ErrCorrupt:
// the group stops). On 14bf11d plus the carryOwed fix, 36 of 300 seeds broke
// (R17_ALL=1): 28 handed a seq out twice (a hand-out while the group was
// stopped was not carved: it now waits for the group,
// TestCarveWaitsForItsGroup), 8 lost one. Then 13 lost one: a skip mark
// owed at Close (a carve or commit durable, the Receive gone) whose write
// failed for good while Flushed said done; Flushed now waits for a stopped
// group's owed marks (its retry writes them). The 1 of 300 left was no loss:
// the last life's group had stopped with the message in the queue and the
// cursor before it; two calm lives follow now. Enforced since 2026-12-06
// (0 of 2,000 seeds; the owed-mark-flushed-early and owed-lost-on-reload
// plants fail 12 and more of 300).

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

type r17Queue struct {
	bodies  map[string][]byte // id -> body
	deleted map[string]bool
	nextID  int
}

type r17Run struct {
	t     *testing.T
	rng   *rand.Rand
	st    *memstore.Store
	q     *r17Queue
	seen  map[uint64]int // seq -> times the application got it
	log   []string
	cfg   recvcore.Config
	fails bool // inject commit failures
	modes int  // 6: ambiguous and transient failures; 7: and ErrCorrupt
}

func (r *r17Run) logf(f string, a ...any) { r.log = append(r.log, fmt.Sprintf(f, a...)) }

func (r *r17Run) newID(body []byte) string {
	r.q.nextID++
	id := fmt.Sprintf("m%d", r.q.nextID)
	r.q.bodies[id] = body
	return id
}

type r17Pending struct {
	d        recvcore.Delivery
	resolved bool
	err      error
}

// life runs one Core over the store: ids arrive in random steps; the life
// ends with a clean Close once lifeSteps events ran. last: everything is
// handed out and acked before the Close.
func (r *r17Run) life(n int, ids []string, lifeSteps int, last bool) {
	h := newEH(r.t, r.cfg)
	h.t = r.t
	recv := map[string]string{} // receipt base -> id
	var pend []*r17Pending
	var held []recvcore.Delivery
	closed := false
	base := func(rc string) string { return strings.TrimRight(rc, "'") }
	take := func(p *r17Pending) {
		k := p.d.Seq
		r.seen[k]++
		r.logf("life %d: app gets %d/%d (unordered %v attempt %d id %s)", n, p.d.Epoch, p.d.Seq, p.d.Unordered, p.d.Attempt, p.d.ID)
		held = append(held, p.d)
	}
	resolveScan := func() {
		for _, p := range pend {
			if p.resolved {
				continue
			}
			if ok, e := h.r16Resolved(p.d.Await); ok {
				p.resolved, p.err = true, e
			}
		}
	}
	answerOne := func() bool {
		switch {
		case len(h.reads) > 0:
			rd := h.reads[0]
			h.reads = h.reads[1:]
			curs, err := r.st.Cursors(context.Background(), rd.Streams)
			h.c.Read(h.now, rd.ID, curs, err)
		case len(h.commits) > 0:
			c := h.commits[0]
			h.commits = h.commits[1:]
			mode := 0
			if r.fails {
				mode = r.rng.Intn(r.modes)
			}
			switch mode {
			case 1: // took effect, outcome unknown
				err := r.st.Advance(context.Background(), c.Advances)
				r.logf("life %d: commit %v -> %v, unknown", n, c.Advances, err)
				h.c.Committed(h.now, c.ID, errors.New("timeout"))
			case 2: // not applied, outcome unknown
				r.logf("life %d: commit %v not applied, unknown", n, c.Advances)
				defer func() { r.logf("life %d: dump after unknown:\n%s", n, h.c.Dump()) }()
				h.c.Committed(h.now, c.ID, errors.New("timeout"))
			case 6: // permanent for the group
				errs := make([]error, len(c.Advances))
				for i := range errs {
					errs[i] = seqstore.ErrCorrupt
				}
				r.logf("life %d: commit %v corrupt", n, c.Advances)
				h.c.Committed(h.now, c.ID, &seqstore.BatchError{Errs: errs})
			case 3: // transient, known
				errs := make([]error, len(c.Advances))
				for i := range errs {
					errs[i] = errors.New("throttled")
				}
				h.c.Committed(h.now, c.ID, &seqstore.BatchError{Errs: errs})
			default:
				err := r.st.Advance(context.Background(), c.Advances)
				r.logf("life %d: commit %v -> %v", n, c.Advances, err)
				h.c.Committed(h.now, c.ID, err)
			}
		case len(h.deletes) > 0:
			d := h.deletes[0]
			h.deletes = h.deletes[1:]
			for _, rc := range d.Receipts {
				id := recv[base(rc)]
				r.q.deleted[id] = true
				r.logf("life %d: deleted %s (%s)", n, id, r.q.bodies[id][len(r.q.bodies[id])-6:])
			}
			h.c.Deleted(h.now, d.ID, nil)
		case len(h.vis) > 0:
			v := h.vis[0]
			h.vis = h.vis[1:]
			h.c.Visibility(h.now, v.ID, v.Receipt+"'", nil)
		case len(h.reqs) > 0:
			q := h.reqs[0]
			h.reqs = h.reqs[1:]
			for _, b := range q.Bodies {
				id := r.newID(b)
				r.logf("life %d: requeued as %s", n, id)
			}
			h.c.Requeued(h.now, q.ID, make([]error, len(q.Bodies)))
		default:
			return false
		}
		h.ready()
		resolveScan()
		return true
	}
	arrive := func() {
		id := ids[0]
		ids = ids[1:]
		rc := h.arriveID(id, r.q.bodies[id])
		recv[rc] = id
		r.logf("life %d: arrive %s %s", n, id, r.q.bodies[id][len(r.q.bodies[id])-6:])
		resolveScan()
	}
	settle := func(i int) {
		d := held[i]
		held = append(held[:i], held[i+1:]...)
		if r.rng.Intn(4) == 0 {
			require.NoError(r.t, h.c.Nack(h.now, &d, errors.New("fail")))
		} else {
			_, err := h.c.Ack(h.now, &d, false)
			require.NoError(r.t, err)
		}
		h.ready()
		resolveScan()
	}
	step := func() {
		switch k := r.rng.Intn(12); {
		case k < 2 && len(ids) > 0:
			arrive()
		case k < 4:
			if d, ok := h.next(); ok {
				r.logf("life %d: next %d unordered=%v await=%d", n, d.Seq, d.Unordered, d.Await)
				resolveScan()
				if d.Await == 0 {
					take(&r17Pending{d: d})
				} else {
					pend = append(pend, &r17Pending{d: d})
					resolveScan()
				}
			}
		case k < 6:
			answerOne()
		case k == 6 && len(pend) > 0:
			i := r.rng.Intn(len(pend))
			p := pend[i]
			pend = append(pend[:i], pend[i+1:]...)
			if !p.resolved || r.rng.Intn(3) == 0 {
				// The Receive gave up (its ctx ended before it took it).
				err := h.c.Abandon(h.now, &p.d)
				r.logf("life %d: abandon %d resolved=%v err=%v -> %v", n, p.d.Seq, p.resolved, p.err, err)
				h.ready()
				resolveScan()
			} else if p.err == nil {
				take(p)
			} else {
				r.logf("life %d: refused %d: %v", n, p.d.Seq, p.err)
			}
		case k == 7 && len(pend) > 0:
			// take what resolved
			keep := pend[:0]
			for _, p := range pend {
				switch {
				case !p.resolved:
					keep = append(keep, p)
				case p.err == nil:
					take(p)
				default:
					r.logf("life %d: refused %d: %v", n, p.d.Seq, p.err)
				}
			}
			pend = keep
		case k == 8 && len(held) > 0:
			settle(r.rng.Intn(len(held)))
		case k == 9:
			dt := time.Duration(r.rng.Intn(7000)) * time.Millisecond
			r.logf("life %d: tick %v", n, dt)
			h.tick(dt)
			resolveScan()
		}
	}
	closeAt := -1
	if !last && r.rng.Intn(2) == 0 {
		closeAt = r.rng.Intn(lifeSteps)
	}
	for i := range lifeSteps {
		if i == closeAt {
			r.logf("life %d: close (mid-life)", n)
			h.c.Close(h.now)
			h.ready()
			resolveScan()
		}
		step()
	}
	if last {
		for range 2000 {
			for len(ids) > 0 {
				arrive()
			}
			progress := answerOne()
			if d, ok := h.next(); ok {
				progress = true
				if d.Await == 0 {
					take(&r17Pending{d: d})
				} else {
					pend = append(pend, &r17Pending{d: d})
				}
			}
			resolveScan()
			keep := pend[:0]
			for _, p := range pend {
				switch {
				case !p.resolved:
					keep = append(keep, p)
				case p.err == nil:
					take(p)
					progress = true
				default:
					progress = true
				}
			}
			pend = keep
			for len(held) > 0 {
				settle(0)
				progress = true
			}
			if !progress {
				h.tick(6 * time.Second)
			}
		}
	}
	// Clean Close: the application finishes what it holds; the Receives
	// waiting take what the flush hands out.
	h.c.Close(h.now)
	closed = true
	h.ready()
	resolveScan()
	for i := 0; ; i++ {
		require.Less(r.t, i, 5000, "life %d: Close never flushed:\n%s", n, h.c.Dump())
		progress := answerOne()
		keep := pend[:0]
		for _, p := range pend {
			switch {
			case r.rng.Intn(8) == 0 && (!p.resolved || p.err == nil):
				// A Receive's ctx ends during the Close.
				err := h.c.Abandon(h.now, &p.d)
				r.logf("life %d: abandon at close %d resolved=%v -> %v", n, p.d.Seq, p.resolved, err)
				h.ready()
				resolveScan()
				progress = true
			case !p.resolved:
				keep = append(keep, p)
			case p.err == nil:
				take(p)
				progress = true
			default:
				progress = true
			}
		}
		pend = keep
		for len(held) > 0 {
			settle(0)
			progress = true
		}
		if !progress {
			if h.c.Flushed() && len(pend) == 0 {
				break
			}
			h.tick(time.Second)
		}
	}
	for range 3 {
		h.tick(time.Second)
		for answerOne() {
		}
	}
	_ = closed
	require.True(r.t, h.c.Flushed())
	curs, _ := r.st.Cursors(context.Background(), []seqstore.Stream{{Queue: "q", Group: "g"}})
	r.logf("life %d ends: store %+v stats %+v", n, curs[0], h.c.Stats())
}

func (r *r17Run) fail(format string, a ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nlog:\n%s", fmt.Sprintf(format, a...), strings.Join(r.log, "\n"))
}

// r17Once runs one case: seqs 1..4 handled before (store 1/5, 2 and 3
// skipped), two sends each of 2, 3, and 5..maxSeq (some late, in a later
// life), three lives then a last one that takes everything.
var r17Initial int

func r17Once(t *testing.T, seed int64, modes int) *r17Run {
	rng := rand.New(rand.NewSource(seed))
	r := &r17Run{t: t, rng: rng, st: r16Store(t, 5, seqstore.Range{Epoch: 1, First: 2, Last: 3}),
		q: &r17Queue{bodies: map[string][]byte{}, deleted: map[string]bool{}}, seen: map[uint64]int{}, cfg: r16Config(), fails: modes > 0, modes: modes}
	switch rng.Intn(4) {
	case 1:
		r.cfg.IdleEvict = time.Second
	case 2:
		r.cfg.Visibility, r.cfg.VisibilityMargin, r.cfg.VisibilityExtend = 30*time.Second, 10*time.Second, 30*time.Second
	case 3:
		r.cfg.MaxMemory = 4 << 10
	}
	const maxSeq = 9
	sends := map[int][]string{} // life -> ids first sent
	defer func() { r17Initial = 0 }()
	for _, s := range []uint64{2, 3, 2, 3} {
		l := rng.Intn(3)
		sends[l] = append(sends[l], r.newID(tagged("g", 1, s)))
	}
	for s := uint64(5); s <= maxSeq; s++ {
		l := 0
		_ = l
		if rng.Intn(4) == 0 {
			l = 1 + rng.Intn(2)
		}
		sends[l] = append(sends[l], r.newID(tagged("g", 1, s)))
		if rng.Intn(3) == 0 {
			l2 := rng.Intn(3)
			sends[l2] = append(sends[l2], r.newID(tagged("g", 1, s)))
		}
	}
	r17Initial = r.q.nextID
	sent := map[string]bool{}
	lives := 8
	if r.modes == 7 {
		// A commit that fails for good stops the group (by design) with
		// its messages still in the queue and its cursor before them: a
		// life after the store recovered hands them out. Without these
		// calm lives, a stop in the last life read as a loss (1 seed in
		// 300, 2026-12-06: seq 8 neither handed out nor deleted, the
		// store's cursor at 8).
		lives = 10
	}
	for n := 0; n < lives; n++ {
		if n == 8 {
			r.fails = false
		}
		// What is in the queue and not deleted comes (again) this life:
		// the ids sent so far, and those sent back (requeued).
		for _, id := range sends[n] {
			sent[id] = true
		}
		for id := range r.q.bodies {
			if idn, _ := strconv.Atoi(id[1:]); idn > r17Initial {
				sent[id] = true
			}
		}
		var ids []string
		for id := range sent {
			if !r.q.deleted[id] {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		if n > 3 && len(ids) == 0 {
			break
		}
		r.life(n, ids, 150, n >= 3)
		// What did not reach the application yet must still be able to:
		// the calm lives of the corrupt variant hide no loss.
		if r.checkRecoverable(seed, n+1) && n+1 == 8 && lives > 8 {
			r17Calm++
		}
		for s, k := range r.seen {
			if k > 1 {
				r.fail("seed %d: seq %d reached the application %d times", seed, s, k)
			}
		}
	}
	for s := uint64(2); s <= maxSeq; s++ {
		if s == 4 {
			continue
		}
		if r.seen[s] != 1 {
			r.fail("seed %d: seq %d reached the application %d times (all received in the last life)", seed, s, r.seen[s])
		}
	}
	return r
}

// r17Calm counts the runs whose calm lives had seqs to hand out.
var r17Calm int

// checkRecoverable (after every life) fails the run if a seq that did not
// reach the application cannot reach it any more: every copy deleted from
// the queue, or the store's cursor past it without it in its Skipped ranges
// (a copy arriving later is then dropped as a duplicate). Before the calm lives of
// the corrupt variant, this tells "stopped with the message queued and the
// cursor before it" (what they are for) from a loss. It reports whether
// some seq is owed. n is the life about to start.
func (r *r17Run) checkRecoverable(seed int64, n int) bool {
	r.t.Helper()
	cur := r16Cursor(r.t, r.st)
	queued := map[uint64]int{}
	deleted := map[uint64]int{}
	for id, b := range r.q.bodies {
		h, _, ok := envelope.Parse(b)
		require.True(r.t, ok, "body of %s", id)
		if r.q.deleted[id] {
			deleted[h.Seq]++
		} else {
			queued[h.Seq]++
		}
	}
	calm := false
	for s := uint64(2); s <= 9; s++ {
		if s == 4 || r.seen[s] > 0 {
			continue
		}
		calm = true
		skipped := false
		for _, rg := range cur.Skipped {
			skipped = skipped || rg.Contains(1, s)
		}
		handable := cur.Epoch < 1 || cur.Epoch == 1 && (s >= cur.Next || skipped)
		if !handable || queued[s] == 0 {
			r.fail("seed %d: before life %d, seq %d never reached the application and cannot any more: store cursor %+v, copies queued %d, deleted %d", seed, n, s, cur, queued[s], deleted[s])
		}
		r.logf("before life %d, seq %d is owed: cursor %+v, copies queued %d, deleted %d", n, s, cur, queued[s], deleted[s])
	}
	return calm
}

func TestReview17_CarveFuzz(t *testing.T) {
	n := 300
	if v := os.Getenv("R17_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	for _, v := range r17Variants {
		r17Calm = 0
		for seed := int64(1); seed <= int64(n); seed++ {
			ok := t.Run(fmt.Sprintf("%s/seed=%d", v.name, seed), func(t *testing.T) { r17Once(t, seed, v.modes) })
			if !ok && os.Getenv("R17_ALL") == "" {
				return
			}
		}
		if v.modes == 7 {
			t.Logf("%s: %d of %d runs left seqs for the calm lives, each still queued and handable", v.name, r17Calm, n)
		}
	}
}

// r17Variants: no store failures; ambiguous and transient commit failures
// (modes 6); and commits that fail for good too (7).
var r17Variants = []struct {
	name  string
	modes int
}{{"calm", 0}, {"fails", 6}, {"corrupt", 7}}

// TestReview17_CarveFuzzShow replays one case with its log: R17_SEED=n and
// R17_MODES=6 or 7 (unset: no failures).
func TestReview17_CarveFuzzShow(t *testing.T) {
	seed, _ := strconv.ParseInt(os.Getenv("R17_SEED"), 10, 64)
	modes, _ := strconv.Atoi(os.Getenv("R17_MODES"))
	r := r17Once(t, seed, modes)
	t.Log(strings.Join(r.log, "\n"))
}

// Finding 1. A carved message whose Receive gave up is given back at Close
// and its seq skipped again (uncarve: g.ack and g.owed); when the commit
// that writes the re-skip fails with a permanent store error
// (becomeFailed), the group is read again after RetryMax and becomeLoaded
// replaces g.ack with the stored cursor, which holds the carve: the
// re-skip is dropped, g.owed is not carried (carryOwed runs on conflicts
// only), and nothing writes it again. The copy went back to the queue,
// unseen, and the next receiver deletes it as a duplicate: lost on a
// Close. (The same holds for skipOwed's ordered owed messages.)
func TestReview17_FailedReskipLosesCarvedMessage(t *testing.T) {
	cfg := r16Config()
	st := r16Store(t, 5, seqstore.Range{Epoch: 1, First: 2, Last: 2})
	h := newEH(t, cfg)
	h.arriveID("copy-a", tagged("g", 1, 2))
	r16Reads(h, st)
	d, ok := h.next()
	require.True(t, ok)
	r16Pump(h, st)
	handed, e := h.r16Resolved(d.Await)
	require.True(t, handed && e == nil)
	require.Empty(t, r16Cursor(t, st).Skipped, "carved, durable")
	require.NoError(t, h.c.Abandon(h.now, &d)) // the Receive gave up after the carve
	h.ready()
	h.c.Close(h.now)
	h.ready()
	require.Len(t, h.commits, 1, "the re-skip")
	c := h.commits[0]
	h.commits = nil
	h.c.Committed(h.now, c.ID, &seqstore.BatchError{Errs: []error{seqstore.ErrCorrupt}})
	h.ready()
	// The group stopped with the mark unwritten: Close is not done (it
	// waits for the group's retry, or its ctx ends and it says so), even
	// once the give-back's visibility change is answered.
	h.visAll()
	h.ready()
	require.False(t, h.c.Flushed(), "flushed while a stopped group owes a skip mark: Close would return nil and the message be lost")
	for range 5 {
		h.tick(cfg.RetryMax + time.Second)
		r16Pump(h, st)
	}
	t.Logf("flushed %v store %+v\n%s", h.c.Flushed(), r16Cursor(t, st), h.c.Dump())
	require.True(t, h.c.Flushed())

	// The next receiver: the copy given back comes again.
	h2 := newEH(t, cfg)
	h2.arriveID("copy-a", tagged("g", 1, 2))
	r16Pump(h2, st)
	d2, ok := h2.next()
	require.True(t, ok, "g/1/2, never seen by the application, is deleted as a duplicate at the next receiver")
	_ = d2
}

// TestReview17_Probe: a carve whose commit's outcome is unknown (not
// applied), its Receive gone, then Close: Close ends flushed and the store
// still skips the seq (the carve is not written, or written and undone).
func TestReview17_Probe(t *testing.T) {
	cfg := r16Config()
	st := r16Store(t, 5, seqstore.Range{Epoch: 1, First: 2, Last: 3})
	h := newEH(t, cfg)
	h.arriveID("copy-3", tagged("g", 1, 3))
	r16Reads(h, st)
	d, ok := h.next()
	require.True(t, ok)
	require.NotZero(t, d.Await)
	require.Len(t, h.commits, 1)
	c := h.commits[0]
	h.commits = nil
	h.c.Committed(h.now, c.ID, errors.New("timeout")) // not applied, outcome unknown
	h.ready()
	require.NoError(t, h.c.Abandon(h.now, &d))
	h.ready()
	h.c.Close(h.now)
	h.ready()
	r16Pump(h, st)
	h.tick(time.Second)
	r16Pump(h, st)
	t.Logf("flushed %v store %+v\n%s", h.c.Flushed(), r16Cursor(t, st), h.c.Dump())
	require.True(t, h.c.Flushed(), "Close is done")
	skipped := false
	for _, r := range r16Cursor(t, st).Skipped {
		skipped = skipped || r.Contains(1, 3)
	}
	require.True(t, skipped, "the abandoned carve's seq is skipped again: the next receiver hands it out")
}

// Held up (liveness): a long run of late arrivals of skipped seqs, each
// carved; half of the Receives give up after the carve is durable (the
// message is handed out again, without a new carve), a quarter are Nacked,
// the rest Acked; duplicate sends come after each. The group's pins all end:
// once idle it is evicted (Stats().Groups 0), and Invariants hold
// throughout.
func TestReview17_HeldUp_LongRunPinsEnd(t *testing.T) {
	cfg := r16Config()
	cfg.IdleEvict = time.Second
	st := r16Store(t, 1000, seqstore.Range{Epoch: 1, First: 1, Last: 999})
	h := newEH(t, cfg)
	for s := uint64(1); s < 400; s += 2 {
		h.arriveID(fmt.Sprintf("a%d", s), tagged("g", 1, s))
		r16Pump(h, st)
		d, ok := h.next()
		require.True(t, ok)
		require.NotZero(t, d.Await, "carved")
		r16Pump(h, st)
		handed, e := h.r16Resolved(d.Await)
		require.True(t, handed && e == nil)
		if s%4 == 1 {
			require.NoError(t, h.c.Abandon(h.now, &d))
			h.ready()
			d, ok = h.next()
			require.True(t, ok)
			require.Zero(t, d.Await)
		}
		if s%8 == 3 {
			require.NoError(t, h.c.Nack(h.now, &d, errors.New("x")))
		} else {
			_, err := h.c.Ack(h.now, &d, false)
			require.NoError(t, err)
		}
		h.ready()
		h.arriveID(fmt.Sprintf("b%d", s), tagged("g", 1, s)) // a duplicate send
		r16Pump(h, st)
		_, ok = h.next()
		require.False(t, ok)
		require.NoError(t, h.c.Invariants())
	}
	for range 10 {
		h.tick(time.Second)
		r16Pump(h, st)
	}
	require.Zero(t, h.c.Stats().Groups, "the group stays pinned:\n%s", h.c.Dump())
	require.Len(t, r16Cursor(t, st).Skipped, 64, "what is left of 1..999 with the odd seqs below 400 carved (capped)")
}

// TestCarveWaitsForItsGroup: a late arrival to carve whose group is not
// active at its hand-out (here its cursor is read again after a conflict)
// waits for the group instead of being handed out without a carve (which a
// duplicate send would then follow at the next receiver: review17's random
// driver found such duplicates under store errors, 28 of 300 cases). Once
// the group is active it is carved, durably, before the application gets it.
func TestCarveWaitsForItsGroup(t *testing.T) {
	cfg := r16Config()
	st := r16Store(t, 5, seqstore.Range{Epoch: 1, First: 2, Last: 2})
	h := newEH(t, cfg)
	h.arriveID("id-5", tagged("g", 1, 5))
	r16Reads(h, st)
	d5, ok := h.next()
	require.True(t, ok)
	require.Equal(t, uint64(5), d5.Seq)
	h.arriveID("copy-a", tagged("g", 1, 2)) // late, to carve
	require.Len(t, h.commits, 1)
	c := h.commits[0]
	h.commits = nil
	h.c.Committed(h.now, c.ID, &seqstore.BatchError{Errs: []error{seqstore.ErrConflict}})
	h.ready()
	require.NotEmpty(t, h.reads, "the conflict reads the cursor again")
	_, ok = h.next()
	require.False(t, ok, "handed out while its group's cursor is read again: it could not be carved")
	r16Pump(h, st) // the read: active again
	d, ok := h.next()
	require.True(t, ok, "in line again once its group is active")
	require.True(t, d.Unordered)
	require.Equal(t, uint64(2), d.Seq)
	require.NotZero(t, d.Await)
	r16Pump(h, st)
	handed, e := h.r16Resolved(d.Await)
	require.True(t, handed && e == nil)
	require.Empty(t, r16Cursor(t, st).Skipped, "carved before the application has it")
}
