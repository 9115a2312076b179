package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/scaleout"
)

// change is a scaleout.Change of one receiver, with its time.
type change struct {
	at     time.Time
	member string
	scaleout.Change
}

// watch is what the example sees: the receivers' ownership changes, which
// it prints as they come, and every delivery, which it checks.
type watch struct {
	out    io.Writer
	start  time.Time
	shards int
	work   time.Duration

	mu        sync.Mutex
	changes   []change
	last      map[string]map[int]string // member -> shard -> kind of its last change
	done      map[string][]int          // group -> message numbers whose handler finished, in order
	by        map[string][]string       // group -> member of each of them
	first     map[string]map[int]string // group -> message number -> member that finished it first
	open      map[string]string         // group -> member whose handler runs now
	leaseErrs map[string]int            // member -> failed calls to the lease store
	handled   map[string]int            // member -> handlers finished
	// handlers whose ctx was cancelled before they finished (they return
	// the error, which nacks), by the kind of the shard's last change
	interrupted map[string]int
	distinct    int
	overlaps    []string // a group handed out while another receiver's handler ran
	afterFence  []string // a handler that started after its shard was fenced, and finished
	unordered   []string
}

func newWatch(out io.Writer, start time.Time, shards int, work time.Duration) *watch {
	return &watch{out: out, start: start, shards: shards, work: work,
		last: map[string]map[int]string{}, done: map[string][]int{}, by: map[string][]string{},
		first: map[string]map[int]string{}, open: map[string]string{}, handled: map[string]int{},
		interrupted: map[string]int{}}
}

// say prints a line stamped with the time since the start.
func (w *watch) say(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.printf(format, args...)
}

// printf is say with w.mu held.
func (w *watch) printf(format string, args ...any) {
	fmt.Fprintf(w.out, "%5.1fs  %s\n", time.Since(w.start).Seconds(), fmt.Sprintf(format, args...))
}

// onChange is a receiver's Options.OnChange: it records the change and
// prints it (a short write, so it does not block the receiver).
func (w *watch) onChange(member string) func(scaleout.Change) {
	return func(c scaleout.Change) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.changes = append(w.changes, change{at: time.Now(), member: member, Change: c})
		if w.last[member] == nil {
			w.last[member] = map[int]string{}
		}
		if c.Kind == "error" { // a failed call to the lease store: the keeper retries
			if w.leaseErrs == nil {
				w.leaseErrs = map[string]int{}
			}
			if w.leaseErrs[member]++; w.leaseErrs[member] == 1 {
				w.printf("%s: %v (it retries; its further lease errors are not shown)", member, c.Err)
			}
			return
		}
		w.last[member][c.Shard] = c.Kind
		switch c.Kind {
		case "start":
			w.printf("%s acquired shard %d (token %d)", member, c.Shard, c.Token)
		case "revoke":
			w.printf("%s hands shard %d over: draining", member, c.Shard)
		case "drained":
			if c.Err != nil {
				w.printf("%s released shard %d, not drained in time: %v", member, c.Shard, c.Err)
			} else {
				w.printf("%s released shard %d (token %d): drained", member, c.Shard, c.Token)
			}
		case "fence":
			w.printf("%s lost shard %d (token %d): fenced: %v", member, c.Shard, c.Token, c.Err)
		default:
			w.printf("%s: shard %d: %s (token %d) %v", member, c.Shard, c.Kind, c.Token, c.Err)
		}
	}
}

// handler is the receivers' handler: it takes w.work (or less when its ctx
// is cancelled, which it honours as a real handler would) and records the
// message's number, from its body, once it finished.
func (w *watch) handler(member string) ordered.Handler {
	return func(ctx context.Context, m *ordered.Message) error {
		n, err := strconv.Atoi(string(m.Body))
		if err != nil {
			return fmt.Errorf("body %q: %w", m.Body, err)
		}
		w.mu.Lock()
		if other, busy := w.open[m.Group]; busy {
			w.overlaps = append(w.overlaps, fmt.Sprintf("%s handed out %s #%d while %s handled the group", member, m.Group, n, other))
		}
		w.open[m.Group] = member
		shard := scaleout.ShardOf(m.Group, w.shards)
		lost := w.last[member][shard] == "fence"
		if m.Unordered {
			w.unordered = append(w.unordered, fmt.Sprintf("%s #%d by %s", m.Group, n, member))
		}
		w.mu.Unlock()

		t := time.NewTimer(w.work)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}

		w.mu.Lock()
		defer w.mu.Unlock()
		if w.open[m.Group] == member {
			delete(w.open, m.Group)
		}
		if ctx.Err() != nil {
			w.interrupted[w.last[member][shard]]++
			return ctx.Err()
		}
		if lost {
			w.afterFence = append(w.afterFence, fmt.Sprintf("%s handled %s #%d of shard %d after it lost the shard", member, m.Group, n, shard))
		}
		w.done[m.Group] = append(w.done[m.Group], n)
		w.by[m.Group] = append(w.by[m.Group], member)
		w.handled[member]++
		if w.first[m.Group] == nil {
			w.first[m.Group] = map[int]string{}
		}
		if _, again := w.first[m.Group][n]; !again {
			w.first[m.Group][n] = member
			w.distinct++
		}
		return nil
	}
}

