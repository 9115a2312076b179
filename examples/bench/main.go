package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/inorder/inorder/examples/internal/cmdline"
	"github.com/inorder/inorder/examples/internal/progress"
)

// config holds the flags.
type config struct {
	quick    bool
	json     bool
	jsonFile string
	// svg is the file of the chart (-svg); with -jsonfile and no -svg,
	// the JSON file's name with .svg (see chartFile).
	svg       string
	messages  int
	scenario  string
	skip      string
	producers int
	consumers int
	size      int
	backlog   int
	count     int
	window    int
	// commitInterval is the ordered rows' ReceiveOptions.CommitInterval
	// (0: the receiver's default).
	commitInterval time.Duration
	timeout        time.Duration
	cpuprofile     string
	blockprof      string
	memprofile     string
	list           bool
	guard          string
	retries        int
	// guardPairs and guardMessages: at most this many pairs of runs for a
	// CPU row of the guard, each run of this many messages.
	guardPairs    int
	guardMessages int
	// guardRef is a reference bench binary the CPU rows are also judged
	// against (cpuref.go); serveCPU makes this process a child serving
	// runs of that CPU row.
	guardRef string
	serveCPU string
}

func (c *config) validate() error {
	switch {
	case c.messages < 1:
		return errors.New("bench: -messages must be at least 1")
	case c.producers < 1 || c.consumers < 1:
		return errors.New("bench: -producers and -consumers must be at least 1")
	case c.size < minPayload:
		return fmt.Errorf("bench: -size must be at least %d", minPayload)
	case c.retries < 0:
		return errors.New("bench: -guard-retries must not be negative")
	case c.guard != "" && c.guardPairs < cpuGuardMinPairs:
		return fmt.Errorf("bench: -guard-pairs must be at least %d", cpuGuardMinPairs)
	case (c.guard != "" || c.serveCPU != "") && c.guardMessages < 1:
		return errors.New("bench: -guard-messages must be at least 1")
	case c.guardRef != "" && c.guard == "":
		return errors.New("bench: -guard-ref needs -guard")
	case c.count < 1:
		return errors.New("bench: -count must be at least 1")
	case c.window < 0:
		return errors.New("bench: -window must not be negative")
	case c.backlog < 0:
		return errors.New("bench: -backlog must not be negative")
	case c.commitInterval < -1:
		return errors.New("bench: -commit-interval must be -1ns (no delay), 0 (the default) or positive")
	case c.timeout <= 0:
		return errors.New("bench: -timeout must be positive")
	}
	if _, err := regexp.Compile(c.scenario); err != nil {
		return fmt.Errorf("bench: -scenario: %w", err)
	}
	if _, err := regexp.Compile(c.skip); err != nil {
		return fmt.Errorf("bench: -skip: %w", err)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command runs the program with args and returns its exit status: 0 on
// success and for -h; 1 if a scenario failed (or the guard did); 2 for a
// bad command line or an error that stopped the run.
func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	var usage *cmdline.UsageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		return 2 // the flag package printed it
	case err != nil:
		fmt.Fprintln(stderr, err) // "bench: ..." already
		return 2
	}
	ok, err := run(ctx, &c, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if !ok {
		return 1
	}
	return 0
}

const synopsis = `bench [flags]: measure what strict per-group order costs: the raw driver and
ordered.Queue side by side over the same queue, in one process.`

// parse reads the flags, applies the defaults that depend on -quick, and
// validates the result.
func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.quick, "quick", false, "few messages per scenario (a smoke test for CI)")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of the table")
	fs.StringVar(&c.jsonFile, "jsonfile", "", "also write the JSON to this file")
	fs.StringVar(&c.svg, "svg", "", "write the ordered/raw ratios as an SVG chart to this file (default with -jsonfile: its name, .svg)")
	fs.IntVar(&c.messages, "messages", 0, "messages per memqueue scenario, emulator ones a quarter (default 200000, -quick 8000)")
	fs.StringVar(&c.scenario, "scenario", "", "run the scenarios whose name matches this regexp (their bases run too)")
	fs.StringVar(&c.skip, "skip", "", "of those, leave out the ones whose name matches this regexp (unless another needs it as its base)")
	fs.IntVar(&c.producers, "producers", 4, "sending goroutines")
	fs.IntVar(&c.consumers, "consumers", 2, "raw receive loops, and the ordered side's fetchers")
	fs.IntVar(&c.size, "size", 100, "payload bytes")
	fs.IntVar(&c.backlog, "backlog", 1000, "most messages sent and not yet delivered, per group, times the groups (0: no bound)")
	fs.IntVar(&c.window, "window", 0, "the ordered receiver's look-ahead window per group (0: ReceiveOptions' default, 8192)")
	fs.DurationVar(&c.commitInterval, "commit-interval", 0, "the ordered receiver's CommitInterval (0: its default, 5ms; -1ns: commit after commit)")
	fs.IntVar(&c.count, "count", 1, "run the scenarios this many rounds; each row shows its median round, ratios from that round")
	fs.DurationVar(&c.timeout, "timeout", 0, "give up on a scenario after this long (default 3m, -quick 30s)")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&c.blockprof, "blockprofile", "", "write a profile of blocking (channel, mutex, cond waits) to this file")
	fs.StringVar(&c.memprofile, "memprofile", "", "write a profile of the run's allocations to this file (pprof -sample_index=alloc_objects)")
	fs.BoolVar(&c.list, "list", false, "list the scenarios and exit")
	fs.StringVar(&c.guard, "guard", "", "fail on a ratio 30% under its baseline in this file's guard table (README.md), or a CPU row over +0.5 µs")
	fs.IntVar(&c.retries, "guard-retries", 2, "with -guard, run a row below its floor again up to this many times; its best ratio counts")
	fs.IntVar(&c.guardPairs, "guard-pairs", 15, "with -guard, run a CPU row (a baseline in µs) and its base in at most this many pairs")
	fs.IntVar(&c.guardMessages, "guard-messages", 40_000, "with -guard, messages in each run of a CPU row's pairs")
	fs.StringVar(&c.guardRef, "guard-ref", "", "with -guard, also judge each CPU row against this bench (a reference commit's) in pairs: fails over +0.5 µs")
	fs.StringVar(&c.serveCPU, "serve-cpu", "", "serve -guard-ref's pairs: run this CPU row once per stdin line, print its CPU per message")
	cmdline.SetUsage(fs, synopsis,
		cmdline.Env{Name: envRedis, Help: "add redisstore rows on this Redis (host:port)"},
		cmdline.Env{Name: envPostgres, Help: "add sqlstore rows on this PostgreSQL (a postgres:// URL)"},
		cmdline.Env{Name: envMySQL, Help: "add sqlstore rows on this MySQL or MariaDB (a go-sql-driver DSN)"},
		cmdline.Env{Name: envMNSURL, Help: "with the two below, add rows on a real MNS queue (created for the run, deleted after)"},
		cmdline.EnvKeyID, cmdline.EnvSecret)
	if err := cmdline.Parse(fs, args); err != nil {
		return c, err
	}
	if c.messages == 0 {
		c.messages = 200_000
		if c.quick {
			c.messages = 8000
		}
	}
	if c.timeout == 0 {
		c.timeout = 3 * time.Minute
		if c.quick {
			c.timeout = 30 * time.Second
		}
	}
	return c, c.validate()
}

