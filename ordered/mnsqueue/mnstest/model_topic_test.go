package mnstest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestTopicModel drives a topic's fan-out and its subscribed queues (no
// HTTP, no clock: time is the test's) with random subscribes, unsubscribes,
// publishes under push faults, receives and clock ticks, and checks them
// against a plain model: which subscriptions a publish reaches (FilterTag),
// the body each gets in its format, the copies and delays the faults chose,
// that nothing lands before its time, and that every push that was not
// dropped is received exactly as often as it was made.
func TestTopicModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		srv, err := NewServer(&Options{Shards: 2})
		require.NoError(rt, err)
		defer srv.Close()
		queues := []string{"qa", "qb"}
		for _, q := range queues {
			require.NoError(rt, srv.CreateQueue(q, &QueueAttributes{VisibilityTimeout: 60}))
		}
		require.NoError(rt, srv.CreateTopic("t", nil))
		tp := srv.topic("t")
		now := int64(time.Hour)

		type msub struct{ queue, format, filter string }
		subs := map[string]msub{}
		type landing struct {
			due  int64
			body string
		}
		pending := map[string][]landing{} // by queue: pushes made, not yet received
		ids := map[string]bool{}
		count := 0

		// Faults come from the test: rapid chooses each decision.
		var faults Faults
		var decisions *rapid.T
		c := chaos{
			draw:  func(p float64) bool { return p > 0 && rapid.Bool().Draw(decisions, "fault") },
			drawN: func(n int64) int64 { return rapid.Int64Range(0, max(n-1, 0)).Draw(decisions, "delay") },
		}

		rt.Repeat(map[string]func(*rapid.T){
			"subscribe": func(rt *rapid.T) {
				name := rapid.SampledFrom([]string{"s1", "s2", "s3"}).Draw(rt, "sub")
				s := msub{
					queue:  rapid.SampledFrom(queues).Draw(rt, "queue"),
					format: rapid.SampledFrom([]string{FormatXML, FormatJSON, FormatSimplified}).Draw(rt, "format"),
					filter: rapid.SampledFrom([]string{"", "red"}).Draw(rt, "filter"),
				}
				err := srv.Subscribe("t", name, Subscription{Endpoint: srv.QueueEndpoint(s.queue), NotifyContentFormat: s.format, FilterTag: s.filter})
				if old, ok := subs[name]; ok && old != s {
					require.ErrorIs(rt, err, ErrSubscriptionExists, "subscribe %s again with other settings", name)
					return
				}
				require.NoError(rt, err, "subscribe %s", name)
				subs[name] = s
			},
			"unsubscribe": func(rt *rapid.T) {
				name := rapid.SampledFrom([]string{"s1", "s2", "s3"}).Draw(rt, "sub")
				require.NoError(rt, srv.Unsubscribe("t", name))
				delete(subs, name)
			},
			"publish": func(rt *rapid.T) {
				faults = Faults{}
				if rapid.Bool().Draw(rt, "chaos") {
					faults = Faults{PushDelay: 3 * time.Second, PushDuplicate: 0.5, PushDrop: 0.5}
				}
				count++
				body := fmt.Sprintf("#%d#<&%d>", count, count)
				tag := rapid.SampledFrom([]string{"", "red", "blue"}).Draw(rt, "tag")
				p := published{body: body, md5: md5Hex(body), tag: tag, time: now}
				decisions = rt
				tp.mu.Lock()
				tp.nextSeq++
				p.id = srv.messageID(tp.id, tp.nextSeq)
				out := tp.publish(&p, srv.opts.AccountID, &faults, c)
				tp.mu.Unlock()
				require.False(rt, ids[p.id], "message id %s issued twice", p.id)
				ids[p.id] = true

				// Which subscriptions it reaches, in name order.
				var want []string
				for _, name := range slices.Sorted(maps.Keys(subs)) {
					if s := subs[name]; s.filter == "" || s.filter == tag {
						want = append(want, name)
					}
				}
				require.Equal(rt, len(want), out.matched, "subscriptions matched by tag %q", tag)
				got := map[string]int{}
				for _, ps := range out.pushes {
					got[ps.sub]++
					s, ok := subs[ps.sub]
					require.True(rt, ok, "a push for %s, which is not subscribed", ps.sub)
					require.Contains(rt, want, ps.sub, "a push for %s, which tag %q does not reach", ps.sub, tag)
					require.Equal(rt, s.queue, ps.queue, "push of %s to its queue", ps.sub)
					require.Less(rt, ps.delay, max(int64(faults.PushDelay), 1), "push delay within PushDelay")
					checkNotification(rt, s.format, ps.body, &p, ps.sub)
					pending[ps.queue] = append(pending[ps.queue], landing{due: now + ps.delay, body: ps.body})
				}
				copies := 0
				for _, name := range want {
					require.LessOrEqual(rt, got[name], 2, "at most two copies to %s", name)
					copies += got[name]
				}
				require.Equal(rt, len(want)-len(out.dropped)+out.duplicated, copies, "copies = reached - dropped + duplicated")
				for _, d := range out.dropped {
					require.Contains(rt, want, d.sub, "a drop for %s, which tag %q does not reach", d.sub, tag)
					require.Zero(rt, got[d.sub], "%s got a copy of a push that was dropped", d.sub)
				}
				if faults == (Faults{}) {
					require.Zero(rt, len(out.dropped)+out.duplicated, "no faults, no drops or duplicates")
				}
				failed, _ := srv.deliver(out.pushes, now)
				require.Empty(rt, failed, "the queues exist and are large enough")
			},
			"receive": func(rt *rapid.T) {
				qn := rapid.SampledFrom(queues).Draw(rt, "queue")
				q := srv.queue(qn)
				q.mu.Lock()
				q.advance(now)
				got, dead := q.receive(16, now, 0, nil, nil)
				for _, d := range got {
					require.Nil(rt, q.remove(d.handle), "delete what was received")
				}
				q.mu.Unlock()
				require.Empty(rt, dead)
				for _, d := range got {
					i := slices.IndexFunc(pending[qn], func(l landing) bool { return l.body == d.body && l.due <= now })
					require.GreaterOrEqual(rt, i, 0, "received from %s a body that is not due or was never pushed: %.60q", qn, d.body)
					pending[qn] = slices.Delete(pending[qn], i, i+1)
				}
				if len(got) < 16 {
					for _, l := range pending[qn] {
						require.Greater(rt, l.due, now, "a push due at %v was not received by %v", l.due, now)
					}
				}
			},
			"tick": func(rt *rapid.T) {
				now += rapid.Int64Range(0, 2000).Draw(rt, "ms") * millisecond
			},
		})
	})
}

