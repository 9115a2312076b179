package mnstest_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// Each fault knob is driven by one sequential scenario that returns a
// fingerprint of what fired. Two servers with the same seed must produce the
// same fingerprint; another seed a different one.

func checkSeeded(t *testing.T, scenario func(t *testing.T, seed int64) string) {
	t.Helper()
	a := scenario(t, 11)
	b := scenario(t, 11)
	c := scenario(t, 12)
	assert.Equal(t, a, b, "same seed, same faults")
	assert.NotEqual(t, a, c, "another seed, other faults")
}

func TestFaultError5xx(t *testing.T) {
	const n = 120
	checkSeeded(t, func(t *testing.T, seed int64) string {
		srv := newServer(t, &mnstest.Options{Seed: seed, Faults: mnstest.Faults{Error5xx: 0.3}})
		name, q := newQueue(t, srv, nil)
		pattern := make([]byte, n)
		failed := 0
		for i := range n {
			_, err := q.SendMessage(msg(strconv.Itoa(i)))
			pattern[i] = '.'
			if err != nil {
				require.Equal(t, uint64(codeInternal), mnsCode(err), "send %d: only InternalError is injected, got %v", i, err)
				pattern[i] = 'x'
				failed++
			}
		}
		assert.InDelta(t, 0.3*n, failed, 0.15*n, "about 30%% of %d sends fail, got %d", n, failed)
		st := srv.Stats()
		assert.EqualValues(t, failed, st.Errors5xx)
		info, err := srv.Queue(name)
		require.NoError(t, err)
		assert.Greater(t, info.Active, n-failed, "some failed sends were applied before the 500")
		assert.Less(t, info.Active, n, "some failed sends were not applied")
		return string(pattern)
	})
}

