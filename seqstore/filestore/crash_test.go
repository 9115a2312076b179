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
// mark some reservations sent and advance cursor pairs, and print every
// success on stdout, one whole line per write, after the call returned:
//
//	R <group> <epoch> <first> <n> <token>   bodies are <token>/0 .. <token>/n-1
//	S <group> <first> <n>                   Sent is about to be called for that reservation
//	A <pair> <next>                         the pair's cursors moved to next
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
				if rnd.IntN(4) > 0 {
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
	verified     int
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
		kill := time.AfterFunc(time.Duration(100+rnd.IntN(500))*time.Millisecond, func() { _ = cmd.Process.Kill() })
		r := bufio.NewReader(out)
		var lines []string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
				break // a line cut by the kill is not an acknowledgement
			}
			line = strings.TrimSuffix(line, "\n")
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
	t.Logf("%d kills in %v: %d lines acknowledged, %d reservations, %d reservation/pair checks passed",
		rounds, time.Since(start).Round(time.Millisecond), acks, total, h.verified)
}
