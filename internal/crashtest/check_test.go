package crashtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hb builds a synthetic history, one incarnation at a time.
type hb struct {
	hs  []*History
	cur *History
}

func (b *hb) inc(role, proc string, n int) *hb {
	b.cur = &History{File: fmt.Sprintf("%s-%s-%d", role, proc, n), Proc: proc, Inc: n, Role: role}
	b.hs = append(b.hs, b.cur)
	return b.ev(Event{Kind: KindStart})
}

func (b *hb) ev(e Event) *hb {
	e.Proc, e.Inc, e.Role = b.cur.Proc, b.cur.Inc, b.cur.Role
	e.File, e.Line = b.cur.File, len(b.cur.Events)+1
	if e.Kind == KindEnd {
		b.cur.Clean = true
	}
	b.cur.Events = append(b.cur.Events, e)
	return b
}

func pid(inc, n int) string { return fmt.Sprintf("s.%d.0.%d", inc, n) }

// send records attempts and successful sends of seqs from..to, payload n =
// seq, in sender incarnation inc.
func (b *hb) send(inc int, from, to uint64) *hb {
	for s := from; s <= to; s++ {
		b.ev(Event{Kind: KindAttempt, Group: "g", Payload: pid(inc, int(s))})
		b.ev(Event{Kind: KindSent, Group: "g", Epoch: 7, Seq: s, Payload: pid(inc, int(s))})
	}
	return b
}

// deliver records deliveries of seqs (payload as send wrote them, inc 1),
// each acked durably when acked is true.
func (b *hb) deliver(acked bool, seqs ...uint64) *hb {
	for _, s := range seqs {
		b.ev(Event{Kind: KindDelivered, Group: "g", Epoch: 7, Seq: s, Payload: pid(1, int(s))})
		if acked {
			b.ev(Event{Kind: KindAcked, Group: "g", Epoch: 7, Seq: s, Durable: true})
		}
	}
	return b
}

func (b *hb) end() *hb { return b.ev(Event{Kind: KindEnd}) }

// durable records that the store holds group g's cursor at next (epoch 7).
func (b *hb) durable(next uint64) *hb {
	return b.ev(Event{Kind: KindDurable, Group: "g", Epoch: 7, Seq: next})
}

// del records the delete of seq s of group g (epoch 7).
func (b *hb) del(s uint64) *hb { return b.ev(Event{Kind: KindDelete, Group: "g", Epoch: 7, Seq: s}) }

func TestCheckRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   string
		build  func(b *hb)
		cfg    Config
		rule   string // "" means no violation
		seq    uint64
		detail string
	}{
		{name: "clean run", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 5).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2, 3, 4, 5).end()
		}},
		{name: "gap within an incarnation", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 5).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2, 4, 5)
		}, rule: RuleOrder, seq: 4, detail: "want 3"},
		{name: "reordered within an incarnation", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 3, 2)
		}, rule: RuleOrder, seq: 3},
		{name: "duplicate within an incarnation", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2, 2, 3)
		}, rule: RuleDuplicate, seq: 2, detail: "in one incarnation"},
		{name: "alo replays what was out at a crash", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2).deliver(false, 3)
			b.inc(RoleReceive, "r", 2).deliver(true, 3, 4).end()
		}},
		{name: "alo replays a durably acked seq", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2, 3)
			b.inc(RoleReceive, "r", 2).deliver(true, 3, 4).end()
		}, rule: RuleDuplicate, seq: 3, detail: "durably past 3"},
		{name: "alo replays after a clean end", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(false, 1, 2).end()
			b.inc(RoleReceive, "r", 2).deliver(true, 2, 3, 4).end()
		}, rule: RuleDuplicate, seq: 2},
		{name: "a send reported failed is delivered after all", build: func(b *hb) {
			// Its seq was reserved and journaled; recovery sent it.
			b.inc(RoleSend, "s", 1).send(1, 1, 2).
				ev(Event{Kind: KindAttempt, Group: "g", Payload: pid(1, 3)}).
				ev(Event{Kind: KindFailed, Group: "g", Epoch: 7, Seq: 3, Payload: pid(1, 3), Err: "send: 500"}).
				send(1, 4, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2, 3, 4).end()
		}},
		{name: "a send reported failed leaves a hole", build: func(b *hb) {
			// Its journal entry was dropped: the group never gets past it,
			// and what was sent after it is lost.
			b.inc(RoleSend, "s", 1).send(1, 1, 2).
				ev(Event{Kind: KindAttempt, Group: "g", Payload: pid(1, 3)}).
				ev(Event{Kind: KindFailed, Group: "g", Epoch: 7, Seq: 3, Payload: pid(1, 3), Err: "send: 500"}).
				send(1, 4, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2).end()
		}, cfg: Config{Leftover: 1}, rule: RuleLost, seq: 4},
		{name: "gap across a restart", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1)
			b.inc(RoleReceive, "r", 2).deliver(true, 3, 4).end()
		}, rule: RuleGap, seq: 3, detail: "want at most 2"},
		{name: "amo may lose the message out at a crash", mode: ModeAtMostOnce, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2)
			b.inc(RoleReceive, "r", 2).deliver(true, 4).end()
		}},
		{name: "amo may lose seq 1 at a crash", mode: ModeAtMostOnce, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1)
			b.inc(RoleReceive, "r", 2).deliver(true, 2, 3).end()
		}},
		{name: "alo starts past seq 1", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1)
			b.inc(RoleReceive, "r", 2).deliver(true, 2, 3).end()
		}, rule: RuleGap, seq: 2, detail: "want at most 1"},
		{name: "amo loses two with one crash", mode: ModeAtMostOnce, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 5).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2)
			b.inc(RoleReceive, "r", 2).deliver(true, 5).end()
		}, rule: RuleGap, seq: 5, detail: "allow 1"},
		{name: "amo loses after a clean end", mode: ModeAtMostOnce, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2).end()
			b.inc(RoleReceive, "r", 2).deliver(true, 4).end()
		}, rule: RuleGap, seq: 4},
		{name: "amo never duplicates", mode: ModeAtMostOnce, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1).deliver(false, 1, 2)
			b.inc(RoleReceive, "r", 2).deliver(true, 2, 3).end()
		}, rule: RuleDuplicate, seq: 2, detail: "at-most-once"},
		{name: "successful send never delivered", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2).end()
		}, rule: RuleLost, seq: 3},
		{name: "attempt without outcome need not arrive", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 2).ev(Event{Kind: KindAttempt, Group: "g", Payload: pid(1, 3)})
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2).end()
		}},
		{name: "wrong payload", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 2).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1).ev(Event{Kind: KindDelivered, Group: "g", Epoch: 7, Seq: 2, Payload: pid(1, 1)}).end()
		}, rule: RulePayload, seq: 2},
		{name: "seqs against admission order", build: func(b *hb) {
			b.inc(RoleSend, "s", 1)
			b.ev(Event{Kind: KindAttempt, Group: "g", Payload: pid(1, 1)}).ev(Event{Kind: KindAttempt, Group: "g", Payload: pid(1, 2)})
			b.ev(Event{Kind: KindSent, Group: "g", Epoch: 7, Seq: 2, Payload: pid(1, 1)}).ev(Event{Kind: KindSent, Group: "g", Epoch: 7, Seq: 1, Payload: pid(1, 2)}).end()
			b.inc(RoleReceive, "r", 1)
			b.ev(Event{Kind: KindDelivered, Group: "g", Epoch: 7, Seq: 1, Payload: pid(1, 2)})
			b.ev(Event{Kind: KindDelivered, Group: "g", Epoch: 7, Seq: 2, Payload: pid(1, 1)}).end()
		}, rule: RuleSendOrder, seq: 2},
		{name: "older epoch after newer", build: func(b *hb) {
			b.inc(RoleReceive, "r", 1).deliver(true, 1)
			b.ev(Event{Kind: KindDelivered, Group: "g", Epoch: 3, Seq: 2, Payload: "x.1.0.9"})
		}, rule: RuleEpoch, seq: 2},
		{name: "unordered delivery", build: func(b *hb) {
			b.inc(RoleReceive, "r", 1).ev(Event{Kind: KindDelivered, Group: "g", Unordered: true, Payload: "junk"})
		}, rule: RuleUnordered},
		{name: "ack of an undelivered message", build: func(b *hb) {
			b.inc(RoleReceive, "r", 1).ev(Event{Kind: KindAcked, Group: "g", Epoch: 7, Seq: 1})
		}, rule: RuleAck, seq: 1},
		{name: "leftover in the queue", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 1).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1).end()
		}, cfg: Config{Leftover: 2}, rule: RuleLeftover, detail: "2 messages"},
		{name: "eo commits each seq once", mode: ModeExactlyOnce, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1).deliver(false, 1, 2)
			b.inc(RoleReceive, "r", 2).deliver(true, 2, 3).end()
			b.inc(RoleDB, "db", 0)
			for s := uint64(1); s <= 3; s++ {
				b.ev(Event{Kind: KindCommitted, Group: "g", Epoch: 7, Seq: s, Payload: pid(1, int(s))})
			}
			b.end()
		}},
		{name: "eo commits twice", mode: ModeExactlyOnce, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 2).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2).end()
			b.inc(RoleDB, "db", 0)
			for _, s := range []uint64{1, 2, 2} {
				b.ev(Event{Kind: KindCommitted, Group: "g", Epoch: 7, Seq: s, Payload: pid(1, int(s))})
			}
			b.end()
		}, rule: RuleCommit, seq: 2, detail: "committed again"},
		{name: "delete after the advance is durable", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 2).end()
			b.inc(RoleReceive, "r", 1).durable(0).deliver(false, 1, 2).durable(3).del(1).del(2).end()
		}},
		{name: "delete before the advance is durable", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 2).end()
			b.inc(RoleReceive, "r", 1).durable(0).deliver(false, 1, 2).durable(2).del(1).del(2).durable(3).end()
		}, rule: RuleDelete, seq: 2, detail: "durable cursor known: epoch 7 next 2"},
		{name: "delete below a cursor read at start", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 2).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2).end()
			b.inc(RoleReceive, "r", 2).durable(3).del(1).end()
		}},
		{name: "a durable cursor of an earlier incarnation does not count", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 2).end()
			b.inc(RoleReceive, "r", 1).deliver(false, 1, 2).durable(3).end()
			b.inc(RoleReceive, "r", 2).del(2).end()
		}, rule: RuleDelete, seq: 2, detail: "epoch 0 next 0"},
		{name: "delete of a message parked durably", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1).durable(0).ev(Event{Kind: KindParked, Group: "g", Epoch: 7, Seq: 3}).del(3).
				deliver(false, 1, 2, 3).durable(4).end()
		}},
		{name: "delete before the park returned", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1).durable(0).del(3).ev(Event{Kind: KindParked, Group: "g", Epoch: 7, Seq: 3}).
				deliver(false, 1, 2, 3).durable(4).end()
		}, rule: RuleDelete, seq: 3, detail: "epoch 7 next 0"},
		{name: "a park of an earlier incarnation does not count", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 3).end()
			b.inc(RoleReceive, "r", 1).durable(0).ev(Event{Kind: KindParked, Group: "g", Epoch: 7, Seq: 3}).end()
			b.inc(RoleReceive, "r", 2).durable(0).del(3).deliver(false, 1, 2, 3).durable(4).end()
		}, rule: RuleDelete, seq: 3, detail: "epoch 7 next 0"},
		{name: "delete after a durable ack", build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 1).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1).del(1).end()
		}},
		{name: "delete after the application committed", mode: ModeExactlyOnce, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 1).end()
			b.inc(RoleReceive, "r", 1).deliver(false, 1)
			b.ev(Event{Kind: KindCommitted, Group: "g", Epoch: 7, Seq: 1, Payload: pid(1, 1)}).del(1).end()
			b.inc(RoleDB, "db", 0).ev(Event{Kind: KindCommitted, Group: "g", Epoch: 7, Seq: 1, Payload: pid(1, 1)}).end()
		}},
		{name: "delete of an older epoch below a newer cursor", build: func(b *hb) {
			b.inc(RoleReceive, "r", 1).ev(Event{Kind: KindDurable, Group: "g", Epoch: 8, Seq: 1})
			b.del(40).end()
		}},
		{name: "late start after a wiped store, passed-over seqs handed out late", cfg: Config{AllowUnordered: true, AllowLateStart: true}, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1).end()
			b.inc(RoleReceive, "r", 2).deliver(true, 4)
			for _, q := range []uint64{2, 3} {
				b.ev(Event{Kind: KindDelivered, Group: "g", Epoch: 7, Seq: q, Unordered: true, Payload: pid(1, int(q))})
			}
			b.end()
		}},
		{name: "late start, a passed-over seq never comes", cfg: Config{AllowUnordered: true, AllowLateStart: true}, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1).end()
			b.inc(RoleReceive, "r", 2).deliver(true, 4)
			b.ev(Event{Kind: KindDelivered, Group: "g", Epoch: 7, Seq: 2, Unordered: true, Payload: pid(1, 2)}).end()
		}, rule: RuleLost, seq: 3},
		{name: "a jump without late start allowed", cfg: Config{AllowUnordered: true}, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 4).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1).end()
			b.inc(RoleReceive, "r", 2).deliver(true, 4).end()
		}, rule: RuleGap, seq: 4},
		{name: "delete of an unordered hand-out is not judged", cfg: Config{AllowUnordered: true}, build: func(b *hb) {
			b.inc(RoleReceive, "r", 1).ev(Event{Kind: KindDelivered, Group: "g", Epoch: 7, Seq: 5, Unordered: true, Payload: "x.1.0.5"})
			b.del(5).end()
		}},
		{name: "eo sent but not committed", mode: ModeExactlyOnce, build: func(b *hb) {
			b.inc(RoleSend, "s", 1).send(1, 1, 2).end()
			b.inc(RoleReceive, "r", 1).deliver(true, 1, 2).end()
			b.inc(RoleDB, "db", 0).ev(Event{Kind: KindCommitted, Group: "g", Epoch: 7, Seq: 1, Payload: pid(1, 1)}).end()
		}, rule: RuleLost, seq: 2, detail: "never committed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &hb{}
			tc.build(b)
			cfg := tc.cfg
			cfg.Mode = tc.mode
			rep := Check(b.hs, cfg)
			if tc.rule == "" {
				assert.True(t, rep.OK(), "want no violation, got %v", rep.Violations)
				return
			}
			require.False(t, rep.OK(), "want a %s violation, got none (%s)", tc.rule, rep.Figures())
			v := rep.First()
			assert.Equal(t, tc.rule, v.Rule, "first violation: %v", v)
			assert.Equal(t, tc.seq, v.Seq, "seq of the first violation: %v", v)
			assert.Contains(t, v.Detail, tc.detail, "detail of the first violation: %v", v)
		})
	}
}

