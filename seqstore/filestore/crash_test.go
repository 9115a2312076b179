package filestore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// crashChildEnv, when set to a directory, makes the test binary run
// crashChild on it instead of the tests (see TestMain).
const crashChildEnv = "INORDER_FILESTORE_CRASH_DIR"

const (
	crashQueue   = "crash"
	crashGroups  = 8
	crashPairs   = 4
	crashWorkers = 16
)

// crashParkStream is worker w's own stream for parks: only w parks in it
// and advances it, so its calls are serial.
func crashParkStream(w int) seqstore.Stream {
	return seqstore.Stream{Queue: "parks", Group: fmt.Sprintf("w%d", w)}
}

func crashStream(g int) seqstore.Stream {
	return seqstore.Stream{Queue: crashQueue, Group: fmt.Sprintf("g%d", g)}
}

// crashPair returns the two streams whose cursors the child always advances
// together, in one batch: after any crash they must be equal.
func crashPair(p int) (a, b seqstore.Stream) {
	return seqstore.Stream{Queue: "cursors", Group: fmt.Sprintf("p%da", p)},
		seqstore.Stream{Queue: "cursors", Group: fmt.Sprintf("p%db", p)}
}

// crashChild runs until killed: 16 goroutines reserve (with journal bodies),
// mark some reservations sent, advance cursor pairs, and park entries in
// and advance a stream of their own, and print every success on stdout,
// one whole line per write, after the call returned:
//
//	R <group> <epoch> <first> <n> <token>   bodies are <token>/0 .. <token>/n-1
//	S <group> <first> <n>                   Sent is about to be called for that reservation
//	A <pair> <next>                         the pair's cursors moved to next
//	p <worker> <token> <seq>...             Park is about to be called (epoch 1, bodies <token>/<seq>)
//	P <worker> <token>                      that Park call returned nil
//	Q <worker> <next>                       the worker's park stream's cursor moved to 1/next
//	E <error>                               an unexpected error (the test fails)
func crashChild(dir string) int {
	s, err := Open(dir, &Options{SnapshotBytes: 64 << 10})
	if err != nil {
		fmt.Printf("E open: %v\n", err)
		return 2
	}
	var mu sync.Mutex
	emit := func(format string, args ...any) {
		line := fmt.Sprintf(format+"\n", args...)
		mu.Lock()
		defer mu.Unlock()
		_, _ = os.Stdout.WriteString(line)
	}
	emit("O")
	crashWorkload(s, emit, time.Now().Add(30*time.Second)) // the deadline only matters if the parent is gone
	if err := s.Close(); err != nil {
		emit("E close: %v", err)
		return 1
	}
	return 0
}

