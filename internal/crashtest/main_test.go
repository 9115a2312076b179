package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// workerBin is the worker program built once for the tests that run it.
var workerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "crashtest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workerBin = filepath.Join(dir, "worker")
	build := exec.Command("go", "build", "-o", workerBin, "./worker")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build worker:", err)
		os.Exit(1)
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		// fasthttp's per-host connection cleaners (the MNS SDK's client)
		// sleep for the idle-connection period before they exit.
		goleak.VerifyTestMain(m, goleak.Cleanup(func(c int) { code = c }),
			goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
			goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
			goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		)
	}()
	os.Exit(code)
}
