package crashtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// workerBinary builds the worker program once per test binary, on first
// use, so that runs that do not need it (fuzzing) do not pay for it. Under
// -race the worker is built with -race: the library runs in the workers, so
// that is where the race detector must look.
func workerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "crashtest-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "worker")
		// The tag inorder_plant lets TestCheckerCatchesPlantedBugs plant
		// bugs inside the receive core (INORDER_PLANT); without that
		// variable the code is the library's.
		args := []string{"build", "-tags", "inorder_plant", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "./worker")...).CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("build the worker: %v", buildErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func TestMain(m *testing.M) {
	// fasthttp's per-host connection cleaners (the MNS SDK's client) sleep
	// for the idle-connection period before they exit.
	goleak.VerifyTestMain(m,
		goleak.Cleanup(func(int) {
			if binDir != "" {
				_ = os.RemoveAll(binDir)
			}
		}),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	)
}
