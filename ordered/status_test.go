package ordered_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// statusJSON is the JSON of the status page, with the documented names
// (README.md, "Status page").
type statusJSON struct {
	Queue   string    `json:"queue"`
	Time    time.Time `json:"time"`
	Closed  bool      `json:"closed"`
	Receive *struct {
		Received      int64 `json:"received"`
		Delivered     int64 `json:"delivered"`
		Acked         int64 `json:"acked"`
		Nacked        int64 `json:"nacked"`
		Duplicates    int64 `json:"duplicates"`
		Late          int64 `json:"late"`
		Gaps          int64 `json:"gaps"`
		Skipped       int64 `json:"skipped"`
		DeadLettered  int64 `json:"dead_lettered"`
		Conflicts     int64 `json:"conflicts"`
		ParkedNow     int64 `json:"parked_now"`
		Buffered      int   `json:"buffered"`
		BufferedBytes int   `json:"buffered_bytes"`
		Undeleted     int   `json:"undeleted"`
		MaxUndeleted  int   `json:"max_undeleted"`
		PeakUndeleted int   `json:"peak_undeleted"`
		Memory        int   `json:"memory"`
		MaxMemory     int   `json:"max_memory"`
		Groups        int   `json:"groups"`
		Stuck         int   `json:"stuck"`
	} `json:"receive"`
	Send *struct {
		Sent        int64 `json:"sent"`
		Failed      int64 `json:"failed"`
		Retries     int64 `json:"retries"`
		Recovered   int64 `json:"recovered"`
		InFlight    int64 `json:"in_flight"`
		MaxInFlight int   `json:"max_in_flight"`
		Held        int64 `json:"held"`
		Groups      int   `json:"groups"`
		Tampered    int64 `json:"tampered"`
	} `json:"send"`
	Stuck        []groupJSON `json:"stuck"`
	StuckTotal   int         `json:"stuck_total"`
	StuckOmitted int         `json:"stuck_omitted"`
	Group        *groupJSON  `json:"group"`
	GroupQuery   *string     `json:"group_query"`
	Rate         []struct {
		Time      time.Time `json:"time"`
		Seconds   float64   `json:"seconds"`
		Delivered float64   `json:"delivered_per_sec"`
		Sent      float64   `json:"sent_per_sec"`
	} `json:"rate"`
}

type groupJSON struct {
	Group         string     `json:"group"`
	Cause         string     `json:"cause"`
	Since         *time.Time `json:"since"`
	StuckSeconds  float64    `json:"stuck_seconds"`
	Error         string     `json:"error"`
	Phase         string     `json:"phase"`
	Epoch         uint64     `json:"epoch"`
	Next          uint64     `json:"next"`
	Out           bool       `json:"out"`
	Attempt       int        `json:"attempt"`
	LastDelivered uint64     `json:"last_delivered"`
	DurableNext   uint64     `json:"durable_next"`
	Held          int        `json:"held"`
	HeldRanges    string     `json:"held_ranges"`
	Newer         int        `json:"newer"`
	Parked        int        `json:"parked"`
	ParkedRanges  string     `json:"parked_ranges"`
	Actions       []string   `json:"actions"` // with StatusOptions.Repair
}

// stuckQueue is a running Queue over memqueue and memstore (GapWait, a
// short GapTimeout) whose Run acks everything, fed bodies straight through
// the driver so that a test can leave holes.
type stuckQueue struct {
	q    *ordered.Queue
	drv  *memqueue.Queue
	stop context.CancelFunc
	done chan error
}

func newStuckQueue(t *testing.T) *stuckQueue {
	drv := memqueue.New(&memqueue.Options{Shards: 2, Seed: 3})
	q := rxQueue(t, drv, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{
		Wait: 20 * time.Millisecond, GapTimeout: 100 * time.Millisecond,
	}})
	ctx, cancel := context.WithCancel(context.Background())
	s := &stuckQueue{q: q, drv: drv, stop: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- q.Run(ctx, func(context.Context, *ordered.Message) error { return nil })
	}()
	t.Cleanup(func() {
		s.stop()
		require.NoError(t, <-s.done)
		rxClose(t, q)
	})
	return s
}

// send sends seqs of group (epoch 5) through the driver.
func (s *stuckQueue) send(t *testing.T, group string, seqs ...uint64) {
	var bodies [][]byte
	for _, seq := range seqs {
		bodies = append(bodies, rxBody(group, 5, seq))
	}
	rxSend(t, s.drv, bodies)
}

