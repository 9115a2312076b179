package crashtest

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// chaos is the emulator's fault mix in the crash runs: reorder via shards,
// early redeliveries, 5xx before and after the effect, dropped
// connections, latency, early empty receives. No loss: a lost message is a
// gap no receiver can close.
var chaos = mnstest.Faults{Redeliver: 0.02, Error5xx: 0.02, Drop: 0.01, Latency: time.Millisecond, Jitter: 3 * time.Millisecond, EarlyEmpty: 0.05}

// killPoints are the worker's self-kill probabilities per passage.
const killPoints = "send-before=0.003,send-after=0.003,delete-before=0.003,advance-after=0.002,delivered=0.001,acked=0.001,acked-recorded=0.002,committed=0.002,sent=0.001,park-after=0.003,unpark-after=0.003"

// storeFaults are the faults of every worker's store in TestCrash (see
// crashtest.ParseStoreFaults): calls that fail before they are applied,
// writes that fail after (a Reserve too: its seqs are journaled, the Send
// fails), slow answers.
const storeFaults = "before=0.03,after=0.02,slow=0.03,reserve-after"

// sendAttempts is the senders' SendOptions.MaxAttempts in TestCrash: one, so
// that the emulator's 5xx and dropped connections make sends fail after
// their seqs were reserved, and the senders recover them (the worker calls
// Recover after a failure).
const sendAttempts = 1

// consumptionScale scales the emulator's abnormal-consumption thresholds in
// the crash runs: the service's own (5,000 received and not deleted, 1,000
// receipts per second ending without a delete, 30 minutes held). Scaled to
// 0.2, the kills alone (whatever a killed receiver held lapses at once)
// tripped the rate rule, and the throttled receives slowed the final drain.
const consumptionScale = 1

// senderPoints are the kill points a sender passes; a receiver passes the
// others.
var senderPoints = map[string]bool{"send-before": true, "send-after": true, "sent": true}

// scenario is one harness run.
type scenario struct {
	mode       string
	senders    int           // sender processes
	groups     int           // per sender
	workers    int           // goroutines per process
	chaos      time.Duration // how long processes are killed and restarted
	killEvery  time.Duration // mean delay between external SIGKILLs
	killPoints string        // INORDER_CRASH_KILL during the chaos phase
	bug        string        // INORDER_CRASH_BUG for the receiver
	// storeFaults is every worker's -store-faults; sendAttempts the
	// senders' -send-attempts (0: the library's default).
	storeFaults  string
	sendAttempts int
	drain        time.Duration // bound of the final drain
	pause        time.Duration // sender pause between rounds
	window       int           // receiver's ReceiveOptions.Window (0: default)
	// maxUndeleted is the receiver's ReceiveOptions.MaxUndeleted (0:
	// default). TestCrash sets it low so that the receiver parks.
	maxUndeleted int
	// consumption turns on the emulator's abnormal-consumption throttle,
	// with the service's thresholds times consumptionScale.
	consumption bool
	// require lists the kill points that must fire: until they did, each
	// new incarnation of the role that passes them has them armed (it
	// kills itself at an early passage), and the chaos phase goes on for
	// up to extraChaos past its duration.
	require []string
	seed    uint64
}

// extraChaos bounds how long the chaos phase goes on past scenario.chaos
// for required kill points that have not fired.
const extraChaos = 20 * time.Second

type harness struct {
	t     *testing.T
	sc    scenario
	srv   *mnstest.Server
	queue string
	dir   string
	hist  string
	bin   string
	procs []*proc

	mu       sync.Mutex
	rng      *rand.Rand     // arming draws
	points   map[string]int // self-kills by kill point
	failures []string       // unexpected exits and race reports, described
	overtime bool           // the chaos runs past its duration for missing kill points
}

