package ordered

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/inorder/inorder/internal/recvcore"
)

// StatusHandler returns an HTTP handler that serves a status page of the
// Queue, to mount on a debug server as net/http/pprof is:
//
//	mux.Handle("/debug/inorder/", q.StatusHandler())
//
// The page (HTML, its style and script inline, nothing fetched from
// elsewhere) refreshes itself every 2 seconds. It shows the counters that
// matter of both directions, the groups in trouble (stuck: a hole under
// GapWait, a poison message, a cursor conflict, a store error), the longest
// stuck first, at most 100 of them with a count of the rest: for each its
// cause, since when, the seq it waits on, the seqs it holds and has parked
// as ranges, the last seq acknowledged and the attempts of the message out;
// and a chart of the messages delivered (and sent) per second over the last
// 5 minutes, from samples the handler takes as the page is requested (one a
// second at most: the chart covers the time the page was watched).
//
// Query parameters: format=json serves the same data as JSON (format=html,
// the default, the page); group=NAME adds the status of one group, if it is
// in memory. The JSON's field names are stable; README.md ("Status page")
// documents them. The handler answers GET and HEAD only (405 otherwise),
// and 400 to an unknown format. Nothing it serves changes anything.
//
// With StatusOptions.Repair (opts: at most one), the page also repairs:
// each stuck group's row gets the buttons of the repairs that apply to it
// (Queue.SkipHole for a hole, DeadLetterHead for a poison message when
// ReceiveOptions.DeadLetter is set, Reread for a store error or a
// conflict, StartAt for a group without a stored cursor), and the handler
// answers POST with the form fields repair (skip-hole, dead-letter-head,
// reread, start-at), group, and for start-at epoch and seq. A POST must
// come from the page's own origin: its Sec-Fetch-Site header must say
// same-origin (browsers send it); without one, its Origin header must name
// the Host the request was sent to (curl: -H "Origin: http://HOST", and a
// proxy in front must pass Host through). Anything else is refused with
// 403. A repair done redirects (303) to the page of its group; a refused
// one answers 409 (ErrNotStuck, ErrNoDeadLetter), 400 (a bad field), 503
// (closed), 504 (not done within 30 seconds: it goes on) or 500 (it
// failed: the store's or the dead-letter queue's error), with the reason
// as text, or as JSON with format=json in the URL.
//
// Serving the page costs the Queue nothing until it is requested: each
// request takes the receiver's lock once, for a snapshot whose cost is
// bounded by the groups it lists (and a walk of the stuck groups, as
// Stats). Group names come from senders: the page escapes them (and shows
// control and bidirectional-override characters as escapes); the JSON
// carries them as they are. The handler works on a Queue that only sends,
// only receives, or is closed; it never starts either side.
func (q *Queue) StatusHandler(opts ...StatusOptions) http.Handler {
	var o StatusOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		panic("ordered: StatusHandler: more than one StatusOptions")
	}
	h := &statusHandler{q: q, opts: o, csp: statusCSP}
	if o.Repair {
		h.csp = statusRepairCSP
	}
	return h
}

// StatusOptions configures Queue.StatusHandler. The zero value serves a
// page that only shows.
type StatusOptions struct {
	// Repair lets the page repair stuck groups: buttons on their rows,
	// POST requests from the page's own origin (see Queue.StatusHandler).
	// Mount a handler with Repair only where the people who may skip
	// messages can reach it.
	Repair bool
}

// Status page limits: the groups a page lists, the rate samples it keeps
// (one a second at most, over the chart's window).
const (
	statusMaxGroups   = 100
	statusMaxGroupArg = 1024 // bytes of ?group= looked at: a group name is at most 128
	rateWindow        = 5 * time.Minute
	rateEvery         = time.Second
	rateSlots         = int(rateWindow / rateEvery)
	rateBreak         = 30 * time.Second // a longer time between samples is not drawn as a line
)

// statusHandler serves Queue.StatusHandler. It keeps the rate samples.
type statusHandler struct {
	q    *Queue
	opts StatusOptions
	csp  string

	mu      sync.Mutex
	samples [rateSlots]rateCount // a ring, oldest at (head-n) mod rateSlots
	head, n int
}

// rateCount is one sample of the counters the chart derives rates from.
type rateCount struct {
	at              time.Time
	delivered, sent int64
}

