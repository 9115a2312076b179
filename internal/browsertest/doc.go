// Package browsertest holds the tests that drive inorder's web pages (the
// status page of ordered.Queue.StatusHandler) in a real browser: headless
// Chromium, through github.com/chromedp/chromedp. It has no code outside
// its tests.
//
// It is a package of its own, rather than test files of package ordered,
// so that chromedp and its protocol packages stay out of the library's test
// binaries (ordered's tests build and run without them, and chromedp is a
// test-only import here, outside the library's dependency graph), and so
// that the tests that start a browser process have their own TestMain and
// their own rules for a missing browser.
//
// The tests need Chromium: $INORDER_TEST_CHROMIUM when set, else
// /usr/bin/chromium (Debian: apt-get install chromium), else chromium on
// $PATH. Without it they skip, and fail when CI=true. A failing test writes
// a screenshot to $INORDER_TEST_ARTIFACTS, else to its artifact directory
// (kept with go test -artifacts), and logs the path.
package browsertest
