package browsertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
)

// TestStatusRepairInChromium: with StatusOptions.Repair, the stuck group's
// row has a Skip hole button; clicking it asks first (the page's confirm,
// stubbed here to say yes and remember the question), posts the form to
// the page itself (its policy lets it, and the same-origin check passes
// with what the browser sends), and lands on the group's page, no group
// stuck any more; the browser logs no error or policy violation.
func TestStatusRepairInChromium(t *testing.T) {
	lq := newLiveQueue(t)
	lq.send(t, "acct-7", 1, 3, 4)
	require.Eventually(t, func() bool { return len(lq.q.Stats().Receive.Stuck) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the group is stuck on its hole")
	mux := http.NewServeMux()
	mux.Handle("/debug/inorder/", lq.q.StatusHandler(ordered.StatusOptions{Repair: true}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	b := startBrowser(t)
	var mu sync.Mutex
	var logged []string
	require.NoError(t, chromedp.Listen(b.tab, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			logged = append(logged, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				logged = append(logged, fmt.Sprintf("%s (%s): %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		}
	}))
	require.NoError(t, chromedp.Do(b.steps, chromedp.Navigate(srv.URL+"/debug/inorder/")))
	assert.Equal(t, "Skip hole", b.waitText("#stuck tbody tr td.repair button"))
	_, err := chromedp.Run(b.steps, chromedp.Evaluate[bool](
		`window.confirm = (m) => { sessionStorage.setItem("asked", m); return true; }; true`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(b.steps, chromedp.Click(chromedp.CSS("#stuck tbody tr td.repair button"))))
	// The post answers with a redirect to the group's page: wait for it
	// (an evaluation cut short by the navigation is asked again).
	require.Eventually(t, func() bool {
		search, err := chromedp.Run(b.steps, chromedp.Evaluate[string](`document.readyState === "complete" ? location.search : ""`))
		return err == nil && search == "?group=acct-7"
	}, 10*time.Second, 50*time.Millisecond, "redirected to the group's page")

	assert.Equal(t, "No group is stuck.", b.waitText("#none-stuck"), "repaired")
	assert.Equal(t, "none", b.waitText("#group tbody tr td.cause"), "on the group's page, not stuck")
	asked, err := chromedp.Run(b.steps, chromedp.Evaluate[string](`sessionStorage.getItem("asked") || ""`))
	require.NoError(t, err)
	assert.Contains(t, asked, "Skip the missing seqs of group acct-7?", "the page asked first")
	assert.Equal(t, int64(1), lq.q.Stats().Receive.Skipped)
	require.Eventually(t, func() bool { return lq.q.Stats().Receive.Acked == 3 }, 10*time.Second, 5*time.Millisecond, "3 and 4 delivered")
	mu.Lock()
	logs := slices.Clone(logged)
	mu.Unlock()
	assert.Empty(t, logs, "no error, exception, warning or policy violation")
}
