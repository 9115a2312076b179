package recvcore_test

// Review 12 (7c3a69e, "Ready and Deadline skip the lanes with nothing to
// do"): a differential test. Two Cores of one Config get the same events;
// one steps with Ready (the lanes skipped, the commit and delete lanes'
// due times kept), the other with recvcore.OldReady (every lane's ready on
// every step, every due worked out afresh: the code before the change).
// Every Ready's actions, Wake, Room and Available must be the same, and the
// new Core's Deadline must equal the old formula at every step. The events
// are random: arrivals (ordered and untagged), hand-outs, Acks and Nacks,
// the outcomes of every kind of action (successes, transient failures,
// failed deletes with retries, commits of unknown outcome), time moving by
// small steps or to the Deadline, Close. A last phase answers everything
// successfully and follows Deadline until the Core is flushed: a lost
// wake-up stalls there, a Deadline that keeps being due with nothing done
// (a busy loop) is counted.
//
// REVIEW12_SEEDS=n runs n seeds per configuration (60 by default, 8 with
// -short; 1500 passed on 6d8fa7e), REVIEW12_SEED=k only seed k,
// REVIEW12_CHECKDUES=1 keeps the package's own checks (checkDues) on too,
// REVIEW12_DUMP=1 logs the Core at the end of each script. Plants that
// this test catches (checkDues off): no changed mark in commitLane.queue,
// deleteLane.push, Committed or Deleted, or after a lane's ready in
// Ready; no c.closing in either pending; no full-batch term in
// deleteLane.pending. Those it does not catch are equivalent (the mark in
// Core.failed and in deleteFirst, the urgent terms: see the report).

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

type r12side struct {
	name     string
	c        *recvcore.Core
	ready    func(*recvcore.Core, time.Time) recvcore.Ready
	deadline func(*recvcore.Core) (time.Time, bool)
	curs     map[string]seqstore.Cursor

	reads   []recvcore.Read
	commits []recvcore.Commit
	deletes []recvcore.Delete
	vis     []recvcore.ChangeVisibility
	deads   []recvcore.DeadLetter
	reqs    []recvcore.Requeue
	out     []recvcore.Delivery
	acted   bool // the last Ready asked for an action
	canon   bool // compare the actions without ids, sorted
	check   func(recvcore.Ready)
}

func (s *r12side) pending() int {
	return len(s.reads) + len(s.commits) + len(s.deletes) + len(s.vis) + len(s.deads) + len(s.reqs)
}

// step runs Ready and files its actions; it returns the Ready's
// description, which both sides must share.
func (s *r12side) step(now time.Time) string {
	rd := s.ready(s.c, now)
	if s.check != nil {
		s.check(rd)
	}
	s.reads = append(s.reads, rd.Reads...)
	s.commits = append(s.commits, rd.Commits...)
	s.deletes = append(s.deletes, rd.Deletes...)
	s.vis = append(s.vis, rd.Visibility...)
	s.deads = append(s.deads, rd.DeadLetters...)
	s.reqs = append(s.reqs, rd.Requeues...)
	s.acted = len(rd.Reads)+len(rd.Commits)+len(rd.Deletes)+len(rd.Visibility)+len(rd.DeadLetters)+len(rd.Requeues)+len(rd.Parks)+len(rd.Unparks)+len(rd.Scans) > 0
	var b strings.Builder
	if !s.canon {
		fmt.Fprintf(&b, "reads %v commits %v deletes %v vis %v deads %d reqs %d parks %d unparks %d scans %d",
			rd.Reads, rd.Commits, rd.Deletes, rd.Visibility, len(rd.DeadLetters), len(rd.Requeues), len(rd.Parks), len(rd.Unparks), len(rd.Scans))
	} else {
		// After a Close with several groups: the actions without their
		// ids, sorted (Close walks a map of groups).
		var xs []string
		for _, r := range rd.Reads {
			xs = append(xs, fmt.Sprint("read ", r.Streams))
		}
		for _, c := range rd.Commits {
			as := make([]string, len(c.Advances))
			for i, a := range c.Advances {
				as[i] = fmt.Sprint(a)
			}
			slices.Sort(as)
			xs = append(xs, fmt.Sprint("commit ", as))
		}
		for _, d := range rd.Deletes {
			rs := slices.Clone(d.Receipts)
			slices.Sort(rs)
			xs = append(xs, fmt.Sprint("delete ", rs))
		}
		for _, v := range rd.Visibility {
			xs = append(xs, fmt.Sprint("vis ", v.Receipt, v.Timeout))
		}
		slices.Sort(xs)
		fmt.Fprintf(&b, "%v deads %d reqs %d parks %d unparks %d scans %d", xs, len(rd.DeadLetters), len(rd.Requeues), len(rd.Parks), len(rd.Unparks), len(rd.Scans))
	}
	return b.String()
}

