package crashtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// soRun builds scale-out histories for the checker's tests: times are in
// milliseconds from an arbitrary origin.
type soRun struct {
	hs map[string]*History
}

func newSORun() *soRun { return &soRun{hs: map[string]*History{}} }

func (r *soRun) add(role, proc string, inc int, ms int64, ev Event) *soRun {
	id := proc + "/" + string(rune('0'+inc))
	h := r.hs[id]
	if h == nil {
		h = &History{File: role + "-" + id, Proc: proc, Inc: inc, Role: role}
		r.hs[id] = h
	}
	ev.Proc, ev.Inc, ev.Role = proc, inc, role
	ev.T = ms * int64(time.Millisecond)
	if ev.T0 != 0 {
		ev.T0 *= int64(time.Millisecond)
	}
	ev.File, ev.Line = h.File, len(h.Events)+1
	h.Events = append(h.Events, ev)
	return r
}

func (r *soRun) sent(ms int64, g string, seq uint64) *soRun {
	return r.add(RoleScaleSend, "s0", 1, ms, Event{Kind: KindSent, Group: g, Epoch: 7, Seq: seq, Payload: payload(g, seq)})
}

func payload(g string, seq uint64) string { return "s0.1." + g + "." + string(rune('0'+seq)) }

// deliver records a delivery of (g, seq) by proc/inc with token from ms to
// end (no KindDone when end is 0).
func (r *soRun) deliver(proc string, inc int, tok uint64, g string, seq uint64, ms, end int64) *soRun {
	r.add(RoleScaleRecv, proc, inc, ms, Event{Kind: KindDelivered, Group: g, Epoch: 7, Seq: seq, Token: tok, Payload: payload(g, seq)})
	if end != 0 {
		r.add(RoleScaleRecv, proc, inc, end, Event{Kind: KindDone, Group: g, Epoch: 7, Seq: seq, Token: tok})
	}
	return r
}

func (r *soRun) write(kind, proc string, inc int, tok uint64, g string, next uint64, t0, ms int64) *soRun {
	return r.add(RoleScaleRecv, proc, inc, ms, Event{Kind: kind, Group: g, Epoch: 7, Seq: next, Token: tok, T0: t0})
}

func (r *soRun) fault(kind, target string, inc int, ms int64) *soRun {
	return r.add(RoleHarness, "harness", 0, ms, Event{Kind: kind, Target: target, TInc: inc})
}

func (r *soRun) histories() []*History {
	var hs []*History
	for _, h := range r.hs {
		hs = append(hs, h)
	}
	SortHistories(hs)
	return hs
}

// soBase is a clean run: r0 takes shard 0 with token 1, claims g and
// handles seqs 1 and 2.
func soBase() *soRun {
	r := newSORun().sent(1, "g", 1).sent(2, "g", 2)
	r.add(RoleScaleRecv, "r0", 1, 10, Event{Kind: KindAcquire, Shard: 0, Token: 1})
	r.write(KindClaim, "r0", 1, 1, "g", 1, 11, 12)
	r.deliver("r0", 1, 1, "g", 1, 20, 25)
	r.write(KindCommit, "r0", 1, 1, "g", 2, 26, 27)
	r.deliver("r0", 1, 1, "g", 2, 30, 35)
	r.write(KindCommit, "r0", 1, 1, "g", 3, 36, 37)
	return r
}