// command is the command of incarnation inc of p: a worker with the
// scenario's flags, kill points and planted bug.
func (h *harness) command(p *proc, inc int) *exec.Cmd {
	args := append([]string{"-role", p.role, "-proc", p.name, "-inc", strconv.Itoa(inc),
		"-mode", h.sc.mode, "-endpoint", h.srv.Endpoint(), "-queue", h.queue,
		"-history", h.hist, "-workers", strconv.Itoa(h.sc.workers),
		"-seed", strconv.FormatUint(h.sc.seed*1000+uint64(inc)+uint64(len(p.name)), 10)}, p.args...)
	cmd := exec.Command(h.bin, args...)
	// halt_on_error: a race report ends the worker at once, with status
	// 66, which fails the run (see exited).
	env := append(os.Environ(), "GORACE=halt_on_error=1")
	if !p.final.Load() {
		env = append(env, "INORDER_CRASH_KILL="+h.killSpec(p.role))
	}
	if p.role == RoleReceive && h.sc.bug != "" {
		env = append(env, "INORDER_CRASH_BUG="+h.sc.bug)
		// Bugs (b) and (c) are planted inside the receive core.
		switch h.sc.bug {
		case "b":
			env = append(env, "INORDER_PLANT=nodedup")
		case "c":
			env = append(env, "INORDER_PLANT=unsorted")
		}
	}
	cmd.Env = env
	return cmd
}

func newHarness(t *testing.T, sc scenario) *harness {
	t.Helper()
	srv, err := mnstest.NewServer(&mnstest.Options{Seed: int64(sc.seed), Shards: 4, Faults: chaos,
		Throttle: mnstest.Throttle{Consumption: sc.consumption, ConsumptionScale: consumptionScale}})
	require.NoError(t, err, "mnstest.NewServer")
	t.Cleanup(func() { require.NoError(t, srv.Close(), "emulator Close") })
	h := &harness{t: t, sc: sc, srv: srv, queue: "crash-" + sc.mode, dir: t.TempDir(), bin: workerBinary(t),
		rng: rand.New(rand.NewPCG(sc.seed, 11)), points: map[string]int{}}
	h.hist = filepath.Join(h.dir, "history")
	require.NoError(t, os.Mkdir(h.hist, 0o700))
	require.NoError(t, srv.CreateQueue(h.queue, &mnstest.QueueAttributes{VisibilityTimeout: 2}), "CreateQueue")
	for i := range sc.senders {
		name := fmt.Sprintf("s%d", i)
		h.procs = append(h.procs, h.newProc(name, RoleSend, []string{
			"-store", filepath.Join(h.dir, "store-"+name),
			"-group-from", strconv.Itoa(i * sc.groups), "-group-to", strconv.Itoa((i + 1) * sc.groups),
			"-pause", sc.pause.String(), "-store-faults", sc.storeFaults, "-send-attempts", strconv.Itoa(sc.sendAttempts)}))
	}
	rargs := []string{"-store", filepath.Join(h.dir, "store-r")}
	if sc.mode == ModeExactlyOnce {
		rargs = []string{"-sqlite", filepath.Join(h.dir, "recv.db")}
	}
	rargs = append(rargs, "-window", strconv.Itoa(sc.window), "-max-undeleted", strconv.Itoa(sc.maxUndeleted), "-store-faults", sc.storeFaults)
	h.procs = append(h.procs, h.newProc("r", RoleReceive, rargs))
	return h
}

// result is what a run produced.
type result struct {
	report   *Report
	kills    int      // external
	deaths   int      // all SIGKILL exits
	failures []string // unexpected exits and race reports, described
	leftover int
	stalls   int            // receivers restarted because they stopped delivering
	points   map[string]int // self-kills by kill point
	missing  []string       // required kill points that never fired
	server   mnstest.Stats
	elapsed  time.Duration
}

func (r *result) String() string {
	return fmt.Sprintf("kills %d external, %d SIGKILL deaths in all (kill points %v), %d failed exits; stalls %d; leftover %d; %s; server: sent %d, received %d (%.2f per message sent), deleted %d, 5xx %d, drops %d, redelivered %d, early-empty %d, consumption trips %v",
		r.kills, r.deaths, r.points, len(r.failures), r.stalls, r.leftover, r.report.Figures(), r.server.Sent, r.server.Received,
		float64(r.server.Received)/float64(max(r.server.Sent, 1)), r.server.Deleted,
		r.server.Errors5xx, r.server.Drops, r.server.Redelivered, r.server.EarlyEmpty, r.server.ConsumptionTrips)
}