type r12 struct {
	t      *testing.T
	rng    *rand.Rand
	now    time.Time
	cfg    recvcore.Config
	sides  [2]*r12side
	seqs   map[string]uint64
	n      int // receipts given
	log    []string
	closes bool // the script closes the Cores
	groups int
}

func newR12(t *testing.T, cfg recvcore.Config, seed uint64) *r12 {
	w := &r12{t: t, rng: rand.New(rand.NewPCG(seed, 12)), now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), cfg: cfg, seqs: map[string]uint64{}}
	for i, name := range []string{"new", "old"} {
		c, err := recvcore.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := &r12side{name: name, c: c, curs: map[string]seqstore.Cursor{}}
		if i == 0 {
			s.ready, s.deadline = (*recvcore.Core).Ready, (*recvcore.Core).Deadline
		} else {
			s.ready, s.deadline = recvcore.OldReady, recvcore.OldDeadline
		}
		w.sides[i] = s
	}
	nw := w.sides[0].c
	w.sides[0].check = func(rd recvcore.Ready) {
		// The new Core's Deadline against the old formula, after every
		// Ready (the Ready's own Wake included).
		at, ok := nw.Deadline()
		oat, ook := recvcore.OldDeadline(nw)
		if ok != ook || !at.Equal(oat) || !rd.Wake.Equal(oat) {
			cd, cc, dd, dc := recvcore.KeptDues(nw)
			w.t.Fatalf("at %v the new Core's Deadline is %v %v (Wake %v), the old formula's %v %v (kept: commits %v changed %v, deletes %v changed %v): %s\n%s",
				w.now, at, ok, rd.Wake, oat, ook, cd, cc, dd, dc, recvcore.DueParts(nw), strings.Join(w.log, "\n"))
		}
	}
	return w
}

// event applies f to both sides, then steps both and compares.
func (w *r12) event(what string, f func(s *r12side) string) {
	w.t.Helper()
	var got [2]string
	for i, s := range w.sides {
		r := f(s)
		got[i] = r + " | " + s.step(w.now)
	}
	w.log = append(w.log, fmt.Sprintf("%s %s: %s", w.now.Format("15:04:05.000000"), what, got[0]))
	if len(w.log) > 40 {
		w.log = w.log[1:]
	}
	if got[0] != got[1] && !w.sides[0].canon {
		w.t.Fatalf("after %s at %v the Cores differ:\nnew: %s\nold: %s\nlast steps:\n%s", what, w.now, got[0], got[1], strings.Join(w.log, "\n"))
	}
	nw := w.sides[0].c
	at, ok := nw.Deadline()
	oat, ook := recvcore.OldDeadline(nw)
	if ok != ook || !at.Equal(oat) {
		cd, cc, dd, dc := recvcore.KeptDues(nw)
		w.t.Fatalf("after %s at %v the new Core's Deadline is %v %v, the old formula's %v %v (kept: commits %v changed %v, deletes %v changed %v)\n%s",
			what, w.now, at, ok, oat, ook, cd, cc, dd, dc, strings.Join(w.log, "\n"))
	}
}

