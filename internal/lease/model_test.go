package lease_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/inorder/inorder/internal/lease"
	"github.com/inorder/inorder/seqstore"
)

// modelStore is the store of TestModelExclusion: a Leaser's semantics on
// the model's clock, called synchronously.
type modelStore struct {
	token   uint64
	leases  map[int]modelLease
	members map[string]modelMember
	version uint64
}

type modelLease struct {
	seqstore.Lease
	expiry time.Time
}

type modelMember struct {
	seqstore.Member
	expiry time.Time
}

func (m *modelStore) live(s int, now time.Time) (modelLease, bool) {
	l, ok := m.leases[s]
	return l, ok && now.Before(l.expiry)
}

// call is a store call of the model: sent by a core, then executed by the
// store, then answered, each at a moment rapid picks.
type call struct {
	core     int // the index of the member whose keeper sent it
	k        *lease.Core
	m        seqstore.Member
	action   lease.Action
	sentAt   time.Time
	executed bool
	failed   bool
	view     seqstore.View
	leases   []seqstore.Lease
}

// modelRecv is what a receiver works on: a shard from Start until Fence
// or, after Revoke, until it reports Drained.
type modelRecv struct {
	working map[int]bool
	revoked []int // revoked, not yet drained
}

// TestModelExclusion drives two or three cores over a model store with
// rapid: calls are executed and answered late, out of order, or never,
// some fail before or after the store executed them, receivers drain at
// random moments, time jumps, keepers close, abort, and restart with a new
// incarnation. With no pauses and one clock rate (the design's timing
// assumption), no two receivers ever work on one shard: checked at every
// Start (I4, 3.1); tokens only grow, and a closed keeper's receiver works
// on nothing.
func TestModelExclusion(t *testing.T) {
	const ttl = 15 * time.Second
	rapid.Check(t, func(t *rapid.T) {
		shards := rapid.IntRange(1, 6).Draw(t, "shards")
		n := rapid.IntRange(2, 3).Draw(t, "members")
		now := t0
		st := &modelStore{leases: map[int]modelLease{}, members: map[string]modelMember{}}
		var cores []*lease.Core
		var members []seqstore.Member
		recvs := make([]*modelRecv, n)
		for i := range n {
			m := seqstore.Member{
				Name:        fmt.Sprintf("m%d", i),
				Incarnation: fmt.Sprintf("m%d-1", i),
				Weight:      rapid.IntRange(0, 2).Draw(t, "weight"),
			}
			c, err := lease.NewCore(m, shards, nil)
			if err != nil {
				t.Fatal(err)
			}
			cores, members = append(cores, c), append(members, m)
			recvs[i] = &modelRecv{working: map[int]bool{}}
		}
		var pending []*call
		gen := 1
		lastToken := map[int]uint64{}

		take := func(i int) {
			for _, a := range cores[i].Ready() {
				r := recvs[i]
				switch a.Kind {
				case lease.Start:
					l := a.Leases[0]
					for j, o := range recvs {
						if j != i && o.working[l.Shard] {
							t.Fatalf("at %v: m%d starts shard %d (token %d), which m%d still works on", now.Sub(t0), i, l.Shard, l.Token, j)
						}
					}
					if l.Token <= lastToken[l.Shard] {
						t.Fatalf("shard %d started with token %d after %d", l.Shard, l.Token, lastToken[l.Shard])
					}
					lastToken[l.Shard] = l.Token
					r.working[l.Shard] = true
				case lease.Revoke:
					r.revoked = append(r.revoked, a.Shards[0])
				case lease.Fence:
					delete(r.working, a.Shards[0])
					r.revoked = slices.DeleteFunc(r.revoked, func(s int) bool { return s == a.Shards[0] })
				default:
					pending = append(pending, &call{core: i, k: cores[i], m: members[i], action: a, sentAt: now})
				}
			}
		}
		execute := func(c *call) {
			c.executed = true
			m := c.m
			switch c.action.Kind {
			case lease.Heartbeat:
				for inc, x := range st.members {
					if !now.Before(x.expiry) {
						delete(st.members, inc)
						st.version++
					}
				}
				if _, ok := st.members[m.Incarnation]; !ok {
					st.version++
				}
				st.members[m.Incarnation] = modelMember{m, now.Add(ttl)}
				c.view = seqstore.View{Version: st.version}
				for _, y := range st.members {
					c.view.Members = append(c.view.Members, y.Member)
				}
				slices.SortFunc(c.view.Members, func(a, b seqstore.Member) int {
					return strings.Compare(a.Name+"\x00"+a.Incarnation, b.Name+"\x00"+b.Incarnation)
				})
				for s := range shards {
					if l, ok := st.live(s, now); ok {
						c.leases = append(c.leases, l.Lease)
					}
				}
			case lease.Acquire:
				for _, s := range c.action.Shards {
					if _, ok := st.live(s, now); !ok {
						st.token++
						l := seqstore.Lease{Shard: s, Token: st.token, Owner: m.Incarnation}
						st.leases[s] = modelLease{l, now.Add(ttl)}
						c.leases = append(c.leases, l)
					}
				}
			case lease.Renew:
				for _, h := range c.action.Leases {
					if l, ok := st.live(h.Shard, now); ok && l.Lease == h {
						l.expiry = now.Add(ttl)
						st.leases[h.Shard] = l
					} else {
						c.leases = append(c.leases, h) // lost
					}
				}
			case lease.Release:
				for _, h := range c.action.Leases {
					if l, ok := st.live(h.Shard, now); ok && l.Lease == h {
						delete(st.leases, h.Shard)
					}
				}
			case lease.Leave:
				delete(st.members, m.Incarnation)
				st.version++
			}
		}
		answer := func(c *call) {
			var err error
			if c.failed {
				err = errDown
			}
			k := c.k
			switch c.action.Kind {
			case lease.Heartbeat:
				k.HeartbeatDone(now, c.view, c.leases, err, c.sentAt)
			case lease.Acquire:
				k.AcquireDone(now, c.leases, err, c.sentAt)
			case lease.Renew:
				k.RenewDone(now, c.leases, err, c.sentAt)
			case lease.Release:
				k.ReleaseDone(now, c.action.Leases, err)
			case lease.Leave:
				k.LeaveDone(now, err)
			}
			if k == cores[c.core] {
				take(c.core)
			} else if acts := k.Ready(); len(acts) > 0 {
				t.Fatalf("a closed keeper acted: %v", acts)
			}
		}
		// advance moves the time to target, ticking each core at its Next
		// on the way, as the shell's timer does.
		advance := func(target time.Time) {
			for ticks := 0; ; ticks++ {
				if ticks > 1000 {
					t.Fatalf("at %v: Next keeps asking for a tick", now.Sub(t0))
				}
				who, when := -1, target
				for i, c := range cores {
					if next := c.Next(); !next.IsZero() && !next.After(when) {
						who, when = i, next
					}
				}
				if who < 0 {
					now = target
					return
				}
				if when.After(now) {
					now = when
				}
				cores[who].Tick(now)
				take(who)
			}
		}

		for i := range cores {
			cores[i].Tick(now)
			take(i)
		}
		steps := rapid.IntRange(50, 400).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(t, "step") {
			case 0, 1, 2: // time passes
				advance(now.Add(time.Duration(rapid.IntRange(0, 4000).Draw(t, "ms")) * time.Millisecond))
			case 3, 4: // the store executes a call, or it fails before reaching it
				var sent []*call
				for _, c := range pending {
					if !c.executed && !c.failed {
						sent = append(sent, c)
					}
				}
				if len(sent) == 0 {
					continue
				}
				c := sent[rapid.IntRange(0, len(sent)-1).Draw(t, "exec")]
				if rapid.IntRange(0, 9).Draw(t, "fail before") == 0 {
					c.failed = true
				} else {
					execute(c)
				}
			case 5, 6, 7: // a call is answered, or its answer is lost
				var done []*call
				for _, c := range pending {
					if c.executed || c.failed {
						done = append(done, c)
					}
				}
				if len(done) == 0 {
					continue
				}
				c := done[rapid.IntRange(0, len(done)-1).Draw(t, "answer")]
				pending = slices.DeleteFunc(pending, func(x *call) bool { return x == c })
				if rapid.IntRange(0, 19).Draw(t, "fail after") == 0 {
					c.failed = true
				}
				answer(c)
			case 8: // a receiver finishes draining a revoked shard
				i := rapid.IntRange(0, n-1).Draw(t, "drainer")
				r := recvs[i]
				if len(r.revoked) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(r.revoked)-1).Draw(t, "drained")
				s := r.revoked[k]
				r.revoked = slices.Delete(r.revoked, k, k+1)
				delete(r.working, s)
				cores[i].Drained(now, s)
				take(i)
			case 9: // a keeper closes, aborts, or restarts once closed
				i := rapid.IntRange(0, n-1).Draw(t, "closer")
				switch {
				case cores[i].Closed():
					gen++
					members[i].Incarnation = fmt.Sprintf("m%d-%d", i, gen)
					c, err := lease.NewCore(members[i], shards, nil)
					if err != nil {
						t.Fatal(err)
					}
					cores[i] = c
					c.Tick(now)
					take(i)
				case rapid.IntRange(0, 9).Draw(t, "abort") == 0:
					cores[i].Abort(now)
					take(i)
				case rapid.IntRange(0, 2).Draw(t, "close") == 0:
					cores[i].Close(now)
					take(i)
				}
			}
			for i, c := range cores {
				if c.Closed() && len(recvs[i].working) > 0 {
					t.Fatalf("m%d closed while its receiver works on %v", i, recvs[i].working)
				}
			}
		}
	})
}
