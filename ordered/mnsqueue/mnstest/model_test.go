package mnstest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestQueueModel drives one queue's state machine (no HTTP) with random
// sends, receives, peeks, deletes, visibility changes and clock ticks, and
// checks it against a plain model after every step: what is receivable,
// which handles are current, dequeue counts, priority, the reorder window,
// and the internal counters and heap indexes.
func TestQueueModel(t *testing.T) {
	srv, err := NewServer(&Options{Shards: 3, ReorderWindow: 4})
	require.NoError(t, err)
	defer srv.Close()
	rapid.Check(t, func(rt *rapid.T) {
		maxReceive := rapid.SampledFrom([]int{0, 2}).Draw(rt, "maxReceive")
		attrs := QueueAttributes{VisibilityTimeout: 2, MessageRetentionPeriod: 6, DelaySeconds: rapid.IntRange(0, 1).Draw(rt, "queueDelay")}.withDefaults()
		if maxReceive > 0 {
			attrs.DeadLetterQueue, attrs.MaxReceiveCount = "dlq", maxReceive
		}
		q := newQueue(srv, "model", 1, attrs, 0)
		redeliver := rapid.SampledFrom([]float64{0, 0.5}).Draw(rt, "redeliver")
		now := int64(time.Hour)

		type mmsg struct {
			body     string
			state    uint8
			visible  int64
			expires  int64
			dequeues int64
			priority int
			handle   string // current handle, "" if none
			seq      uint64
		}
		model := map[string]*mmsg{} // by body
		var handles []string        // every handle ever issued
		nextBody := 0

		// settle applies what advance does: due messages come back, and
		// messages past retention are deleted, in flight or not.
		settle := func() {
			for _, m := range model {
				if m.state != stateActive && min(m.visible, m.expires) <= now {
					if m.expires <= now {
						delete(model, m.body)
						continue
					}
					m.state = stateActive
					m.handle = ""
				}
			}
		}
		live := func(m *mmsg) bool { return m.state == stateActive && m.expires > now }

		rt.Repeat(map[string]func(*rapid.T){
			"send": func(rt *rapid.T) {
				settle()
				delay := rapid.SampledFrom([]int64{-1, 1, 3}).Draw(rt, "delay")
				prio := rapid.SampledFrom([]int{1, 8}).Draw(rt, "priority")
				nextBody++
				body := string(rune('a'+nextBody%26)) + time.Duration(nextBody).String()
				q.advance(now)
				_, h := q.send(body, "md5", max(delay*second, -1), prio, "", now, false)
				m := &mmsg{body: body, expires: now + 6*second, priority: prio, seq: q.nextSeq}
				d := delay
				if d < 0 {
					d = int64(attrs.DelaySeconds)
				}
				if d > 0 {
					m.state, m.visible, m.handle = stateDelayed, now+d*second, h
					require.NotEmpty(rt, h, "a delayed send answers a handle")
					handles = append(handles, h)
				} else {
					m.state = stateActive
					require.Empty(rt, h, "an immediate send answers no handle")
				}
				model[body] = m
			},
			"receive": func(rt *rapid.T) {
				settle()
				n := rapid.IntRange(1, 4).Draw(rt, "n")
				q.advance(now)
				got, dead := q.receive(n, now, redeliver, nil, nil)
				// Messages moved by the dead-letter policy: each had been
				// received MaxReceiveCount times already.
				moved := map[string]bool{}
				for _, dm := range dead {
					m := model[dm.body]
					require.NotNil(rt, m, "dead-lettered %s, which the model does not hold", dm.body)
					require.True(rt, live(m), "dead-lettered %s in state %d", dm.body, m.state)
					require.Positive(rt, maxReceive, "dead-lettered %s without a policy", dm.body)
					require.GreaterOrEqual(rt, m.dequeues, int64(maxReceive), "dead-lettered %s after %d receives", dm.body, m.dequeues)
					moved[dm.body] = true
				}
				under := func(m *mmsg) bool { return maxReceive == 0 || m.dequeues < int64(maxReceive) }
				// best and minSeq describe what a pick may take: live and
				// not moved (a moved message may have been picked first;
				// leaving it out only loosens the window bound).
				var best int
				minSeq := map[int]uint64{}
				recompute := func() {
					best = 100
					clear(minSeq)
					for _, o := range model {
						if live(o) && !moved[o.body] {
							best = min(best, o.priority)
							if s, ok := minSeq[o.priority]; !ok || o.seq < s {
								minSeq[o.priority] = o.seq
							}
						}
					}
				}
				recompute()
				var receivable, over int
				for _, m := range model {
					if live(m) {
						if under(m) {
							receivable++
						} else {
							over++
						}
					}
				}
				require.Equal(rt, min(n, receivable), len(got), "received count with %d receivable", receivable)
				if len(got) < n {
					require.Equal(rt, over, len(dead), "a receive that ran out of messages moves every one over MaxReceiveCount")
				}
				for _, d := range got {
					m := model[d.body]
					require.NotNil(rt, m, "received %s, which the model does not hold", d.body)
					require.True(rt, live(m), "received %s in state %d", d.body, m.state)
					require.True(rt, under(m), "received %s after %d receives, MaxReceiveCount %d", d.body, m.dequeues, maxReceive)
					require.Equal(rt, best, m.priority, "received priority %d while %d was receivable", m.priority, best)
					require.LessOrEqual(rt, m.seq, minSeq[m.priority]+4, "received seq %d beyond the window of %d", m.seq, minSeq[m.priority])
					m.dequeues++
					require.Equal(rt, m.dequeues, d.dequeues, "dequeue count of %s", d.body)
					require.Greater(rt, d.visible, now-1)
					require.LessOrEqual(rt, d.visible, now+2*second)
					if redeliver == 0 {
						require.Equal(rt, now+2*second, d.visible)
					}
					m.state, m.visible, m.handle = stateInflight, d.visible, d.handle
					handles = append(handles, d.handle)
					// What was just received is no longer receivable: the
					// next pick looks at the rest.
					recompute()
				}
				for body := range moved {
					delete(model, body)
				}
			},
			"peek": func(rt *rapid.T) {
				settle()
				q.advance(now)
				got := q.peek(4, now, nil)
				for _, d := range got {
					m := model[d.body]
					require.NotNil(rt, m)
					require.True(rt, live(m), "peeked %s in state %d", d.body, m.state)
					require.Empty(rt, d.handle, "peek gives no handle")
				}
			},
			"delete": func(rt *rapid.T) {
				settle()
				h := "not-a-handle"
				if len(handles) > 0 && rapid.IntRange(0, 9).Draw(rt, "garbage") > 0 {
					h = rapid.SampledFrom(handles).Draw(rt, "handle")
				}
				q.advance(now)
				err := q.remove(h)
				var holder *mmsg
				for _, m := range model {
					if m.handle == h && m.state != stateActive {
						holder = m
					}
				}
				switch {
				case h == "not-a-handle":
					require.Equal(rt, errReceiptHandle, err)
				case holder != nil:
					require.Nil(rt, err, "delete with the current handle of %s", holder.body)
					delete(model, holder.body)
				default:
					require.Equal(rt, errMessageNotExist, err, "delete with a stale handle")
				}
			},
			"changeVisibility": func(rt *rapid.T) {
				settle()
				if len(handles) == 0 {
					rt.Skip("no handle yet")
				}
				h := rapid.SampledFrom(handles).Draw(rt, "handle")
				vt := rapid.Int64Range(1, 3).Draw(rt, "vt")
				q.advance(now)
				nh, visible, err := q.changeVisibility(h, vt, now)
				var holder *mmsg
				for _, m := range model {
					if m.handle == h && m.state != stateActive {
						holder = m
					}
				}
				if holder == nil {
					require.Equal(rt, errMessageNotExist, err, "change visibility with a stale handle")
					return
				}
				require.Nil(rt, err)
				require.NotEqual(rt, h, nh, "a new handle")
				require.Equal(rt, now+vt*second, visible)
				holder.handle, holder.visible = nh, visible
				handles = append(handles, nh)
			},
			"tick": func(rt *rapid.T) {
				now += rapid.Int64Range(0, 2500).Draw(rt, "ms") * millisecond
			},
			"": func(rt *rapid.T) {
				// Invariants, after every step.
				settle()
				q.advance(now)
				var inflight, delayed int
				for _, m := range model {
					switch m.state {
					case stateInflight:
						inflight++
					case stateDelayed:
						delayed++
					}
				}
				require.Equal(rt, inflight, q.inflight, "in-flight count")
				require.Equal(rt, delayed, q.delayed, "delayed count")
				heaped := 0
				for s := range q.shards {
					for i, m := range q.shards[s] {
						require.Equal(rt, i, m.vidx, "shard heap index")
						require.Equal(rt, stateActive, m.state)
					}
					heaped += len(q.shards[s])
				}
				require.Equal(rt, q.active, heaped, "active count = shard heap sizes")
				for i, m := range q.timers {
					require.Equal(rt, i, m.tidx, "timer heap index")
					require.NotEqual(rt, stateActive, m.state)
				}
				require.Equal(rt, len(q.msgs), q.active+q.inflight+q.delayed, "every stored message in exactly one place")
				var bytes int64
				for _, m := range q.msgs {
					bytes += int64(len(m.body))
				}
				require.Equal(rt, bytes, q.bytes, "stored bytes")
				// Visible messages not yet expired are stored (expired ones
				// may or may not be: their expiry is lazy).
				for _, m := range model {
					if live(m) {
						_, ok := q.msgs[m.seq]
						require.True(rt, ok, "visible %s stored", m.body)
					}
				}
			},
		})
	})
}
