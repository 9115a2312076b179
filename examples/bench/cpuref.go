package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// The CPU guard against a reference binary (-guard-ref BIN): each CPU row
// also runs in pairs of two child processes, BIN (the bench built from a
// reference commit) and this binary, each serving runs of the row
// (-serve-cpu), alternately, and what this binary adds over the reference
// is judged against zero with half cpuGuardStep for its limit. The pairs
// against the raw base (cpuguard.go) measure ordering's whole cost and
// scale it by the host's speed as raw measures it; but raw's CPU per
// message moved 1.6x with the host's state where ordering's moved little,
// so on 2026-12-05 the scaled figure of one unchanged row ranged over 1.1
// µs and no limit told a 1 µs regression apart. Two runs of the same row
// pay the host's state alike: the difference needs no scaling, and what
// is left is the regression (or the saving) since the reference.
//
// Both sides are children, so neither pays for the parent's heap, and each
// does one run first that does not count (it grows the heap and pays its
// page faults). The reference runs without the plants' env vars
// (INORDER_PLANT*), so that a planted regression in this binary is one
// against an unplanted reference, even when BIN is this binary.

// serveCPU is the child's side (-serve-cpu NAME): it runs the row NAME
// (at -guard-messages, on one P) once per line read from in, after a GC,
// and writes its CPU per message as a JSON line (cpuRun) to out, until in
// ends.
func serveCPU(ctx context.Context, c *config, env *environment, in io.Reader, out io.Writer) error {
	var s scenario
	for _, ps := range pairScenarios(c, env) {
		if ps.name == c.serveCPU {
			s = ps
		}
	}
	if s.run == nil {
		return fmt.Errorf("bench: -serve-cpu: no scenario %q (see -list)", c.serveCPU)
	}
	runtime.GOMAXPROCS(1)
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		if sc.Text() != "run" {
			return fmt.Errorf("bench: -serve-cpu: want \"run\", read %q", sc.Text())
		}
		runtime.GC()
		r := runOne(ctx, c, s)
		if err := enc.Encode(cpuRun{CPUPerMsg: r.CPUPerMsg, Failed: r.Failed}); err != nil {
			return fmt.Errorf("bench: -serve-cpu: %w", err)
		}
	}
	return sc.Err()
}

// cpuRun is a child's answer: one run's CPU per message, or why it failed.
type cpuRun struct {
	CPUPerMsg float64 `json:"cpu_us_per_msg"`
	Failed    string  `json:"failed,omitempty"`
}

// cpuChild is a child serving runs of one row.
type cpuChild struct {
	bin    string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
}

// startChild starts bin serving runs of the row name with c's flags,
// without the plants' env vars if unplanted.
func startChild(ctx context.Context, c *config, bin, name string, unplanted bool) (*cpuChild, error) {
	ch := &cpuChild{bin: bin}
	ch.cmd = exec.CommandContext(ctx, bin, childArgs(c, name)...)
	if unplanted {
		ch.cmd.Env = withoutPlants(os.Environ())
	}
	ch.cmd.Stderr = &ch.stderr
	in, err := ch.cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", bin, err)
	}
	out, err := ch.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", bin, err)
	}
	ch.in, ch.out = in, bufio.NewReader(out)
	if err := ch.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", bin, err)
	}
	return ch, nil
}

// childArgs are the flags a child serving the row name needs: those that
// shape the row's run, as this run has them.
func childArgs(c *config, name string) []string {
	return []string{
		"-serve-cpu", name,
		"-guard-messages", strconv.Itoa(c.guardMessages),
		"-producers", strconv.Itoa(c.producers),
		"-consumers", strconv.Itoa(c.consumers),
		"-size", strconv.Itoa(c.size),
		"-backlog", strconv.Itoa(c.backlog),
		"-window", strconv.Itoa(c.window),
		"-commit-interval", c.commitInterval.String(),
		"-timeout", c.timeout.String(),
	}
}

// withoutPlants returns env without the plants' variables (INORDER_PLANT,
// INORDER_PLANT_SPIN, ...).
func withoutPlants(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "INORDER_PLANT") {
			out = append(out, kv)
		}
	}
	return out
}

