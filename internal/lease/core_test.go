package lease_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/lease"
	"github.com/inorder/inorder/internal/shard"
	"github.com/inorder/inorder/seqstore"
)

var (
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errDown = errors.New("store down")
	memberA = seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}
	memberB = seqstore.Member{Name: "b", Incarnation: "b-1", Weight: 1}
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func describe(as []lease.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func newCore(t *testing.T, self seqstore.Member, shards int) *lease.Core {
	t.Helper()
	c, err := lease.NewCore(self, shards, nil)
	require.NoError(t, err)
	return c
}

func leasesOf(owner string, firstToken uint64, shards ...int) []seqstore.Lease {
	ls := make([]seqstore.Lease, len(shards))
	for i, s := range shards {
		ls[i] = seqstore.Lease{Shard: s, Token: firstToken + uint64(i), Owner: owner}
	}
	return ls
}

// started brings a lone member a to hold all 4 shards: heartbeat at 0,
// acquire sent at 10ms, leases 0..3 with tokens 1..4. Their local deadline
// is 10ms + RenewDeadline.
func started(t *testing.T) *lease.Core {
	t.Helper()
	c := newCore(t, memberA, 4)
	c.Tick(at(0))
	require.Equal(t, []string{"heartbeat"}, describe(c.Ready()), "the first tick")
	c.HeartbeatDone(at(10*time.Millisecond), seqstore.View{Version: 1, Members: []seqstore.Member{memberA}}, nil, nil, at(0))
	require.Equal(t, []string{"acquire [0 1 2 3]"}, describe(c.Ready()), "a lone member acquires every shard")
	c.AcquireDone(at(20*time.Millisecond), leasesOf("a-1", 1, 0, 1, 2, 3), nil, at(10*time.Millisecond))
	require.Equal(t, []string{"start 0#1", "start 1#2", "start 2#3", "start 3#4"}, describe(c.Ready()))
	return c
}

// step ticks c at its Next time, which must be due before limit, and
// returns that time and the actions.
func step(t *testing.T, c *lease.Core, limit time.Time) (time.Time, []string) {
	t.Helper()
	next := c.Next()
	require.False(t, next.IsZero(), "the core waits for nothing")
	require.True(t, next.Before(limit), "next %v is not before %v", next.Sub(t0), limit.Sub(t0))
	c.Tick(next)
	return next, describe(c.Ready())
}

// TestRenewOnTimeKeepsLeases: renewals answered on time keep every lease
// served for a minute (3.5: renew every RenewEvery).
func TestRenewOnTimeKeepsLeases(t *testing.T) {
	c := started(t)
	view := seqstore.View{Version: 1, Members: []seqstore.Member{memberA}}
	var renewAt []time.Duration
	for now := at(0); now.Before(at(time.Minute)); {
		var acts []string
		now, acts = step(t, c, at(2*time.Minute))
		for _, a := range acts {
			switch {
			case a == "heartbeat":
				c.HeartbeatDone(now.Add(50*time.Millisecond), view, c.Held(), nil, now)
			case a == "renew [0#1 1#2 2#3 3#4]":
				renewAt = append(renewAt, now.Sub(t0))
				c.RenewDone(now.Add(50*time.Millisecond), nil, nil, now)
			default:
				t.Fatalf("at %v: unexpected %q", now.Sub(t0), a)
			}
			require.Empty(t, describe(c.Ready()), "after the answer to %q", a)
		}
		require.Equal(t, []int{0, 1, 2, 3}, c.Serving(), "at %v", now.Sub(t0))
	}
	assert.Equal(t, time.Duration(5*time.Second), renewAt[0], "the first renewal")
	for i := 1; i < len(renewAt); i++ {
		assert.Equal(t, 5*time.Second, renewAt[i]-renewAt[i-1], "renewal %d comes RenewEvery after the last", i)
	}
}

// TestRenewFailingFences: renewals that fail are retried every
// RetryPeriod, and the leases are fenced at their local deadline (the
// acquire's send time + RenewDeadline), before the store's TTL, and before
// anything else of that moment.
func TestRenewFailingFences(t *testing.T) {
	c := started(t)
	var renews []time.Duration
	var fencedAt time.Duration
	for fencedAt == 0 {
		now, acts := step(t, c, at(time.Minute))
		for i, a := range acts {
			switch {
			case a == "heartbeat":
				c.HeartbeatDone(now, seqstore.View{}, nil, errDown, now)
			case a == "renew [0#1 1#2 2#3 3#4]":
				renews = append(renews, now.Sub(t0))
				c.RenewDone(now.Add(time.Millisecond), nil, errDown, now)
			case a == "fence 0":
				require.Zero(t, i, "the fence comes first, got %v", acts)
				assert.Equal(t, []string{"fence 0", "fence 1", "fence 2", "fence 3"}, acts[:4])
				fencedAt = now.Sub(t0)
			}
			c.Ready()
		}
	}
	deadline := 10*time.Millisecond + lease.DefaultRenewDeadline
	assert.Equal(t, deadline, fencedAt, "fenced at the acquire's send time + RenewDeadline")
	assert.Less(t, fencedAt, 10*time.Millisecond+lease.DefaultTTL, "fenced before the store's TTL")
	assert.Equal(t, []time.Duration{5 * time.Second, 7001 * time.Millisecond, 9002 * time.Millisecond}, renews,
		"renewed at RenewEvery, then every RetryPeriod after each failure's answer")
	assert.Empty(t, c.Held(), "a fenced lease is forgotten")
	assert.Empty(t, c.Serving())
}

// TestLateRenewUsesSendTime: a renewal answered late proves the lease from
// its send time: the deadline is send + RenewDeadline, not answer +
// RenewDeadline.
func TestLateRenewUsesSendTime(t *testing.T) {
	c := started(t)
	c.Tick(at(5 * time.Second))
	require.Equal(t, []string{"heartbeat", "renew [0#1 1#2 2#3 3#4]"}, describe(c.Ready()))
	// The heartbeat fails; the renewal's answer comes 4 s late.
	c.HeartbeatDone(at(5*time.Second), seqstore.View{}, nil, errDown, at(5*time.Second))
	require.Empty(t, describe(c.Ready()))
	c.RenewDone(at(9*time.Second), nil, nil, at(5*time.Second))
	require.Equal(t, []string{"heartbeat"}, describe(c.Ready()), "the heartbeat retried, nothing else")
	c.HeartbeatDone(at(9*time.Second), seqstore.View{}, nil, errDown, at(9*time.Second))
	// Every later call fails.
	for {
		now, acts := step(t, c, at(time.Minute))
		if slices.Contains(acts, "fence 0") {
			assert.Equal(t, 15*time.Second, now.Sub(t0), "deadline: send time 5 s + RenewDeadline 10 s")
			return
		}
		for _, a := range acts {
			switch a {
			case "heartbeat":
				c.HeartbeatDone(now, seqstore.View{}, nil, errDown, now)
			default:
				c.RenewDone(now, nil, errDown, now)
			}
		}
		c.Ready()
	}
}

// TestRenewAfterDeadlineDoesNotRevive: an answer that comes after the
// local deadline finds the leases fenced already; it revives nothing.
func TestRenewAfterDeadlineDoesNotRevive(t *testing.T) {
	c := started(t)
	c.Tick(at(5 * time.Second))
	require.Equal(t, []string{"heartbeat", "renew [0#1 1#2 2#3 3#4]"}, describe(c.Ready()))
	c.RenewDone(at(11*time.Second), nil, nil, at(5*time.Second))
	acts := describe(c.Ready())
	require.GreaterOrEqual(t, len(acts), 4)
	assert.Equal(t, []string{"fence 0", "fence 1", "fence 2", "fence 3"}, acts[:4], "fenced on the late answer, first")
	assert.Empty(t, c.Serving())
	assert.Empty(t, c.Held())
}

// TestRenewLostFences: a lease the store reports lost is fenced at once,
// and the others kept.
func TestRenewLostFences(t *testing.T) {
	c := started(t)
	c.Tick(at(5 * time.Second))
	c.Ready()
	c.RenewDone(at(5*time.Second), leasesOf("a-1", 2, 1), nil, at(5*time.Second))
	assert.Equal(t, []string{"fence 1"}, describe(c.Ready()))
	assert.Equal(t, []int{0, 2, 3}, c.Serving())
}

// TestTakeoverReadFences: a live lease with a higher token on a held shard
// means it was taken over: fenced at once.
func TestTakeoverReadFences(t *testing.T) {
	c := started(t)
	c.Tick(at(5 * time.Second))
	c.Ready()
	live := append(leasesOf("a-1", 1, 0, 1, 2), seqstore.Lease{Shard: 3, Token: 9, Owner: "z-1"})
	c.HeartbeatDone(at(5*time.Second), seqstore.View{Version: 1, Members: []seqstore.Member{memberA}}, live, nil, at(5*time.Second))
	assert.Equal(t, []string{"fence 3"}, describe(c.Ready()))
	// An older token is a read from before this keeper acquired: no fence.
	live = append(leasesOf("a-1", 1, 0, 1), seqstore.Lease{Shard: 2, Token: 1, Owner: "z-1"}, seqstore.Lease{Shard: 3, Token: 9, Owner: "z-1"})
	c.RenewDone(at(5*time.Second), nil, nil, at(5*time.Second))
	c.Tick(at(10 * time.Second))
	c.Ready()
	c.HeartbeatDone(at(10*time.Second), seqstore.View{Version: 1, Members: []seqstore.Member{memberA}}, live, nil, at(10*time.Second))
	assert.Empty(t, describe(c.Ready()))
}

// TestJoinRevokesThenReleasesAfterDrained: when b joins, a revokes the
// shards b now wins after RebalanceDelay, and releases each only after the
// receiver drained it (revoke before acquire, 3.7).
func TestJoinRevokesThenReleasesAfterDrained(t *testing.T) {
	const shards = 16
	c := newCore(t, memberA, shards)
	c.Tick(at(0))
	c.Ready()
	c.HeartbeatDone(at(0), seqstore.View{Version: 1, Members: []seqstore.Member{memberA}}, nil, nil, at(0))
	all := make([]int, shards)
	for i := range all {
		all[i] = i
	}
	require.Equal(t, []string{fmt.Sprintf("acquire %v", all)}, describe(c.Ready()))
	c.AcquireDone(at(0), leasesOf("a-1", 1, all...), nil, at(0))
	c.Ready()

	two := seqstore.View{Version: 2, Members: []seqstore.Member{memberA, memberB}}
	moved := shard.Assign(two.Members, shards).Shards("b")
	require.NotEmpty(t, moved, "b must win some of %d shards", shards)

	c.Tick(at(5 * time.Second))
	require.Equal(t, []string{"heartbeat", "renew " + renewList(c.Held())}, describe(c.Ready()))
	c.RenewDone(at(5*time.Second), nil, nil, at(5*time.Second))
	c.HeartbeatDone(at(5*time.Second), two, c.Held(), nil, at(5*time.Second))
	assert.Empty(t, describe(c.Ready()), "nothing revoked before RebalanceDelay")
	assert.Equal(t, at(8*time.Second), c.Next(), "the revoke is due RebalanceDelay after the view change")
	c.Tick(at(8*time.Second - time.Millisecond))
	assert.Empty(t, describe(c.Ready()))

	c.Tick(at(8 * time.Second))
	var want []string
	for _, s := range moved {
		want = append(want, fmt.Sprintf("revoke %d", s))
	}
	require.Equal(t, want, describe(c.Ready()), "b's shards revoked at RebalanceDelay")
	assert.Len(t, c.Held(), shards, "revoked leases are held until drained and released")
	assert.Len(t, c.Serving(), shards-len(moved))

	c.Tick(at(9 * time.Second))
	assert.Empty(t, describe(c.Ready()), "no release before Drained")

	first := moved[0]
	c.Drained(at(9*time.Second), first)
	assert.Equal(t, []string{fmt.Sprintf("release [%d#%d]", first, first+1)}, describe(c.Ready()), "released once drained")
	c.ReleaseDone(at(9*time.Second), leasesOf("a-1", uint64(first+1), first), nil)
	assert.Len(t, c.Held(), shards-1)
	c.Drained(at(9*time.Second), first)
	assert.Empty(t, describe(c.Ready()), "a second Drained is ignored")
}

func renewList(ls []seqstore.Lease) string {
	return lease.Action{Kind: lease.Renew, Leases: ls}.String()[len("renew "):]
}

// TestJoinerWaitsForRelease: b acquires only its shards with no live
// lease; the ones a still holds come after a released them.
func TestJoinerWaitsForRelease(t *testing.T) {
	const shards = 16
	two := seqstore.View{Version: 2, Members: []seqstore.Member{memberA, memberB}}
	mine := shard.Assign(two.Members, shards).Shards("b")
	require.GreaterOrEqual(t, len(mine), 2)
	c := newCore(t, memberB, shards)
	c.Tick(at(0))
	c.Ready()
	all := make([]int, shards)
	for i := range all {
		all[i] = i
	}
	c.HeartbeatDone(at(0), two, leasesOf("a-1", 1, all...), nil, at(0))
	assert.Empty(t, describe(c.Ready()), "every shard has a live lease: nothing to acquire")
	// a released mine[0].
	var live []seqstore.Lease
	for _, s := range all {
		if s != mine[0] {
			live = append(live, seqstore.Lease{Shard: s, Token: uint64(s + 1), Owner: "a-1"})
		}
	}
	c.Tick(at(5 * time.Second))
	c.Ready()
	c.HeartbeatDone(at(5*time.Second), two, live, nil, at(5*time.Second))
	assert.Equal(t, []string{fmt.Sprintf("acquire [%d]", mine[0])}, describe(c.Ready()))
}

// drive runs c from the time of its last event until limit against a
// store that answers every call at once and successfully, and returns the
// actions with the time each was taken.
func drive(t *testing.T, c *lease.Core, from, limit time.Time, view seqstore.View, owner string, token *uint64) []string {
	t.Helper()
	var log []string
	now := from
	for {
		for acts := c.Ready(); len(acts) > 0; acts = c.Ready() {
			for _, a := range acts {
				log = append(log, fmt.Sprintf("%v %v", now.Sub(t0), a))
				if len(log) > 1000 {
					t.Fatalf("runaway: %v", log)
				}
				switch a.Kind {
				case lease.Heartbeat:
					c.HeartbeatDone(now, view, c.Held(), nil, now)
				case lease.Renew:
					c.RenewDone(now, nil, nil, now)
				case lease.Acquire:
					var ls []seqstore.Lease
					for _, s := range a.Shards {
						*token++
						ls = append(ls, seqstore.Lease{Shard: s, Token: *token, Owner: owner})
					}
					c.AcquireDone(now, ls, nil, now)
				case lease.Release:
					c.ReleaseDone(now, a.Leases, nil)
				}
			}
		}
		now = c.Next()
		if now.IsZero() || !now.Before(limit) {
			return log
		}
		c.Tick(now)
	}
}

func only(log []string, word string) []string {
	var out []string
	for _, l := range log {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return out
}

// TestOrphanAdoptedAfterTwoTTL: a shard assigned to a member that never
// takes it is adopted by another after 2 x TTL without a live lease, and
// not revoked while the view stays.
func TestOrphanAdoptedAfterTwoTTL(t *testing.T) {
	const shards = 8
	two := seqstore.View{Version: 2, Members: []seqstore.Member{memberA, memberB}}
	as := shard.Assign(two.Members, shards)
	mine, theirs := as.Shards("b"), as.Shards("a")
	require.NotEmpty(t, theirs)
	c := newCore(t, memberB, shards)
	c.Tick(at(0))
	token := uint64(0)
	log := drive(t, c, at(0), at(time.Minute), two, "b-1", &token)
	assert.Equal(t, []string{fmt.Sprintf("0s acquire %v", mine), fmt.Sprintf("30s acquire %v", theirs)}, only(log, "acquire"),
		"b's shards at once, the orphans at 2 x TTL")
	assert.Empty(t, only(log, "revoke"), "an adopted orphan revoked while the view stayed")
	assert.Len(t, c.Serving(), shards)

	// The view changes (a restarts): the adopted orphans go back to a.
	three := seqstore.View{Version: 3, Members: []seqstore.Member{memberA, memberB}}
	log = drive(t, c, at(time.Minute), at(2*time.Minute), three, "b-1", &token)
	var want []string
	for _, s := range theirs {
		want = append(want, fmt.Sprintf("1m3s revoke %d", s))
	}
	assert.Equal(t, want, only(log, "revoke"), "revoked RebalanceDelay after the heartbeat that saw the new view")
}

// TestStandbyAcquiresNothing: a member of weight 0 acquires no assigned
// shard.
func TestStandbyAcquiresNothing(t *testing.T) {
	standby := seqstore.Member{Name: "s", Incarnation: "s-1"}
	c := newCore(t, standby, 4)
	c.Tick(at(0))
	c.Ready()
	c.HeartbeatDone(at(0), seqstore.View{Version: 1, Members: []seqstore.Member{memberA, standby}}, nil, nil, at(0))
	assert.Empty(t, describe(c.Ready()))
}

// TestCloseOrder: Close revokes every shard, waits for all to drain,
// releases them, then leaves.
func TestCloseOrder(t *testing.T) {
	c := started(t)
	c.Close(at(time.Second))
	assert.Equal(t, []string{"revoke 0", "revoke 1", "revoke 2", "revoke 3"}, describe(c.Ready()))
	for _, s := range []int{2, 0, 3} {
		c.Drained(at(2*time.Second), s)
		assert.Empty(t, describe(c.Ready()), "release waits for every shard to drain")
	}
	c.Drained(at(3*time.Second), 1)
	assert.Equal(t, []string{"release [0#1 1#2 2#3 3#4]"}, describe(c.Ready()))
	assert.False(t, c.Closed())
	c.ReleaseDone(at(3*time.Second), c.Held(), nil)
	assert.Equal(t, []string{"leave"}, describe(c.Ready()))
	assert.False(t, c.Closed())
	c.LeaveDone(at(3*time.Second), nil)
	assert.True(t, c.Closed())
	assert.Empty(t, describe(c.Ready()))
	assert.True(t, c.Next().IsZero())
}

// TestCloseDrainBound: a shard not drained within CloseDrain is fenced,
// not released; the drained ones are released and the keeper leaves. The
// leases are renewed while draining.
func TestCloseDrainBound(t *testing.T) {
	c := started(t)
	c.Close(at(time.Second))
	c.Ready()
	c.Drained(at(2*time.Second), 0)
	c.Drained(at(2*time.Second), 1)
	c.Drained(at(2*time.Second), 3)
	for {
		now, acts := step(t, c, at(time.Minute))
		if len(acts) > 0 && acts[0] == "fence 2" {
			assert.Equal(t, at(31*time.Second), now, "fenced at Close + CloseDrain")
			assert.Equal(t, []string{"fence 2", "release [0#1 1#3 3#4]"}[0:1], acts[0:1])
			assert.Equal(t, "release [0#1 1#2 3#4]", acts[1], "the drained ones released, not the fenced one")
			break
		}
		for _, a := range acts {
			require.Contains(t, a, "renew", "only renewals while draining")
			c.RenewDone(now, nil, nil, now)
		}
		c.Ready()
	}
	c.ReleaseDone(at(31*time.Second), leasesOf("a-1", 1, 0), errDown)
	assert.Equal(t, []string{"leave"}, describe(c.Ready()), "a failed release at Close is given up")
	c.LeaveDone(at(31*time.Second), errDown)
	assert.True(t, c.Closed())
}

// TestCloseBeforeAcquireDone: leases that come after Close are never
// started, and released.
func TestCloseBeforeAcquireDone(t *testing.T) {
	c := newCore(t, memberA, 2)
	c.Tick(at(0))
	c.Ready()
	c.HeartbeatDone(at(0), seqstore.View{Version: 1, Members: []seqstore.Member{memberA}}, nil, nil, at(0))
	require.Equal(t, []string{"acquire [0 1]"}, describe(c.Ready()))
	c.Close(at(time.Second))
	assert.Empty(t, describe(c.Ready()), "waits for the acquire in flight")
	c.AcquireDone(at(time.Second), leasesOf("a-1", 1, 0, 1), nil, at(0))
	assert.Equal(t, []string{"release [0#1 1#2]"}, describe(c.Ready()))
}

// TestCloseWaitsForAcquireQuietly: past CloseDrain, a Close that waits
// for an Acquire's answer asks for no tick (the shell's timer would spin),
// and leases that come after their local deadline are neither started nor
// released. Found by TestModelExclusion, which hung on it.
func TestCloseWaitsForAcquireQuietly(t *testing.T) {
	c := newCore(t, memberA, 2)
	c.Tick(at(0))
	c.Ready()
	c.HeartbeatDone(at(0), seqstore.View{Version: 1, Members: []seqstore.Member{memberA}}, nil, nil, at(0))
	require.Equal(t, []string{"acquire [0 1]"}, describe(c.Ready()))
	c.Close(at(time.Second))
	c.Tick(at(40 * time.Second))
	assert.Empty(t, describe(c.Ready()))
	if next := c.Next(); !next.IsZero() {
		assert.True(t, next.After(at(40*time.Second)), "Next %v is past: the shell's timer would spin", next.Sub(t0))
	}
	c.AcquireDone(at(41*time.Second), leasesOf("a-1", 1, 0, 1), nil, at(0))
	assert.Equal(t, []string{"leave"}, describe(c.Ready()), "leases proven at 0 s are past their deadline: left to expire")
	assert.Empty(t, c.Held())
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []lease.Options{
		{TTL: 10 * time.Second, RenewDeadline: 10 * time.Second},
		{RenewEvery: 10 * time.Second},
		{RetryPeriod: 10 * time.Second},
		{TTL: -time.Second},
		{RebalanceDelay: -time.Second},
		{Balance: 0.5},
	} {
		_, err := lease.NewCore(memberA, 4, &o)
		assert.ErrorIs(t, err, lease.ErrOptions, "%+v", o)
	}
	_, err := lease.NewCore(memberA, 0, nil)
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument)
	_, err = lease.NewCore(seqstore.Member{Name: "a"}, 4, nil)
	assert.ErrorIs(t, err, seqstore.ErrInvalidArgument)
	_, err = lease.NewCore(memberA, 4, &lease.Options{TTL: 300 * time.Millisecond, RenewEvery: 100 * time.Millisecond,
		RetryPeriod: 50 * time.Millisecond, RenewDeadline: 200 * time.Millisecond, Balance: 1.25})
	assert.NoError(t, err)
}

// TestRebalanceDelayResets: a view change undone within RebalanceDelay
// revokes nothing (KIP-134's delay absorbs a quick restart). The delay is
// 8 s here, so that a heartbeat (every 5 s) sees the undo in time.
func TestRebalanceDelayResets(t *testing.T) {
	const shards = 16
	c, err := lease.NewCore(memberA, shards, &lease.Options{RebalanceDelay: 8 * time.Second})
	require.NoError(t, err)
	one := seqstore.View{Version: 1, Members: []seqstore.Member{memberA}}
	token := uint64(0)
	c.Tick(at(0))
	drive(t, c, at(0), at(4*time.Second), one, "a-1", &token)
	require.Len(t, c.Serving(), shards)
	two := seqstore.View{Version: 2, Members: []seqstore.Member{memberA, memberB}}
	log := drive(t, c, at(4*time.Second), at(6*time.Second), two, "a-1", &token) // b seen at 5 s
	assert.Empty(t, only(log, "revoke"))
	assert.Equal(t, at(10*time.Second), c.Next(), "the next heartbeat comes before the revoke at 13 s")
	three := seqstore.View{Version: 3, Members: []seqstore.Member{memberA}}
	log = drive(t, c, at(6*time.Second), at(time.Minute), three, "a-1", &token) // b gone at 10 s
	assert.Empty(t, only(log, "revoke"), "b left before RebalanceDelay: nothing revoked")
	assert.Len(t, c.Serving(), shards)
}

// TestBalanceBoundsDesired: with Options.Balance, the shards a member
// acquires are shard.AssignBounded's.
func TestBalanceBoundsDesired(t *testing.T) {
	const shards = 16
	// Find a view where plain rendezvous puts more than ceil(1.25·16/4) = 5
	// shards on one member.
	var view seqstore.View
	var busiest seqstore.Member
	for i := 0; busiest.Name == ""; i++ {
		require.Less(t, i, 1000, "no unbalanced view found")
		ms := make([]seqstore.Member, 4)
		for j := range ms {
			ms[j] = seqstore.Member{Name: fmt.Sprintf("n%d-%d", i, j), Incarnation: fmt.Sprintf("i%d-%d", i, j), Weight: 1}
		}
		plain := shard.Assign(ms, shards)
		for _, m := range ms {
			if len(plain.Shards(m.Name)) > 5 {
				view, busiest = seqstore.View{Version: 1, Members: ms}, m
			}
		}
	}
	want := shard.AssignBounded(view.Members, shards, 1.25).Shards(busiest.Name)
	require.LessOrEqual(t, len(want), 5)
	c, err := lease.NewCore(busiest, shards, &lease.Options{Balance: 1.25})
	require.NoError(t, err)
	c.Tick(at(0))
	c.Ready()
	c.HeartbeatDone(at(0), view, nil, nil, at(0))
	assert.Equal(t, []string{fmt.Sprintf("acquire %v", want)}, describe(c.Ready()))
}