func (w *r12) arrive(groups int) {
	k := 1 + w.rng.IntN(4)
	var in []recvcore.Incoming
	for range k {
		var body []byte
		switch w.rng.IntN(10) {
		case 0: // untagged: Unordered (not with a strict Close: its give-backs walk a map)
			if w.closes && w.groups == 1 {
				continue
			}
			body = []byte(fmt.Sprintf("raw-%d", w.n))
		case 1: // a redelivery of an old seq
			g := fmt.Sprintf("g%d", w.rng.IntN(groups))
			if w.seqs[g] == 0 {
				continue
			}
			body = tagged(g, 1, 1+w.rng.Uint64N(w.seqs[g]))
		default:
			g := fmt.Sprintf("g%d", w.rng.IntN(groups))
			w.seqs[g]++
			body = tagged(g, 1, w.seqs[g])
		}
		w.n++
		in = append(in, recvcore.Incoming{Body: body, ID: fmt.Sprintf("id%d", w.n), Receipt: fmt.Sprintf("r%d", w.n)})
	}
	w.event("arrive", func(s *r12side) string {
		s.c.Arrive(w.now, in)
		return ""
	})
}

var errR12 = errors.New("review12: transient")

// answer answers one pending action of the new side (the same one on the
// old side), successfully when ok.
func (w *r12) answer(ok bool) bool {
	a := w.sides[0]
	if a.canon {
		// Each side answers its own actions (see canon).
		if a.pending()+w.sides[1].pending() == 0 {
			return false
		}
		for _, s := range w.sides {
			w.answerSide(s)
		}
		w.event("answered", func(*r12side) string { return "" })
		return true
	}
	type kind struct {
		n    int
		name string
	}
	kinds := []kind{{len(a.reads), "read"}, {len(a.commits), "commit"}, {len(a.deletes), "delete"}, {len(a.vis), "vis"}, {len(a.deads), "dead"}, {len(a.reqs), "requeue"}}
	var have []kind
	for _, k := range kinds {
		if k.n > 0 {
			have = append(have, k)
		}
	}
	if len(have) == 0 {
		return false
	}
	k := have[w.rng.IntN(len(have))]
	i := w.rng.IntN(k.n)
	fail := !ok && w.rng.IntN(3) == 0
	mode := w.rng.IntN(3)
	w.event(fmt.Sprintf("%s %d fail=%v/%d", k.name, i, fail, mode), func(s *r12side) string {
		switch k.name {
		case "read":
			r := s.reads[i]
			s.reads = append(s.reads[:i:i], s.reads[i+1:]...)
			if fail {
				s.c.Read(w.now, r.ID, nil, errR12)
				return ""
			}
			out := make([]seqstore.Cursor, len(r.Streams))
			for j, st := range r.Streams {
				out[j] = s.curs[st.Group]
			}
			s.c.Read(w.now, r.ID, out, nil)
		case "commit":
			c := s.commits[i]
			s.commits = append(s.commits[:i:i], s.commits[i+1:]...)
			switch {
			case !fail:
				for _, a := range c.Advances {
					s.curs[a.Stream.Group] = a.To
				}
				s.c.Committed(w.now, c.ID, nil)
			case mode == 0: // unknown outcome
				s.c.Committed(w.now, c.ID, errR12)
			default: // every advance failed, transiently: a backoff
				errs := make([]error, len(c.Advances))
				for j := range errs {
					errs[j] = errR12
				}
				s.c.Committed(w.now, c.ID, &seqstore.BatchError{Errs: errs})
			}
		case "delete":
			d := s.deletes[i]
			s.deletes = append(s.deletes[:i:i], s.deletes[i+1:]...)
			if !fail {
				s.c.Deleted(w.now, d.ID, nil)
				return ""
			}
			res := make([]recvcore.DeleteResult, len(d.Receipts))
			for j := range res {
				res[j] = recvcore.DeleteResult{Err: errR12, Retry: mode != 2}
			}
			s.c.Deleted(w.now, d.ID, res)
		case "vis":
			v := s.vis[i]
			s.vis = append(s.vis[:i:i], s.vis[i+1:]...)
			if fail {
				s.c.Visibility(w.now, v.ID, "", errR12)
				return ""
			}
			s.c.Visibility(w.now, v.ID, v.Receipt+"'", nil)
		case "dead":
			d := s.deads[i]
			s.deads = append(s.deads[:i:i], s.deads[i+1:]...)
			errs := make([]error, len(d.Bodies))
			if fail {
				for j := range errs {
					errs[j] = errR12
				}
			}
			s.c.DeadLettered(w.now, d.ID, errs)
		case "requeue":
			r := s.reqs[i]
			s.reqs = append(s.reqs[:i:i], s.reqs[i+1:]...)
			errs := make([]error, len(r.Bodies))
			if fail {
				for j := range errs {
					errs[j] = errR12
				}
			}
			s.c.Requeued(w.now, r.ID, errs)
		}
		return ""
	})
	return true
}

