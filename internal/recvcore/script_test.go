package recvcore_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the scripts in testdata")

// TestScripts runs the scripts in testdata/*.txt: each step is a command
// (an event for the Core, or the outcome of an action it asked for), then
// "----", then what the Core did: its groups' phase changes, the actions of
// its next Ready, the reports and resolutions, and for "next" the hand-out.
// They show each rule of the receive side as an example, in the manner of
// etcd raft's interaction tests. A small world answers what a command does
// not spell out: the store's cursors and park (which commits and parks
// update), and "stabilize" answers every action outstanding, as the world
// would, until none is left. go test -run TestScripts -rewrite regenerates
// the expected output; review the diff.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type script struct {
	t        *testing.T
	cfg      recvcore.Config
	core     *recvcore.Core
	now      time.Time
	receipts int
	out      []recvcore.Delivery
	reads    []recvcore.Read
	commits  []recvcore.Commit
	deletes  []recvcore.Delete
	parks    []recvcore.Park
	unparks  []recvcore.Unpark
	deads    []recvcore.DeadLetter
	vis      []recvcore.ChangeVisibility
	scans    []recvcore.Scan
	requeues []recvcore.Requeue
	trace    strings.Builder // phase changes since the last output

	// the world: the store's cursors and parked bodies
	cursors map[string]seqstore.Cursor
	park    map[string]map[uint64]seqstore.Parked // group -> seq -> entry
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	blocks := strings.Split(string(data), "\n\n")
	var rewritten []string
	s := &script{t: t, now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		cursors: map[string]seqstore.Cursor{}, park: map[string]map[uint64]seqstore.Parked{}}
	for _, block := range blocks {
		block = strings.TrimRight(block, "\n")
		if strings.TrimSpace(block) == "" {
			continue
		}
		cmd, want, _ := strings.Cut(block, "\n----")
		want = strings.TrimPrefix(want, "\n")
		var got strings.Builder
		for _, line := range strings.Split(cmd, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			out := s.do(line)
			got.WriteString(s.trace.String())
			s.trace.Reset()
			got.WriteString(out)
			if s.core != nil {
				got.WriteString(s.ready())
			}
		}
		if *rewrite {
			rewritten = append(rewritten, strings.TrimRight(cmd+"\n----\n"+got.String(), "\n"))
			continue
		}
		require.Equal(t, strings.TrimRight(want, "\n"), strings.TrimRight(got.String(), "\n"), "%s: after\n%s", path, cmd)
	}
	if *rewrite {
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(rewritten, "\n\n")+"\n"), 0o644))
	}
}

func (s *script) ready() string {
	rd := s.core.Ready(s.now)
	s.reads = append(s.reads, rd.Reads...)
	s.commits = append(s.commits, rd.Commits...)
	s.deletes = append(s.deletes, rd.Deletes...)
	s.parks = append(s.parks, rd.Parks...)
	s.unparks = append(s.unparks, rd.Unparks...)
	s.deads = append(s.deads, rd.DeadLetters...)
	s.vis = append(s.vis, rd.Visibility...)
	s.scans = append(s.scans, rd.Scans...)
	s.requeues = append(s.requeues, rd.Requeues...)
	for _, r := range rd.Resolved {
		for i := range s.out {
			if s.out[i].Await == r.Ticket && r.Err == nil {
				s.out[i].Await = 0
			}
		}
	}
	// The scripts run within one visibility timeout, with extension off:
	// the visibility changes they show shorten a message's visibility (a
	// release, or Close giving back what it holds).
	return describe(rd)
}

