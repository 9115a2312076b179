package lease_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/lease"
	"github.com/inorder/inorder/internal/shard"
	"github.com/inorder/inorder/seqstore"
)

// The wake-up steps (doc.go "Wake-ups"): a Wake brings the next heartbeat
// forward, two at once and then at most one per WakeGap (RenewEvery/4 =
// 1.25 s by default).

var oneView = seqstore.View{Version: 1, Members: []seqstore.Member{memberA}}

// TestWakeHeartbeatsAtOnce: a Wake long enough after the last heartbeat
// sends one at once, and nothing else.
func TestWakeHeartbeatsAtOnce(t *testing.T) {
	c := started(t) // heartbeat sent at 0, next due at 5 s
	assert.Equal(t, 1250*time.Millisecond, c.WakeGap(), "RenewEvery/4")
	c.Wake(at(2 * time.Second))
	assert.Equal(t, []string{"heartbeat"}, describe(c.Ready()), "a wake-up 2 s after the last heartbeat")
	c.HeartbeatDone(at(2*time.Second+10*time.Millisecond), oneView, c.Held(), nil, at(2*time.Second))
	require.Empty(t, describe(c.Ready()))
	assert.Equal(t, at(5*time.Second), c.Next(), "the renewal at 5 s comes next; the heartbeat is due at 7 s")
	c.Tick(at(5 * time.Second))
	assert.Equal(t, []string{"renew [0#1 1#2 2#3 3#4]"}, describe(c.Ready()), "the regular heartbeat moved: sent + RenewEvery")
}

// TestWakeRateLimited: a storm of wake-ups gets two heartbeats at once
// (the burst), then one per WakeGap.
func TestWakeRateLimited(t *testing.T) {
	c := started(t)
	var sent []time.Duration
	for ms := 2000; ms < 6000; ms += 10 {
		now := at(time.Duration(ms) * time.Millisecond)
		if !c.Next().After(now) {
			c.Tick(c.Next())
		}
		c.Wake(now)
		for _, a := range describe(c.Ready()) {
			if a == "renew [0#1 1#2 2#3 3#4]" {
				c.RenewDone(now, nil, nil, now)
				continue
			}
			require.Equal(t, "heartbeat", a, "at %v", now.Sub(t0))
			sent = append(sent, now.Sub(t0).Round(10*time.Millisecond))
			c.HeartbeatDone(now, oneView, c.Held(), nil, now)
		}
	}
	assert.Equal(t, []time.Duration{2000 * time.Millisecond, 2010 * time.Millisecond, 3250 * time.Millisecond, 4500 * time.Millisecond, 5750 * time.Millisecond}, sent,
		"400 wake-ups within 4 s: two at once, then one per WakeGap")
}

// TestWakeDuringHeartbeat: a Wake while a heartbeat is out asks for
// another after its answer (its reads may predate the change), and so does
// one while that one is out; a third waits for the credit.
func TestWakeDuringHeartbeat(t *testing.T) {
	c := started(t)
	c.Tick(at(5 * time.Second))
	require.Equal(t, []string{"heartbeat", "renew [0#1 1#2 2#3 3#4]"}, describe(c.Ready()))
	c.RenewDone(at(5*time.Second), nil, nil, at(5*time.Second))
	c.Wake(at(5*time.Second + 100*time.Millisecond))
	assert.Empty(t, describe(c.Ready()), "a heartbeat is out: no second one")
	c.HeartbeatDone(at(5*time.Second+200*time.Millisecond), oneView, c.Held(), nil, at(5*time.Second))
	require.Equal(t, []string{"heartbeat"}, describe(c.Ready()), "the wake-up's heartbeat follows the answer")
	c.Wake(at(5*time.Second + 250*time.Millisecond))
	c.HeartbeatDone(at(5*time.Second+300*time.Millisecond), oneView, c.Held(), nil, at(5*time.Second+200*time.Millisecond))
	require.Equal(t, []string{"heartbeat"}, describe(c.Ready()), "the second of the burst")
	c.Wake(at(5*time.Second + 350*time.Millisecond))
	c.HeartbeatDone(at(5*time.Second+400*time.Millisecond), oneView, c.Held(), nil, at(5*time.Second+300*time.Millisecond))
	require.Empty(t, describe(c.Ready()), "the credit is spent")
	next := c.Next()
	assert.Equal(t, 5200*time.Millisecond+c.WakeGap(), next.Sub(t0).Round(time.Millisecond), "the third when the credit refilled to one")
	c.Tick(next)
	assert.Equal(t, []string{"heartbeat"}, describe(c.Ready()))
}

