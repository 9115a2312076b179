package backendtest_test

// Whoever can write the store's Redis, without the key, must not get a
// message handed out as ordered (issue 21): the send journal is no signing
// oracle, a parked body rewritten in Redis is checked against its MAC
// again, and a corrupt stored cursor stops its group. Moved from package
// ordered's sec3 tests, which hold the same checks without Redis.

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/redisstore"
)

// Whoever can write the sender's Redis, without the key, plants a journal
// entry in a new stream at epoch MaxNumber. Before, recovery (New) signed
// and sent it, and a keyed receiver handed it out as ordered seq 1 of group
// "admin"; now recovery refuses it, logs it and counts it.
func TestSec3JournalSigningOracle(t *testing.T) {
	ctx := context.Background()
	c, prefix := sec3Redis(t)
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	newSender := func() *ordered.Queue {
		s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		q, err := ordered.New(ctx, drv, s, &ordered.Options{Name: "q", Key: sec3Key})
		require.NoError(t, err)
		return q
	}
	snd := newSender()
	require.NoError(t, snd.Send(ctx, "acct", []byte("real-1")))
	rxClose(t, snd)

	stream := prefix + "{q/admin}"
	for _, epoch := range []uint64{envelope.MaxNumber, seqstore.NewEpoch(time.Now())} {
		require.NoError(t, c.HSet(ctx, stream+":send", "epoch", strconv.FormatUint(epoch, 10), "last", "1").Err())
		require.NoError(t, c.HSet(ctx, stream+":journal", "1", "grant admin to mallory").Err())
		require.NoError(t, c.SAdd(ctx, prefix+"pending:{q}", "q/admin").Err())

		snd = newSender() // New recovers the journal
		n, err := snd.Recover(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "a planted entry is not sent")
		assert.Equal(t, int64(2), snd.Stats().Send.Tampered, "refused by New's recovery and by Recover")
		rxClose(t, snd)
	}

	rx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "q", Key: sec3Key,
		Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, Untagged: ordered.UntaggedDeliver}})
	require.NoError(t, err)
	var g sec3Got
	sec3Run(t, rx, &g)
	out := g.wait(t, 2, time.Second)
	t.Logf("receiver with Key handed out:%s", sec3Dump(out))
	require.Len(t, out, 1, "only the real message")
	assert.Equal(t, "real-1", string(out[0].Body))
	assert.False(t, out[0].Unordered)
}

// The MAC is checked again when a parked body is read back: whoever can
// write Redis rewrites a parked body (its CRC-32C is unkeyed); the receiver,
// with Options.Key set, must not hand the new payload out as ordered.
func TestSec3RedisParkTamper(t *testing.T) {
	ctx := context.Background()
	c, prefix := sec3Redis(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "q", Key: key})
	require.NoError(t, err)
	for i := 1; i <= 4; i++ {
		require.NoError(t, sender.Send(ctx, "g", []byte("pay 10 to alice #"+strconv.Itoa(i))))
	}
	rxClose(t, sender)
	var first []byte
	var rest [][]byte
	for i := 0; i < 100; i++ {
		ms, err := drv.ReceiveBatch(ctx, 16, 50*time.Millisecond)
		require.NoError(t, err)
		for _, m := range ms {
			h, _, _ := envelope.Parse(m.Body)
			if h.Seq == 1 {
				first = m.Body
			} else {
				rest = append(rest, m.Body)
			}
			require.NoError(t, drv.DeleteBatch(ctx, []string{m.Receipt}))
		}
		if first != nil && len(rest) == 3 {
			break
		}
	}
	require.NoError(t, drv.SendBatch(ctx, rest))
	store, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	rx, err := ordered.New(ctx, drv, store, &ordered.Options{Name: "q", Key: key,
		Receive: ordered.ReceiveOptions{Wait: 50 * time.Millisecond, Window: 1, MaxUndeleted: 2}})
	require.NoError(t, err)
	var g sec3Got
	sec3Run(t, rx, &g)
	deadline := time.Now().Add(5 * time.Second)
	for rx.Stats().Receive.Parked < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// The attacker with Redis access rewrites every parked body.
	bodiesKey := prefix + "{q/g}:parkbody"
	vals, err := c.HGetAll(ctx, bodiesKey).Result()
	require.NoError(t, err)
	t.Logf("parked in %s: %d entries", bodiesKey, len(vals))
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for member, v := range vals {
		var epoch, seq uint64
		fmt.Sscanf(member, "%d:%d", &epoch, &seq)
		h, _, ok := envelope.Parse([]byte(v[4:]))
		require.True(t, ok)
		body := envelope.Append(nil, h, []byte("pay 9999 to mallory"))
		var num [17]byte
		binary.BigEndian.PutUint64(num[1:], epoch)
		binary.BigEndian.PutUint64(num[9:], seq)
		crc := crc32.Update(0, castagnoli, []byte("q/g"))
		crc = crc32.Update(crc, castagnoli, num[:])
		crc = crc32.Update(crc, castagnoli, body)
		nv := make([]byte, 4+len(body))
		binary.BigEndian.PutUint32(nv, crc)
		copy(nv[4:], body)
		require.NoError(t, c.HSet(ctx, bodiesKey, member, nv).Err())
	}
	require.NoError(t, drv.SendBatch(ctx, [][]byte{first}))
	out := g.wait(t, 4, 5*time.Second)
	t.Logf("handed out:%s", sec3Dump(out))
	for _, m := range out {
		if string(m.Body) == "pay 9999 to mallory" && !m.Unordered {
			t.Errorf("payload rewritten in Redis handed out as ordered seq %d with Options.Key set", m.Seq)
		}
	}
}