func (s *script) do(line string) string {
	f := strings.Fields(line)
	args := f[1:]
	pending := map[string]int{"read": len(s.reads), "commit": len(s.commits), "delete": len(s.deletes),
		"park": len(s.parks), "unpark": len(s.unparks), "dead-letter": len(s.deads), "requeue": len(s.requeues)}
	if n, ok := pending[f[0]]; ok && n == 0 {
		return f[0] + ": nothing pending\n"
	}
	switch f[0] {
	case "config":
		s.config(args)
		return ""
	case "arrive":
		var in []recvcore.Incoming
		for _, a := range args {
			// group/epoch/seq*n: received n times already (its dequeue
			// count); group/epoch/seq@x: another queue message with that
			// body (a duplicate send), its id suffixed with x.
			a, n, _ := strings.Cut(a, "*")
			dequeue, _ := strconv.Atoi(n)
			id := "id-" + a
			a, _, _ = strings.Cut(a, "@")
			s.receipts++
			in = append(in, recvcore.Incoming{Body: body(a), ID: id, Receipt: fmt.Sprintf("r%d", s.receipts), DequeueCount: max(dequeue, 1)})
		}
		s.core.Arrive(s.now, in)
		return ""
	case "next":
		d, ok := s.core.Next(s.now)
		if !ok {
			return "next: none\n"
		}
		s.out = append(s.out, d)
		return "next: " + delivery(d) + "\n"
	case "ack", "ack-sync", "nack", "abandon":
		d := s.find(args[0])
		if d == nil {
			return f[0] + ": no delivery " + args[0] + "\n"
		}
		var err error
		var tk recvcore.Ticket
		switch f[0] {
		case "ack":
			_, err = s.core.Ack(s.now, d, false)
		case "ack-sync":
			tk, err = s.core.Ack(s.now, d, true)
		case "nack":
			err = s.core.Nack(s.now, d, errors.New("handler failed"))
		case "abandon":
			err = s.core.Abandon(s.now, d)
		}
		if err != nil {
			return fmt.Sprintf("%s: %v\n", f[0], err)
		}
		if tk != 0 {
			return fmt.Sprintf("ack-sync: ticket %d\n", tk)
		}
		return ""
	case "repair":
		// repair dead-letter-head|skip-hole|reread GROUP, or
		// repair start-at GROUP EPOCH SEQ.
		var tk recvcore.Ticket
		var err error
		switch args[0] {
		case "dead-letter-head":
			tk, err = s.core.DeadLetterHead(s.now, args[1])
		case "skip-hole":
			tk, err = s.core.SkipHole(s.now, args[1])
		case "reread":
			tk, err = s.core.Reread(s.now, args[1])
		case "start-at":
			e, _ := strconv.ParseUint(args[2], 10, 64)
			q, _ := strconv.ParseUint(args[3], 10, 64)
			tk, err = s.core.StartAt(s.now, args[1], e, q)
		default:
			s.t.Fatalf("unknown repair %q", line)
		}
		if err != nil {
			return fmt.Sprintf("repair %s: %v\n", args[0], err)
		}
		return fmt.Sprintf("repair %s: ticket %d\n", args[0], tk)
	case "tick":
		d, err := time.ParseDuration(args[0])
		require.NoError(s.t, err)
		s.now = s.now.Add(d)
		s.core.Tick(s.now)
		return ""
	case "read":
		r := pop1(&s.reads)
		if len(args) > 0 && args[0] == "fail" {
			s.core.Read(s.now, r.ID, nil, errors.New("store unreachable"))
			return ""
		}
		for _, a := range args[min(1, len(args)):] { // group=epoch/next: the store holds that
			g, c, _ := strings.Cut(a, "=")
			s.cursors[g] = parseCursor(c)
		}
		s.read(r)
		return ""
	case "stabilize":
		return s.stabilize()
	case "commit":
		c := pop1(&s.commits)
		switch args[0] {
		case "ok":
			s.apply(c.Advances)
			s.core.Committed(s.now, c.ID, nil)
		case "fail":
			s.core.Committed(s.now, c.ID, errors.New("timeout: outcome unknown"))
		case "ambiguous":
			s.apply(c.Advances)
			s.core.Committed(s.now, c.ID, errors.New("timeout: outcome unknown"))
		case "conflict", "corrupt": // commit conflict|corrupt GROUP: that group's advance is refused
			errs := make([]error, len(c.Advances))
			for i, a := range c.Advances {
				errs[i] = seqstore.ErrAborted
				if a.Stream.Group == args[1] {
					errs[i] = map[string]error{"conflict": seqstore.ErrConflict, "corrupt": seqstore.ErrCorrupt}[args[0]]
				}
			}
			s.core.Committed(s.now, c.ID, &seqstore.BatchError{Errs: errs})
		}
		return ""
	case "delete":
		d := pop1(&s.deletes)
		res := make([]recvcore.DeleteResult, len(d.Receipts))
		if args[0] == "stale" {
			for i := range res {
				res[i] = recvcore.DeleteResult{Err: errors.New("stale"), Stale: true}
			}
		}
		s.core.Deleted(s.now, d.ID, res)
		return ""
	case "park":
		p := pop1(&s.parks)
		s.parked(p.Entries)
		s.core.Parked(s.now, p.ID, nil)
		return ""
	case "requeue":
		r := pop1(&s.requeues)
		s.core.Requeued(s.now, r.ID, make([]error, len(r.Bodies)))
		return ""
	case "unpark":
		u := pop1(&s.unparks)
		if len(args) == 0 { // what the world's park holds
			s.unpark(u)
			return ""
		}
		res := make([][]seqstore.Parked, len(u.Queries))
		for _, a := range args { // group/epoch/seq
			parts := strings.Split(a, "/")
			e, _ := strconv.ParseUint(parts[1], 10, 64)
			q, _ := strconv.ParseUint(parts[2], 10, 64)
			for i, qu := range u.Queries {
				if qu.Stream.Group == parts[0] {
					res[i] = append(res[i], seqstore.Parked{Stream: qu.Stream, Epoch: e, Seq: q, Body: body(a)})
				}
			}
		}
		s.core.Unparked(s.now, u.ID, res, nil)
		return ""
	case "dead-letter":
		d := pop1(&s.deads)
		errs := make([]error, len(d.Bodies))
		if len(args) > 0 && args[0] == "fail" {
			for i := range errs {
				errs[i] = errors.New("dead-letter queue unreachable")
			}
		}
		s.core.DeadLettered(s.now, d.ID, errs)
		return ""
	case "dump":
		return s.core.Dump()
	case "close":
		s.core.Close(s.now)
		return ""
	case "restart":
		// A new Core over the same store: the next receiver's life.
		c, err := recvcore.New(s.cfg)
		require.NoError(s.t, err)
		recvcore.SetTrace(c, func(g, from, to string) { fmt.Fprintf(&s.trace, "phase %s %s -> %s\n", g, from, to) })
		*s = script{t: s.t, now: s.now, cfg: s.cfg, core: c, receipts: s.receipts, cursors: s.cursors, park: s.park}
		return ""
	case "stats":
		st := s.core.Stats()
		return fmt.Sprintf("stats: held %d buffered %d delivered %d acked %d duplicates %d late %d skipped %d conflicts %d stuck %v\n",
			st.Held, st.Buffered, st.Delivered, st.Acked, st.Duplicates, st.Late, st.Skipped, st.Conflicts, stuck(st.Stuck))
	}
	s.t.Fatalf("unknown command %q", line)
	return ""
}