// TestWakeAfterFailedHeartbeat: a Wake during a heartbeat that fails still
// asks for one after the answer, before the RetryPeriod.
func TestWakeAfterFailedHeartbeat(t *testing.T) {
	c := started(t)
	c.Tick(at(5 * time.Second))
	c.Ready()
	c.RenewDone(at(5*time.Second), nil, nil, at(5*time.Second))
	c.Wake(at(5*time.Second + 100*time.Millisecond))
	c.HeartbeatDone(at(5*time.Second+200*time.Millisecond), seqstore.View{}, nil, errDown, at(5*time.Second))
	assert.Equal(t, []string{"heartbeat"}, describe(c.Ready()))
}

// TestWakeIgnoredOnClose: once Close began, a Wake sends nothing.
func TestWakeIgnoredOnClose(t *testing.T) {
	c := started(t)
	c.Close(at(time.Second))
	acts := describe(c.Ready())
	require.Equal(t, []string{"revoke 0", "revoke 1", "revoke 2", "revoke 3"}, acts)
	c.Wake(at(2 * time.Second))
	assert.Empty(t, describe(c.Ready()))
}

// TestWakeAcquiresReleasedShard: the joiner of TestJoinerWaitsForRelease,
// woken by the release of its shard, acquires it at the wake-up's
// heartbeat instead of the next regular one.
func TestWakeAcquiresReleasedShard(t *testing.T) {
	const shards = 16
	two := seqstore.View{Version: 2, Members: []seqstore.Member{memberA, memberB}}
	mine := shard.Assign(two.Members, shards).Shards("b")
	require.NotEmpty(t, mine)
	c := newCore(t, memberB, shards)
	c.Tick(at(0))
	c.Ready()
	var all, rest []seqstore.Lease
	for s := range shards {
		l := seqstore.Lease{Shard: s, Token: uint64(s + 1), Owner: "a-1"}
		all = append(all, l)
		if s != mine[0] {
			rest = append(rest, l)
		}
	}
	c.HeartbeatDone(at(0), two, all, nil, at(0))
	require.Empty(t, describe(c.Ready()))
	c.Wake(at(3 * time.Second)) // a released mine[0]
	require.Equal(t, []string{"heartbeat"}, describe(c.Ready()))
	c.HeartbeatDone(at(3*time.Second), two, rest, nil, at(3*time.Second))
	assert.Equal(t, []string{fmt.Sprintf("acquire [%d]", mine[0])}, describe(c.Ready()), "acquired at 3 s, not at the heartbeat of 5 s")
}

// TestAcquireAnsweredAfterJoinRevokes: a lone member asks for every shard;
// before the Acquire's answer, a heartbeat (woken by a join) reads a view
// that assigns some of them to the joiner. Those are revoked after
// RebalanceDelay, not kept as adopted orphans until the view changes again
// (found by TestHandoverFigures on PostgreSQL: the joiner never got its
// shard).
func TestAcquireAnsweredAfterJoinRevokes(t *testing.T) {
	const shards = 8
	two := seqstore.View{Version: 2, Members: []seqstore.Member{memberA, memberB}}
	theirs := shard.Assign(two.Members, shards).Shards("b")
	require.NotEmpty(t, theirs)
	c := newCore(t, memberA, shards)
	c.Tick(at(0))
	c.Ready()
	c.HeartbeatDone(at(10*time.Millisecond), oneView, nil, nil, at(0))
	require.Equal(t, []string{"acquire [0 1 2 3 4 5 6 7]"}, describe(c.Ready()))
	c.Wake(at(20 * time.Millisecond)) // b joined
	require.Equal(t, []string{"heartbeat"}, describe(c.Ready()))
	c.HeartbeatDone(at(30*time.Millisecond), two, nil, nil, at(20*time.Millisecond))
	require.Empty(t, describe(c.Ready()), "the Acquire is out")
	var all []int
	for s := range shards {
		all = append(all, s)
	}
	c.AcquireDone(at(40*time.Millisecond), leasesOf("a-1", 1, all...), nil, at(10*time.Millisecond))
	require.Len(t, describe(c.Ready()), shards, "every shard started")
	var revoked []string
	for range 10 {
		now, acts := step(t, c, at(5*time.Second))
		for _, a := range acts {
			if strings.HasPrefix(a, "revoke") {
				revoked = append(revoked, fmt.Sprintf("%s at %v", a, now.Sub(t0)))
			}
		}
		if len(revoked) > 0 {
			break
		}
	}
	var want []string
	for _, s := range theirs {
		want = append(want, fmt.Sprintf("revoke %d at %v", s, 40*time.Millisecond+lease.DefaultRebalanceDelay))
	}
	assert.Equal(t, want, revoked, "b's shards revoked RebalanceDelay after the Acquire's answer")
}