// waitStuck waits until stuck groups are reported stuck and acked messages
// acknowledged.
func (s *stuckQueue) waitStuck(t *testing.T, stuck int, acked int64) {
	require.Eventually(t, func() bool {
		st := s.q.Stats().Receive
		return len(st.Stuck) == stuck && st.Acked == acked
	}, 10*time.Second, 5*time.Millisecond, "want %d stuck groups and %d acked: %+v", stuck, acked, s.q.Stats().Receive)
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func getJSON(t *testing.T, url string) statusJSON {
	t.Helper()
	resp, body := get(t, url)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	var s statusJSON
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields() // every field the handler writes is documented here
	require.NoError(t, dec.Decode(&s), body)
	return s
}

// TestStatusJSONGap: a group missing seq 2 of 1..10 under GapWait is listed
// stuck on a "gap", waiting on seq 2, holding 3-10, having delivered 1; a
// healthy group beside it is not listed, and ?group= describes it.
func TestStatusJSONGap(t *testing.T) {
	sq := newStuckQueue(t)
	sq.send(t, "g", 1, 3, 4, 5, 6, 7, 8, 9, 10)
	sq.send(t, "ok", 1, 2, 3)
	sq.waitStuck(t, 1, 4)
	srv := httptest.NewServer(sq.q.StatusHandler())
	defer srv.Close()

	s := getJSON(t, srv.URL+"/?format=json")
	assert.Equal(t, "default", s.Queue)
	assert.False(t, s.Closed)
	require.NotNil(t, s.Receive, "a receiver runs")
	assert.Nil(t, s.Send, "no sender started: this Queue only receives")
	assert.Equal(t, int64(4), s.Receive.Acked)
	assert.Equal(t, 4000, s.Receive.MaxUndeleted, "the cap, ReceiveOptions.MaxUndeleted's default")
	assert.Equal(t, 1, s.Receive.Stuck)
	assert.Equal(t, 1, s.StuckTotal)
	assert.Zero(t, s.StuckOmitted)
	require.Len(t, s.Stuck, 1, "only the stuck group is listed")
	g := s.Stuck[0]
	assert.Equal(t, "g", g.Group)
	assert.Equal(t, "gap", g.Cause)
	assert.Equal(t, uint64(2), g.Next, "next expected")
	assert.Equal(t, "3-10", g.HeldRanges)
	assert.Equal(t, 8, g.Held)
	assert.Equal(t, uint64(1), g.LastDelivered)
	assert.Equal(t, uint64(5), g.Epoch)
	assert.Equal(t, "active", g.Phase)
	assert.False(t, g.Out)
	assert.Zero(t, g.Attempt, "nothing out")
	require.NotNil(t, g.Since)
	assert.WithinDuration(t, s.Time, *g.Since, 10*time.Second)
	assert.Positive(t, g.StuckSeconds)
	assert.Nil(t, s.Group, "no group asked for")

	s = getJSON(t, srv.URL+"/debug/inorder/?format=json&group=ok")
	require.NotNil(t, s.Group, "the healthy group is in memory")
	assert.Equal(t, groupJSON{Group: "ok", Phase: "active", Epoch: 5, Next: 4, LastDelivered: 3, DurableNext: 4}, withoutSince(*s.Group))
	s = getJSON(t, srv.URL+"/?format=json&group=nope")
	assert.Nil(t, s.Group, "a group never seen")

	// The field names of a listed group, as documented.
	_, body := get(t, srv.URL+"/?format=json")
	var raw struct {
		Stuck []map[string]any `json:"stuck"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &raw))
	var keys []string
	for k := range raw.Stuck[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	assert.Equal(t, []string{"attempt", "cause", "durable_next", "epoch", "group", "held", "held_ranges", "last_delivered",
		"newer", "next", "out", "parked", "parked_ranges", "phase", "since", "stuck_seconds"}, keys)
}

func withoutSince(g groupJSON) groupJSON {
	g.Since, g.StuckSeconds = nil, 0
	return g
}

// TestStatusEscapesGroupNames: group names come from senders: the page
// escapes them, the JSON carries them as they are.
func TestStatusEscapesGroupNames(t *testing.T) {
	const evil = `<script>alert(1)</script>`
	const bidi = "invoice\u202Egpj.exe" // a right-to-left override
	sq := newStuckQueue(t)
	sq.send(t, evil, 2, 3) // seq 1 missing
	sq.send(t, bidi, 2)
	sq.waitStuck(t, 2, 0)
	srv := httptest.NewServer(sq.q.StatusHandler())
	defer srv.Close()

	resp, page := get(t, srv.URL+"/?group="+strings.ReplaceAll(evil, "<", "%3C"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.NotContains(t, page, "<script>alert", "the name is never markup")
	assert.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;", "the name is shown, escaped")
	assert.Equal(t, 1, strings.Count(page, "<script>"), "one script: the page's own")
	assert.NotContains(t, page, "\u202E", "no bidirectional override reaches the page")
	assert.Contains(t, page, `invoice\u202egpj.exe`, "it is shown as an escape")
	csp := resp.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "script-src 'sha256-", "only the page's own script runs")

	s := getJSON(t, srv.URL+"/?format=json")
	var names []string
	for _, g := range s.Stuck {
		names = append(names, g.Group)
	}
	assert.ElementsMatch(t, []string{evil, bidi}, names, "the JSON carries the names as sent")
	_, body := get(t, srv.URL+"/?format=json")
	assert.NotContains(t, body, "<script>", "encoding/json escapes <, > and & too")
}

// TestStatusRequests: methods, formats, and a Queue with only one side.
func TestStatusRequests(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Seed: 1})
	q := rxQueue(t, drv, memstore.New(), nil)
	defer rxClose(t, q)
	srv := httptest.NewServer(q.StatusHandler())
	defer srv.Close()

	s := getJSON(t, srv.URL+"/?format=json")
	assert.Nil(t, s.Receive, "nothing started")
	assert.Nil(t, s.Send)
	assert.Empty(t, s.Stuck)
	_, page := get(t, srv.URL)
	assert.Contains(t, page, "No receiver")
	assert.Contains(t, page, "No sender")

	require.NoError(t, q.Send(context.Background(), "g", []byte("x")))
	s = getJSON(t, srv.URL+"/?format=json")
	assert.Nil(t, s.Receive, "the handler never starts the receiver")
	require.NotNil(t, s.Send)
	assert.Equal(t, int64(1), s.Send.Sent)
	assert.Equal(t, 4096, s.Send.MaxInFlight)

	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, err := http.NewRequest(m, srv.URL, strings.NewReader("x"))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, m)
		assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"), m)
	}
	resp, body := get(t, srv.URL+"/?format=xml")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, `unknown format "xml": want format=html (the default) or format=json`)

	resp, err := http.Head(srv.URL + "/?format=json")
	require.NoError(t, err)
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Zero(t, n, "HEAD: no body")

	resp, page = get(t, srv.URL+"/?format=html")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, "<svg", "the rate chart")
	_, page = get(t, srv.URL+"/?group=nope")
	assert.Contains(t, page, "Not in memory", "a group asked for and not found")

	// Closed: still served, and says so.
	rxClose(t, q)
	s = getJSON(t, srv.URL+"/?format=json")
	assert.True(t, s.Closed)
}

// TestStatusRate: the chart's rates come from the samples the handler
// takes as it is requested, one a second at most.
func TestStatusRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drv := memqueue.New(&memqueue.Options{Seed: 1})
		q := rxQueue(t, drv, memstore.New(), nil)
		h := q.StatusHandler()
		fetch := func() statusJSON {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?format=json", nil))
			require.Equal(t, http.StatusOK, rec.Code)
			var s statusJSON
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &s))
			return s
		}
		send := func(n int) {
			for range n {
				require.NoError(t, q.Send(context.Background(), "g", []byte("x")))
			}
		}
		send(1)
		assert.Empty(t, fetch().Rate, "one sample: no rate yet")
		send(20)
		time.Sleep(2 * time.Second)
		s := fetch()
		require.Len(t, s.Rate, 1)
		assert.Equal(t, 2.0, s.Rate[0].Seconds)
		assert.Equal(t, 10.0, s.Rate[0].Sent, "20 sent in 2 s")
		assert.Zero(t, s.Rate[0].Delivered)
		assert.Len(t, fetch().Rate, 1, "within a second: no new sample")

		time.Sleep(time.Second)
		assert.Len(t, fetch().Rate, 2)
		time.Sleep(10 * time.Minute)
		s = fetch()
		assert.Len(t, s.Rate, 1, "samples older than 5 minutes are dropped")
		assert.Equal(t, 600.0, s.Rate[0].Seconds)

		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		assert.Contains(t, rec.Body.String(), `<polyline class="sent"`)
		rxClose(t, q)
	})
}

// TestStatusRace: the page is served while the Queue sends, receives and
// closes (go test -race).
func TestStatusRace(t *testing.T) {
	drv := memqueue.New(&memqueue.Options{Shards: 4, Seed: 2, Redeliver: 0.1})
	q := rxQueue(t, drv, memstore.New(), &ordered.Options{Receive: ordered.ReceiveOptions{Wait: 10 * time.Millisecond}})
	srv := httptest.NewServer(q.StatusHandler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = q.Run(ctx, func(context.Context, *ordered.Message) error { return nil })
	})
	wg.Go(func() {
		for i := 0; ctx.Err() == nil && i < 2000; i++ {
			_ = q.Send(ctx, []string{"a", "b", "c"}[i%3], []byte("x"))
		}
	})
	for i := range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				url := srv.URL + "/?format=json&group=a"
				if i%2 == 0 {
					url = srv.URL + "/?group=b"
				}
				resp, err := http.Get(url)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		})
	}
	require.Eventually(t, func() bool { return q.Stats().Receive.Acked > 500 }, 20*time.Second, 10*time.Millisecond)
	rxClose(t, q) // while the page is served
	time.Sleep(50 * time.Millisecond)
	cancel()
	wg.Wait()
}
