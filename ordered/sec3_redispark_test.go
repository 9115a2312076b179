package ordered_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/redisstore"
)

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