func TestParse(t *testing.T) {
	good := `{"p":"r","i":2,"r":"recv","k":"start","m":"alo"}` + "\n" +
		`{"p":"r","i":2,"r":"recv","k":"delivered","g":"g1","e":5,"s":1,"id":"s.1.1.1"}` + "\n"
	h, err := Parse("f", strings.NewReader(good))
	require.NoError(t, err)
	assert.Len(t, h.Events, 2, "events")
	assert.False(t, h.Torn, "torn")
	assert.Equal(t, "f:2", h.Events[1].Pos(), "position of the second event")
	assert.Equal(t, "alo", h.Mode)

	h, err = Parse("f", strings.NewReader(good+`{"p":"r","i":2,"r":"recv","k":"deliv`))
	require.NoError(t, err, "a torn last line is not an error")
	assert.True(t, h.Torn, "torn")
	assert.Len(t, h.Events, 2, "events before the torn line")

	h, err = Parse("f", strings.NewReader(good+`{"p":"r","i":2,"r":"recv","k":"end"}`))
	require.NoError(t, err)
	assert.True(t, h.Torn, "a last line without its newline is torn even if it parses")
	assert.False(t, h.Clean, "a torn end does not count")

	for name, bad := range map[string]string{
		"garbage in the middle": `{"p":"r","i":2,"r":"recv","k":"start"}` + "\nxx\n" + `{"p":"r","i":2,"r":"recv","k":"end"}` + "\n",
		"unknown kind":          `{"p":"r","i":2,"r":"recv","k":"boom"}` + "\n",
		"unknown field":         `{"p":"r","i":2,"r":"recv","k":"start","zz":1}` + "\n",
		"two incarnations":      `{"p":"r","i":2,"r":"recv","k":"start"}` + "\n" + `{"p":"r","i":3,"r":"recv","k":"start"}` + "\n",
	} {
		_, err := Parse("f", strings.NewReader(bad))
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	b := &hb{}
	b.inc(RoleSend, "s", 1).send(1, 1, 2).end()
	b.inc(RoleReceive, "r", 2).deliver(true, 2).end()
	b.inc(RoleReceive, "r", 1).deliver(false, 1)
	require.NoError(t, writeHistories(dir, b.hs))
	hs, err := Load(dir)
	require.NoError(t, err)
	require.Len(t, hs, 3)
	got := []string{}
	for _, h := range hs {
		got = append(got, fmt.Sprintf("%s/%d", h.Proc, h.Inc))
	}
	assert.Equal(t, []string{"r/1", "r/2", "s/1"}, got, "sorted by process then incarnation")
	rep := Check(hs, Config{})
	assert.True(t, rep.OK(), "want no violation, got %v", rep.Violations)
	assert.Equal(t, 1, rep.Killed, "incarnations without an end")
}