// run asks the child for one run and returns its CPU per message.
func (ch *cpuChild) run() (float64, error) {
	if _, err := io.WriteString(ch.in, "run\n"); err != nil {
		return 0, ch.failed(err)
	}
	line, err := ch.out.ReadBytes('\n')
	if err != nil {
		return 0, ch.failed(err)
	}
	var r cpuRun
	if err := json.Unmarshal(line, &r); err != nil {
		return 0, fmt.Errorf("bench: %s answered %q: %w", ch.bin, line, err)
	}
	switch {
	case r.Failed != "":
		return 0, fmt.Errorf("bench: %s: the run failed: %s", ch.bin, r.Failed)
	case !(r.CPUPerMsg > 0):
		return 0, fmt.Errorf("bench: %s measured no CPU time", ch.bin)
	}
	return r.CPUPerMsg, nil
}

// failed returns err with what the child said on stderr, once it exited.
func (ch *cpuChild) failed(err error) error {
	ch.in.Close()
	werr := ch.cmd.Wait()
	return fmt.Errorf("bench: %s: %w (%v): %s", ch.bin, err, werr, strings.TrimSpace(ch.stderr.String()))
}

// close ends the child: its input ends, so it exits.
func (ch *cpuChild) close() {
	ch.in.Close()
	ch.cmd.Wait()
}

// cpuServer serves runs of one row: a child process (cpuChild), or a
// test's fake.
type cpuServer interface {
	run() (float64, error)
	close()
}

// refGuard judges row against the reference binary c.guardRef: it starts
// a child of it and one of this binary, and judges their pairs (against).
func refGuard(ctx context.Context, c *config, row guardRow, retries int, progress io.Writer) guardVerdict {
	v := guardVerdict{guardRow: guardRow{Scenario: row.Scenario, CPU: true}, Against: c.guardRef}
	self, err := os.Executable()
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	ref, err := startChild(ctx, c, c.guardRef, row.Scenario, true)
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	defer ref.close()
	this, err := startChild(ctx, c, self, row.Scenario, false)
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	defer this.close()
	return against(ctx, v, ref, this, c.guardPairs, retries, progress)
}

// against judges v's row from pairs of runs of ref and this, alternately
// first, as judgeRow asks, against a baseline of zero (what this adds)
// and a limit of half cpuGuardStep, unscaled. Each server first does a
// run that does not count.
func against(ctx context.Context, v guardVerdict, ref, this cpuServer, maxPairs, retries int, progress io.Writer) guardVerdict {
	for _, s := range []cpuServer{ref, this} {
		if _, err := s.run(); err != nil {
			v.Problem = err.Error()
			return v
		}
	}
	k := 0
	next := func() (cpuPair, error) {
		if err := ctx.Err(); err != nil {
			return cpuPair{}, err
		}
		k++
		first, second := ref, this
		if k%2 == 0 {
			first, second = this, ref
		}
		a, err := first.run()
		if err != nil {
			return cpuPair{}, err
		}
		b, err := second.run()
		if err != nil {
			return cpuPair{}, err
		}
		if first == this {
			a, b = b, a
		}
		return cpuPair{Base: a, Row: b}, nil
	}
	seen := func(p cpuPair, j cpuJudgement) {
		fmt.Fprintf(progress, "  guard: %s pair %d against the reference: reference %.2f, this %.2f µs/msg (%+.2f); so far %s, limit %+.2f\n",
			v.Scenario, k, p.Base, p.Row, p.Row-p.Base, j, j.Limit)
	}
	return v.judged(judgeRow(cpuBaseline{}, maxPairs, retries, next, seen))
}

// checkRef checks that bin is a file this process may run, before the
// guard's runs begin rather than after them.
func checkRef(bin string) error {
	fi, err := os.Stat(bin)
	switch {
	case err != nil:
		return fmt.Errorf("bench: -guard-ref: %w", err)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return fmt.Errorf("bench: -guard-ref: %s is not an executable file", bin)
	}
	return nil
}
