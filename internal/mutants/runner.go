package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// kind is a mutant's verdict.
type kind int

const (
	vSurvived kind = iota // its tests passed: the proof does not guard the property
	vCaught               // its tests failed
	vInvalid              // it does not build, or its tests do not run (or fail unmutated)
	vSkipped              // an environment variable it needs is not set
)

func (k kind) String() string {
	return [...]string{"survived", "caught", "invalid", "skipped"}[k]
}

// verdict is what became of a mutant (or of a baseline run).
type verdict struct {
	kind   kind
	caught int // runs in which the tests failed
	runs   int
	note   string // the first failure line, or why it is invalid
	took   time.Duration
}

func (v verdict) pass() bool { return v.kind == vSurvived }

func (v verdict) String() string {
	s := v.kind.String()
	if v.kind == vCaught || v.kind == vSurvived && v.runs > 0 {
		s = fmt.Sprintf("%s %d of %d", s, v.caught, v.runs)
	}
	if v.note != "" {
		s += ": " + v.note
	}
	return s
}

// runner builds and runs tests in the scratch copy dir.
type runner struct {
	dir       string
	out       io.Writer
	baselines map[string]*verdict // by test command
	builds    int
}

// command identifies a mutant's test command: the same command needs one
// baseline run.
func command(m mutant) string {
	return fmt.Sprintf("%s -run %q race=%v env=%q", m.Pkg, m.Run, m.Race, m.Env)
}

// baseline runs m's tests once on the unmutated copy (once per distinct
// command); they must pass.
func (r *runner) baseline(ctx context.Context, m mutant) *verdict {
	key := command(m)
	if v := r.baselines[key]; v != nil {
		return v
	}
	fmt.Fprintf(r.out, "baseline: %s\n", key)
	v := r.test(ctx, m, 1)
	if v.kind == vCaught {
		v.kind, v.note = vInvalid, "the tests fail without the mutant: "+v.note
	}
	r.baselines[key] = &v
	return &v
}

// mutate applies m's edits to the scratch copy, runs its tests runs times
// and restores the files.
func (r *runner) mutate(ctx context.Context, m mutant, runs int) verdict {
	start := time.Now()
	restore, err := apply(r.dir, m.Edits)
	if err != nil {
		return verdict{kind: vInvalid, note: err.Error(), took: time.Since(start)}
	}
	defer restore()
	v := r.test(ctx, m, runs)
	v.took = time.Since(start)
	return v
}

// test builds the test binary of m's package and runs it runs times.
func (r *runner) test(ctx context.Context, m mutant, runs int) verdict {
	start := time.Now()
	r.builds++
	bin := filepath.Join(r.dir, ".mutants", fmt.Sprintf("t%d.test", r.builds))
	args := []string{"test", "-c", "-o", bin}
	if m.Race {
		args = append(args, "-race")
	}
	build := exec.CommandContext(ctx, "go", append(args, m.Pkg)...)
	build.Dir = r.dir
	if out, err := build.CombinedOutput(); err != nil {
		return verdict{kind: vInvalid, note: "does not build: " + lastLines(out, 3), took: time.Since(start)}
	}
	defer os.Remove(bin)
	timeout := m.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	v := verdict{kind: vSurvived, runs: runs}
	for range runs {
		failed, note, err := r.runTest(ctx, m, bin, timeout)
		if err != nil {
			return verdict{kind: vInvalid, note: err.Error(), took: time.Since(start)}
		}
		if failed {
			v.caught++
			if v.note == "" {
				v.note = note
			}
		}
	}
	if v.caught > 0 {
		v.kind = vCaught
	}
	v.took = time.Since(start)
	return v
}

var logLine = regexp.MustCompile(`^\s+\S+\.go:\d+: ?(.*)$`)

