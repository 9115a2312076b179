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
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
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
// page faults). A pair of children carries an offset of its own (review11:
// six fresh pairs of the same binary, 20 pairs each, had medians from
// -0.22 to +0.15 µs, where a long run of one pair drifted from -2.4 to
// +2.3 µs and back), which pairing cannot cancel: fresh children take
// over every cpuRefBlock pairs, so that a verdict rests on several draws
// of it, and a try judged again adds pairs from new ones. The pairs
// alternate which side runs first, and a try's last look, where the
// median decides, falls on an even count of pairs, so that a cost of
// going first or second weighs on both sides alike there (the sign test's
// earlier looks need every pair or nearly so on one side, which such a
// cost alone cannot make). The
// reference runs without the plants' env vars (INORDER_PLANT*), so that a
// planted regression in this binary is one against an unplanted
// reference, even when BIN is this binary.
//
// The children get the flags that shape the row (childArgs): a flag added
// there needs a reference that knows it, so the commit that adds one also
// cannot be its own reference; its CI fails on the older pin ("flag
// provided but not defined"), and the pin moves in the same commit to a
// commit that has the flag, or the flag waits. And the judgement compares
// whole benches: a change to the bench's own timed work counts as much as
// one to the library's.

// cpuRefBlock is how many pairs a pair of children serves before fresh
// ones take over.
const cpuRefBlock = cpuGuardMinPairs

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

// cpuChild is a child serving runs of one row; a run that has not
// answered within wait kills it.
type cpuChild struct {
	bin    string
	wait   time.Duration
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
}

// startChild starts bin (a path: a bare name is one in the working
// directory, not one looked up in PATH) serving runs of the row name with
// c's flags, without the plants' env vars if unplanted. A run gets twice
// c.timeout and 5 s to answer (the child's own timeout bounds the
// scenario's context, not a scenario that hangs regardless).
func startChild(ctx context.Context, c *config, bin, name string, unplanted bool) (*cpuChild, error) {
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	ch := &cpuChild{bin: bin, wait: 2*c.timeout + 5*time.Second}
	ch.cmd = exec.CommandContext(ctx, bin, childArgs(c, name)...)
	ch.cmd.WaitDelay = time.Second // a grandchild holding stderr open does not hold Wait
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
	var late atomic.Bool
	t := time.AfterFunc(ch.wait, func() {
		late.Store(true)
		ch.cmd.Process.Kill()
	})
	line, err := ch.out.ReadBytes('\n')
	t.Stop()
	if late.Load() {
		return 0, ch.failed(fmt.Errorf("no answer within %v: killed", ch.wait))
	}
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

// refGuard judges row against the reference binary c.guardRef: children
// of it and of this binary serve the pairs (against).
func refGuard(ctx context.Context, c *config, row guardRow, retries int, progress io.Writer) guardVerdict {
	v := guardVerdict{guardRow: guardRow{Scenario: row.Scenario, CPU: true}, Against: c.guardRef}
	self, err := os.Executable()
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	start := func() (ref, this cpuServer, err error) {
		r, err := startChild(ctx, c, c.guardRef, row.Scenario, true)
		if err != nil {
			return nil, nil, err
		}
		t, err := startChild(ctx, c, self, row.Scenario, false)
		if err != nil {
			r.close()
			return nil, nil, err
		}
		return r, t, nil
	}
	return against(ctx, v, start, c.guardPairs, retries, progress)
}

// against judges v's row from pairs of runs of a reference server and
// this binary's, alternately first, as judgeRow asks (at most maxPairs a
// try, rounded up to even), against a baseline of zero (what this adds)
// and a limit of half cpuGuardStep, unscaled. start gives a fresh pair of
// servers for every cpuRefBlock pairs; each first does a run that does not
// count.
func against(ctx context.Context, v guardVerdict, start func() (ref, this cpuServer, err error), maxPairs, retries int, progress io.Writer) guardVerdict {
	var ref, this cpuServer
	stop := func() {
		if ref != nil {
			ref.close()
			this.close()
			ref, this = nil, nil
		}
	}
	defer stop()
	k := 0
	next := func() (cpuPair, error) {
		if err := ctx.Err(); err != nil {
			return cpuPair{}, err
		}
		if k%cpuRefBlock == 0 {
			stop()
			r, t, err := start()
			if err != nil {
				return cpuPair{}, err
			}
			ref, this = r, t
			for _, s := range []cpuServer{ref, this} {
				if _, err := s.run(); err != nil {
					return cpuPair{}, err
				}
			}
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
	return v.judged(judgeRow(cpuBaseline{}, maxPairs+maxPairs%2, retries, next, seen))
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