func TestCheckScaleOut(t *testing.T) {
	cfg := ScaleConfig{Cursors: map[string]uint64{"g": 3}}
	for _, tc := range []struct {
		name  string
		run   func() *soRun
		cfg   *ScaleConfig
		rule  string // "" for no violation
		check func(t *testing.T, rep *ScaleReport)
	}{
		{name: "clean", run: soBase},
		{name: "exclusion: a second owner begins while the first's delivery is open", rule: RuleExclusion, run: func() *soRun {
			r := newSORun().sent(1, "g", 1)
			r.deliver("r0", 1, 1, "g", 1, 20, 60)
			r.write(KindClaim, "r1", 1, 2, "g", 1, 30, 31)
			return r.deliver("r1", 1, 2, "g", 1, 40, 45)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 2}}},
		{name: "exclusion: allowed when the open one's process was stopped", run: func() *soRun {
			r := newSORun().sent(1, "g", 1)
			r.deliver("r0", 1, 1, "g", 1, 20, 60)
			r.fault(KindStop, "r0", 1, 22).fault(KindCont, "r0", 1, 55)
			r.write(KindClaim, "r1", 1, 2, "g", 1, 30, 31)
			return r.deliver("r1", 1, 2, "g", 1, 40, 45)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 2}}, check: func(t *testing.T, rep *ScaleReport) {
			assert.Equal(t, 1, rep.Overlaps, "overlaps with a stopped owner")
			assert.Equal(t, 1, rep.Duplicates, "duplicates")
		}},
		{name: "exclusion: a killed process's delivery ends at the kill", run: func() *soRun {
			r := newSORun().sent(1, "g", 1)
			r.deliver("r0", 1, 1, "g", 1, 20, 0)
			r.fault(KindKill, "r0", 1, 25)
			r.write(KindClaim, "r1", 1, 2, "g", 1, 30, 31)
			return r.deliver("r1", 1, 2, "g", 1, 40, 45)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 2}}},
		{name: "exclusion: a process that was stopped before the delivery is not exempt", rule: RuleExclusion, run: func() *soRun {
			r := newSORun().sent(1, "g", 1)
			r.fault(KindStop, "r0", 1, 5).fault(KindCont, "r0", 1, 10)
			r.deliver("r0", 1, 1, "g", 1, 20, 60)
			r.write(KindClaim, "r1", 1, 2, "g", 1, 30, 31)
			return r.deliver("r1", 1, 2, "g", 1, 40, 45)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 2}}},
		{name: "order: seq 2 begins before seq 1 ended (its owner stopped)", rule: RuleOrder, run: func() *soRun {
			r := newSORun().sent(1, "g", 1).sent(2, "g", 2)
			r.deliver("r0", 1, 1, "g", 1, 20, 60)
			r.fault(KindStop, "r0", 1, 22).fault(KindCont, "r0", 1, 55)
			return r.deliver("r1", 1, 2, "g", 2, 30, 35)
		}},
		{name: "gap: seq 2 handled, seq 1 never", rule: RuleGap, run: func() *soRun {
			r := newSORun().sent(1, "g", 1).sent(2, "g", 2)
			return r.deliver("r0", 1, 1, "g", 2, 20, 25)
		}},
		{name: "duplicate: the same token delivers a seq again", rule: RuleDuplicate, run: func() *soRun {
			r := soBase()
			return r.deliver("r0", 1, 1, "g", 2, 40, 45)
		}},
		{name: "duplicate: delivered after a commit past it", rule: RuleDuplicate, run: func() *soRun {
			r := soBase()
			r.write(KindClaim, "r1", 1, 2, "g", 3, 50, 51)
			return r.deliver("r1", 1, 2, "g", 2, 60, 65)
		}},
		{name: "redelivery with a higher token before the commit is allowed", run: func() *soRun {
			r := newSORun().sent(1, "g", 1)
			r.deliver("r0", 1, 1, "g", 1, 20, 25)
			r.fault(KindKill, "r0", 1, 26)
			r.write(KindClaim, "r1", 1, 2, "g", 1, 30, 31)
			r.deliver("r1", 1, 2, "g", 1, 40, 45)
			return r.write(KindCommit, "r1", 1, 2, "g", 2, 46, 47)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 2}}},
		{name: "stale: a delivery with a token below a returned claim's", rule: RuleStale, run: func() *soRun {
			r := soBase()
			r.sent(3, "g", 3)
			r.write(KindClaim, "r1", 1, 2, "g", 3, 40, 41)
			return r.deliver("r0", 1, 1, "g", 3, 50, 55)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 4}}},
		{name: "stale: right after a SIGCONT, without ResumeGrace", rule: RuleStale, run: func() *soRun {
			r := soBase()
			r.sent(3, "g", 3)
			r.fault(KindStop, "r0", 1, 38).fault(KindCont, "r0", 1, 49)
			r.write(KindClaim, "r1", 1, 2, "g", 3, 40, 41)
			return r.deliver("r0", 1, 1, "g", 3, 50, 55)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 4}}},
		{name: "stale: right after a SIGCONT, within ResumeGrace", run: func() *soRun {
			r := soBase()
			r.sent(3, "g", 3)
			r.fault(KindStop, "r0", 1, 38).fault(KindCont, "r0", 1, 49)
			r.write(KindClaim, "r1", 1, 2, "g", 3, 40, 41)
			return r.deliver("r0", 1, 1, "g", 3, 50, 55)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 4}, ResumeGrace: 5 * time.Millisecond}, check: func(t *testing.T, rep *ScaleReport) {
			assert.Equal(t, 1, rep.StaleAfterResume, "stale deliveries let through")
		}},
		{name: "stale: after ResumeGrace", rule: RuleStale, run: func() *soRun {
			r := soBase()
			r.sent(3, "g", 3)
			r.fault(KindStop, "r0", 1, 38).fault(KindCont, "r0", 1, 39)
			r.write(KindClaim, "r1", 1, 2, "g", 3, 40, 41)
			return r.deliver("r0", 1, 1, "g", 3, 50, 55)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 4}, ResumeGrace: 5 * time.Millisecond}},
		{name: "fence: an advance with a lower token began after a claim returned", rule: RuleFence, run: func() *soRun {
			r := soBase()
			r.write(KindClaim, "r1", 1, 2, "g", 3, 40, 41)
			return r.write(KindCommit, "r0", 1, 1, "g", 3, 42, 43)
		}},
		{name: "fence: an advance that began before the claim returned is not judged", run: func() *soRun {
			r := soBase()
			r.write(KindClaim, "r1", 1, 2, "g", 3, 40, 45)
			return r.write(KindCommit, "r0", 1, 1, "g", 3, 41, 46)
		}},
		{name: "fence: a write the store refused is counted, not judged", run: func() *soRun {
			r := soBase()
			r.write(KindClaim, "r1", 1, 2, "g", 3, 40, 41)
			return r.add(RoleScaleRecv, "r0", 1, 43, Event{Kind: KindCommit, Group: "g", Epoch: 7, Seq: 3, Token: 1, T0: 42, Err: "fenced"})
		}, check: func(t *testing.T, rep *ScaleReport) {
			assert.Equal(t, 1, rep.Refused, "refused writes")
		}},
		{name: "lost: a sent message never handled", rule: RuleLost, run: func() *soRun {
			return soBase().sent(3, "g", 3)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 4}}},
		{name: "lost: the final cursor is not past a message", rule: RuleLost, run: soBase,
			cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 2}}},
		{name: "lost: a delivery without its end does not count as handled", rule: RuleLost, run: func() *soRun {
			r := newSORun().sent(1, "g", 1)
			return r.deliver("r0", 1, 1, "g", 1, 20, 0)
		}, cfg: &ScaleConfig{}},
		{name: "payload: another payload than the one sent", rule: RulePayload, run: func() *soRun {
			r := newSORun()
			r.add(RoleScaleSend, "s0", 1, 1, Event{Kind: KindSent, Group: "g", Epoch: 7, Seq: 1, Payload: "other"})
			return r.deliver("r0", 1, 1, "g", 1, 20, 25)
		}, cfg: &ScaleConfig{}},
		{name: "liveness: the last message handled too long after the last fault", rule: RuleLiveness, run: func() *soRun {
			return soBase().fault(KindKill, "r9", 1, 5)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 3}, Liveness: 20 * time.Millisecond}, check: func(t *testing.T, rep *ScaleReport) {
			assert.Equal(t, 30*time.Millisecond, rep.WorstFinish, "worst finish: seq 2 sent at 2 ms, the fault at 5 ms, handled at 35 ms")
		}},
		{name: "liveness: within the bound", run: func() *soRun {
			return soBase().fault(KindKill, "r9", 1, 5)
		}, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 3}, Liveness: 40 * time.Millisecond}},
		{name: "leftover", rule: RuleLeftover, run: soBase, cfg: &ScaleConfig{Cursors: map[string]uint64{"g": 3}, Leftover: 2}},
		{name: "match: a done without its delivery", rule: RuleMatch, run: func() *soRun {
			return soBase().add(RoleScaleRecv, "r0", 1, 50, Event{Kind: KindDone, Group: "g", Epoch: 7, Seq: 9})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.cfg != nil {
				c = *tc.cfg
			}
			rep := CheckScaleOut(tc.run().histories(), c)
			if tc.rule == "" {
				require.True(t, rep.OK(), "want no violation, first: %v", rep.First())
			} else {
				require.False(t, rep.OK(), "want a violation of rule %s, got none (%s)", tc.rule, rep.Figures())
				assert.Equal(t, tc.rule, rep.First().Rule, "first violation: %v", rep.First())
			}
			if tc.check != nil {
				tc.check(t, rep)
			}
		})
	}
}

