// Command mutants is the standing mutation check: it plants each break of
// its list (list.go) in a scratch copy of the tree and requires the tests
// named for it to fail. A proof that passes on the bug it guards proves
// nothing; this keeps every such proof honest after the code moves on.
//
// Run it through .ci/mutants from anywhere in the repository:
//
//	.ci/mutants                      plant every mutant, one at a time, and run its tests
//	.ci/mutants -run 'sql|lua'       only the mutants whose name matches the regexp
//	.ci/mutants -runs 3 commit-before-delete
//	                                 a named mutant, three test runs: "caught 3 of 3"
//	.ci/mutants -check               only verify that every anchor still matches (CI runs this)
//	.ci/mutants -list                print the list
//	.ci/mutants -rotate KEY -budget 2m -baseline=false
//	                                 a few mutants chosen by KEY, within the budget (CI runs
//	                                 this with KEY the commit hash: see Rotation)
//
// The scratch copy holds the tracked files plus uncommitted changes and new
// untracked files (git ls-files -co --exclude-standard), so a mutant is
// judged against the working tree as it is. For each mutant, its edits are
// applied, the test binary of its package is built (go test -c, with -race
// if the mutant asks), and the binary runs the tests matching its Run
// regexp. The edits are undone before the next mutant.
//
// Verdicts, one row per mutant: "caught N of M" when the tests failed in N
// of M runs (each run must fail for the mutant to count as caught);
// "survived" when they passed; "invalid" when the mutated package does not
// build (a mutant that does not compile proves nothing) or the regexp
// matches no test; "stale" when an anchor does not match exactly once;
// "skipped" when an environment variable it needs is not set (with CI=true
// that is a failure). Before the mutants, each distinct test command runs
// once on the unmutated copy and must pass ("baseline"), so that a failure
// under a mutant is the mutant's doing. The exit status is 0 only if every
// selected mutant was caught in every run.
//
// # Rotation
//
// Planting the whole list takes far longer than a CI run may, so CI plants
// a few mutants on every run: -rotate KEY starts at the mutant a hash of KEY
// picks and takes the mutants after it in list order (wrapping), while
// their estimated times (mutant.Cost) fit in -budget; the first is always
// taken. With KEY the commit hash, every mutant takes its turn as commits
// come, and a run can be repeated with the same KEY. -run narrows the list
// first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	var o options
	flag.BoolVar(&o.check, "check", false, "only verify that every anchor matches exactly once (fast; no build)")
	flag.BoolVar(&o.list, "list", false, "print the mutants and exit")
	flag.StringVar(&o.run, "run", "", "only the mutants whose name matches this regexp")
	flag.IntVar(&o.runs, "runs", 1, "test runs per mutant")
	flag.BoolVar(&o.baseline, "baseline", true, "first run each test command on the unmutated copy; it must pass")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch copy and print where it is")
	flag.StringVar(&o.rotate, "rotate", "", "plant only a few mutants chosen by this key (a commit hash), within -budget")
	flag.DurationVar(&o.budget, "budget", 2*time.Minute, "with -rotate: the estimated time the chosen mutants may take")
	flag.Parse()
	if flag.NArg() > 0 {
		// Bare arguments name mutants exactly.
		names := make([]string, flag.NArg())
		for i, a := range flag.Args() {
			names[i] = regexp.QuoteMeta(a)
		}
		o.run = "^(" + strings.Join(names, "|") + ")$"
	}
	root, err := repoRoot()
	if err == nil {
		err = o.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ok, err := run(context.Background(), root, mutants, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	check, list, keep bool
	run               string
	runs              int  // test runs per mutant (default 1)
	baseline          bool // run each test command unmutated first
	rotate            string
	budget            time.Duration
}

func (o *options) validate() error {
	if o.runs < 1 {
		return errors.New("mutants: -runs must be at least 1")
	}
	if o.rotate != "" && o.budget <= 0 {
		return errors.New("mutants: -budget must be positive")
	}
	if _, err := regexp.Compile(o.run); err != nil {
		return fmt.Errorf("mutants: -run: %w", err)
	}
	return nil
}

// repoRoot returns the top of the git work tree around the current
// directory.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("mutants: not in a git work tree: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// run selects the mutants of list matching o.run and lists, checks or runs
// them against the tree at root, writing the table to out. It reports
// whether every selected mutant passed: its anchors match (-check) or its
// tests failed in every run.
func run(ctx context.Context, root string, list []mutant, o options, out io.Writer) (bool, error) {
	if err := validateList(root, list); err != nil {
		return false, err
	}
	re := regexp.MustCompile(o.run)
	var sel []mutant
	for _, m := range list {
		if re.MatchString(m.Name) {
			sel = append(sel, m)
		}
	}
	if len(sel) == 0 {
		return false, fmt.Errorf("mutants: no mutant matches %q (see -list)", o.run)
	}
	if o.rotate != "" {
		var first int
		first, sel = rotation(sel, o.rotate, o.budget)
		var est time.Duration
		for _, m := range sel {
			est += m.cost()
		}
		fmt.Fprintf(out, "rotation %q: %d of %d mutants from #%d (%s), estimated %v of a %v budget\n",
			o.rotate, len(sel), countMutants(list, re), first+1, sel[0].Name, est, o.budget)
	}
	if o.list {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "mutant\tpackage\ttest\tbreaks")
		for _, m := range sel {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, m.Pkg, m.Run, m.Breaks)
		}
		return true, tw.Flush()
	}
	ok := true
	read := func(file string) ([]byte, error) { return os.ReadFile(filepath.Join(root, file)) }
	for _, m := range sel {
		if _, err := plant(read, m.Edits); err != nil {
			fmt.Fprintf(out, "%s: %v\n", m.Name, err)
			ok = false
		}
	}
	if o.check {
		if ok {
			fmt.Fprintf(out, "mutants: %d anchors of %d mutants match\n", countEdits(sel), len(sel))
		}
		return ok, nil
	}
	scratch, err := os.MkdirTemp("", "inorder-mutants-")
	if err != nil {
		return false, fmt.Errorf("mutants: %w", err)
	}
	if o.keep {
		fmt.Fprintf(out, "scratch copy: %s\n", scratch)
	} else {
		defer os.RemoveAll(scratch)
	}
	if err := copyTree(root, scratch); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Join(scratch, ".mutants"), 0o755); err != nil {
		return false, fmt.Errorf("mutants: %w", err)
	}
	r := &runner{dir: scratch, out: out, baselines: map[string]*verdict{}}
	var rows []row
	for _, m := range sel {
		v := r.judge(ctx, m, o)
		if !(v.kind == vCaught && v.caught == o.runs || v.kind == vSkipped && os.Getenv("CI") != "true") {
			ok = false
		}
		fmt.Fprintf(out, "%-28s %s (%s)\n", m.Name, v, v.took.Round(time.Second))
		rows = append(rows, row{m, v})
	}
	fmt.Fprintln(out)
	printTable(out, rows, o.runs)
	return ok, nil
}

