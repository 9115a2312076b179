package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserDeadline bounds a test's whole use of the browser, start
// included: a browser that hangs fails the test within it.
const browserDeadline = 60 * time.Second

// chromium returns the browser to run, or "" when there is none:
// $INORDER_TEST_CHROMIUM when set (and only it), else /usr/bin/chromium,
// else chromium on $PATH.
func chromium() string {
	if p := os.Getenv("INORDER_TEST_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return ""
		}
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// browser is a headless Chromium tab for one test.
type browser struct {
	t   *testing.T
	tab context.Context // a chromedp context whose browser runs
	// steps bounds the test's actions: it ends a few seconds before the
	// browser's deadline, so that a timed-out test still gets its
	// screenshot.
	steps context.Context
}

// startBrowser starts headless Chromium (skipping the test when there is
// none, failing it when CI=true) with a fresh profile and no background
// networking (the machine may have no network: Chromium's own requests
// would flood the log with refused connections). Its cleanup takes a
// screenshot if the test failed, then stops the browser. Register the
// cleanups of what the page shows (servers, queues) before calling it, so
// that they are still up for the screenshot.
func startBrowser(t *testing.T) *browser {
	path := chromium()
	if path == "" {
		const missing = "no Chromium ($INORDER_TEST_CHROMIUM when set, else /usr/bin/chromium or chromium on $PATH)"
		if os.Getenv("CI") == "true" {
			t.Fatal(missing + ": CI=true requires it (apt-get install chromium)")
		}
		t.Skip(missing + ": apt-get install chromium to run this test")
	}
	start := time.Now()
	base, cancelBase := context.WithTimeout(context.Background(), browserDeadline)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(base, opts...)
	// chromedp logs from its own goroutines, until the browser stops.
	var over atomic.Bool
	logf := func(format string, args ...any) {
		if !over.Load() {
			t.Logf("chromedp: "+format, args...)
		}
	}
	tab, cancelTab := chromedp.NewContext(alloc, chromedp.WithErrorf(logf), chromedp.WithLogf(logf))
	steps, cancelSteps := context.WithTimeout(tab, browserDeadline-10*time.Second)
	b := &browser{t: t, tab: tab, steps: steps}
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot()
		}
		cancelSteps()
		cancelTab()
		cancelAlloc()
		cancelBase()
		over.Store(true)
	})
	if err := chromedp.Do(tab); err != nil { // starts the browser, within base's deadline
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	t.Logf("Chromium (%s) started in %v", path, time.Since(start).Round(time.Millisecond))
	return b
}

// screenshot writes the page as it is now, and logs where.
func (b *browser) screenshot() {
	t := b.t
	dir, kept := os.Getenv("INORDER_TEST_ARTIFACTS"), ""
	if dir == "" {
		dir = t.ArtifactDir()
		kept = " (removed after the test unless go test -artifacts; or set INORDER_TEST_ARTIFACTS)"
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(b.tab, 8*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	path := filepath.Join(dir, filepath.Base(t.Name())+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot of the page: %s%s", path, kept)
}