// newProc returns a supervised worker of the scenario, restarted at once
// after each exit.
func (h *harness) newProc(name, role string, args []string) *proc {
	return &proc{t: h.t, dir: h.dir, name: name, role: role, args: args, done: make(chan struct{}),
		command: h.command, report: h.exited}
}

// exited accounts for an incarnation's exit: the kill point it hit, or the
// failure it was.
func (h *harness) exited(name string, log logScan, failure string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if log.point != "" {
		h.points[log.point]++
	}
	if failure != "" {
		h.failures = append(h.failures, fmt.Sprintf("%s: %s; log:\n%s", name, failure, log.excerpt()))
	}
}

// killSpec is INORDER_CRASH_KILL for a new incarnation of role: the
// scenario's probabilities, plus the required points of the role that have
// not fired yet, each armed at an early passage: one of the first eight,
// or the first once the chaos runs over its duration for them (an
// incarnation killed from outside before its eighth park left park-after
// unfired through 23 s of chaos in one eo run).
func (h *harness) killSpec(role string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	spec := h.sc.killPoints
	for _, p := range h.missingLocked() {
		if senderPoints[p] == (role == RoleSend) {
			n := 1 + h.rng.IntN(8)
			if h.overtime {
				n = 1
			}
			spec += fmt.Sprintf(",%s@%d", p, n)
		}
	}
	return spec
}

// missingLocked lists the required kill points that have not fired.
func (h *harness) missingLocked() []string {
	var missing []string
	for _, p := range h.sc.require {
		if h.points[p] == 0 {
			missing = append(missing, p)
		}
	}
	return missing
}

// run runs the scenario: chaos, then a clean stop of the senders, a drain
// by a clean receiver, its clean stop, and the checker.
func (h *harness) run() *result {
	t := h.t
	start := time.Now()
	for _, p := range h.procs {
		require.NoError(t, p.start(), "start %s", p.name)
	}
	defer func() { // on a failed require, leave no process behind
		for _, p := range h.procs {
			p.mu.Lock()
			p.stopping = true
			p.mu.Unlock()
			p.signal(syscall.SIGKILL)
			<-p.done
		}
	}()
	rng := rand.New(rand.NewPCG(h.sc.seed, 7))
	deadline, bound := time.Now().Add(h.sc.chaos), time.Now().Add(h.sc.chaos+extraChaos)
	for {
		now := time.Now()
		h.mu.Lock()
		missing := len(h.missingLocked())
		h.mu.Unlock()
		if now.After(bound) || now.After(deadline) && missing == 0 {
			break
		}
		if now.After(deadline) {
			h.mu.Lock()
			h.overtime = true
			h.mu.Unlock()
		}
		d := time.Duration(rng.Int64N(int64(2*h.sc.killEvery) + 1))
		time.Sleep(min(d, time.Until(bound)))
		if h.sc.killEvery > 0 {
			h.procs[rng.IntN(len(h.procs))].signal(syscall.SIGKILL)
		}
	}
	// Senders: one clean incarnation each (it recovers the journal), then
	// a clean stop.
	for _, p := range h.procs {
		p.restartClean()
	}
	time.Sleep(1500 * time.Millisecond)
	for _, p := range h.procs[:len(h.procs)-1] {
		p.stop(t, time.Minute)
	}
	// Receiver: drain until the queue stays empty, then a clean stop.
	recv := h.procs[len(h.procs)-1]
	drainEnd := time.Now().Add(h.sc.drain)
	empty, stalls := 0, 0
	progress, lastMove := h.receiverProgress(), time.Now()
	for time.Now().Before(drainEnd) && empty < 3 {
		time.Sleep(300 * time.Millisecond)
		qi, err := h.srv.Queue(h.queue)
		require.NoError(t, err)
		if qi.Active+qi.Inactive+qi.Delayed == 0 {
			empty++
			continue
		}
		empty = 0
		// A receiver that delivers nothing for stallAfter while the queue
		// holds messages has stalled (the known fetch stall of ordered,
		// see receiveWindow): restart it, count it, and report it.
		if p := h.receiverProgress(); p != progress {
			progress, lastMove = p, time.Now()
		} else if time.Since(lastMove) > stallAfter {
			stalls++
			t.Logf("receiver stalled: nothing delivered for %v with %d messages in the queue; restarting it (log %s)",
				stallAfter, qi.Active+qi.Inactive+qi.Delayed, recv.logName())
			recv.signal(syscall.SIGKILL)
			lastMove = time.Now()
		}
	}
	recv.stop(t, time.Minute)
	qi, err := h.srv.Queue(h.queue)
	require.NoError(t, err)
	res := &result{leftover: qi.Active + qi.Inactive + qi.Delayed, stalls: stalls, server: h.srv.Stats(), elapsed: time.Since(start)}
	for _, p := range h.procs {
		res.kills += p.kills
		res.deaths += p.deaths
	}
	h.mu.Lock()
	res.points, res.failures, res.missing = maps.Clone(h.points), slices.Clone(h.failures), h.missingLocked()
	h.mu.Unlock()
	hs, err := Load(h.hist)
	require.NoError(t, err, "load histories")
	if h.sc.mode == ModeExactlyOnce {
		hs = append(hs, h.appliedHistory())
	}
	res.report = Check(hs, Config{Mode: h.sc.mode, Leftover: res.leftover})
	return res
}