// The status snapshot. Its JSON field names are part of the API
// (README.md, "Status page").
type (
	statusSnapshot struct {
		Queue        string         `json:"queue"`
		Time         time.Time      `json:"time"`
		Closed       bool           `json:"closed"`
		Receive      *receiveStatus `json:"receive"` // null: no receiver started
		Send         *sendStatus    `json:"send"`    // null: no sender started
		Stuck        []groupStatus  `json:"stuck"`   // the groups in trouble, longest stuck first
		StuckTotal   int            `json:"stuck_total"`
		StuckOmitted int            `json:"stuck_omitted"`
		Group        *groupStatus   `json:"group,omitempty"` // ?group=NAME, when in memory
		GroupQuery   *string        `json:"group_query,omitempty"`
		Rate         []rateSample   `json:"rate"`
	}
	receiveStatus struct {
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
		MaxUndeleted  int   `json:"max_undeleted"`  // the cap, ReceiveOptions.MaxUndeleted
		PeakUndeleted int   `json:"peak_undeleted"` // ReceiveStats.MaxUndeleted
		Memory        int   `json:"memory"`
		MaxMemory     int   `json:"max_memory"`
		Groups        int   `json:"groups"`
		Stuck         int   `json:"stuck"`
	}
	sendStatus struct {
		Sent        int64 `json:"sent"`
		Failed      int64 `json:"failed"`
		Retries     int64 `json:"retries"`
		Recovered   int64 `json:"recovered"`
		InFlight    int64 `json:"in_flight"`
		MaxInFlight int   `json:"max_in_flight"`
		Held        int64 `json:"held"`
		Groups      int   `json:"groups"`
		Tampered    int64 `json:"tampered"`
	}
	groupStatus struct {
		Group         string     `json:"group"`
		Cause         string     `json:"cause"` // "" (not stuck), "gap", "poison", "conflict", "store"
		Since         *time.Time `json:"since,omitempty"`
		StuckSeconds  float64    `json:"stuck_seconds,omitempty"`
		Error         string     `json:"error,omitempty"`
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
		// Actions are the repairs the page offers for the group (only
		// with StatusOptions.Repair, only for stuck groups).
		Actions []string `json:"actions,omitempty"`
	}
	rateSample struct {
		Time      time.Time `json:"time"`
		Seconds   float64   `json:"seconds"` // since the previous sample
		Delivered float64   `json:"delivered_per_sec"`
		Sent      float64   `json:"sent_per_sec"`
	}
)

// receiverStatus is what the status page reads of the receiver, taken
// under its lock in one call.
type receiverStatus struct {
	stats ReceiveStats
	stuck []recvcore.GroupStatus
	total int
	group *recvcore.GroupStatus
}

func (r *receiver) status(limit int, group string, lookup bool) receiverStatus {
	var s receiverStatus
	c := func() recvcore.Stats {
		r.mu.Lock()
		defer r.mu.Unlock() // (see coreStats)
		s.stuck, s.total = r.core.StuckStatus(limit)
		if lookup {
			if g, ok := r.core.GroupStatus(group); ok {
				s.group = &g
			}
		}
		return r.core.Stats()
	}()
	s.stats = r.receiveStats(c)
	return s
}