// progress returns how many distinct messages were handled.
func (w *watch) progress() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.distinct
}

// table prints who owns each shard and how many messages each receiver
// handled (repeats included). notes label receivers ("cut", "stopped").
func (w *watch) table(rs []*receiver, total int) {
	owner := make([]string, w.shards)
	for i := range owner {
		owner[i] = "--"
	}
	for _, r := range rs {
		for s := range r.r.Owned() {
			if owner[s] != "--" {
				owner[s] = "!!" // two at once: the check at the end says more
				continue
			}
			owner[s] = r.name
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var head, own strings.Builder
	for s := range w.shards {
		fmt.Fprintf(&head, " %3d", s)
		fmt.Fprintf(&own, " %3s", owner[s])
	}
	var counts []string
	for _, r := range rs {
		c := fmt.Sprintf("%s %d", r.name, w.handled[r.name])
		if r.note != "" {
			c += " (" + r.note + ")"
		}
		counts = append(counts, c)
	}
	w.printf("shard%s", head.String())
	fmt.Fprintf(w.out, "        owner%s   handled: %s; %d of %d\n", own.String(), strings.Join(counts, ", "), w.distinct, total)
}

// movedAt returns when the last of shards was started by a member other
// than from, after since; ok is false while one of them was not.
func (w *watch) movedAt(shards []int, from string, since time.Time) (last time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range shards {
		i := slices.IndexFunc(w.changes, func(c change) bool {
			return c.Kind == "start" && c.Shard == s && c.member != from && !c.at.Before(since)
		})
		if i < 0 {
			return time.Time{}, false
		}
		if at := w.changes[i].at; at.After(last) {
			last = at
		}
	}
	return last, true
}

// lastOf returns when member's last change of kind on one of shards came
// after since.
func (w *watch) lastOf(member, kind string, shards []int, since time.Time) (last time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.changes {
		if c.member == member && c.Kind == kind && slices.Contains(shards, c.Shard) && !c.at.Before(since) {
			if c.at.After(last) {
				last = c.at
			}
			ok = true
		}
	}
	return last, ok
}

// verdict is the check at the end.
type verdict struct {
	deliveries, repeats int
	repeatsBy           map[string]int // member that had handled the message first
	problems            []string
}

// check checks that each group's messages 1..n were handled in order: the
// first time each number is handled, it is the next one; a number handled
// again must be an earlier one (at-least-once), and only after the receiver
// that handled it first lost the shard (fenced): a shard handed over on
// purpose is drained, so it repeats nothing.
func (w *watch) check(groups []string, n int) verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := verdict{repeatsBy: map[string]int{}}
	fenced := map[string]map[int]bool{}
	for _, c := range w.changes {
		if c.Kind == "fence" {
			if fenced[c.member] == nil {
				fenced[c.member] = map[int]bool{}
			}
			fenced[c.member][c.Shard] = true
		}
	}
	for _, g := range groups {
		next := 1
		for i, k := range w.done[g] {
			v.deliveries++
			switch {
			case k == next:
				next++
			case k < next:
				v.repeats++
				firstBy := w.first[g][k]
				v.repeatsBy[firstBy]++
				if !fenced[firstBy][scaleout.ShardOf(g, w.shards)] {
					v.problems = append(v.problems, fmt.Sprintf("%s #%d handled again by %s, although %s, which handled it first, never lost shard %d",
						g, k, w.by[g][i], firstBy, scaleout.ShardOf(g, w.shards)))
				}
			default:
				v.problems = append(v.problems, fmt.Sprintf("%s #%d handled by %s while #%d was due", g, k, w.by[g][i], next))
			}
		}
		if next != n+1 {
			v.problems = append(v.problems, fmt.Sprintf("%s: handled up to #%d of %d", g, next-1, n))
		}
	}
	v.problems = append(v.problems, w.overlaps...)
	v.problems = append(v.problems, w.afterFence...)
	for _, u := range w.unordered {
		v.problems = append(v.problems, u+" handed out flagged Unordered")
	}
	return v
}