// answerSide answers every pending action of s successfully (s only).
func (w *r12) answerSide(s *r12side) {
	for len(s.reads) > 0 {
		r := s.reads[0]
		s.reads = s.reads[1:]
		out := make([]seqstore.Cursor, len(r.Streams))
		for j, st := range r.Streams {
			out[j] = s.curs[st.Group]
		}
		s.c.Read(w.now, r.ID, out, nil)
		s.step(w.now)
	}
	for len(s.commits) > 0 {
		c := s.commits[0]
		s.commits = s.commits[1:]
		for _, a := range c.Advances {
			s.curs[a.Stream.Group] = a.To
		}
		s.c.Committed(w.now, c.ID, nil)
		s.step(w.now)
	}
	for len(s.deletes) > 0 {
		d := s.deletes[0]
		s.deletes = s.deletes[1:]
		s.c.Deleted(w.now, d.ID, nil)
		s.step(w.now)
	}
	for len(s.vis) > 0 {
		v := s.vis[0]
		s.vis = s.vis[1:]
		s.c.Visibility(w.now, v.ID, v.Receipt+"'", nil)
		s.step(w.now)
	}
	for len(s.deads) > 0 {
		d := s.deads[0]
		s.deads = s.deads[1:]
		s.c.DeadLettered(w.now, d.ID, make([]error, len(d.Bodies)))
		s.step(w.now)
	}
	for len(s.reqs) > 0 {
		r := s.reqs[0]
		s.reqs = s.reqs[1:]
		s.c.Requeued(w.now, r.ID, make([]error, len(r.Bodies)))
		s.step(w.now)
	}
}

func (w *r12) next() {
	w.event("next", func(s *r12side) string {
		d, ok := s.c.Next(w.now)
		if ok {
			s.out = append(s.out, d)
		}
		return fmt.Sprintf("next %v %s/%d/%d await %d", ok, d.Group, d.Epoch, d.Seq, d.Await)
	})
}

func (w *r12) settle(ack bool) {
	a := w.sides[0]
	if len(a.out) == 0 {
		return
	}
	i := w.rng.IntN(len(a.out))
	sync := w.rng.IntN(4) == 0
	w.event(fmt.Sprintf("settle %d ack=%v", i, ack), func(s *r12side) string {
		d := s.out[i]
		s.out = append(s.out[:i:i], s.out[i+1:]...)
		if ack {
			t, err := s.c.Ack(w.now, &d, sync)
			return fmt.Sprintf("ack %d %v", t, err)
		}
		return fmt.Sprintf("nack %v", s.c.Nack(w.now, &d, errR12))
	})
}

