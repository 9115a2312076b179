package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/examples/internal/cmdline"
	"github.com/inorder/inorder/examples/internal/storeurl"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore"
)

// runMember runs receive as one member of a scale-out (-shards): it
// receives the shards -queue-0 .. -queue-{S-1} that it holds leases on in
// the store, shared with the other members, and prints each message, each
// change of its own shards, and who owns which shard whenever that
// changes. It ends after -n messages when -n was given, else at -timeout or
// on SIGINT/SIGTERM, handing its shards over.
func runMember(ctx context.Context, c config, stdout, stderr io.Writer) error {
	qlog, log := cmdline.Loggers(c.verbose, stderr, slog.LevelDebug, c.queue)
	backend, err := c.storeSpec.Open(ctx, &storeurl.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("open the store: %w", err)
	}
	defer func() {
		if err := backend.Close(); err != nil {
			fmt.Fprintln(stderr, "receive: close the store:", err)
		}
	}()
	ls, ok := backend.Store.(seqstore.Leaser)
	if !ok {
		return fmt.Errorf("-store %s holds no leases, which the members of a scale-out share: use redis://, postgres://, mysql:// or sqlite:FILE", backend)
	}

	// The shard queues, created if missing (as command send does for its
	// queue).
	shards := make([]scaleout.Shard, c.shards)
	for i := range shards {
		name := c.queue + "-" + strconv.Itoa(i)
		if err := mnsqueue.CreateQueue(ctx, c.endpoint, c.cred, name, nil); err != nil && !errors.Is(err, mnsqueue.ErrQueueExists) {
			return cmdline.Unreachable(fmt.Errorf("create shard queue %s at %s: %w", name, c.endpoint, err), c.endpoint)
		}
		q, err := mnsqueue.New(ctx, c.endpoint, name, c.cred, &mnsqueue.Options{Logger: log})
		if err != nil {
			return fmt.Errorf("open shard queue %s: %w", name, err)
		}
		defer q.Close()
		shards[i] = scaleout.Shard{Name: name, Queue: q}
	}

	opts := ordered.Options{Name: c.queue, Logger: qlog, Key: c.key}
	if c.key != nil {
		opts.MACContext = c.queue
	}
	if c.lowest {
		opts.Receive.Start = ordered.StartLowest
	}
	opts.Receive.GapTimeout = c.gapTimeout
	if c.gapSkip {
		opts.Receive.GapPolicy = ordered.GapSkip
	}
	var out sync.Mutex // stdout and stderr lines from the receiver's goroutines
	say := func(w io.Writer, format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(w, format+"\n", args...)
	}
	ttl := c.ttl
	r, err := scaleout.NewReceiver(ctx, shards, backend.Store, &scaleout.Options{
		Queue:  opts,
		Member: c.member,
		Lease: scaleout.LeaseOptions{TTL: ttl, RenewEvery: ttl / 3, RetryPeriod: ttl / 6,
			RenewDeadline: ttl * 2 / 3, RebalanceDelay: ttl / 6,
			Balance: 1.25}, // with few shards, plain rendezvous hashing can leave a member idle
		OnChange: func(ch scaleout.Change) { say(stderr, "receive: %s", describeChange(c.member, ch)) },
	})
	if err != nil {
		return err
	}
	say(stderr, "receive: member %s of %s: %d shard queues %s-0..%s-%d; leases in %s, TTL %v",
		c.member, c.queue, c.shards, c.queue, c.queue, c.shards-1, backend, ttl)

	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var got atomic.Int64
	handler := func(_ context.Context, m *ordered.Message) error {
		shard := scaleout.ShardOf(m.Group, c.shards)
		prefix := "receive message"
		if m.Unordered {
			prefix = "receive unordered message"
		}
		if m.Group == "" {
			say(stdout, "%s body is %s (shard %d)", prefix, m.Body, shard)
		} else {
			say(stdout, "%s body is %s (group %s, shard %d)", prefix, m.Body, m.Group, shard)
		}
		if !m.Unordered && got.Add(1) == int64(c.n) && c.nSet {
			cancel()
		}
		return nil
	}
	// Who owns what, from the store: printed when it changes.
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		last := ""
		t := time.NewTicker(min(ttl/6, time.Second))
		defer t.Stop()
		for {
			if leases, err := ls.Leases(rctx, c.queue); err == nil {
				if s := describeOwners(leases, c.shards); s != last {
					last = s
					say(stderr, "receive: owners: %s", s)
				}
			}
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	err = r.Run(rctx, handler)
	<-watched
	say(stderr, "receive: member %s handled %d messages", c.member, got.Load())
	return err
}

// describeChange is a line for a change of this member's shards, worded as
// examples/scaleout prints them.
func describeChange(member string, c scaleout.Change) string {
	switch c.Kind {
	case "start":
		return fmt.Sprintf("%s acquired shard %d (token %d)", member, c.Shard, c.Token)
	case "revoke":
		return fmt.Sprintf("%s hands shard %d over: draining", member, c.Shard)
	case "drained":
		if c.Err != nil {
			return fmt.Sprintf("%s released shard %d, not drained in time: %v", member, c.Shard, c.Err)
		}
		return fmt.Sprintf("%s released shard %d (token %d): drained", member, c.Shard, c.Token)
	case "fence":
		return fmt.Sprintf("%s lost shard %d (token %d): fenced: %v", member, c.Shard, c.Token, c.Err)
	case "error":
		return fmt.Sprintf("%s: %v (it retries)", member, c.Err)
	}
	return fmt.Sprintf("%s: shard %d: %s (token %d) %v", member, c.Shard, c.Kind, c.Token, c.Err)
}

// describeOwners lists the members and their shards, then the shards
// nobody holds: "r1 [0 2], r2 [1 3]; free [4]". A lease's owner is the
// member's incarnation, whose name follows the '#'.
func describeOwners(leases []seqstore.Lease, shards int) string {
	by := map[string][]int{}
	held := make([]bool, shards)
	for _, l := range leases {
		name := l.Owner
		if _, after, ok := strings.Cut(name, "#"); ok {
			name = after
		}
		by[name] = append(by[name], l.Shard)
		if l.Shard >= 0 && l.Shard < shards {
			held[l.Shard] = true
		}
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(by)) {
		s := by[name]
		slices.Sort(s)
		parts = append(parts, fmt.Sprintf("%s %v", name, s))
	}
	var free []int
	for s, h := range held {
		if !h {
			free = append(free, s)
		}
	}
	text := strings.Join(parts, ", ")
	if text == "" {
		text = "none"
	}
	if len(free) > 0 {
		text += fmt.Sprintf("; free %v", free)
	}
	return text
}