// runTest runs the test binary once in the package's directory, as go test
// does. It reports whether the tests failed, with the first failure line.
func (r *runner) runTest(ctx context.Context, m mutant, bin string, timeout time.Duration) (failed bool, note string, err error) {
	// The binary's own -test.timeout panics with the stacks; the context
	// is a backstop for a binary that does not even do that.
	cctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, "-test.run", m.Run, "-test.count", "1", "-test.timeout", timeout.String())
	cmd.Dir = filepath.Join(r.dir, m.Pkg)
	// What the tests leave in the temporary directory (the crash
	// harness keeps a failed run's histories) goes with the scratch copy.
	tmp, err := os.MkdirTemp(filepath.Join(r.dir, ".mutants"), "tmp-")
	if err != nil {
		return false, "", fmt.Errorf("mutants: %w", err)
	}
	cmd.Env = append(os.Environ(), append([]string{"TMPDIR=" + tmp}, m.Env...)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	runErr := cmd.Run()
	_ = os.RemoveAll(tmp)
	out := buf.Bytes()
	if bytes.Contains(out, []byte("testing: warning: no tests to run")) {
		return false, "", fmt.Errorf("-run %q matches no test in %s", m.Run, m.Pkg)
	}
	var ee *exec.ExitError
	switch {
	case runErr == nil:
		return false, "", nil
	case errors.As(runErr, &ee):
		note := "exit " + ee.ProcessState.String()
		if bytes.Contains(out, []byte("panic: test timed out")) {
			note = "timed out after " + timeout.String()
		} else if f := failure(string(out)); f != "" {
			note = f
		}
		return true, note, nil
	default:
		return false, "", fmt.Errorf("run the tests: %w", runErr)
	}
}

// failure picks the telling line of a failed test's output: the first
// testify failure (its Error and Messages), else a panic, else the last
// message a test logged (t.Fatal's comes last).
func failure(out string) string {
	lines := strings.Split(out, "\n")
	last := ""
	for i, line := range lines {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "Error:") && !strings.HasPrefix(t, "Error Trace:"):
			msg := strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(t, "Error:")), ":")
			for _, next := range lines[i+1 : min(i+12, len(lines))] {
				if m, ok := strings.CutPrefix(strings.TrimSpace(next), "Messages:"); ok {
					msg += ": " + strings.TrimSpace(m)
					break
				}
			}
			return truncate(msg, 200)
		case strings.HasPrefix(t, "panic: "):
			return truncate(t, 200)
		}
		if m := logLine.FindStringSubmatch(line); m != nil && m[1] != "" {
			last = m[1]
		}
	}
	return truncate(last, 200)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return truncate(strings.Join(lines, " | "), 300)
}

// plant returns the files edits touch, with the edits applied in order:
// each Old must occur exactly once in its file as the previous edits left
// it, else the mutant is stale. read reads a file by its File path.
func plant(read func(file string) ([]byte, error), edits []edit) (map[string]string, error) {
	next := map[string]string{}
	for _, e := range edits {
		cur, seen := next[e.File]
		if !seen {
			b, err := read(e.File)
			if err != nil {
				return nil, fmt.Errorf("stale mutant: %w", err)
			}
			cur = string(b)
		}
		if n := strings.Count(cur, e.Old); n != 1 {
			return nil, fmt.Errorf("stale mutant: %s: anchor found %d times, want exactly once: %q", e.File, n, firstLine(e.Old))
		}
		next[e.File] = strings.Replace(cur, e.Old, e.New, 1)
	}
	return next, nil
}

// apply applies edits to the files under dir and returns a function that
// restores them. If any anchor is stale, nothing is changed.
func apply(dir string, edits []edit) (restore func(), err error) {
	next, err := plant(func(file string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, file)) }, edits)
	if err != nil {
		return nil, err
	}
	type saved struct {
		orig []byte
		mode os.FileMode
	}
	files := map[string]saved{}
	restore = func() {
		for path, f := range files {
			_ = os.WriteFile(path, f.orig, f.mode)
		}
	}
	for file, s := range next {
		path := filepath.Join(dir, file)
		fi, err := os.Stat(path)
		if err != nil {
			restore()
			return nil, fmt.Errorf("mutants: %w", err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			restore()
			return nil, fmt.Errorf("mutants: %w", err)
		}
		files[path] = saved{b, fi.Mode().Perm()}
		if err := os.WriteFile(path, []byte(s), fi.Mode().Perm()); err != nil {
			restore()
			return nil, fmt.Errorf("mutants: %w", err)
		}
	}
	return restore, nil
}

// copyTree copies the files git knows in root (tracked, and untracked but
// not ignored), as they are in the work tree, to dst.
func copyTree(root, dst string) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("mutants: git ls-files: %w", err)
	}
	for name := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			return fmt.Errorf("mutants: %w", err)
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return fmt.Errorf("mutants: %w", err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				return fmt.Errorf("mutants: %w", err)
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("mutants: %w", err)
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("mutants: %w", err)
		}
	}
	return nil
}