func stuck(gs []recvcore.StuckGroup) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Group+":"+g.Reason)
	}
	return out
}

func (s *script) config(args []string) {
	cfg := recvcore.Config{
		Queue: "q", GapTimeout: 5 * time.Second, StartSettle: 2 * time.Second, MaxAttempts: 3,
		RetryInitial: time.Second, RetryMax: 4 * time.Second, Window: 100, MaxHeld: 100, MaxMemory: 1 << 20,
		MaxUndeletedRate: 1000, MaxBatch: 4, MaxAdvances: 16, MaxParks: 16, ReapInterval: 200 * time.Millisecond,
		Visibility: time.Hour, VisibilityMargin: -1, VisibilityExtend: time.Hour, ShortVisibility: time.Second,
		MaxVisibilityRate: 10, IdleEvict: -1, MaxEpochAhead: 24 * time.Hour,
	}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "mode":
			cfg.Mode = map[string]recvcore.Mode{"alo": recvcore.AtLeastOnce, "amo": recvcore.AtMostOnce, "eo": recvcore.ExactlyOnce}[v]
		case "gap":
			cfg.GapPolicy = map[string]recvcore.GapPolicy{"wait": recvcore.GapWait, "skip": recvcore.GapSkip}[v]
		case "start":
			cfg.Start = map[string]recvcore.StartPolicy{"first": recvcore.StartFirst, "lowest": recvcore.StartLowest}[v]
		case "window":
			cfg.Window = n
		case "maxheld":
			cfg.MaxHeld = n
		case "park":
			cfg.Park = v == "true"
		case "deadletter":
			cfg.DeadLetter = v == "true"
		case "idleevict":
			d, err := time.ParseDuration(v)
			require.NoError(s.t, err)
			cfg.IdleEvict = d
		case "visibility", "margin", "maxhold": // durations
			d, err := time.ParseDuration(v)
			require.NoError(s.t, err)
			switch k {
			case "visibility":
				cfg.Visibility, cfg.VisibilityExtend = d, d
			case "margin":
				cfg.VisibilityMargin = d
			case "maxhold":
				cfg.MaxHold = d
			}
		default:
			s.t.Fatalf("unknown config %q", a)
		}
	}
	c, err := recvcore.New(cfg)
	require.NoError(s.t, err)
	recvcore.SetTrace(c, func(g, from, to string) { fmt.Fprintf(&s.trace, "phase %s %s -> %s\n", g, from, to) })
	// A new Core over a new world: another receiver, store and queue.
	*s = script{t: s.t, now: s.now, cfg: cfg, core: c, receipts: s.receipts,
		cursors: map[string]seqstore.Cursor{}, park: map[string]map[uint64]seqstore.Parked{}}
}

// The world's side.

// read answers r with the store's cursors.
func (s *script) read(r recvcore.Read) {
	curs := make([]seqstore.Cursor, len(r.Streams))
	for i, st := range r.Streams {
		curs[i] = s.cursors[st.Group]
	}
	s.core.Read(s.now, r.ID, curs, nil)
}