// advance moves time by d (to the new Core's Deadline when d is 0) and
// ticks both.
func (w *r12) advance(d time.Duration) {
	if d == 0 {
		at, ok := w.sides[0].c.Deadline()
		if !ok {
			return
		}
		if at.After(w.now) {
			d = at.Sub(w.now)
		}
	}
	w.now = w.now.Add(d)
	w.event(fmt.Sprintf("tick +%v", d), func(s *r12side) string {
		s.c.Tick(w.now)
		return ""
	})
}

func (w *r12) close() {
	w.event("close", func(s *r12side) string {
		s.canon = w.groups > 1
		s.c.Close(w.now)
		return ""
	})
}

// run drives steps random events, then (closing when close) answers
// everything and follows Deadline until the new Core is flushed.
func (w *r12) run(steps, groups int, closeAt int) {
	closed := false
	for i := range steps {
		if i == closeAt {
			w.close()
			closed = true
		}
		switch r := w.rng.IntN(20); {
		case r < 4:
			w.arrive(groups)
		case r < 8:
			w.next()
		case r < 11:
			w.settle(w.rng.IntN(5) != 0)
		case r < 16:
			w.answer(false)
		case r < 18:
			w.advance(time.Duration(w.rng.IntN(300)) * time.Millisecond)
		default:
			w.advance(0)
		}
	}
	// Everything settled and answered successfully from here on.
	for len(w.sides[0].out) > 0 {
		w.settle(true)
	}
	if !closed && closeAt >= 0 {
		w.close()
		closed = true
	}
	due := 0
	for i := 0; ; i++ {
		if i > 5000 {
			w.t.Fatalf("not flushed after 5000 steps (a stall): %s\n%s", w.sides[0].c.Dump(), strings.Join(w.log, "\n"))
		}
		if w.answer(true) {
			continue
		}
		for len(w.sides[0].out) > 0 {
			w.settle(true)
		}
		a := w.sides[0]
		if !closed {
			w.next()
			if len(a.out) > 0 {
				continue
			}
		}
		if closed && a.c.Flushed() && a.pending() == 0 {
			if b := w.sides[1]; w.groups > 1 {
				// Each side went its own order since Close: both must
				// end flushed, with the same counts.
				for j := 0; !(b.c.Flushed() && b.pending() == 0); j++ {
					if j > 5000 {
						w.t.Fatalf("the old Core is not flushed: %s", b.c.Dump())
					}
					w.answerSide(b)
					if b.pending() == 0 {
						at, ok := b.c.Deadline()
						if !ok {
							w.t.Fatalf("the old Core: closing, not flushed, no Deadline: %s", b.c.Dump())
						}
						if at.After(w.now) {
							w.now = at
						}
						b.c.Tick(w.now)
						b.step(w.now)
					}
				}
			}
			if os.Getenv("REVIEW12_DUMP") != "" {
				w.t.Logf("before Stats: %s", w.sides[0].c.Dump())
			}
			sa, sb, ok := r12Stats(w.sides[0].c), r12Stats(w.sides[1].c), true
			if sa == nil || sb == nil {
				// Stats panicked: a stuck group compacted (see
				// TestReview12StatsAfterStuckGroupCompacted).
				w.t.Logf("Stats panics (TestReview12StatsAfterStuckGroupCompacted): counts not compared")
				ok = false
			}
			if ok && fmt.Sprint(*sa) != fmt.Sprint(*sb) {
				w.t.Fatalf("the Cores end with different counts:\nnew %+v\nold %+v", *sa, *sb)
			}
			return
		}
		at, ok := a.c.Deadline()
		if !ok {
			if closed {
				w.t.Fatalf("closing, not flushed, and no Deadline (a lost wake-up): %s\n%s", a.c.Dump(), strings.Join(w.log, "\n"))
			}
			return // nothing more to do on its own
		}
		wasDue := !at.After(w.now)
		w.advance(0)
		if wasDue && !a.acted && a.pending() == 0 {
			due++
			if due > 3 {
				w.t.Fatalf("Deadline %v keeps being due at %v with nothing done (a busy loop): %s\n%s\n%s", at, w.now, recvcore.DueParts(a.c), a.c.Dump(), strings.Join(w.log, "\n"))
			}
		} else {
			due = 0
		}
	}
}

