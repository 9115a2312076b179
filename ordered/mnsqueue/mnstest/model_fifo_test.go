package mnstest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestFIFOQueueModel drives one FIFO queue's state machine (no HTTP) with
// random sends to a few groups (some delayed), batch receives (with the
// Redeliver fault or not), deletes with current and stale handles, and clock
// ticks, and checks it against a plain model after every step: a receive
// returns exactly the heads of the groups whose head is visible (up to n,
// one per group), nothing behind a head in flight or delayed, and the
// internal invariants hold (only heads in shard heaps, a group's only
// in-flight message is its head).
func TestFIFOQueueModel(t *testing.T) {
	srv, err := NewServer(&Options{Shards: 3, ReorderWindow: 8})
	require.NoError(t, err)
	defer srv.Close()
	rapid.Check(t, func(rt *rapid.T) {
		attrs := QueueAttributes{QueueType: QueueTypeFIFO, VisibilityTimeout: 2, MessageRetentionPeriod: 8}.withDefaults()
		q := newQueue(srv, "fifo-model", 2, attrs, 0)
		redeliver := rapid.SampledFrom([]float64{0, 0.5}).Draw(rt, "redeliver")
		now := int64(time.Hour)

		type mmsg struct {
			body, group string
			visible     int64 // end of the delay or of the visibility timeout
			inflight    bool
			expires     int64
			handle      string // current handle of an in-flight message
		}
		groups := map[string][]*mmsg{} // arrival order
		var stale []string
		next := 0

		settle := func() {
			for g, ms := range groups {
				ms = slices.DeleteFunc(ms, func(m *mmsg) bool { return m.expires <= now })
				for _, m := range ms {
					if m.inflight && m.visible <= now {
						m.inflight = false
						stale = append(stale, m.handle)
						m.handle = ""
					}
				}
				if len(ms) == 0 {
					delete(groups, g)
				} else {
					groups[g] = ms
				}
			}
		}
		available := func() map[string]*mmsg {
			out := map[string]*mmsg{}
			for g, ms := range groups {
				if h := ms[0]; !h.inflight && h.visible <= now {
					out[g] = h
				}
			}
			return out
		}
		check := func() {
			for i := range q.shards {
				for _, m := range q.shards[i] {
					require.Same(rt, m, m.grp.msgs[0], "message %s in a shard heap is not its group's head", m.body)
				}
			}
			for id, g := range q.groups {
				require.NotEmpty(rt, g.msgs, "group %s kept empty", id)
				for i, m := range g.msgs {
					require.Equal(rt, id, m.grp.id)
					if i > 0 {
						require.NotEqual(rt, stateInflight, m.state, "message %d of group %s in flight behind its head", i, id)
						require.Less(rt, g.msgs[i-1].seq, m.seq, "group %s out of arrival order", id)
					}
				}
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"send": func(rt *rapid.T) {
				settle()
				g := rapid.SampledFrom([]string{"A", "B", "C"}).Draw(rt, "group")
				delay := rapid.SampledFrom([]int64{-1, -1, 1, 3}).Draw(rt, "delay")
				next++
				body := fmt.Sprintf("%s%d", g, next)
				q.advance(now)
				q.send(body, "md5", max(delay*second, -1), defaultPriority, g, now, false)
				m := &mmsg{body: body, group: g, visible: now, expires: now + 8*second}
				if delay > 0 {
					m.visible = now + delay*second
				}
				groups[g] = append(groups[g], m)
			},
			"receive": func(rt *rapid.T) {
				settle()
				n := rapid.IntRange(1, 4).Draw(rt, "n")
				want := available()
				q.advance(now)
				got, dead := q.receive(n, now, redeliver, nil, nil)
				require.Empty(rt, dead)
				require.Equal(rt, min(n, len(want)), len(got), "received count with %d groups' heads visible", len(want))
				seen := map[string]bool{}
				for _, d := range got {
					require.NotNil(rt, d.group, "a FIFO delivery carries its group")
					g := *d.group
					require.False(rt, seen[g], "two messages of group %s in one receive", g)
					seen[g] = true
					h := want[g]
					require.NotNil(rt, h, "received %s of group %s, whose head is in flight or delayed", d.body, g)
					require.Equal(rt, h.body, d.body, "group %s: received %s, its head is %s", g, d.body, h.body)
					h.inflight, h.visible, h.handle = true, d.visible, d.handle
				}
			},
			"delete": func(rt *rapid.T) {
				settle()
				var held []*mmsg
				for _, ms := range groups {
					if ms[0].inflight {
						held = append(held, ms[0])
					}
				}
				if len(held) == 0 {
					rt.Skip("nothing in flight")
				}
				slices.SortFunc(held, func(a, b *mmsg) int { return int(a.body[0]) - int(b.body[0]) })
				m := rapid.SampledFrom(held).Draw(rt, "held")
				q.advance(now)
				require.Nil(rt, q.remove(m.handle), "delete %s with its current handle", m.body)
				require.Same(rt, m, groups[m.group][0])
				groups[m.group] = groups[m.group][1:]
				if len(groups[m.group]) == 0 {
					delete(groups, m.group)
				}
			},
			"deleteStale": func(rt *rapid.T) {
				if len(stale) == 0 {
					rt.Skip("no stale handle")
				}
				h := rapid.SampledFrom(stale).Draw(rt, "stale")
				q.advance(now)
				require.NotNil(rt, q.remove(h), "a stale handle deletes nothing")
			},
			"tick": func(rt *rapid.T) {
				now += rapid.Int64Range(1, 3*second).Draw(rt, "d")
			},
			"": func(rt *rapid.T) {
				settle()
				q.advance(now)
				check()
			},
		})
	})
}
