package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envBenchChild makes the test binary run as the bench (TestMain): the
// children of TestRefGuardChildren.
const envBenchChild = "INORDER_BENCH_TEST_CHILD"

// fakeServer serves runs at the next of cpus, then (if any) the next of
// cycle, round and round, else the last of cpus again; it records how
// many runs and starts it served.
type fakeServer struct {
	cpus     []float64
	cycle    []float64
	runs     int
	err      error
	closed   int
	starts   int
	startErr error
}

func (f *fakeServer) run() (float64, error) {
	if f.err != nil {
		return 0, f.err
	}
	cpu := f.cpus[min(f.runs, len(f.cpus)-1)]
	if n := f.runs - len(f.cpus); n >= 0 && len(f.cycle) > 0 {
		cpu = f.cycle[n%len(f.cycle)]
	}
	f.runs++
	return cpu, nil
}

func (f *fakeServer) close() { f.closed++ }

// serve returns a start for against that serves ref and this every time,
// counting the starts in ref.starts.
func serve(ref, this *fakeServer) func() (cpuServer, cpuServer, error) {
	return func() (cpuServer, cpuServer, error) {
		ref.starts++
		if ref.startErr != nil {
			return nil, nil, ref.startErr
		}
		return ref, this, nil
	}
}

func TestAgainstTheReference(t *testing.T) {
	judge := func(ref, this *fakeServer) guardVerdict {
		v := guardVerdict{guardRow: guardRow{Scenario: "ordered/q/s/durable/g1", CPU: true}, Against: "ref"}
		return against(context.Background(), v, serve(ref, this), 15, 2, io.Discard)
	}
	v := judge(&fakeServer{cpus: []float64{4}}, &fakeServer{cpus: []float64{4.2}})
	assert.True(t, v.Passed, "0.2 µs dearer: under the limit of 0.5")
	require.Len(t, v.CPUTries, 1)
	assert.Len(t, v.CPUTries[0].Pairs, cpuGuardMinPairs)
	assert.InDelta(t, 0.2, v.CPUTries[0].Added, 1e-9, "unscaled")
	assert.Equal(t, 1.0, v.CPUTries[0].Speed)

	v = judge(&fakeServer{cpus: []float64{4}}, &fakeServer{cpus: []float64{5}})
	assert.False(t, v.Passed, "1 µs dearer")
	assert.Len(t, v.CPUTries, 3, "judged again on fresh pairs, twice")

	v = judge(&fakeServer{cpus: []float64{5}}, &fakeServer{cpus: []float64{4}})
	assert.True(t, v.Passed, "cheaper than the reference")
	assert.True(t, v.CPUTries[0].Stale, "decidedly cheaper: the reference should move forward")

	// The first run of each is a warm-up: a first run 10 µs dear of this
	// binary does not count, and the pairs alternate which runs first
	// yet keep the reference as the base.
	ref, this := &fakeServer{cpus: []float64{4}}, &fakeServer{cpus: []float64{14, 4, 4.1, 4, 4.1, 4}}
	v = judge(ref, this)
	assert.True(t, v.Passed)
	for _, p := range v.CPUTries[0].Pairs {
		assert.Equal(t, 4.0, p.Base, "the reference's runs are the base")
	}
	assert.Equal(t, ref.runs, this.runs)
	assert.Equal(t, 1, ref.starts, "5 pairs: one pair of servers")
	assert.Equal(t, 1, ref.closed)

	// Fresh servers every cpuRefBlock pairs, each with its warm-up; the
	// last look is on an even count.
	ref, this = &fakeServer{cpus: []float64{4}}, &fakeServer{cpus: []float64{4}, cycle: []float64{4.3, 4.7}}
	v = judge(ref, this)
	require.NotEmpty(t, v.CPUTries)
	assert.Len(t, v.CPUTries[0].Pairs, 16, "-guard-pairs 15, rounded up to even")
	assert.Equal(t, 4, ref.starts, "16 pairs: four pairs of servers")
	assert.Equal(t, 4, this.closed, "each closed")
	assert.Equal(t, 16+4, ref.runs, "a warm-up each")

	v = judge(&fakeServer{cpus: []float64{4}, startErr: errors.New("no such file")}, &fakeServer{cpus: []float64{4}})
	assert.False(t, v.Passed)
	assert.Contains(t, v.Problem, "no such file")

	v = judge(&fakeServer{cpus: []float64{4}, err: errors.New("the child exited")}, &fakeServer{cpus: []float64{4}})
	assert.False(t, v.Passed)
	assert.Contains(t, v.Problem, "the child exited")
}

