package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/redisstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

// Scale-out harness settings: S shard queues, 2 senders, 4 receivers (r0..r3)
// and a fifth (r4) that joins and leaves, on lease timings scaled to soTTL
// (the worker's leaseTimings: renewals every TTL/4, fenced 2/3 TTL after
// the last good renewal).
const (
	soShards     = 8
	soReceivers  = 4
	soTTL        = 2 * time.Second
	soVisibility = 2 * time.Second
	soDrain      = 2 * time.Second // DrainTimeout
	soName       = "scale"         // the logical queue (Options.Name, the lease namespace)
	soQueue      = "so"            // the shard queues' names: so-0 .. so-7
)

// Fault kinds of the scale-out harness.
const (
	faultKill      = "kill"       // SIGKILL of a receiver that owns shards, restarted after 0-2 s
	faultStopShort = "stop-short" // SIGSTOP for 0.3-0.6 x TTL, then SIGCONT
	faultStopLong  = "stop-long"  // SIGSTOP for 1.5-3 x TTL, then SIGCONT
	faultTerm      = "term"       // SIGTERM of a receiver that owns shards (a clean stop), restarted after 0-2 s
	faultJoin      = "join"       // r4 joins, or leaves (SIGTERM) if it runs
	faultCut       = "cut"        // a receiver's store connection black-holed for 2 x TTL
)

var faultKinds = []string{faultKill, faultStopShort, faultStopLong, faultTerm, faultJoin, faultCut}

// scaleDuration is how long faults are injected: INORDER_SCALEOUT_DURATION
// (the long form, about a fault every 6 s), else the short form: each fault
// kind once or twice, about 40 s.
func scaleDuration(t *testing.T) (time.Duration, bool) {
	if s := os.Getenv("INORDER_SCALEOUT_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "INORDER_SCALEOUT_DURATION")
		return d, true
	}
	return 0, false
}

// scaleSeed is INORDER_SCALEOUT_SEED (to replay a failed run), else the
// clock.
func scaleSeed(t *testing.T) uint64 {
	if s := os.Getenv("INORDER_SCALEOUT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "INORDER_SCALEOUT_SEED")
		return v
	}
	return uint64(time.Now().UnixNano())
}

// TestScaleOut runs ordered/scaleout under process faults: the emulator with
// chaos, 8 shard queues, 2 sender processes and 4 receiver processes (and a
// fifth that joins and leaves) with their leases and cursors in PostgreSQL
// or Redis (a sub-test each; INORDER_SCALEOUT_STORE=postgres or redis runs
// one). The faults, drawn from a logged seed: SIGKILL of a receiver that owns
// shards, SIGSTOP shorter and longer than the lease TTL, SIGTERM and restart,
// a fifth receiver joining and leaving, and a black hole between one receiver
// and the store for 2 x TTL (an in-test TCP proxy). Then the senders stop,
// the receivers drain the queues and stop, and CheckScaleOut judges the
// histories: exclusion, order, fencing, stale deliveries, no loss and
// liveness. It logs failover times after SIGKILL and SIGTERM and a JSON
// line of figures ("scaleout-figures").
//
// The short form (CI) injects each fault kind at least once; with
// INORDER_SCALEOUT_DURATION=20m it injects faults for that long (about 200).
// INORDER_SCALEOUT_SEED replays a run's choices; INORDER_CRASH_BUG=so-...
// plants a bug in the receivers (see the worker), which must fail the test.
// Needs INORDER_TEST_POSTGRES_DSN and INORDER_TEST_REDIS_ADDR (skipped
// without them, failed with CI=true).
func TestScaleOut(t *testing.T) {
	d, long := scaleDuration(t)
	stores := []string{"postgres", "redis"}
	if s := os.Getenv("INORDER_SCALEOUT_STORE"); s != "" {
		stores = strings.Split(s, ",")
	}
	for i, store := range stores {
		t.Run(store, func(t *testing.T) {
			seed := scaleSeed(t) + uint64(i)
			h := newScaleHarness(t, store, seed, d, long)
			res := h.run()
			h.judge(res)
		})
	}
}

