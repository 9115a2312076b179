package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckerGrouped: a raw FIFO delivery must come back in the group it
// was sent to, and each producer's messages to a group in sending order;
// producers interleave freely, and a redelivery is counted, not a fault.
func TestCheckerGrouped(t *testing.T) {
	body := func(id, g, p int, count uint64) []byte {
		b := make([]byte, minPayload)
		stamp{id: uint64(id), group: uint32(g), producer: uint32(p), count: count}.put(b)
		return b
	}
	c := newChecker(4, 2, 2)
	c.grouped("g0000", body(0, 0, 1, 1))
	c.grouped("g0000", body(1, 0, 0, 1)) // another producer's first: any interleaving
	c.grouped("g0000", body(1, 0, 0, 1)) // the head again
	c.grouped("g0001", body(2, 1, 0, 1))
	c.grouped("g0000", body(3, 0, 1, 2))
	require.NoError(t, c.err())
	assert.Equal(t, int64(4), c.delivered.Load())
	assert.Equal(t, int64(1), c.dups.Load())

	for _, tc := range []struct {
		name string
		run  func(c *checker)
		want string
	}{
		{"producer order", func(c *checker) {
			c.grouped("g0000", body(1, 0, 0, 2))
			c.grouped("g0000", body(0, 0, 0, 1))
		}, "producer 0's message #2 delivered after its #0"},
		{"wrong group", func(c *checker) { c.grouped("g0001", body(0, 0, 0, 1)) }, `sent to group "g0000" delivered as group "g0001"`},
		{"no stamp", func(c *checker) { c.grouped("g0000", []byte("short")) }, "carries no stamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChecker(4, 2, 2)
			tc.run(c)
			require.ErrorContains(t, c.err(), tc.want)
		})
	}
}

// TestRunFIFO runs the FIFO rows and their standard-queue counterparts with
// a few messages: every row delivers every message (each group in order,
// checked by the checker, or the row fails), and reports its requests per
// message by kind.
func TestRunFIFO(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real scenarios")
	}
	const messages = 800 // emulator rows: 200; one FIFO group: 20
	c := &config{
		json: true, count: 1, messages: messages, producers: 2, consumers: 2, size: 64, backlog: 1000, window: 8192,
		timeout: 60 * time.Second, quick: true,
		scenario: `^(ordered/emulator(-fifo)?/memstore/durable/g1(000)?|raw/emulator-fifo/g1(000)?)$`,
	}
	var out, progress bytes.Buffer
	ok, err := run(context.Background(), c, &out, &progress)
	require.NoError(t, err, "progress:\n%s", progress.String())
	require.True(t, ok, "every scenario must pass; progress:\n%s", progress.String())
	var doc struct {
		Results []struct {
			Name     string   `json:"scenario"`
			Messages int      `json:"messages"`
			Rate     float64  `json:"msgs_per_s"`
			Ratio    float64  `json:"ratio"`
			Base     string   `json:"base"`
			Failed   string   `json:"failed"`
			Reqs     float64  `json:"queue_requests_per_msg"`
			ByKind   reqKinds `json:"queue_requests_per_msg_by_kind"`
			Notes    string   `json:"notes"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc), "JSON output:\n%s", out.String())
	var names []string
	for _, r := range doc.Results {
		names = append(names, r.Name)
		require.Empty(t, r.Failed, "%s failed", r.Name)
		want := messages / 4
		if strings.Contains(r.Name, "/emulator-fifo/") && strings.HasSuffix(r.Name, "/g1") {
			want /= fifoHotDivisor
		}
		assert.Equal(t, want, r.Messages, "%s: messages delivered", r.Name)
		assert.Positive(t, r.Rate, "%s: msgs/s", r.Name)
		assert.Positive(t, r.Reqs, "%s: requests per message", r.Name)
		assert.Positive(t, r.ByKind.Send, "%s: sends per message", r.Name)
		assert.Positive(t, r.ByKind.Receive, "%s: receives per message", r.Name)
		assert.Positive(t, r.ByKind.Delete, "%s: deletes per message", r.Name)
		assert.GreaterOrEqual(t, r.ByKind.Visibility, 0.0, "%s: visibility changes per message", r.Name)
		assert.LessOrEqual(t, r.ByKind.Send+r.ByKind.Receive+r.ByKind.Delete+r.ByKind.Visibility, r.Reqs+1e-9,
			"%s: the kinds add up to at most the total", r.Name)
		assert.Contains(t, r.Notes, "send/receive/delete/visibility per msg", "%s: the notes print the kinds", r.Name)
		if strings.HasPrefix(r.Name, "ordered/") {
			assert.Positive(t, r.Ratio, "%s: ratio to its raw base", r.Name)
		}
		if strings.HasPrefix(r.Name, "raw/emulator-fifo/") {
			assert.Contains(t, r.Notes, fmt.Sprintf("0 of %d deliveries out of per-group order", r.Messages),
				"%s: the service's own order was checked", r.Name)
		}
	}
	assert.Equal(t, []string{
		"raw/emulator/g1", "raw/emulator/g1000", "floor/emulator/memstore/g1", "floor/emulator/memstore/g1000",
		"ordered/emulator/memstore/durable/g1", "ordered/emulator/memstore/durable/g1000",
		"raw/emulator-fifo/g1", "ordered/emulator-fifo/memstore/durable/g1",
		"raw/emulator-fifo/g1000", "ordered/emulator-fifo/memstore/durable/g1000",
	}, names, "selected scenarios and their bases and floors, in order")
	for _, r := range doc.Results {
		if r.Name == "raw/emulator-fifo/g1" {
			// One group, one message in flight: each receive hands out at
			// most one message, and each message is deleted on its own (the
			// last deletes can be cut short when the run ends at the last
			// delivery: one per consumer).
			assert.GreaterOrEqual(t, r.ByKind.Receive, 1.0, "raw FIFO, one group: receives per message")
			assert.GreaterOrEqual(t, r.ByKind.Delete*float64(r.Messages), float64(r.Messages-c.consumers), "raw FIFO, one group: deletes")
		}
	}
}

// TestRunFIFOCommitInterval: -commit-interval reaches the receiver (-1: no
// commit delay, which ordered.New accepts) and the hot FIFO row still
// delivers every message in order.
func TestRunFIFOCommitInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real scenarios")
	}
	c := &config{
		json: true, count: 1, messages: 800, producers: 2, consumers: 2, size: 64, backlog: 1000,
		timeout: 60 * time.Second, quick: true, commitInterval: -1,
		scenario: `^ordered/emulator-fifo/memstore/durable/g1$`,
	}
	var out, progress bytes.Buffer
	ok, err := run(context.Background(), c, &out, &progress)
	require.NoError(t, err, "progress:\n%s", progress.String())
	require.True(t, ok, "every scenario must pass; progress:\n%s", progress.String())
	assert.Contains(t, out.String(), `"scenario": "ordered/emulator-fifo/memstore/durable/g1"`)

	c.commitInterval = -2 * time.Millisecond // refused by ordered.New: the row fails
	c.scenario = `^ordered/emulator/memstore/durable/g1$`
	ok, err = run(context.Background(), c, &bytes.Buffer{}, &progress)
	require.NoError(t, err)
	assert.False(t, ok, "a CommitInterval the receiver refuses fails the row: the flag reaches it")
}