func TestFailovers(t *testing.T) {
	r := newSORun()
	r.add(RoleScaleRecv, "r0", 1, 10, Event{Kind: KindAcquire, Shard: 3, Token: 1})
	r.add(RoleScaleRecv, "r0", 1, 11, Event{Kind: KindAcquire, Shard: 5, Token: 2})
	r.add(RoleScaleRecv, "r0", 1, 20, Event{Kind: KindDelivered, Shard: 3, Group: "g", Seq: 1, Token: 1})
	r.add(RoleScaleRecv, "r0", 1, 21, Event{Kind: KindDrained, Shard: 5, Token: 2})
	r.fault(KindKill, "r0", 1, 100)
	r.add(RoleScaleRecv, "r0", 2, 2100, Event{Kind: KindAcquire, Shard: 3, Token: 3})
	r.add(RoleScaleRecv, "r0", 2, 2600, Event{Kind: KindDelivered, Shard: 3, Group: "g", Seq: 1, Token: 3})
	r.add(RoleScaleRecv, "r1", 1, 2700, Event{Kind: KindDelivered, Shard: 5, Group: "h", Seq: 1, Token: 4})
	fs := Failovers(r.histories())
	require.Len(t, fs, 1, "one shard owned at the kill (shard 5 was drained before it)")
	assert.Equal(t, Failover{Fault: KindKill, Target: "r0", Shard: 3, Acquired: 2000 * time.Millisecond, Delivered: 2500 * time.Millisecond}, fs[0])
}