func TestFaultError5xxPartialBatch(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Faults: mnstest.Faults{Error5xx: 1}})
	_, q := newQueue(t, srv, nil)
	partial := 0
	for range 40 {
		resp, err := q.BatchSendMessage(msgs("p", 8)...)
		require.Error(t, err)
		switch mnsCode(err) {
		case codeInternal:
		case codeBatchOpFail:
			partial++
			failed := 0
			for _, m := range resp.Messages {
				if m.ErrorCode != "" {
					assert.Equal(t, "InternalError", m.ErrorCode)
					failed++
				} else {
					assert.NotEmpty(t, m.MessageId)
				}
			}
			assert.Positive(t, failed, "a partial failure fails at least one entry")
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	assert.Positive(t, partial, "some batch sends fail partially")
}

func TestFaultDrop(t *testing.T) {
	checkSeeded(t, func(t *testing.T, seed int64) string {
		srv := newServer(t, &mnstest.Options{Seed: seed, Faults: mnstest.Faults{Drop: 0.3}})
		name, q := newQueue(t, srv, nil)
		ok := 0
		for i := range 60 {
			// The SDK's fasthttp client (v1.78) does not repeat a POST
			// whose connection closed before any answer: a drop before
			// the send took effect loses it, a drop after stores it
			// although the client saw an error.
			if _, err := q.SendMessage(msg(strconv.Itoa(i))); err == nil {
				ok++
			}
		}
		st := srv.Stats()
		assert.Positive(t, st.Drops, "connections dropped")
		info, err := srv.Queue(name)
		require.NoError(t, err)
		assert.Greater(t, info.Active, ok, "sends dropped after they took effect are stored although they failed")
		assert.Less(t, info.Active, 60, "sends dropped before they took effect are lost (no client retry of a POST)")
		return fmt.Sprintf("drops=%d ok=%d stored=%d", st.Drops, ok, info.Active)
	})
}

func TestFaultLatency(t *testing.T) {
	// Margins are wide: the check is that latency is added where it should
	// be, on a machine that may be busy with other tests.
	srv := newServer(t, &mnstest.Options{Faults: mnstest.Faults{Latency: 150 * time.Millisecond, Jitter: 50 * time.Millisecond}})
	name, q := newQueue(t, srv, nil)
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	start := time.Now()
	_, err := mgr.GetQueueAttributes(name)
	require.NoError(t, err)
	assert.Less(t, since(start), 120*time.Millisecond, "queue management is not delayed")
	start = time.Now()
	for i := range 4 {
		_, err := q.SendMessage(msg(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	took := since(start)
	assert.GreaterOrEqual(t, took, 600*time.Millisecond, "4 sends with at least 150 ms latency each")
	assert.Less(t, took, 2*time.Second, "at most 200 ms each plus overhead")
	require.NoError(t, srv.SetFaults(mnstest.Faults{}))
	start = time.Now()
	_, err = q.SendMessage(msg("fast"))
	require.NoError(t, err)
	assert.Less(t, since(start), 120*time.Millisecond, "SetFaults removed the latency")
	assert.Error(t, srv.SetFaults(mnstest.Faults{Drop: 2}), "probability over 1 rejected")
}

func TestFaultLoss(t *testing.T) {
	const n = 160
	checkSeeded(t, func(t *testing.T, seed int64) string {
		srv := newServer(t, &mnstest.Options{Seed: seed, Faults: mnstest.Faults{LoseAckedSends: 0.25}})
		_, q := newQueue(t, srv, nil)
		for i := 0; i < n; i += 16 {
			batch := make([]ali_mns.MessageSendRequest, 16)
			for j := range batch {
				batch[j] = msg(strconv.Itoa(i + j))
			}
			_, err := q.BatchSendMessage(batch...)
			require.NoError(t, err, "lost messages are still acknowledged")
		}
		got := make([]byte, n)
		for i := range got {
			got[i] = 'x'
		}
		received := 0
		for {
			ms, err := batchReceive(q, 16) // short poll: the queue is drained
			if mnsCode(err) == codeMessageNotExist {
				break
			}
			require.NoError(t, err)
			for _, m := range ms {
				v, err := strconv.Atoi(m.MessageBody)
				require.NoError(t, err)
				got[v] = '.'
				received++
			}
		}
		st := srv.Stats()
		assert.EqualValues(t, n, int64(received)+st.LostAckedSends, "every message either received or lost")
		assert.InDelta(t, 0.25*n, st.LostAckedSends, 0.12*n, "about a quarter lost")
		return string(got)
	})
}

func TestFaultRedeliver(t *testing.T) {
	const rounds = 4
	checkSeeded(t, func(t *testing.T, seed int64) string {
		srv := newServer(t, &mnstest.Options{Seed: seed, Shards: 1, Faults: mnstest.Faults{Redeliver: 0.5}})
		var pattern []byte
		cuts := 0
		for range rounds {
			require.NoError(t, srv.SetFaults(mnstest.Faults{Redeliver: 0.5}))
			_, q := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 60})
			_, err := q.BatchSendMessage(msgs("", 16)...)
			require.NoError(t, err)
			// One request receives all 16, so the fault draws are the same
			// whatever the timing.
			ms, err := batchReceive(q, 16, 1)
			require.NoError(t, err)
			require.Len(t, ms, 16)
			cut := map[string]string{}
			for _, m := range ms {
				if m.NextVisibleTime-m.FirstDequeueTime < 60_000 {
					cut[m.MessageBody] = m.ReceiptHandle
					pattern = append(pattern, 'r')
				} else {
					pattern = append(pattern, '.')
				}
			}
			cuts += len(cut)
			// Cut-short visibilities end within a second; the rest last 60 s.
			// No more cuts while the redeliveries are collected.
			require.NoError(t, srv.SetFaults(mnstest.Faults{}))
			srv.Advance(time.Second)
			again := map[string]bool{}
			for {
				ms, err := batchReceive(q, 16) // short poll: the queue is drained
				if mnsCode(err) == codeMessageNotExist {
					break
				}
				require.NoError(t, err)
				for _, m := range ms {
					again[m.MessageBody] = true
					assert.EqualValues(t, 2, m.DequeueCount)
					requireCode(t, codeMessageNotExist, q.DeleteMessage(cut[m.MessageBody]),
						"the first handle of a redelivered message")
				}
			}
			assert.Len(t, again, len(cut), "exactly the messages cut short came again")
			for b := range cut {
				assert.True(t, again[b], "message %s was cut short but not redelivered", b)
			}
		}
		assert.InDelta(t, rounds*8, cuts, rounds*4, "about half cut short")
		assert.EqualValues(t, cuts, srv.Stats().Redelivered)
		return string(pattern)
	})
}

func TestFaultEarlyEmpty(t *testing.T) {
	const n = 80
	checkSeeded(t, func(t *testing.T, seed int64) string {
		srv := newServer(t, &mnstest.Options{Seed: seed, Faults: mnstest.Faults{EarlyEmpty: 0.4}})
		_, q := newQueue(t, srv, nil)
		_, err := q.SendMessage(msg("always-there"))
		require.NoError(t, err)
		pattern := make([]byte, n)
		empty := 0
		start := time.Now()
		for i := range pattern {
			// A 5 s long poll on a queue with a visible message: only the
			// fault can make it come back empty, and then at once.
			m, err := receive(q, 5)
			pattern[i] = '.'
			if err != nil {
				requireCode(t, codeMessageNotExist, err, "early empty receive")
				pattern[i] = 'e'
				empty++
				continue
			}
			_, err = q.ChangeMessageVisibility(m.ReceiptHandle, 1)
			require.NoError(t, err)
			srv.Advance(time.Second)
		}
		assert.Less(t, since(start), 5*time.Second, "empty answers come at once")
		assert.InDelta(t, 0.4*n, empty, 0.2*n, "about 40%% empty, got %d of %d", empty, n)
		assert.EqualValues(t, empty, srv.Stats().EarlyEmpty)
		return string(pattern)
	})
}