// A corrupt stored cursor (a Redis field overwritten) stops its group and
// reports it stuck; it is never read as "no cursor".
func TestSec3CorruptCursorRedis(t *testing.T) {
	ctx := context.Background()
	c, prefix := sec3Redis(t)
	drv := memqueue.New(&memqueue.Options{Shards: 1})
	newStore := func() seqstore.Store {
		s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		return s
	}
	sender, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: "q"})
	require.NoError(t, err)
	defer rxClose(t, sender)
	for i := 1; i <= 3; i++ {
		require.NoError(t, sender.Send(ctx, "g", []byte("m"+strconv.Itoa(i))))
		require.NoError(t, sender.Send(ctx, "h", []byte("m"+strconv.Itoa(i))))
	}
	rx, err := ordered.New(ctx, drv, newStore(), &ordered.Options{Name: "q", Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond, SyncAck: true}})
	require.NoError(t, err)
	var g1 sec3Got
	ctx1, cancel1 := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = rx.Run(ctx1, g1.handler) }()
	require.Len(t, g1.wait(t, 6, 5*time.Second), 6)
	cancel1()
	<-done
	rxClose(t, rx)
	require.NoError(t, c.HSet(ctx, prefix+"{q/g}:cursor", "next", "garbage").Err())
	for i := 4; i <= 5; i++ {
		require.NoError(t, sender.Send(ctx, "g", []byte("m"+strconv.Itoa(i))))
		require.NoError(t, sender.Send(ctx, "h", []byte("m"+strconv.Itoa(i))))
	}
	var mu sync.Mutex
	var stuck []ordered.Event
	rx2, err := ordered.New(ctx, drv, newStore(), &ordered.Options{Name: "q",
		Hooks:   ordered.Hooks{OnStuck: func(e ordered.Event) { mu.Lock(); stuck = append(stuck, e); mu.Unlock() }},
		Receive: ordered.ReceiveOptions{Wait: 20 * time.Millisecond}})
	require.NoError(t, err)
	var g2 sec3Got
	sec3Run(t, rx2, &g2)
	g2.wait(t, 2, 5*time.Second)
	time.Sleep(200 * time.Millisecond) // anything of g would show now
	out := g2.wait(t, 3, 0)
	require.Len(t, out, 2, "h's two new messages only:%s", sec3Dump(out))
	for _, m := range out {
		assert.Equal(t, "h", m.Group, "a group with a corrupt cursor must not deliver")
	}
	assert.NotEmpty(t, rx2.Stats().Receive.Stuck, "the group is reported stuck")
	mu.Lock()
	assert.NotEmpty(t, stuck, "OnStuck")
	mu.Unlock()
}