// run runs the selected scenarios and prints the results to out, progress
// to info. It reports false if any scenario failed. On a terminal, info
// also shows the running scenario's progress line.
func run(ctx context.Context, c *config, out, info io.Writer) (bool, error) {
	env := newEnvironment()
	if c.serveCPU != "" {
		return true, serveCPU(ctx, c, env, os.Stdin, out)
	}
	if c.guardRef != "" {
		if err := checkRef(c.guardRef); err != nil {
			return false, err
		}
	}
	all := scenarios(c, env)
	re := regexp.MustCompile(c.scenario)
	var skip *regexp.Regexp
	if c.skip != "" {
		skip = regexp.MustCompile(c.skip)
	}
	selected := selectScenarios(all, re, skip)
	if c.list {
		for _, s := range selected {
			fmt.Fprintln(out, s.name)
		}
		return true, nil
	}
	if len(selected) == 0 {
		return false, fmt.Errorf("bench: no scenario matches %q (see -list)", c.scenario)
	}
	var guardRows []guardRow
	if c.guard != "" {
		rows, err := readGuard(c.guard)
		if err != nil {
			return false, err
		}
		guardRows = rows
	}
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return false, fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return false, fmt.Errorf("bench: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if c.memprofile != "" {
		defer func() {
			if err := writeProfile("allocs", c.memprofile); err != nil {
				fmt.Fprintln(info, err)
			}
		}()
	}
	if c.blockprof != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
		defer func() {
			runtime.SetBlockProfileRate(0)
			if err := writeProfile("block", c.blockprof); err != nil {
				fmt.Fprintln(info, err)
			}
		}()
	}
	fmt.Fprint(info, wrap(fmt.Sprintf("bench: %d scenarios; %s; %s", len(selected), env.describe(), loadAverage()), "", "  "))
	terminal := progress.IsTerminal(info)
	var rounds [][]*result
	ok := true
	for round := range c.count {
		if c.count > 1 {
			fmt.Fprintf(info, "round %d of %d\n", round+1, c.count)
		}
		runs := make([]*result, len(selected))
		for i, s := range selected {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			// Off a terminal the name comes first, so that a log shows
			// which scenario runs; on one, the progress line shows it.
			name := fmt.Sprintf("  %-44s ", s.name)
			if !terminal {
				fmt.Fprint(info, name)
			}
			env.live.Store(nil)
			meter := progress.Start(info, progress.Options{Label: "  " + s.name, Unit: "msgs", Count: env.liveCount})
			r := runOne(ctx, c, s)
			meter.Stop()
			if terminal {
				fmt.Fprint(info, name)
			}
			if r.Failed != "" {
				fmt.Fprint(info, wrapAfter(name, "FAILED: "+r.Failed, "    "))
				ok = false
			} else {
				fmt.Fprintf(info, "%10.0f msgs/s  (%.1fs)\n", r.Rate, r.Seconds)
			}
			runs[i] = r
		}
		withRatios(selected, runs)
		rounds = append(rounds, runs)
	}
	results := pickRounds(selected, rounds)
	byName := make(map[string]*result, len(results))
	for _, r := range results {
		byName[r.Name] = r
	}
	var verdicts []guardVerdict
	if guardRows != nil {
		verdicts = guard(ctx, c, selected, pairScenarios(c, env), byName, guardRows, c.retries, info)
		ok = ok && guardPassed(verdicts)
	}
	fmt.Fprintf(info, "bench: done; %s\n", loadAverage())
	targets := checkTargets(byName)
	doc := struct {
		Environment string         `json:"environment"`
		Results     []*result      `json:"results"`
		Targets     []target       `json:"targets"`
		Guard       []guardVerdict `json:"guard,omitempty"`
	}{env.describe() + "; " + loadAverage(), results, targets, verdicts}
	if c.jsonFile != "" {
		b, err := json.MarshalIndent(doc, "", "  ")
		if err == nil {
			err = os.WriteFile(c.jsonFile, append(b, '\n'), 0o644)
		}
		if err != nil {
			return false, fmt.Errorf("bench: %w", err)
		}
	}
	if file := c.chartFile(); file != "" {
		var b bytes.Buffer
		if err := writeSVG(&b, doc.Environment, results); err != nil {
			return false, fmt.Errorf("bench: %w", err)
		}
		if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
			return false, fmt.Errorf("bench: %w", err)
		}
	}
	if c.json {
		if verdicts != nil {
			printGuard(info, c.guard, verdicts) // the verdict stays readable in a CI log
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return ok, enc.Encode(doc)
	}
	printTable(out, results)
	printFloors(out, results)
	printTargets(out, targets)
	if verdicts != nil {
		printGuard(out, c.guard, verdicts)
	}
	return ok, nil
}