// appliedHistory turns the exactly-once receiver's table into committed
// events, in commit order.
func (h *harness) appliedHistory() *History {
	t := h.t
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.dir, "recv.db")+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.QueryContext(context.Background(), `SELECT id, grp, epoch, seq, payload FROM applied ORDER BY id`)
	require.NoError(t, err, "read applied table")
	defer rows.Close()
	hist := &History{File: "applied", Proc: "db", Role: RoleDB, Clean: true}
	for rows.Next() {
		var id, epoch, seq int64
		var ev Event
		require.NoError(t, rows.Scan(&id, &ev.Group, &epoch, &seq, &ev.Payload))
		ev.Epoch, ev.Seq, ev.Kind, ev.Proc, ev.Role = uint64(epoch), uint64(seq), KindCommitted, "db", RoleDB
		ev.File, ev.Line = "applied", int(id)
		hist.Events = append(hist.Events, ev)
	}
	require.NoError(t, rows.Err())
	return hist
}

// logScan is what a worker's log shows.
type logScan struct {
	point string   // the kill point it killed itself at
	race  string   // the first race report, from its WARNING line
	panic string   // the panic, from its first line
	last  []string // the last lines
}

// scanLog reads the log of one incarnation.
func scanLog(path string) logScan {
	var ls logScan
	b, err := os.ReadFile(path)
	if err != nil {
		ls.last = []string{err.Error()}
		return ls
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	excerpt := func(i int) string { return strings.Join(lines[i:min(i+20, len(lines))], "\n") }
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "worker: kill point "):
			ls.point = strings.TrimPrefix(line, "worker: kill point ")
		case ls.race == "" && strings.Contains(line, "WARNING: DATA RACE"):
			ls.race = excerpt(i)
		case ls.panic == "" && (strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ")):
			ls.panic = excerpt(i)
		}
	}
	ls.last = lines[max(len(lines)-8, 0):]
	return ls
}

// excerpt is what a failure message quotes of the log.
func (ls logScan) excerpt() string {
	switch {
	case ls.race != "":
		return ls.race
	case ls.panic != "":
		return ls.panic
	}
	return strings.Join(ls.last, "\n")
}

// keep copies the run's histories and logs out of the test's temporary
// directory, for a failed run, and returns where. Call it only when the
// run failed: each call leaves a directory behind.
func (h *harness) keep() string {
	dst, err := os.MkdirTemp("", "crashtest-failed-")
	if err != nil {
		return err.Error()
	}
	if err := os.CopyFS(dst, os.DirFS(h.dir)); err != nil {
		return err.Error()
	}
	return dst
}

// stallAfter is how long a draining receiver may deliver nothing while the
// queue holds messages before the harness calls it stalled.
const stallAfter = 8 * time.Second

// receiverProgress sums the sizes of the receiver's history files: it grows
// with every delivery.
func (h *harness) receiverProgress() int64 {
	var n int64
	files, _ := filepath.Glob(filepath.Join(h.hist, RoleReceive+"-*.jsonl"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}
