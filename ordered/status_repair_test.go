package ordered_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// repairQueue is a running Queue over memqueue and a store whose cursors
// can be made corrupt (GapWait, a short GapTimeout, two attempts, a
// dead-letter queue), whose Run fails every ordered message of group "p"
// and acks the rest; its status page has the repairs on.
type repairQueue struct {
	q     *ordered.Queue
	drv   *memqueue.Queue
	dlq   *memqueue.Queue
	store *mendStore
	h     http.Handler
}

func newRepairQueue(t *testing.T) *repairQueue {
	rq := &repairQueue{drv: memqueue.New(&memqueue.Options{Shards: 2, Seed: 3}), dlq: memqueue.New(nil), store: &mendStore{Store: memstore.New()}}
	rq.q = rxQueue(t, rq.drv, rq.store, &ordered.Options{
		Retry: ordered.RetryOptions{Initial: 10 * time.Millisecond, Max: time.Minute}, // a poison message waits a minute for its next retry
		Receive: ordered.ReceiveOptions{
			Wait: 20 * time.Millisecond, GapTimeout: 100 * time.Millisecond, MaxAttempts: 2, DeadLetter: rq.dlq,
		},
	})
	rq.h = rq.q.StatusHandler(ordered.StatusOptions{Repair: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- rq.q.Run(ctx, func(_ context.Context, m *ordered.Message) error {
			if m.Group == "p" && !m.Unordered {
				return errors.New("poison")
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		rxClose(t, rq.q)
	})
	return rq
}

func (rq *repairQueue) send(t *testing.T, group string, epoch uint64, seqs ...uint64) {
	var bodies [][]byte
	for _, s := range seqs {
		bodies = append(bodies, rxBody(group, epoch, s))
	}
	rxSend(t, rq.drv, bodies)
}

// waitStuck waits until group is stuck for reason.
func (rq *repairQueue) waitStuck(t *testing.T, group, reason string) {
	t.Helper()
	require.Eventually(t, func() bool { return rq.stuck(group) == reason }, 10*time.Second, 5*time.Millisecond,
		"want %s stuck on %q: %+v", group, reason, rq.q.Stats().Receive.Stuck)
}

// stuck returns why group is stuck ("" not).
func (rq *repairQueue) stuck(group string) string {
	for _, g := range rq.q.Stats().Receive.Stuck {
		if g.Group == group {
			return g.Reason
		}
	}
	return ""
}

// post posts the form to h as a browser on the page would (same origin).
func post(h http.Handler, target string, form url.Values, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// sameSite is what a browser sends with a form posted by the page itself:
// the page's referrer policy (no-referrer) makes its Origin null, and
// Sec-Fetch-Site says where the form came from.
var sameSite = map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}

func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

// TestStatusRepairRefusals: a repair is a POST from the page's own origin
// to a handler with repairs on; anything else changes nothing: a GET (with
// the same fields), a POST without the option, from another origin, with
// no origin at all, with a bad field.
func TestStatusRepairRefusals(t *testing.T) {
	rq := newRepairQueue(t)
	rq.send(t, "g", 5, 1, 3, 4)
	rq.waitStuck(t, "g", "gap")
	skip := url.Values{"repair": {"skip-hole"}, "group": {"g"}}

	rec := serve(rq.h, http.MethodGet, "/?"+skip.Encode())
	assert.Equal(t, http.StatusOK, rec.Code, "a GET shows the page")
	rec = serve(rq.h, http.MethodGet, "/?format=json&"+skip.Encode())
	assert.Equal(t, http.StatusOK, rec.Code)

	off := rq.q.StatusHandler()
	rec = post(off, "/", skip, sameSite)
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, "repairs off: no POST")
	assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
	rec = post(rq.q.StatusHandler(ordered.StatusOptions{}), "/", skip, sameSite)
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, "the zero StatusOptions: repairs off")

	for name, h := range map[string]map[string]string{
		"cross-site":             {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
		"same-site, other port":  {"Origin": "http://example.com:8080", "Sec-Fetch-Site": "same-site"},
		"other origin":           {"Origin": "http://evil.example"},
		"fetch metadata only":    {"Sec-Fetch-Site": "cross-site"},
		"null origin":            {"Origin": "null"},
		"no port":                {"Origin": "http://example.com:80"},
		"neither header":         {},
		"user-typed (not posts)": {"Sec-Fetch-Site": "none"},
	} {
		rec := post(rq.h, "/", skip, h)
		assert.Equal(t, http.StatusForbidden, rec.Code, "%s: refused", name)
		assert.Contains(t, rec.Body.String(), "repair refused", name)
	}
	rec = post(rq.h, "/?format=json", url.Values{"repair": {"nothing"}, "group": {"g"}}, map[string]string{"Origin": "http://example.com"})
	assert.Equal(t, http.StatusBadRequest, rec.Code, "an Origin naming the Host passes without Sec-Fetch-Site (httptest.NewRequest's Host is example.com)")
	rec = serve(rq.h, http.MethodPut, "/")
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Equal(t, "GET, HEAD, POST", rec.Header().Get("Allow"))

	for name, form := range map[string]url.Values{
		"unknown repair":  {"repair": {"delete-everything"}, "group": {"g"}},
		"no group":        {"repair": {"skip-hole"}},
		"start-at no seq": {"repair": {"start-at"}, "group": {"g"}, "epoch": {"5"}},
		"start-at seq 0":  {"repair": {"start-at"}, "group": {"g"}, "epoch": {"5"}, "seq": {"0"}},
	} {
		rec := post(rq.h, "/", form, sameSite)
		assert.Equal(t, http.StatusBadRequest, rec.Code, name)
	}

	// Refused by the Queue: 409 with the reason.
	rec = post(rq.h, "/", url.Values{"repair": {"dead-letter-head"}, "group": {"g"}}, sameSite)
	assert.Equal(t, http.StatusConflict, rec.Code)
	assert.Contains(t, rec.Body.String(), "not in the state the repair needs")
	rec = post(rq.h, "/?format=json", url.Values{"repair": {"reread"}, "group": {"g"}}, sameSite)
	assert.Equal(t, http.StatusConflict, rec.Code)
	var res struct {
		Action, Group, Error string
		Done                 bool
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
	assert.Equal(t, "reread", res.Action)
	assert.False(t, res.Done)
	assert.Contains(t, res.Error, "stuck on \"gap\"")

	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, "gap", rq.stuck("g"), "still stuck: nothing refused did anything")
	assert.Equal(t, int64(0), rq.q.Stats().Receive.Skipped)
}

// TestStatusRepairPage: the page shows the repair buttons on the stuck
// groups' rows, and only with the option; its policy lets the forms post
// to the page only then.
func TestStatusRepairPage(t *testing.T) {
	rq := newRepairQueue(t)
	rq.send(t, "g", 5, 1, 3)
	rq.send(t, "p", 1, 1, 2)
	rq.send(t, "ok", 1, 1, 2)
	rq.waitStuck(t, "g", "gap")
	rq.waitStuck(t, "p", "poison")

	rec := serve(rq.h, http.MethodGet, "/?group=ok")
	require.Equal(t, http.StatusOK, rec.Code)
	page := rec.Body.String()
	assert.Contains(t, rec.Header().Get("Content-Security-Policy"), "form-action 'self'")
	assert.Contains(t, page, "<th>repair</th>")
	assert.Contains(t, page, `<input type="hidden" name="repair" value="skip-hole"><input type="hidden" name="group64" value="Zw">`)        // "g", base64url
	assert.Contains(t, page, `<input type="hidden" name="repair" value="dead-letter-head"><input type="hidden" name="group64" value="cA">`) // "p"
	assert.Equal(t, 2, strings.Count(page, `<form method="post" class="repair"`), "one button per stuck group, none for the healthy one shown below")
	assert.Contains(t, page, `data-confirm="Skip the missing seqs of group g?`)

	var s statusJSON
	require.NoError(t, json.Unmarshal(serve(rq.h, http.MethodGet, "/?format=json").Body.Bytes(), &s))
	actions := map[string][]string{}
	for _, g := range s.Stuck {
		actions[g.Group] = g.Actions
	}
	assert.Equal(t, map[string][]string{"g": {"skip-hole"}, "p": {"dead-letter-head"}}, actions)

	rec = serve(rq.q.StatusHandler(), http.MethodGet, "/")
	assert.Contains(t, rec.Header().Get("Content-Security-Policy"), "form-action 'none'")
	assert.NotContains(t, rec.Body.String(), "<form", "repairs off: no buttons")
	assert.NotContains(t, rec.Body.String(), "<th>repair</th>")
	var off statusJSON
	require.NoError(t, json.Unmarshal(serve(rq.q.StatusHandler(), http.MethodGet, "/?format=json").Body.Bytes(), &off))
	require.Len(t, off.Stuck, 2)
	for _, g := range off.Stuck {
		assert.Nil(t, g.Actions, "no actions in the JSON without the option")
	}
}

// TestStatusRepairActions: each repair posted from the page does what its
// Queue method does, and redirects to its group's page.
func TestStatusRepairActions(t *testing.T) {
	rq := newRepairQueue(t)
	repaired := func(t *testing.T, form url.Values) {
		t.Helper()
		rec := post(rq.h, "/", form, sameSite)
		require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
		assert.Equal(t, "?group="+url.QueryEscape(form.Get("group")), rec.Header().Get("Location"))
		assert.Empty(t, rq.stuck(form.Get("group")), "no longer stuck")
	}
	acked := func() int64 { return rq.q.Stats().Receive.Acked }

	t.Run("skip-hole", func(t *testing.T) {
		rq.send(t, "g", 5, 1, 3, 4)
		rq.waitStuck(t, "g", "gap")
		before := acked()
		repaired(t, url.Values{"repair": {"skip-hole"}, "group": {"g"}})
		c, err := storeCursor(context.Background(), rq.store, seqstore.Stream{Queue: "default", Group: "g"})
		require.NoError(t, err)
		assert.Equal(t, []seqstore.Range{{Epoch: 5, First: 2, Last: 2}}, c.Skipped, "durable when the POST answers")
		require.Eventually(t, func() bool { return acked() == before+2 }, 10*time.Second, 5*time.Millisecond, "3 and 4 delivered")
	})
	t.Run("dead-letter-head", func(t *testing.T) {
		rq.send(t, "p", 1, 1) // (one message: a second would fail too, stuck again at once)
		rq.waitStuck(t, "p", "poison")
		repaired(t, url.Values{"repair": {"dead-letter-head"}, "group": {"p"}})
		got, err := rq.dlq.ReceiveBatch(context.Background(), 16, 0)
		require.NoError(t, err)
		require.Len(t, got, 1, "the copy is in the dead-letter queue")
		assert.Equal(t, rxBody("p", 1, 1), got[0].Body)
		c, err := storeCursor(context.Background(), rq.store, seqstore.Stream{Queue: "default", Group: "p"})
		require.NoError(t, err)
		assert.Equal(t, uint64(2), c.Next, "passed, durably, when the POST answers")
	})
	t.Run("reread", func(t *testing.T) {
		rq.store.bad.Store(true)
		rq.send(t, "f", 1, 1, 2)
		rq.waitStuck(t, "f", "store")
		rq.store.bad.Store(false)
		before := acked()
		repaired(t, url.Values{"repair": {"reread"}, "group": {"f"}})
		require.Eventually(t, func() bool { return acked() == before+2 }, 10*time.Second, 5*time.Millisecond, "delivered once read")
	})
	t.Run("start-at", func(t *testing.T) {
		rq.send(t, "s", 9, 40, 41)
		rq.waitStuck(t, "s", "gap")
		before := acked()
		rec := post(rq.h, "/?format=json", url.Values{"repair": {"start-at"}, "group": {"s"}, "epoch": {"9"}, "seq": {"40"}}, sameSite)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assert.JSONEq(t, `{"action": "start-at", "group": "s", "done": true}`, rec.Body.String())
		c, err := storeCursor(context.Background(), rq.store, seqstore.Stream{Queue: "default", Group: "s"})
		require.NoError(t, err)
		assert.Equal(t, []seqstore.Range{{Epoch: 9, First: 1, Last: 39}}, c.Skipped, "durable when the POST answers")
		assert.Equal(t, uint64(9), c.Epoch)
		assert.GreaterOrEqual(t, c.Next, uint64(40))
		require.Eventually(t, func() bool { return acked() == before+2 }, 10*time.Second, 5*time.Millisecond, "40 and 41 delivered")
	})
}
