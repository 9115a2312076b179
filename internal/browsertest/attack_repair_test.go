package browsertest

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
)

// TestAttackRepairGroupWithNewline: a group name is any valid UTF-8
// without NUL, so "a\nb" is a group. Its row offers Skip hole; clicking
// it must repair that group. The hidden input's value goes through the
// browser's newline normalization (LF -> CRLF in the form data): the POST
// named the group "a\r\nb", refused (409), and the group stayed stuck
// (found by an attack on the repairs). The form now carries the name
// base64url-encoded (group64).
func TestAttackRepairGroupWithNewline(t *testing.T) {
	const group = "a\nb"
	lq := newLiveQueue(t)
	lq.send(t, group, 1, 3, 4)
	require.Eventually(t, func() bool { return len(lq.q.Stats().Receive.Stuck) == 1 }, 10*time.Second, 5*time.Millisecond)
	mux := http.NewServeMux()
	mux.Handle("/debug/inorder/", lq.q.StatusHandler(ordered.StatusOptions{Repair: true}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	b := startBrowser(t)
	require.NoError(t, chromedp.Do(b.steps, chromedp.Navigate(srv.URL+"/debug/inorder/")))
	assert.Equal(t, "Skip hole", b.waitText("#stuck tbody tr td.repair button"))
	_, err := chromedp.Run(b.steps, chromedp.Evaluate[bool](`window.confirm = () => true; true`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(b.steps, chromedp.Click(chromedp.CSS("#stuck tbody tr td.repair button"))))
	time.Sleep(2 * time.Second)
	body, _ := chromedp.Run(b.steps, chromedp.Evaluate[string](`document.body.innerText.slice(0, 300)`))
	t.Logf("after the click: %q", body)
	assert.Equal(t, int64(1), lq.q.Stats().Receive.Skipped, "the page's Skip hole button repairs the group it is on")
}