// r12Stats returns c's Stats without the stuck groups, nil if Stats
// panics.
func r12Stats(c *recvcore.Core) (st *recvcore.Stats) {
	defer func() {
		if recover() != nil {
			st = nil
		}
	}()
	s := c.Stats()
	s.Stuck = nil
	return &s
}

func r12Config(mode recvcore.Mode, commitInterval time.Duration, maxBatch int) recvcore.Config {
	cfg := ehConfig()
	cfg.Mode = mode
	cfg.CommitInterval = commitInterval
	cfg.MaxBatch = maxBatch
	cfg.Untagged = recvcore.UntaggedDeliver
	// Extensions on (ehConfig's -1 turns them off, and then a released
	// message's shortening keeps Deadline at now until Close: see
	// TestReview12NoMarginBusyLoop), within a short visibility so that
	// they happen.
	cfg.Visibility, cfg.VisibilityMargin, cfg.VisibilityExtend = 20*time.Second, 5*time.Second, 20*time.Second
	return cfg
}

// TestReview12Differential: the new Ready and Deadline against the old
// ones, over random event scripts, for each mode, CommitInterval 0, -1,
// 5 ms and 300 ms, MaxBatch 1 and 4. One group (its Close gives back in
// one order on both Cores; with more groups, Close's walk over a map
// orders the give-backs differently on the two Cores), and several groups
// without Close.
func TestReview12Differential(t *testing.T) {
	// Without the package's own checks: the old code is the oracle here
	// (REVIEW12_CHECKDUES=1 keeps them on as well).
	defer recvcore.SetCheckDues(os.Getenv("REVIEW12_CHECKDUES") != "")()
	seeds := 60
	if testing.Short() {
		seeds = 8
	}
	if n, err := strconv.Atoi(os.Getenv("REVIEW12_SEEDS")); err == nil {
		seeds = n
	}
	for _, mode := range []recvcore.Mode{recvcore.AtLeastOnce, recvcore.AtMostOnce} {
		for _, ci := range []time.Duration{0, -1, 5 * time.Millisecond, 300 * time.Millisecond} {
			for _, mb := range []int{1, 4} {
				for _, groups := range []int{1, 3} {
					t.Run(fmt.Sprintf("mode=%d/ci=%v/maxbatch=%d/groups=%d", mode, ci, mb, groups), func(t *testing.T) {
						for seed := range uint64(seeds) {
							w := newR12(t, r12Config(mode, ci, mb), seed)
							closeAt := 100 + w.rng.IntN(300)
							if groups > 1 {
								closeAt = 400 // at the end: see canon
							}
							w.closes, w.groups = true, groups
							if os.Getenv("REVIEW12_SEED") != "" && os.Getenv("REVIEW12_SEED") != fmt.Sprint(seed) {
								continue
							}
							w.run(400, groups, closeAt)
						}
					})
				}
			}
		}
	}
}

// Scripted cases (review 12): each runs on both Cores (new and old Ready)
// with the Deadline oracle at every step, and checks that the commit or
// delete goes out when it must.

func (w *r12) arriveSeqs(g string, seqs ...uint64) {
	var in []recvcore.Incoming
	for _, s := range seqs {
		w.n++
		body := []byte(fmt.Sprintf("raw-%d", w.n))
		if g != "" {
			body = tagged(g, 1, s)
		}
		in = append(in, recvcore.Incoming{Body: body, ID: fmt.Sprintf("id%d", w.n), Receipt: fmt.Sprintf("r%d", w.n)})
	}
	w.event("arrive "+g, func(s *r12side) string {
		s.c.Arrive(w.now, in)
		return ""
	})
}