// rotation picks the mutants a rotation run plants: from the one at a hash
// of key, the next ones in order (wrapping round) while the sum of their
// estimated times stays within budget, at least one. It returns the index
// of the first.
func rotation(list []mutant, key string, budget time.Duration) (int, []mutant) {
	h := fnv.New64a()
	h.Write([]byte(key))
	first := int(h.Sum64() % uint64(len(list)))
	out := []mutant{list[first]}
	spent := list[first].cost()
	for i := 1; i < len(list); i++ {
		m := list[(first+i)%len(list)]
		if spent+m.cost() > budget {
			break
		}
		out = append(out, m)
		spent += m.cost()
	}
	return first, out
}

func countMutants(list []mutant, re *regexp.Regexp) int {
	n := 0
	for _, m := range list {
		if re.MatchString(m.Name) {
			n++
		}
	}
	return n
}

func countEdits(ms []mutant) int {
	n := 0
	for _, m := range ms {
		n += len(m.Edits)
	}
	return n
}

// judge runs m's baseline (with o.baseline), then plants m and runs its
// tests o.runs times.
func (r *runner) judge(ctx context.Context, m mutant, o options) verdict {
	if name := missingEnv(m); name != "" {
		v := verdict{kind: vSkipped, note: "needs " + name}
		if os.Getenv("CI") == "true" {
			v.note += " (required with CI=true)"
		}
		return v
	}
	if o.baseline {
		if b := r.baseline(ctx, m); !b.pass() {
			return verdict{kind: vInvalid, note: "baseline: " + b.String()}
		}
	}
	return r.mutate(ctx, m, o.runs)
}

// missingEnv names the first variable of m.Needs that is not set, or "".
func missingEnv(m mutant) string {
	for _, v := range m.Needs {
		if os.Getenv(v) == "" {
			return v
		}
	}
	return ""
}

type row struct {
	m mutant
	v verdict
}

func printTable(w io.Writer, rows []row, runs int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mutant\ttest\tcaught\ttime\tnote")
	for _, r := range rows {
		caught := "no"
		switch {
		case r.v.kind == vCaught && r.v.caught == runs:
			caught = fmt.Sprintf("yes (%d of %d)", r.v.caught, runs)
		case r.v.kind == vCaught:
			caught = fmt.Sprintf("PARTLY (%d of %d)", r.v.caught, runs)
		case r.v.kind != vSurvived:
			caught = strings.ToUpper(r.v.kind.String())
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\n", r.m.Name, r.m.Pkg, r.m.Run, caught, r.v.took.Round(time.Second), r.v.note)
	}
	tw.Flush()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// validateList checks the list itself: unique names, and each mutant
// complete (edits, a package directory that exists, a valid test regexp).
func validateList(root string, list []mutant) error {
	var errs []error
	seen := map[string]bool{}
	for _, m := range list {
		switch {
		case m.Name == "" || seen[m.Name]:
			errs = append(errs, fmt.Errorf("mutant %q: empty or duplicate name", m.Name))
		case len(m.Edits) == 0:
			errs = append(errs, fmt.Errorf("mutant %s: no edits", m.Name))
		case m.Run == "" || m.Breaks == "":
			errs = append(errs, fmt.Errorf("mutant %s: Run and Breaks are required", m.Name))
		}
		seen[m.Name] = true
		if _, err := regexp.Compile(m.Run); err != nil {
			errs = append(errs, fmt.Errorf("mutant %s: Run: %w", m.Name, err))
		}
		if fi, err := os.Stat(filepath.Join(root, m.Pkg)); err != nil || !fi.IsDir() || !strings.HasPrefix(m.Pkg, "./") {
			errs = append(errs, fmt.Errorf("mutant %s: Pkg %q is not a package directory like ./ordered", m.Name, m.Pkg))
		}
		for _, e := range m.Edits {
			if e.File == "" || e.Old == "" || e.Old == e.New {
				errs = append(errs, fmt.Errorf("mutant %s: edit of %q: File and Old are required, New must differ from Old", m.Name, e.File))
			}
		}
		for _, kv := range m.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				errs = append(errs, fmt.Errorf("mutant %s: Env %q is not KEY=VALUE", m.Name, kv))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("mutants: bad list: %w", errors.Join(errs...))
	}
	return nil
}