func (h *statusHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost && h.opts.Repair {
		h.repair(w, req)
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		if h.opts.Repair {
			w.Header().Set("Allow", "GET, HEAD, POST")
			http.Error(w, "method not allowed: the status page answers GET and HEAD, and POST to repair", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: the status page answers GET and HEAD (repairs are off: StatusOptions.Repair)", http.StatusMethodNotAllowed)
		return
	}
	query := req.URL.Query()
	format := query.Get("format")
	if format != "" && format != "html" && format != "json" {
		if len(format) > 32 {
			format = format[:32] + "..."
		}
		http.Error(w, fmt.Sprintf("unknown format %q: want format=html (the default) or format=json", format), http.StatusBadRequest)
		return
	}
	var group *string
	if query.Has("group") {
		g := query.Get("group")
		if len(g) > statusMaxGroupArg {
			g = g[:statusMaxGroupArg]
		}
		group = &g
	}
	snap := h.snapshot(time.Now(), group)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if format == "json" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(snap) // a write error is the client's: nothing to tell it
		return
	}
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, newStatusPage(snap, h.opts.Repair)); err != nil {
		// The template is fixed and tested: a failure is a bug, told
		// plainly rather than served half-written.
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", h.csp)
	w.Header().Set("X-Frame-Options", "DENY")
	_, _ = w.Write(buf.Bytes())
}

// snapshot reads the Queue's state at now, and records a rate sample.
func (h *statusHandler) snapshot(now time.Time, group *string) statusSnapshot {
	q := h.q
	q.mu.Lock()
	snd, rcv, closed := q.snd, q.rcv, q.closed
	q.mu.Unlock()
	snap := statusSnapshot{Queue: q.opts.Name, Time: now.UTC(), Closed: closed, Stuck: []groupStatus{}, GroupQuery: group}
	var delivered, sent int64
	if rcv != nil {
		rs := rcv.status(statusMaxGroups, ptrOr(group, ""), group != nil)
		st := rs.stats
		delivered = st.Delivered
		snap.Receive = &receiveStatus{
			Received: st.Received, Delivered: st.Delivered, Acked: st.Acked, Nacked: st.Nacked,
			Duplicates: st.Duplicates, Late: st.Late, Gaps: st.Gaps, Skipped: st.Skipped,
			DeadLettered: st.DeadLettered, Conflicts: st.Conflicts, ParkedNow: st.ParkedNow,
			Buffered: st.Buffered, BufferedBytes: st.BufferedBytes,
			Undeleted: st.Undeleted, MaxUndeleted: q.opts.Receive.MaxUndeleted, PeakUndeleted: st.MaxUndeleted,
			Memory: st.Memory, MaxMemory: q.opts.Receive.MaxMemory, Groups: st.Groups, Stuck: rs.total,
		}
		for _, g := range rs.stuck {
			s := newGroupStatus(g, now)
			if h.opts.Repair {
				s.Actions = repairActions(g, q.opts.Receive.DeadLetter != nil)
			}
			snap.Stuck = append(snap.Stuck, s)
		}
		snap.StuckTotal, snap.StuckOmitted = rs.total, rs.total-len(rs.stuck)
		if rs.group != nil {
			g := newGroupStatus(*rs.group, now)
			snap.Group = &g
		}
	}
	if snd != nil {
		st := snd.stats()
		sent = st.Sent
		snap.Send = &sendStatus{
			Sent: st.Sent, Failed: st.Failed, Retries: st.Retries, Recovered: st.Recovered,
			InFlight: st.InFlight, MaxInFlight: q.opts.Send.MaxInFlight, Held: st.Held, Groups: st.Groups,
			Tampered: st.Tampered,
		}
	}
	snap.Rate = h.sample(rateCount{at: now, delivered: delivered, sent: sent})
	return snap
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// sample records c, one a second at most, and returns the rates between
// the samples of the last rateWindow.
func (h *statusHandler) sample(c rateCount) []rateSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 || c.at.Sub(h.samples[(h.head+rateSlots-1)%rateSlots].at) >= rateEvery {
		h.samples[h.head] = c
		h.head = (h.head + 1) % rateSlots
		h.n = min(h.n+1, rateSlots)
	}
	rates := []rateSample{}
	var prev rateCount
	for i := range h.n {
		s := h.samples[(h.head-h.n+i+rateSlots)%rateSlots]
		if i > 0 && c.at.Sub(s.at) <= rateWindow {
			d := s.at.Sub(prev.at).Seconds()
			if d > 0 {
				rates = append(rates, rateSample{Time: s.at.UTC(), Seconds: d,
					Delivered: float64(s.delivered-prev.delivered) / d, Sent: float64(s.sent-prev.sent) / d})
			}
		}
		prev = s
	}
	return rates
}

func newGroupStatus(g recvcore.GroupStatus, now time.Time) groupStatus {
	s := groupStatus{
		Group: g.Group, Cause: g.Reason, Phase: g.Phase, Epoch: g.Epoch, Next: g.Next, Out: g.Out,
		Attempt: g.Attempt, LastDelivered: g.Acked, Held: g.Held, Newer: g.Newer + g.Pending, Parked: g.Parked,
		HeldRanges: formatRanges(g.HeldRanges, g.HeldMore), ParkedRanges: formatRanges(g.ParkedRanges, g.ParkedMore),
	}
	if g.DurableEpoch == g.Epoch {
		s.DurableNext = g.Durable
	}
	if g.Reason != "" {
		since := g.Since.UTC()
		s.Since = &since
		s.StuckSeconds = math.Round(now.Sub(g.Since).Seconds()*10) / 10
	}
	if g.Err != nil {
		s.Error = g.Err.Error()
	}
	return s
}

// formatRanges writes ranges as "3-10, 15", with ", ..." when more follow.
func formatRanges(rs []recvcore.SeqRange, more bool) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatUint(r.First, 10))
		if r.Last != r.First {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(r.Last, 10))
		}
	}
	if more {
		b.WriteString(", ...")
	}
	return b.String()
}

// The page: one template, its style and script embedded and inlined, and
// a Content-Security-Policy that lets the browser run only those (by hash)
// and fetch nothing but the page itself (the icon is an empty data: URL,
// so that the browser asks for no /favicon.ico either).

//go:embed status/page.html status/page.css status/page.js
var statusFiles embed.FS