// answerKind answers the first pending action of kind on both sides with
// f.
func (w *r12) answerFirst(kind string, f func(s *r12side)) {
	w.event("answer "+kind, func(s *r12side) string {
		f(s)
		return ""
	})
}

func (w *r12) readAll() {
	for len(w.sides[0].reads) > 0 {
		w.answerFirst("read", func(s *r12side) {
			r := s.reads[0]
			s.reads = s.reads[1:]
			out := make([]seqstore.Cursor, len(r.Streams))
			for j, st := range r.Streams {
				out[j] = s.curs[st.Group]
			}
			s.c.Read(w.now, r.ID, out, nil)
		})
	}
}

func (w *r12) nextAck() {
	w.next()
	w.event("ack", func(s *r12side) string {
		d := s.out[len(s.out)-1]
		s.out = s.out[:len(s.out)-1]
		t, err := s.c.Ack(w.now, &d, false)
		return fmt.Sprint(t, err)
	})
}

func (w *r12) commitOutcome(err func(n int) error) {
	w.answerFirst("commit", func(s *r12side) {
		c := s.commits[0]
		s.commits = s.commits[1:]
		e := err(len(c.Advances))
		if e == nil {
			for _, a := range c.Advances {
				s.curs[a.Stream.Group] = a.To
			}
		}
		s.c.Committed(w.now, c.ID, e)
	})
}

func transientAll(n int) error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = errR12
	}
	return &seqstore.BatchError{Errs: errs}
}

// drain answers everything successfully and follows Deadline until the
// (closed) new Core is flushed.
func (w *r12) drain() {
	w.t.Helper()
	a := w.sides[0]
	for i := 0; !(a.c.Flushed() && a.pending() == 0); i++ {
		if i > 1000 {
			w.t.Fatalf("not flushed: %s", a.c.Dump())
		}
		if a.pending() > 0 {
			for _, s := range w.sides {
				w.answerSide(s)
			}
			w.event("answered", func(*r12side) string { return "" })
			continue
		}
		if _, ok := a.c.Deadline(); !ok {
			w.t.Fatalf("closing, not flushed, no Deadline: %s", a.c.Dump())
		}
		w.advance(0)
	}
}

// TestReview12CommitBackoffThenClose: a commit fails (known, transient):
// the lane backs off; Close during the backoff does not send it early
// (closing does not lift a backoff), the Deadline is the backoff's end,
// and at that time the commit goes out and the flush ends.
func TestReview12CommitBackoffThenClose(t *testing.T) {
	defer recvcore.SetCheckDues(false)()
	for _, ci := range []time.Duration{-1, 0, 5 * time.Millisecond} {
		w := newR12(t, r12Config(recvcore.AtLeastOnce, ci, 4), 1)
		w.groups = 1
		w.arriveSeqs("g", 1, 2)
		w.readAll()
		w.nextAck()
		w.advance(0) // the commit window
		if len(w.sides[0].commits) != 1 {
			t.Fatalf("ci %v: no commit: %v", ci, w.sides[0].commits)
		}
		w.commitOutcome(transientAll)
		w.nextAck() // g/2: queued behind the backoff
		w.close()
		if n := len(w.sides[0].commits); n != 0 {
			t.Fatalf("ci %v: a commit went during the backoff", ci)
		}
		at, ok := w.sides[0].c.Deadline()
		if !ok || !at.After(w.now) {
			t.Fatalf("ci %v: Deadline %v %v during the backoff", ci, at, ok)
		}
		w.advance(0)
		if n := len(w.sides[0].commits); n != 1 {
			t.Fatalf("ci %v: no commit at the end of the backoff (%v)", ci, w.now)
		}
		w.commitOutcome(func(int) error { return nil })
		w.drain()
	}
}