func TestWithoutPlants(t *testing.T) {
	env := []string{"PATH=/bin", "INORDER_PLANT_SPIN=1us", "INORDER_PLANT=handout-alloc", "INORDER_TEST_REDIS_ADDR=x"}
	assert.Equal(t, []string{"PATH=/bin", "INORDER_TEST_REDIS_ADDR=x"}, withoutPlants(env))
}

func TestServeCPU(t *testing.T) {
	c := &config{guardMessages: 2000, producers: 2, consumers: 1, size: minPayload, backlog: 1000, timeout: 30 * time.Second,
		serveCPU: "ordered/memqueue/memstore/durable/g1"}
	var out bytes.Buffer
	require.NoError(t, serveCPU(context.Background(), c, newEnvironment(), strings.NewReader("run\nrun\n"), &out))
	dec := json.NewDecoder(&out)
	for range 2 {
		var r cpuRun
		require.NoError(t, dec.Decode(&r))
		assert.Empty(t, r.Failed)
		assert.Positive(t, r.CPUPerMsg)
	}
	assert.False(t, dec.More(), "one answer a line read")

	err := serveCPU(context.Background(), c, newEnvironment(), strings.NewReader("go\n"), io.Discard)
	assert.ErrorContains(t, err, `want "run", read "go"`)
	c.serveCPU = "ordered/nowhere/g1"
	err = serveCPU(context.Background(), c, newEnvironment(), strings.NewReader("run\n"), io.Discard)
	assert.ErrorContains(t, err, `no scenario "ordered/nowhere/g1"`)
}

// TestRefGuardChildren runs the guard against a reference with real
// children: the test binary serves as the bench (TestMain), for this
// binary and for the reference, which is the same binary here.
func TestRefGuardChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("runs children")
	}
	t.Setenv(envBenchChild, "1")
	self, err := os.Executable()
	require.NoError(t, err)
	c := &config{guardMessages: 2000, guardPairs: cpuGuardMinPairs, producers: 2, consumers: 1, size: minPayload, backlog: 1000,
		timeout: 30 * time.Second, guardRef: self}
	row := guardRow{Scenario: "ordered/memqueue/memstore/durable/g1", Baseline: 3, CPU: true}
	v := refGuard(context.Background(), c, row, 0, io.Discard)
	require.Empty(t, v.Problem)
	require.Len(t, v.CPUTries, 1)
	assert.Contains(t, []int{cpuGuardMinPairs, cpuGuardMinPairs + 1}, len(v.CPUTries[0].Pairs), "at most -guard-pairs, rounded up to even")
	for _, p := range v.CPUTries[0].Pairs {
		assert.Positive(t, p.Base)
		assert.Positive(t, p.Row)
	}
	assert.Equal(t, self, v.Against)

	// A reference that cannot serve: its own words come back.
	bad := filepath.Join(t.TempDir(), "bench-ref")
	require.NoError(t, os.WriteFile(bad, []byte("#!/bin/sh\necho 'flag provided but not defined: -serve-cpu' >&2\nexit 2\n"), 0o755))
	c.guardRef = bad
	v = refGuard(context.Background(), c, row, 0, io.Discard)
	assert.False(t, v.Passed)
	assert.Contains(t, v.Problem, "flag provided but not defined: -serve-cpu")

	assert.ErrorContains(t, checkRef(filepath.Join(t.TempDir(), "none")), "-guard-ref")
	assert.ErrorContains(t, checkRef(t.TempDir()), "not an executable file")
}