// crashWorkload runs crashWorkers goroutines against s until deadline or
// until each meets an error, and reports every success through emit after
// the call returned (the line formats are described at crashChild).
func crashWorkload(s *Store, emit func(format string, args ...any), deadline time.Time) {
	pid := os.Getpid()
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for k := 0; time.Now().Before(deadline); k++ {
				if op := rnd.IntN(8); op >= 6 {
					if err := crashParkOp(s, emit, rnd, w, op == 6, fmt.Sprintf("%d.%d.%d.%d", pid, deadline.UnixNano()%1e9, w, k)); err != nil {
						emit("E %v", err)
						return
					}
					continue
				} else if op < 5 {
					g := rnd.IntN(crashGroups)
					n := 1 + rnd.IntN(3)
					token := fmt.Sprintf("%d.%d.%d.%d", pid, deadline.UnixNano()%1e9, w, k)
					journal := make([][]byte, n)
					for i := range journal {
						journal[i] = fmt.Appendf(nil, "%s/%d", token, i)
					}
					res, err := reserve(ctx, s, crashStream(g), n, journal)
					if err != nil {
						emit("E reserve: %v", err)
						return
					}
					emit("R %d %d %d %d %s", g, res.Epoch, res.First, n, token)
					if rnd.IntN(2) == 0 {
						seqs := make([]uint64, n)
						for i := range seqs {
							seqs[i] = res.First + uint64(i)
						}
						// Announced before the call: the mark may be
						// durable before Sent even returns.
						emit("S %d %d %d", g, res.First, n)
						if err := sent(ctx, s, crashStream(g), seqs); err != nil {
							emit("E sent: %v", err)
							return
						}
					}
					continue
				}
				p := rnd.IntN(crashPairs)
				a, b := crashPair(p)
				c, err := cursor(ctx, s, a)
				if err != nil {
					emit("E cursor: %v", err)
					return
				}
				to := seqstore.Cursor{Epoch: 1, Next: c.Next + 1 + uint64(rnd.IntN(3))}
				err = s.Advance(ctx, []seqstore.Advance{{Stream: a, From: c, To: to}, {Stream: b, From: c, To: to}})
				switch {
				case err == nil:
					emit("A %d %d", p, to.Next)
				case !errors.Is(err, seqstore.ErrConflict):
					emit("E advance: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// crashParkOp parks one to three entries in worker w's park stream at or
// above its cursor (park true), or advances that cursor by one to eight.
func crashParkOp(s *Store, emit func(format string, args ...any), rnd *rand.Rand, w int, park bool, token string) error {
	st := crashParkStream(w)
	c, err := cursor(ctx, s, st)
	if err != nil {
		return fmt.Errorf("cursor: %w", err)
	}
	if !park {
		to := seqstore.Cursor{Epoch: 1, Next: max(c.Next, 1) + 1 + uint64(rnd.IntN(8))}
		if err := s.Advance(ctx, []seqstore.Advance{{Stream: st, From: c, To: to}}); err != nil {
			return fmt.Errorf("advance parks: %w", err)
		}
		emit("Q %d %d", w, to.Next)
		return nil
	}
	var entries []seqstore.Parked
	var seqs []string
	for _, i := range rnd.Perm(32)[:1+rnd.IntN(3)] {
		seq := max(c.Next, 1) + uint64(i)
		entries = append(entries, seqstore.Parked{Stream: st, Epoch: 1, Seq: seq, Body: fmt.Appendf(nil, "%s/%d", token, seq)})
		seqs = append(seqs, fmt.Sprint(seq))
	}
	emit("p %d %s %s", w, token, strings.Join(seqs, " "))
	if err := s.Park(ctx, entries); err != nil {
		return fmt.Errorf("park: %w", err)
	}
	emit("P %d %s", w, token)
	return nil
}

// crashParks is what the children did to one worker's park stream.
type crashParks struct {
	want    map[uint64]string   // seq -> token of the last acknowledged park (or what the store held)
	maybe   map[uint64][]string // seq -> tokens of parks begun since, not acknowledged
	intents map[string][]uint64 // token -> seqs of parks begun
	next    uint64              // acknowledged cursor
}

type ackedReservation struct {
	epoch, first, n uint64
	token           string
	sent            bool
}

// crashHistory is what the children acknowledged, across rounds.
type crashHistory struct {
	res      [crashGroups][]*ackedReservation
	byFirst  [crashGroups]map[uint64]*ackedReservation
	pairNext [crashPairs]uint64
	// observed after the previous round: must never go down
	lastNext     [crashGroups]uint64
	lastPairNext [crashPairs]uint64
	parks        [crashWorkers]crashParks
	verified     int
	parkChecks   int // acknowledged parks found after a crash
}

func (h *crashHistory) parse(t *testing.T, line string) {
	f := strings.Fields(line)
	switch f[0] {
	case "O":
	case "R":
		var g int
		r := &ackedReservation{}
		_, err := fmt.Sscanf(line, "R %d %d %d %d %s", &g, &r.epoch, &r.first, &r.n, &r.token)
		require.NoError(t, err, "child line %q", line)
		h.res[g] = append(h.res[g], r)
		if h.byFirst[g] == nil {
			h.byFirst[g] = map[uint64]*ackedReservation{}
		}
		require.Nil(t, h.byFirst[g][r.first], "seq %d of group %d acknowledged twice", r.first, g)
		h.byFirst[g][r.first] = r
	case "S":
		var g int
		var first, n uint64
		_, err := fmt.Sscanf(line, "S %d %d %d", &g, &first, &n)
		require.NoError(t, err, "child line %q", line)
		r := h.byFirst[g][first]
		require.NotNil(t, r, "Sent line %q without its reservation", line)
		r.sent = true
	case "A":
		var p int
		var next uint64
		_, err := fmt.Sscanf(line, "A %d %d", &p, &next)
		require.NoError(t, err, "child line %q", line)
		h.pairNext[p] = max(h.pairNext[p], next)
	case "p":
		w, _ := strconv.Atoi(f[1])
		cp := &h.parks[w]
		if cp.want == nil {
			cp.want, cp.maybe, cp.intents = map[uint64]string{}, map[uint64][]string{}, map[string][]uint64{}
		}
		for _, q := range f[3:] {
			seq, err := strconv.ParseUint(q, 10, 64)
			require.NoError(t, err, "child line %q", line)
			cp.intents[f[2]] = append(cp.intents[f[2]], seq)
			cp.maybe[seq] = append(cp.maybe[seq], f[2])
		}
	case "P":
		w, _ := strconv.Atoi(f[1])
		cp := &h.parks[w]
		seqs, ok := cp.intents[f[2]]
		require.True(t, ok, "Park acknowledged in %q was not announced", line)
		for _, seq := range seqs {
			cp.want[seq] = f[2]
			cp.maybe[seq] = nil
		}
	case "Q":
		var w int
		var next uint64
		_, err := fmt.Sscanf(line, "Q %d %d", &w, &next)
		require.NoError(t, err, "child line %q", line)
		h.parks[w].next = max(h.parks[w].next, next)
	default:
		t.Fatalf("child reported %q", line)
	}
}

// verify opens the store and checks every acknowledged effect is there.
func (h *crashHistory) verify(t *testing.T, dir string) {
	s, err := Open(dir, nil)
	require.NoError(t, err, "reopen after kill")
	defer func() { require.NoError(t, s.Close()) }()

	pending, err := s.Pending(ctx, crashQueue)
	require.NoError(t, err)
	bodies := map[string]string{}
	for _, e := range pending {
		bodies[fmt.Sprintf("%s %d", e.Stream.Group, e.Seq)] = string(e.Body)
	}
	for g := range crashGroups {
		st := crashStream(g)
		epoch, next := senderState(s, st)
		require.GreaterOrEqual(t, next, h.lastNext[g], "counter of %s went back", st)
		h.lastNext[g] = next
		rs := slices.Clone(h.res[g])
		slices.SortFunc(rs, func(a, b *ackedReservation) int { return int(a.first - b.first) })
		for i, r := range rs {
			// Plain comparisons: this loop runs over the whole history
			// after every round.
			if r.epoch != epoch {
				t.Fatalf("epoch of %s changed from %d to %d: the counter was reset", st, r.epoch, epoch)
			}
			if next < r.first+r.n {
				t.Fatalf("counter of %s is %d, below acknowledged reservation %d+%d", st, next, r.first, r.n)
			}
			if i > 0 && rs[i-1].first+rs[i-1].n > r.first {
				t.Fatalf("acknowledged reservations %d+%d and %d+%d of %s overlap: a seq was handed out twice", rs[i-1].first, rs[i-1].n, r.first, r.n, st)
			}
			for k := range r.n {
				got, ok := bodies[fmt.Sprintf("%s %d", st.Group, r.first+k)]
				if !ok && !r.sent {
					t.Fatalf("journal entry %s #%d (acknowledged, never marked sent) missing", st, r.first+k)
				}
				if want := fmt.Sprintf("%s/%d", r.token, k); ok && got != want {
					t.Fatalf("journal body of %s #%d is %q, want %q", st, r.first+k, got, want)
				}
			}
			h.verified++
		}
	}
	for p := range crashPairs {
		a, b := crashPair(p)
		ca, err := cursor(ctx, s, a)
		require.NoError(t, err)
		cb, err := cursor(ctx, s, b)
		require.NoError(t, err)
		require.Equal(t, ca, cb, "cursors of pair %d, always advanced in one batch, differ", p)
		require.GreaterOrEqual(t, ca.Next, h.pairNext[p], "cursor of pair %d below an acknowledged advance", p)
		require.GreaterOrEqual(t, ca.Next, h.lastPairNext[p], "cursor of pair %d went back", p)
		h.lastPairNext[p] = ca.Next
		if h.pairNext[p] > 0 {
			h.verified++
		}
	}
	h.verifyParks(t, s)
}

// verifyParks checks the park streams: the cursor is at least the last
// acknowledged advance; every acknowledged park the cursor has not passed
// is there with its body or that of a park begun after it; nothing else
// is there. The store's content then becomes the history.
func (h *crashHistory) verifyParks(t *testing.T, s *Store) {
	for w := range crashWorkers {
		st := crashParkStream(w)
		cp := &h.parks[w]
		c, err := cursor(ctx, s, st)
		require.NoError(t, err)
		require.GreaterOrEqual(t, c.Next, cp.next, "cursor of %s below an acknowledged advance", st)
		got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 1 << 20}})
		require.NoError(t, err, "unpark %s", st)
		held := map[uint64]string{}
		for _, p := range got[0] {
			require.False(t, c.Below(p.Epoch, p.Seq), "%s holds %d/%d below its cursor %d/%d", st, p.Epoch, p.Seq, c.Epoch, c.Next)
			token, _, _ := strings.Cut(string(p.Body), "/")
			require.Equal(t, fmt.Sprintf("%s/%d", token, p.Seq), string(p.Body), "body of %s %d", st, p.Seq)
			if token != cp.want[p.Seq] {
				require.Contains(t, cp.maybe[p.Seq], token, "%s %d holds a body neither acknowledged last nor begun since", st, p.Seq)
			}
			held[p.Seq] = token
		}
		for seq, token := range cp.want {
			if !c.Below(1, seq) {
				require.Contains(t, held, seq, "acknowledged park %s %d (token %s) missing above the cursor %d", st, seq, token, c.Next)
				h.verified++
				h.parkChecks++
			}
		}
		cp.want, cp.maybe, cp.intents, cp.next = held, map[uint64][]string{}, map[string][]uint64{}, c.Next
	}
}

// TestCrashRecovery kills a child process that writes under load at random
// moments, ten times, and checks after each kill that everything the child
// acknowledged is in the store, that counters never went back and that
// batched advances stayed atomic.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test starts child processes")
	}
	dir := t.TempDir()
	var h crashHistory
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	const rounds = 10
	start := time.Now()
	acks := 0
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		// The kill falls 100-600 ms after the child opened the store (its
		// "O" line), not after it started: a child built with -race on a
		// loaded machine took longer than that to start, and ten kills
		// found nothing to check. A child that never opens is killed
		// after a minute, and the round fails.
		kill := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
		opened := false
		r := bufio.NewReader(out)
		var lines []string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
				break // a line cut by the kill is not an acknowledgement
			}
			line = strings.TrimSuffix(line, "\n")
			if line == "O" && !opened {
				opened = true
				kill.Reset(time.Duration(100+rnd.IntN(500)) * time.Millisecond)
			}
			if line == "O" {
				// The child holds the directory: another process
				// must not open it.
				_, err := Open(dir, nil)
				require.ErrorIs(t, err, seqstore.ErrLocked, "round %d: Open while the child has the store open", round)
			}
			lines = append(lines, line)
		}
		err = cmd.Wait()
		kill.Stop()
		require.True(t, opened, "round %d: the child never opened the store; stderr:\n%s", round, stderr.String())
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "round %d: child must die by SIGKILL; stderr:\n%s", round, stderr.String())
		ws, _ := exit.Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "round %d: child ended with %v, not SIGKILL; stderr:\n%s", round, err, stderr.String())
		for _, line := range lines {
			h.parse(t, line)
		}
		acks += len(lines)
		h.verify(t, dir)
	}
	total := 0
	for g := range crashGroups {
		total += len(h.res[g])
	}
	assert.Greater(t, total, 100, "reservations acknowledged over %d rounds", rounds)
	assert.Greater(t, h.parkChecks, 100, "acknowledged parks checked over %d rounds", rounds)
	t.Logf("%d park checks", h.parkChecks)
	t.Logf("%d kills in %v: %d lines acknowledged, %d reservations, %d reservation/pair checks passed",
		rounds, time.Since(start).Round(time.Millisecond), acks, total, h.verified)
}
