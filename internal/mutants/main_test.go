package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestListAnchors is -check on the real list: every anchor of every
// mutant matches exactly once in this tree, and the rows are complete.
func TestListAnchors(t *testing.T) {
	root, err := repoRoot()
	require.NoError(t, err)
	var out bytes.Buffer
	ok, err := run(t.Context(), root, mutants, options{check: true, runs: 1}, &out)
	require.NoError(t, err)
	assert.True(t, ok, "every anchor matches once; got:\n%s", out.String())
}

// TestApply covers the anchor rule: exactly one occurrence, or nothing is
// changed; restore puts the bytes and mode back.
func TestApply(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.go")
	const orig = "x := 1\ny := 2\ny := 2\n"
	require.NoError(t, os.WriteFile(path, []byte(orig), 0o600))

	restore, err := apply(dir, []edit{{File: "a.go", Old: "x := 1", New: "x := 3"}})
	require.NoError(t, err, "a unique anchor applies")
	b, _ := os.ReadFile(path)
	assert.Equal(t, "x := 3\ny := 2\ny := 2\n", string(b), "mutated file")
	restore()
	b, _ = os.ReadFile(path)
	assert.Equal(t, orig, string(b), "restored file")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "restored mode")

	for _, e := range []edit{
		{File: "a.go", Old: "y := 2", New: "y := 3"},    // twice
		{File: "a.go", Old: "z := 1", New: "z := 2"},    // missing
		{File: "none.go", Old: "x := 1", New: "x := 2"}, // no file
	} {
		_, err := apply(dir, []edit{{File: "a.go", Old: "x := 1", New: "x := 9"}, e})
		assert.ErrorContains(t, err, "stale mutant", "edit %+v", e)
		b, _ := os.ReadFile(path)
		assert.Equal(t, orig, string(b), "a stale edit changes nothing, the other edits of the mutant included")
	}
}

// TestRunVerdicts runs the whole command on a tiny module in a git
// repository: a mutant its test catches, one it does not, one that does
// not build, one with a stale anchor, and one whose regexp matches no test.
func TestRunVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds test binaries")
	}
	root := t.TempDir()
	files := map[string]string{
		"go.mod":         "module example.com/m\n\ngo 1.26\n",
		"m/m.go":         "package m\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Unused() int { return 1 }\n",
		"m/m_test.go":    "package m\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n",
		"m/untracked.go": "package m\n\nconst New = 1\n",
	}
	for name, body := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(body), 0o644))
	}
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	git("init", "-q")
	git("add", "go.mod", "m/m.go", "m/m_test.go") // untracked.go stays untracked: it must be copied too
	list := []mutant{
		{Name: "add-subtracts", Breaks: "Add subtracts", Pkg: "./m", Run: "^TestAdd$",
			Edits: []edit{{File: "m/m.go", Old: "return a + b", New: "return a - b"}}},
		{Name: "unused-changed", Breaks: "a function no test calls", Pkg: "./m", Run: "^TestAdd$",
			Edits: []edit{{File: "m/m.go", Old: "return 1", New: "return 2"}}},
		{Name: "no-build", Breaks: "a syntax error", Pkg: "./m", Run: "^TestAdd$",
			Edits: []edit{{File: "m/m.go", Old: "return a + b", New: "return a +"}}},
		{Name: "untracked-seen", Breaks: "uses the untracked file's constant", Pkg: "./m", Run: "^TestAdd$",
			Edits: []edit{{File: "m/m.go", Old: "return a + b", New: "return a + b + New"}}},
		{Name: "stale", Breaks: "an anchor that is gone", Pkg: "./m", Run: "^TestAdd$",
			Edits: []edit{{File: "m/m.go", Old: "return a * b", New: "return 0"}}},
		{Name: "no-test", Breaks: "a regexp that matches nothing", Pkg: "./m", Run: "^TestNothing$",
			Edits: []edit{{File: "m/m.go", Old: "return a + b", New: "return a - b"}}},
	}
	ctx := context.Background()
	verdictOf := func(name string) (bool, string) {
		var out bytes.Buffer
		ok, err := run(ctx, root, list, options{run: "^" + name + "$", runs: 2, baseline: true}, &out)
		require.NoError(t, err, "%s:\n%s", name, out.String())
		return ok, out.String()
	}
	ok, out := verdictOf("add-subtracts")
	assert.True(t, ok, "a mutant its test catches passes the check:\n%s", out)
	assert.Contains(t, out, "yes (2 of 2)", "both runs caught it:\n%s", out)
	assert.Contains(t, out, "Add(2, 3) != 5", "the failure is quoted:\n%s", out)

	ok, out = verdictOf("untracked-seen")
	assert.True(t, ok, "the scratch copy holds untracked files, so the mutant builds and is caught:\n%s", out)

	for name, want := range map[string]string{
		"unused-changed": "survived",
		"no-build":       "does not build",
		"stale":          "anchor found 0 times",
		"no-test":        "matches no test",
	} {
		ok, out := verdictOf(name)
		assert.False(t, ok, "%s must fail the check:\n%s", name, out)
		assert.Contains(t, out, want, "%s:\n%s", name, out)
	}

	var out2 bytes.Buffer
	ok, err := run(ctx, root, list, options{check: true, runs: 1}, &out2)
	require.NoError(t, err)
	assert.False(t, ok, "-check reports the stale anchor")
	assert.Contains(t, out2.String(), "stale: stale mutant: m/m.go: anchor found 0 times", "-check names it:\n%s", out2.String())

	_, err = run(ctx, root, append(list, list[0]), options{check: true, runs: 1}, &out2)
	assert.ErrorContains(t, err, "duplicate name", "a list with a name twice is refused")
}

// TestRotation: a key picks the same mutants every time, at least one,
// consecutive in list order from where the key's hash points, within the
// budget; over many keys every mutant takes its turn, the slow ones too.
func TestRotation(t *testing.T) {
	var list []mutant
	for i := range 20 {
		m := mutant{Name: fmt.Sprintf("m%02d", i)}
		if i%7 == 3 {
			m.Cost = 3 * time.Minute // more than the budget alone
		}
		list = append(list, m)
	}
	const budget = 2 * time.Minute
	seen := map[string]int{}
	for k := range 500 {
		key := fmt.Sprintf("%040x", k*7919)
		first, got := rotation(list, key, budget)
		again, got2 := rotation(list, key, budget)
		require.Equal(t, first, again, "key %s: the same start", key)
		require.Equal(t, got, got2, "key %s: the same mutants", key)
		require.NotEmpty(t, got, "key %s", key)
		assert.Equal(t, list[first].Name, got[0].Name, "key %s: starts where the hash points", key)
		var est time.Duration
		for i, m := range got {
			assert.Equal(t, list[(first+i)%len(list)].Name, m.Name, "key %s: consecutive in list order", key)
			est += m.cost()
			seen[m.Name]++
		}
		if len(got) > 1 {
			assert.LessOrEqual(t, est, budget, "key %s: within the budget", key)
		}
	}
	for _, m := range list {
		assert.Positive(t, seen[m.Name], "%s never took its turn in 500 keys", m.Name)
	}
	assert.Equal(t, 30*time.Second, mutant{}.cost(), "default cost")
}