// TestReview12DeleteBatchFillsWhileInFlight: MaxBatch 1, four deletes in
// flight (the limit) and more queued: each Deleted sends the next at once;
// a full batch never waits for ReapInterval; a delete that fails backs
// the lane off and the retry goes at the backoff's end.
func TestReview12DeleteBatchFillsWhileInFlight(t *testing.T) {
	defer recvcore.SetCheckDues(false)()
	for _, mb := range []int{1, 2} {
		cfg := r12Config(recvcore.AtLeastOnce, 0, mb)
		cfg.ReapInterval = time.Hour // only a full batch goes before Close
		w := newR12(t, cfg, 2)
		w.groups = 1
		seqs := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
		w.arriveSeqs("g", seqs...)
		w.readAll()
		for range seqs {
			w.nextAck()
		}
		for len(w.sides[0].commits) > 0 {
			w.commitOutcome(func(int) error { return nil })
		}
		a := w.sides[0]
		if len(a.deletes) != 4 {
			t.Fatalf("maxbatch %d: %d deletes in flight, want 4 (the limit)", mb, len(a.deletes))
		}
		// One fails: retried after the backoff, not before.
		w.answerFirst("delete fails", func(s *r12side) {
			d := s.deletes[0]
			s.deletes = s.deletes[1:]
			res := make([]recvcore.DeleteResult, len(d.Receipts))
			for i := range res {
				res[i] = recvcore.DeleteResult{Err: errR12, Retry: true}
			}
			s.c.Deleted(w.now, d.ID, res)
		})
		if len(a.deletes) != 3 {
			t.Fatalf("maxbatch %d: a delete went during the backoff", mb)
		}
		w.advance(0)
		if len(a.deletes) != 4 {
			t.Fatalf("maxbatch %d: %d deletes in flight after the backoff, want 4", mb, len(a.deletes))
		}
		for i := 0; len(a.deletes) > 0; i++ {
			if i > 100 {
				t.Fatal("deletes do not end")
			}
			w.answerFirst("delete", func(s *r12side) {
				d := s.deletes[0]
				s.deletes = s.deletes[1:]
				s.c.Deleted(w.now, d.ID, nil)
			})
			if len(a.deletes) == 0 && w.sides[0].c.Stats().Deleted < int64(len(seqs)) {
				w.close() // the partial batch left goes at Close, at once
			}
		}
		if st := a.c.Stats(); st.Deleted != int64(len(seqs)) {
			t.Fatalf("maxbatch %d: %d deleted of %d", mb, st.Deleted, len(seqs))
		}
	}
}

// TestReview12UrgentDeleteDuringBackoff: AtMostOnce, an Unordered message
// handed out waits for its delete (urgent); while the delete lane backs
// off after a failure the urgent delete waits for the backoff's end, and
// goes then (Deadline says when), not after ReapInterval.
func TestReview12UrgentDeleteDuringBackoff(t *testing.T) {
	defer recvcore.SetCheckDues(false)()
	cfg := r12Config(recvcore.AtMostOnce, 0, 4)
	cfg.ReapInterval = time.Hour
	w := newR12(t, cfg, 3)
	w.groups = 1
	w.arriveSeqs("", 1)
	w.next() // delete first: urgent
	a := w.sides[0]
	if len(a.deletes) != 1 {
		t.Fatalf("no urgent delete: %v", a.deletes)
	}
	w.answerFirst("delete fails", func(s *r12side) {
		d := s.deletes[0]
		s.deletes = s.deletes[1:]
		s.c.Deleted(w.now, d.ID, []recvcore.DeleteResult{{Err: errR12, Retry: true}})
	})
	w.arriveSeqs("", 2)
	w.next() // a second urgent one, during the backoff
	if len(a.deletes) != 0 {
		t.Fatal("a delete went during the backoff")
	}
	at, ok := a.c.Deadline()
	if !ok || at.Sub(w.now) > cfg.RetryMax {
		t.Fatalf("Deadline %v %v: the urgent delete waits past the backoff", at, ok)
	}
	w.advance(0)
	if len(a.deletes) == 0 {
		t.Fatalf("no delete at the backoff's end (%v)", w.now)
	}
}