// scaleHarness is one scale-out run.
type scaleHarness struct {
	t        *testing.T
	store    string
	seed     uint64
	long     bool
	duration time.Duration
	srv      *mnstest.Server
	dir      string
	hist     string
	bin      string
	bug      string
	// storeArg returns a receiver's store flags, through its proxy.
	storeArg func(member string) []string
	proxies  map[string]*proxy
	direct   seqstore.Store // the test's own connection, for the final cursors and the leases
	senders  []*proc
	recv     []*proc // r0..r4
	groups   int     // per sender
	pause    time.Duration

	rng *rand.Rand
	hw  *harnessHistory

	mu       sync.Mutex
	failures []string
}

// harnessHistory is the harness's own history file: the faults it
// injected and the exits it saw, one JSON line each.
type harnessHistory struct {
	mu sync.Mutex
	f  *os.File
}

func (w *harnessHistory) add(kind string, target *proc, inc int) {
	ev := Event{Proc: "harness", Role: RoleHarness, Kind: kind, T: time.Now().UnixNano(), Target: target.name, TInc: inc}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		panic(err)
	}
}

func newScaleHarness(t *testing.T, store string, seed uint64, d time.Duration, long bool) *scaleHarness {
	t.Logf("seed %d (INORDER_SCALEOUT_STORE=%s INORDER_SCALEOUT_SEED=%d replays the harness's choices: faults, targets, durations, the emulator's chaos; not the processes' scheduling)", seed, store, seed)
	h := &scaleHarness{t: t, store: store, seed: seed, long: long, duration: d, dir: t.TempDir(),
		bug: os.Getenv("INORDER_CRASH_BUG"), proxies: map[string]*proxy{}, rng: rand.New(rand.NewPCG(seed, 29)),
		groups: 50, pause: 500 * time.Millisecond}
	if long {
		h.groups, h.pause = 100, 4*time.Second // 200 groups in all, as the harness; about 100 messages/s
	}
	members := make([]string, soReceivers+1)
	for i := range members {
		members[i] = "r" + strconv.Itoa(i)
	}
	switch store {
	case "postgres":
		dsn := serverVar(t, "INORDER_TEST_POSTGRES_DSN")
		u, err := url.Parse(dsn)
		require.NoError(t, err, "INORDER_TEST_POSTGRES_DSN")
		prefix := postgresPrefix(t, dsn)
		dsns := map[string]string{}
		for _, m := range members {
			p := newProxy(t, u.Host)
			h.proxies[m] = p
			pu := *u
			pu.Host = p.addr
			dsns[m] = pu.String()
		}
		h.storeArg = func(m string) []string { return []string{"-postgres", dsns[m], "-prefix", prefix} }
		db, err := sql.Open("pgx", dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		s, err := sqlstore.Open(db, sqlstore.Postgres, &sqlstore.Options{TablePrefix: prefix})
		require.NoError(t, err, "sqlstore.Open")
		require.NoError(t, s.Migrate(t.Context()), "Migrate")
		h.direct = s
	case "redis":
		// A real Redis: miniredis expires keys only when told to, so its
		// leases would never lapse.
		addr := serverVar(t, "INORDER_TEST_REDIS_ADDR")
		prefix := redisPrefix(t, addr)
		for _, m := range members {
			h.proxies[m] = newProxy(t, addr)
		}
		h.storeArg = func(m string) []string { return []string{"-redis", h.proxies[m].addr, "-prefix", prefix} }
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
		require.NoError(t, err, "redisstore.New")
		h.direct = s
	default:
		t.Fatalf("INORDER_SCALEOUT_STORE: unknown store %q (postgres or redis)", store)
	}
	t.Cleanup(func() { _ = h.direct.Close() })
	h.bin = workerBinary(t) // after the servers: a missing one fails or skips at once

	srv, err := mnstest.NewServer(&mnstest.Options{Seed: int64(seed), Shards: 4, Faults: chaos})
	require.NoError(t, err, "mnstest.NewServer")
	t.Cleanup(func() { assert.NoError(t, srv.Close(), "emulator Close") })
	h.srv = srv
	for i := range soShards {
		require.NoError(t, srv.CreateQueue(soQueue+"-"+strconv.Itoa(i), &mnstest.QueueAttributes{VisibilityTimeout: int(soVisibility / time.Second)}), "CreateQueue")
	}
	h.hist = filepath.Join(h.dir, "history")
	require.NoError(t, os.Mkdir(h.hist, 0o700))
	f, err := os.OpenFile(filepath.Join(h.hist, "harness.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	h.hw = &harnessHistory{f: f}

	for i := range 2 {
		name := fmt.Sprintf("s%d", i)
		h.senders = append(h.senders, h.newProc(name, RoleScaleSend, []string{"-store", filepath.Join(h.dir, "store-"+name),
			"-group-from", strconv.Itoa(i * h.groups), "-group-to", strconv.Itoa((i + 1) * h.groups),
			"-workers", "4", "-pause", h.pause.String()}))
	}
	for _, m := range members {
		args := append([]string{"-workers", "4", "-ttl", soTTL.String(), "-drain-timeout", soDrain.String()}, h.storeArg(m)...)
		p := h.newProc(m, RoleScaleRecv, args)
		p.restartDelay = func() time.Duration { return time.Duration(h.intN(2001)) * time.Millisecond }
		h.recv = append(h.recv, p)
	}
	return h
}

func (h *scaleHarness) intN(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rng.IntN(n)
}

func (h *scaleHarness) newProc(name, role string, args []string) *proc {
	p := &proc{t: h.t, dir: h.dir, name: name, role: role, args: args, done: make(chan struct{}),
		command: h.command, report: h.exited}
	p.ended = func(p *proc, inc int) { h.hw.add(KindExit, p, inc) }
	return p
}

func (h *scaleHarness) command(p *proc, inc int) *exec.Cmd {
	args := append([]string{"-role", p.role, "-proc", p.name, "-inc", strconv.Itoa(inc),
		"-endpoint", h.srv.Endpoint(), "-ak", h.srv.AccessKeyID(), "-sk", h.srv.AccessKeySecret(),
		"-queue", soQueue, "-shards", strconv.Itoa(soShards), "-name", soName,
		"-visibility", soVisibility.String(), "-history", h.hist,
		"-seed", strconv.FormatUint(h.seed*1000+uint64(inc)*7+uint64(p.name[1]), 10)}, p.args...)
	cmd := exec.Command(h.bin, args...)
	env := append(os.Environ(), "GORACE=halt_on_error=1", "INORDER_CRASH_KILL=")
	if p.role == RoleScaleRecv && h.bug != "" {
		env = append(env, "INORDER_CRASH_BUG="+h.bug)
	} else {
		env = append(env, "INORDER_CRASH_BUG=")
	}
	cmd.Env = env
	return cmd
}

func (h *scaleHarness) exited(name string, log logScan, failure string) {
	if failure == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures = append(h.failures, fmt.Sprintf("%s: %s; log:\n%s", name, failure, log.excerpt()))
}

// owners returns the receivers that own shards now, by the store's live
// leases (an owner is "<incarnation>#<member>").
func (h *scaleHarness) owners() []*proc {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ls, err := h.direct.(seqstore.Leaser).Leases(ctx, soName)
	if err != nil {
		h.t.Logf("reading the leases: %v", err)
		return nil
	}
	seen := map[string]bool{}
	var out []*proc
	for _, l := range ls {
		_, m, ok := strings.Cut(l.Owner, "#")
		if !ok || seen[m] {
			continue
		}
		seen[m] = true
		for _, p := range h.recv {
			if p.name == m && p.running() != 0 {
				out = append(out, p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// target picks a receiver that owns shards (any running one if none
// does).
func (h *scaleHarness) target() *proc {
	ps := h.owners()
	if len(ps) == 0 {
		for _, p := range h.recv {
			if p.running() != 0 {
				ps = append(ps, p)
			}
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return ps[h.intN(len(ps))]
}

// scaleResult is what a scale-out run produced.
type scaleResult struct {
	report    *ScaleReport
	failovers []Failover
	faults    []string // in order
	leftover  int
	lastFault time.Time
	chaos     time.Duration
	elapsed   time.Duration
	failures  []string
}

// faultPlan returns the kinds of the faults to inject: the short form
// each kind once, then a second round, shuffled; the long form as many as
// its duration takes, drawn at random, each kind once first.
func (h *scaleHarness) faultPlan() []string {
	plan := slices.Clone(faultKinds)
	h.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	if !h.long {
		// Two more, of the kinds that move shards most.
		return append(plan, faultKill, faultStopLong)
	}
	return plan
}

func (h *scaleHarness) run() *scaleResult {
	t := h.t
	start := time.Now()
	all := append(slices.Clone(h.senders), h.recv[:soReceivers]...)
	for _, p := range all {
		require.NoError(t, p.start(), "start %s", p.name)
	}
	r4 := h.recv[soReceivers]
	r4.stopping = true
	close(r4.done)
	defer func() { // on a failed require, leave no process behind
		for _, p := range append(all, r4) {
			p.mu.Lock()
			p.stopping = true
			p.mu.Unlock()
			p.signal(syscall.SIGCONT)
			p.signal(syscall.SIGKILL)
			<-p.done
		}
	}()
	// Let the receivers share the shards before the first fault.
	time.Sleep(3 * soTTL)

	res := &scaleResult{}
	plan := h.faultPlan()
	chaosStart := time.Now()
	for i := 0; ; i++ {
		var kind string
		switch {
		case i < len(plan):
			kind = plan[i]
		case h.long && time.Since(chaosStart) < h.duration:
			kind = faultKinds[h.intN(len(faultKinds))]
		default:
		}
		if kind == "" {
			break
		}
		// A pause between faults: 1-3 s in the short form; in the long
		// form what makes about one fault per 6 s.
		gap := time.Duration(1000+h.intN(2001)) * time.Millisecond
		if h.long {
			gap = time.Duration(2000+h.intN(4001)) * time.Millisecond
		}
		time.Sleep(gap)
		if what := h.inject(kind); what != "" {
			res.faults = append(res.faults, what)
			t.Logf("fault %d at %v: %s", len(res.faults), time.Since(start).Round(time.Millisecond), what)
		}
	}
	res.lastFault = time.Now()
	res.chaos = time.Since(chaosStart)
	// Senders stop (SIGTERM: every admitted message gets its outcome);
	// the receivers drain the queues, then stop.
	for _, p := range h.senders {
		p.stop(t, time.Minute)
	}
	drainEnd := time.Now().Add(soTTL + soVisibility + 40*time.Second)
	empty := 0
	for time.Now().Before(drainEnd) && empty < 3 {
		time.Sleep(300 * time.Millisecond)
		if h.left() == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	for _, p := range h.recv {
		p.stop(t, time.Minute)
	}
	res.leftover = h.left()
	res.elapsed = time.Since(start)
	h.mu.Lock()
	res.failures = slices.Clone(h.failures)
	h.mu.Unlock()

	hs, err := Load(h.hist)
	require.NoError(t, err, "load histories")
	res.report = CheckScaleOut(hs, ScaleConfig{Leftover: res.leftover, Cursors: h.cursors(hs), LastFault: res.lastFault,
		Liveness: soTTL + soVisibility + 10*time.Second})
	res.failovers = Failovers(hs)
	return res
}

// inject injects one fault of kind and describes it ("" if it found no
// target).
func (h *scaleHarness) inject(kind string) string {
	switch kind {
	case faultJoin:
		r4 := h.recv[soReceivers]
		if r4.running() != 0 {
			h.hw.add(KindTerm, r4, r4.running())
			r4.stop(h.t, time.Minute)
			return "r4 leaves (SIGTERM)"
		}
		require.NoError(h.t, r4.resume(), "start r4")
		h.hw.add(KindJoin, r4, r4.running())
		return "r4 joins"
	}
	p := h.target()
	if p == nil {
		return ""
	}
	inc := p.running()
	switch kind {
	case faultKill:
		p.signal(syscall.SIGKILL)
		h.hw.add(KindKill, p, inc)
		return fmt.Sprintf("SIGKILL %s/%d", p.name, inc)
	case faultTerm:
		h.hw.add(KindTerm, p, inc)
		p.signal(syscall.SIGTERM)
		return fmt.Sprintf("SIGTERM %s/%d", p.name, inc)
	case faultStopShort, faultStopLong:
		d := time.Duration(300+h.intN(301)) * soTTL / 1000
		if kind == faultStopLong {
			d = time.Duration(1500+h.intN(1501)) * soTTL / 1000
		}
		h.hw.add(KindStop, p, inc)
		p.signal(syscall.SIGSTOP)
		time.Sleep(d)
		p.signal(syscall.SIGCONT)
		h.hw.add(KindCont, p, inc)
		return fmt.Sprintf("SIGSTOP %s/%d for %v", p.name, inc, d.Round(time.Millisecond))
	case faultCut:
		h.hw.add(KindCut, p, inc)
		h.proxies[p.name].blackhole(true)
		time.Sleep(2 * soTTL)
		h.proxies[p.name].blackhole(false)
		h.hw.add(KindHeal, p, inc)
		return fmt.Sprintf("store cut from %s/%d for %v", p.name, inc, 2*soTTL)
	}
	panic("unknown fault " + kind)
}

// left returns the messages the shard queues hold, in all states.
func (h *scaleHarness) left() int {
	n := 0
	for i := range soShards {
		qi, err := h.srv.Queue(soQueue + "-" + strconv.Itoa(i))
		require.NoError(h.t, err)
		n += qi.Active + qi.Inactive + qi.Delayed
	}
	return n
}

// cursors reads the final cursor of every group the senders wrote to.
func (h *scaleHarness) cursors(hs []*History) map[string]uint64 {
	groups := map[string]bool{}
	for _, hi := range hs {
		if hi.Role != RoleScaleSend {
			continue
		}
		for _, ev := range hi.Events {
			if ev.Group != "" {
				groups[ev.Group] = true
			}
		}
	}
	streams := make([]seqstore.Stream, 0, len(groups))
	for g := range groups {
		streams = append(streams, seqstore.Stream{Queue: soName, Group: g})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := h.direct.Cursors(ctx, streams)
	require.NoError(h.t, err, "read the final cursors")
	out := make(map[string]uint64, len(streams))
	for i, s := range streams {
		out[s.Group] = cs[i].Next
	}
	return out
}

// scaleFigures is the JSON line a run logs, for the README.
type scaleFigures struct {
	Store          string         `json:"store"`
	Seed           uint64         `json:"seed"`
	Faults         map[string]int `json:"faults"`
	ChaosSeconds   float64        `json:"chaos_s"`
	RuntimeSeconds float64        `json:"runtime_s"`
	Sent           int            `json:"sent"`
	Deliveries     int            `json:"deliveries"`
	Duplicates     int            `json:"duplicates"`
	Overlaps       int            `json:"overlaps_with_stopped"`
	KillMedianMs   int64          `json:"failover_kill_median_ms"`
	KillWorstMs    int64          `json:"failover_kill_worst_ms"`
	KillN          int            `json:"failover_kill_n"`
	TermMedianMs   int64          `json:"failover_term_median_ms"`
	TermWorstMs    int64          `json:"failover_term_worst_ms"`
	TermN          int            `json:"failover_term_n"`
	WorstFinishMs  int64          `json:"worst_finish_ms"`
	StoreOpsPerSec float64        `json:"store_ops_per_s_per_receiver"`
	StaleAfterCont int            `json:"stale_after_sigcont"`
	Refused        int            `json:"writes_refused"`
	Violations     int            `json:"violations"`
}

// medianWorst returns the median and the worst of the failovers of fault
// kind, and their number.
func medianWorst(fs []Failover, kind string) (median, worst time.Duration, n int) {
	var ds []time.Duration
	for _, f := range fs {
		if f.Fault == kind {
			ds = append(ds, f.Delivered)
		}
	}
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)-1], len(ds)
}

func (h *scaleHarness) judge(res *scaleResult) {
	t := h.t
	rep := res.report
	km, kw, kn := medianWorst(res.failovers, KindKill)
	tm, tw, tn := medianWorst(res.failovers, KindTerm)
	fig := scaleFigures{Store: h.store, Seed: h.seed, Faults: rep.Faults, ChaosSeconds: res.chaos.Seconds(), RuntimeSeconds: res.elapsed.Seconds(),
		Sent: rep.Sent, Deliveries: rep.Deliveries, Duplicates: rep.Duplicates, Overlaps: rep.Overlaps,
		KillMedianMs: km.Milliseconds(), KillWorstMs: kw.Milliseconds(), KillN: kn,
		TermMedianMs: tm.Milliseconds(), TermWorstMs: tw.Milliseconds(), TermN: tn,
		WorstFinishMs: rep.WorstFinish.Milliseconds(), StoreOpsPerSec: rep.StoreOps, StaleAfterCont: rep.StaleAfterResume, Refused: rep.Refused, Violations: len(rep.Violations)}
	b, _ := json.Marshal(fig)
	t.Logf("%s: %d faults in %v, %v in all; %s", h.store, len(res.faults), res.chaos.Round(time.Millisecond), res.elapsed.Round(time.Millisecond), rep.Figures())
	t.Logf("failover after SIGKILL: median %v, worst %v (%d shards); after SIGTERM: median %v, worst %v (%d shards)", km, kw, kn, tm, tw, tn)
	t.Logf("scaleout-figures %s", b)
	for i, v := range rep.Violations {
		if i == 10 {
			break
		}
		t.Logf("violation: %v", v)
	}
	if len(res.failures) > 0 {
		t.Fatalf("%d worker exits the harness did not cause (seed %d, histories kept in %s); the first: %s", len(res.failures), h.seed, h.keep(), res.failures[0])
	}
	if !rep.OK() {
		t.Fatalf("want no violation, first: %v (seed %d, histories kept in %s)", rep.First(), h.seed, h.keep())
	}
	for _, k := range []string{KindKill, KindStop, KindTerm, KindCut, KindJoin} {
		assert.Positive(t, rep.Faults[k], "faults of kind %s injected", k)
	}
	assert.Positive(t, rep.Sent, "messages sent")
	assert.Positive(t, rep.Claims, "claims recorded (the fencing rule had something to judge)")
	assert.Positive(t, kn, "failovers measured after a SIGKILL")
}

// keep copies the run's histories and logs out of the test's temporary
// directory, for a failed run, and returns where.
func (h *scaleHarness) keep() string {
	dst, err := os.MkdirTemp("", "crashtest-scaleout-failed-")
	if err != nil {
		return err.Error()
	}
	if err := os.CopyFS(dst, os.DirFS(h.dir)); err != nil {
		return err.Error()
	}
	return dst
}

// TestScaleOutCheckDir checks the histories of a kept run again and lists
// every violation: INORDER_SCALEOUT_CHECK_DIR=/tmp/crashtest-scaleout-failed-...
// (the directory a failed TestScaleOut names). Skipped without it.
func TestScaleOutCheckDir(t *testing.T) {
	dir := os.Getenv("INORDER_SCALEOUT_CHECK_DIR")
	if dir == "" {
		t.Skip("INORDER_SCALEOUT_CHECK_DIR not set")
	}
	hs, err := Load(filepath.Join(dir, "history"))
	require.NoError(t, err)
	rep := CheckScaleOut(hs, ScaleConfig{MaxViolations: 1000})
	t.Log(rep.Figures())
	for _, v := range rep.Violations {
		t.Logf("violation: %v", v)
	}
	for _, f := range Failovers(hs) {
		t.Logf("failover: %+v", f)
	}
}