// chartFile returns the file of the SVG chart: -svg, else -jsonfile's name
// with .svg for its extension, else "" (no chart).
func (c *config) chartFile() string {
	if c.svg != "" || c.jsonFile == "" {
		return c.svg
	}
	return strings.TrimSuffix(c.jsonFile, filepath.Ext(c.jsonFile)) + ".svg"
}

func writeProfile(name, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		return fmt.Errorf("bench: %s profile: %w", name, err)
	}
	return nil
}

// runOne runs one scenario within the timeout.
func runOne(ctx context.Context, c *config, s scenario) *result {
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var r *result
	var err error
	// The label lets a CPU profile of several scenarios be split by
	// scenario: go tool pprof -tagfocus scenario=raw/emulator/g1 ...
	pprof.Do(sctx, pprof.Labels("scenario", s.name), func(sctx context.Context) {
		r, err = s.run(sctx)
	})
	if r == nil {
		r = &result{}
	}
	r.Name, r.Base, r.Floor = s.name, s.base, s.floor
	r.Seconds = time.Since(start).Seconds()
	if err != nil {
		r.Failed = err.Error()
	}
	return r
}

// selectScenarios returns the scenarios matching re and not skip (nil:
// none), with the bases and floors they need, in the registry's order.
func selectScenarios(all []scenario, re, skip *regexp.Regexp) []scenario {
	want := make(map[string]bool)
	for _, s := range all {
		if re.MatchString(s.name) && (skip == nil || !skip.MatchString(s.name)) {
			want[s.name] = true
			for _, dep := range []string{s.base, s.floor} {
				if dep != "" {
					want[dep] = true
				}
			}
		}
	}
	var out []scenario
	for _, s := range all {
		if want[s.name] {
			out = append(out, s)
		}
	}
	return out
}