// apply writes advances to the store: the cursors move, and the parked
// entries below them go.
func (s *script) apply(advs []seqstore.Advance) {
	for _, a := range advs {
		s.cursors[a.Stream.Group] = a.To
		for seq, p := range s.park[a.Stream.Group] {
			if a.To.Below(p.Epoch, seq) {
				delete(s.park[a.Stream.Group], seq)
			}
		}
	}
}

func (s *script) parked(entries []seqstore.Parked) {
	for _, e := range entries {
		if s.park[e.Stream.Group] == nil {
			s.park[e.Stream.Group] = map[uint64]seqstore.Parked{}
		}
		s.park[e.Stream.Group][e.Seq] = e
	}
}

// unpark answers u with what the store's park holds.
func (s *script) unpark(u recvcore.Unpark) {
	res := make([][]seqstore.Parked, len(u.Queries))
	for i, q := range u.Queries {
		var seqs []uint64
		for seq, p := range s.park[q.Stream.Group] {
			if p.Epoch == q.Epoch && seq >= q.From {
				seqs = append(seqs, seq)
			}
		}
		slices.Sort(seqs)
		for _, seq := range seqs[:min(len(seqs), q.Max)] {
			res[i] = append(res[i], s.park[q.Stream.Group][seq])
		}
	}
	s.core.Unparked(s.now, u.ID, res, nil)
}

// stabilize answers every action outstanding as the world would (the
// store's cursors and park, deletes and visibility changes that succeed),
// and the actions they lead to, until none is left; it returns what the
// Core did meanwhile.
func (s *script) stabilize() string {
	var out strings.Builder
	for range 100 {
		switch {
		case len(s.reads) > 0:
			s.read(pop1(&s.reads))
		case len(s.commits) > 0:
			c := pop1(&s.commits)
			s.apply(c.Advances)
			s.core.Committed(s.now, c.ID, nil)
		case len(s.parks) > 0:
			p := pop1(&s.parks)
			s.parked(p.Entries)
			s.core.Parked(s.now, p.ID, nil)
		case len(s.unparks) > 0:
			s.unpark(pop1(&s.unparks))
		case len(s.scans) > 0:
			var gs []string
			for g, ps := range s.park {
				if len(ps) > 0 {
					gs = append(gs, g)
				}
			}
			slices.Sort(gs)
			s.core.Scanned(s.now, pop1(&s.scans).ID, gs, nil)
		case len(s.deletes) > 0:
			s.core.Deleted(s.now, pop1(&s.deletes).ID, nil)
		case len(s.vis) > 0:
			v := pop1(&s.vis)
			s.core.Visibility(s.now, v.ID, v.Receipt+"'", nil)
		case len(s.deads) > 0:
			d := pop1(&s.deads)
			s.core.DeadLettered(s.now, d.ID, make([]error, len(d.Bodies)))
		case len(s.requeues) > 0:
			r := pop1(&s.requeues)
			s.core.Requeued(s.now, r.ID, make([]error, len(r.Bodies)))
		default:
			return out.String()
		}
		out.WriteString(s.trace.String())
		s.trace.Reset()
		out.WriteString(s.ready())
	}
	s.t.Fatalf("stabilize: the Core keeps asking for actions")
	return ""
}

// find returns the outstanding delivery named group/seq.
func (s *script) find(name string) *recvcore.Delivery {
	for i := len(s.out) - 1; i >= 0; i-- {
		d := &s.out[i]
		if fmt.Sprintf("%s/%d", d.Group, d.Seq) == name {
			return d
		}
	}
	return nil
}

// body encodes group/epoch/seq as a tagged body, "plain:x" as untagged.
// body returns the body of an arrival written group/epoch/seq (suffix
// "!big": a payload one byte over seqstore.MaxParkBody) or plain:text.
func body(a string) []byte {
	if p, ok := strings.CutPrefix(a, "plain:"); ok {
		return []byte(p)
	}
	a, big := strings.CutSuffix(a, "!big")
	payload := []byte(a)
	if big {
		payload = append(payload, make([]byte, seqstore.MaxParkBody+1)...)
	}
	parts := strings.Split(a, "/")
	e, _ := strconv.ParseUint(parts[1], 10, 64)
	q, _ := strconv.ParseUint(parts[2], 10, 64)
	return envelope.Append(nil, envelope.Header{Group: parts[0], Epoch: e, Seq: q}, payload)
}

func parseCursor(c string) seqstore.Cursor {
	e, n, _ := strings.Cut(c, "/")
	ep, _ := strconv.ParseUint(e, 10, 64)
	nx, _ := strconv.ParseUint(n, 10, 64)
	return seqstore.Cursor{Epoch: ep, Next: nx}
}

func pop1[T any](s *[]T) T {
	v := (*s)[0]
	*s = (*s)[1:]
	return v
}
