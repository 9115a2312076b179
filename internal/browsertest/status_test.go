package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// liveQueue is a running Queue over memqueue and memstore (GapWait, a
// short GapTimeout) whose Run acks everything. Bodies go straight through
// the driver, so that a test can leave holes.
type liveQueue struct {
	q   *ordered.Queue
	drv *memqueue.Queue
}

func newLiveQueue(t *testing.T) *liveQueue {
	drv := memqueue.New(&memqueue.Options{Shards: 2, Seed: 5})
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{
		Wait: 20 * time.Millisecond, GapTimeout: 100 * time.Millisecond,
	}})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, func(context.Context, *ordered.Message) error { return nil }) }()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-done)
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, q.Close(cctx))
	})
	return &liveQueue{q: q, drv: drv}
}

// send sends seqs of group (epoch 9) through the driver.
func (l *liveQueue) send(t *testing.T, group string, seqs ...uint64) {
	var bodies [][]byte
	for _, s := range seqs {
		bodies = append(bodies, envelope.Append(nil, envelope.Header{Group: group, Epoch: 9, Seq: s}, fmt.Appendf(nil, "%d", s)))
	}
	require.NoError(t, l.drv.SendBatch(context.Background(), bodies))
}

// visibleText returns, in one evaluation (the page replaces its content as
// it refreshes), the rendered text of the element sel selects, or null
// while there is none or it is not visible.
const visibleText = `(sel) => {
	const e = document.querySelector(sel);
	if (!e || !e.checkVisibility({opacityProperty: true, visibilityProperty: true})) return null;
	const r = e.getBoundingClientRect();
	return r.width > 0 && r.height > 0 ? e.innerText : null;
}`

// waitText waits until sel is visible and returns its text. The page
// renders in milliseconds and refreshes every 2 s: 10 s is plenty, even on
// a busy machine, and a page that never shows sel fails within it.
func (b *browser) waitText(sel string) string {
	b.t.Helper()
	text, err := chromedp.Run(b.steps, chromedp.PollFunction[string](visibleText,
		chromedp.WithPollingArgs(sel), chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(b.t, err, "waiting for %s to be visible", sel)
	return text
}

// TestStatusPageInChromium: the status page of a running Queue, in headless
// Chromium. A group stuck on a hole is shown with its name (escaped by the
// server, shown as sent) and its cause as visible text; the page refreshes
// itself in place (its script runs under its Content-Security-Policy) and
// shows the group no longer stuck once the hole fills; the browser fetches
// nothing but the page, and logs no error.
func TestStatusPageInChromium(t *testing.T) {
	start := time.Now()
	const group = `acct <7> & "co"` // shown as sent, not as markup
	lq := newLiveQueue(t)
	lq.send(t, group, 1, 3, 4, 5, 6, 7, 8, 9, 10)
	lq.send(t, "healthy", 1, 2, 3)
	require.Eventually(t, func() bool {
		st := lq.q.Stats().Receive
		return len(st.Stuck) == 1 && st.Acked == 4
	}, 10*time.Second, 5*time.Millisecond, "the group is stuck on its hole")

	mux := http.NewServeMux()
	mux.Handle("/debug/inorder/", lq.q.StatusHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	b := startBrowser(t)
	var mu sync.Mutex
	var requested, logged []string
	require.NoError(t, chromedp.Listen(b.tab, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			requested = append(requested, e.Request.URL)
		case *runtime.EventExceptionThrown:
			logged = append(logged, "exception: "+e.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				logged = append(logged, fmt.Sprintf("console.%s", e.Type))
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				logged = append(logged, fmt.Sprintf("%s (%s): %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		}
	}))

	require.NoError(t, chromedp.Do(b.steps, chromedp.Navigate(srv.URL+"/debug/inorder/")))
	rendered := time.Now()
	assert.Equal(t, group, b.waitText("#stuck tbody tr td.group"), "the stuck group's name, as visible text")
	assert.Equal(t, "gap", b.waitText("#stuck tbody tr td.cause"), "its cause, as visible text")
	assert.Equal(t, "2", b.waitText("#stuck tbody tr td.next"), "the seq it waits on")
	assert.Equal(t, "3-10 (8)", b.waitText("#stuck tbody tr td.held"), "the seqs it holds")
	assert.Equal(t, "1", b.waitText("#stuck tbody tr td.last"), "the last seq delivered")
	assert.Contains(t, b.waitText("#alert"), "1 group stuck")
	t.Logf("page rendered %v after navigating", time.Since(rendered).Round(time.Millisecond))

	// The page refreshes itself: the snapshot's time moves on.
	first := b.waitText("#asof")
	_, err := chromedp.Run(b.steps, chromedp.PollFunction[bool](`(sel, was) => { const e = document.querySelector(sel); return !!e && e.textContent !== was; }`,
		chromedp.WithPollingArgs("#asof", first), chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the page refreshes itself within 10 s")

	// The hole fills: the next refreshes show the group no longer stuck.
	lq.send(t, group, 2)
	assert.Equal(t, "No group is stuck.", b.waitText("#none-stuck"))
	assert.Empty(t, b.waitTextOrEmpty("#conn"), "no failed refresh")

	mu.Lock()
	reqs, logs := slices.Clone(requested), slices.Clone(logged)
	mu.Unlock()
	assert.GreaterOrEqual(t, len(reqs), 3, "the page and its refreshes: %v", reqs)
	for _, u := range reqs {
		assert.True(t, strings.HasPrefix(u, srv.URL+"/"), "the browser fetched only the page, not %s", u)
	}
	assert.Empty(t, logs, "the page logged no error, exception, warning or CSP violation")
	t.Logf("browser test: %v in all, %d requests", time.Since(start).Round(time.Millisecond), len(reqs))
}

// waitTextOrEmpty returns sel's text now, "" when it has none.
func (b *browser) waitTextOrEmpty(sel string) string {
	b.t.Helper()
	text, err := chromedp.Run(b.steps, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
	require.NoError(b.t, err)
	return text
}