var (
	statusTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
		"name":    displayName,
		"seconds": func(s float64) string { return time.Duration(s * float64(time.Second)).Round(time.Second).String() },
		"bytes":   formatBytes,
		"repairLabel": func(action string) string {
			return map[string]string{recvcore.ActionSkipHole: "Skip hole", recvcore.ActionDeadLetterHead: "Dead-letter head",
				recvcore.ActionReread: "Read cursor again", recvcore.ActionStartAt: "Start at"}[action]
		},
		"repairConfirm": repairConfirm,
		// A form carries a group's name encoded: a browser posts line
		// breaks in a field's value as CRLF, which would name another group.
		"groupField": func(name string) string { return base64.RawURLEncoding.EncodeToString([]byte(name)) },
	}).ParseFS(statusFiles, "status/page.html"))
	statusCSS = template.CSS(mustRead("status/page.css"))
	statusJS  = template.JS(mustRead("status/page.js"))
	statusCSP = "default-src 'none'; script-src '" + cspHash(string(statusJS)) + "'; style-src '" + cspHash(string(statusCSS)) +
		"'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	// statusRepairCSP lets the page's repair forms post to the page itself.
	statusRepairCSP = strings.Replace(statusCSP, "form-action 'none'", "form-action 'self'", 1)
)

func mustRead(name string) string {
	b, err := statusFiles.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// displayName shows a group name on the page: the default group as such,
// and characters that would hide or rearrange text (controls, invisible
// and bidirectional formatting ones, invalid UTF-8) as escapes. The
// template escapes the rest for HTML.
func displayName(name string) string {
	if name == "" {
		return "(default group)"
	}
	var b strings.Builder
	for i, r := range name {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(name[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, name[i])
		case r == ' ' || unicode.IsGraphic(r) && !unicode.Is(unicode.Bidi_Control, r) && !unicode.Is(unicode.Cf, r):
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// statusPage is what the template renders: the snapshot, and the few
// things it does not compute itself.
type statusPage struct {
	statusSnapshot
	CSS    template.CSS
	JS     template.JS
	Chart  chart
	Repair bool // the stuck groups' rows have a column of repair buttons
}

func newStatusPage(s statusSnapshot, repair bool) statusPage {
	return statusPage{statusSnapshot: s, CSS: statusCSS, JS: statusJS, Chart: newChart(s.Time, s.Rate), Repair: repair}
}

// chart is the rate chart, an inline SVG: one polyline per run of samples
// (a pause in the polling breaks the line), over rateWindow up to now.
type chart struct {
	Width, Height int
	Max           string // the top of the scale, per second
	Delivered     []string
	Sent          []string
	Empty         bool
	// Now says whether there is a latest rate; NowDelivered and NowSent
	// are its values.
	Now                   bool
	NowDelivered, NowSent string
}

const chartW, chartH = 600, 120

func newChart(now time.Time, rates []rateSample) chart {
	c := chart{Width: chartW, Height: chartH, Empty: len(rates) == 0}
	if n := len(rates); n > 0 {
		c.Now = true
		c.NowDelivered = strconv.FormatFloat(rates[n-1].Delivered, 'f', 1, 64)
		c.NowSent = strconv.FormatFloat(rates[n-1].Sent, 'f', 1, 64)
	}
	top := 0.0
	for _, r := range rates {
		top = max(top, r.Delivered, r.Sent)
	}
	top = niceCeil(top)
	c.Max = strconv.FormatFloat(top, 'f', -1, 64)
	line := func(v func(rateSample) float64) []string {
		var lines []string
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				lines = append(lines, strings.Join(pts, " "))
			}
			pts = nil
		}
		for _, r := range rates {
			if r.Seconds > rateBreak.Seconds() {
				flush()
			}
			x := float64(chartW) * (1 - now.Sub(r.Time).Seconds()/rateWindow.Seconds())
			y := float64(chartH) * (1 - v(r)/top)
			if len(pts) == 0 && r.Seconds <= rateBreak.Seconds() {
				// A rate holds over its interval: the run starts at
				// the interval's beginning.
				x0 := x - float64(chartW)*r.Seconds/rateWindow.Seconds()
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", max(x0, 0), y))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		flush()
		return lines
	}
	c.Delivered = line(func(r rateSample) float64 { return r.Delivered })
	c.Sent = line(func(r rateSample) float64 { return r.Sent })
	return c
}

// formatBytes writes n bytes in B, KiB, MiB or GiB, to about 3 digits.
func formatBytes(n int) string {
	v, unit := float64(n), "B"
	for _, u := range []string{"KiB", "MiB", "GiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	if unit == "B" {
		return strconv.Itoa(n) + " B"
	}
	prec := 2
	if v >= 100 {
		prec = 0
	} else if v >= 10 {
		prec = 1
	}
	return strconv.FormatFloat(v, 'f', prec, 64) + " " + unit
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