// checkNotification checks a push body against its publish.
func checkNotification(rt *rapid.T, format, body string, p *published, sub string) {
	switch format {
	case FormatSimplified:
		require.Equal(rt, p.body, body, "SIMPLIFIED: the body itself")
	case FormatXML:
		var n struct {
			XMLName                                                        xml.Name `xml:"Notification"`
			TopicName, SubscriptionName, MessageId, MessageMD5, MessageTag string
			Message                                                        string
			PublishTime                                                    int64
		}
		require.NoError(rt, xml.Unmarshal([]byte(body), &n), "XML notification %q", body)
		require.Equal(rt, p.body, n.Message)
		require.Equal(rt, p.id, n.MessageId)
		require.Equal(rt, p.md5, n.MessageMD5)
		require.Equal(rt, p.tag, n.MessageTag)
		require.Equal(rt, sub, n.SubscriptionName)
		require.Equal(rt, ms(p.time), n.PublishTime)
	case FormatJSON:
		var n map[string]string
		require.NoError(rt, json.Unmarshal([]byte(body), &n), "JSON notification %q", body)
		require.Equal(rt, p.body, n["Message"])
		require.Equal(rt, p.id, n["MessageId"])
		require.Equal(rt, sub, n["SubscriptionName"])
		require.Equal(rt, p.tag, n["MessageTag"])
		require.Equal(rt, fmt.Sprint(ms(p.time)), n["PublishTime"])
	}
}
