// Package progress draws the example programs' progress line on a terminal:
// what is done of the total, the rate, and the time left, on one line that is
// rewritten in place (with \r) every quarter of a second. When the output is
// not a terminal (a file, a pipe, a test's buffer) it draws nothing, so logs
// and captured output stay clean.
//
// Other output that goes to the same terminal while the line is up must go
// through Meter.Wrap: it erases the line first, so that no text lands in the
// middle of it; the next tick draws the line again below.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Interval is how often the line is drawn.
const Interval = 250 * time.Millisecond

// rateWindow is how far back the rate is measured: long enough to smooth
// bursts, short enough to follow a change of pace.
const rateWindow = 5 * time.Second

// IsTerminal reports whether w is a terminal: an *os.File that is a
// character device. (So is /dev/null, where a progress line costs nothing.)
// golang.org/x/term would also look at the terminal's mode; it is not a
// dependency of this module, and a character device is enough here.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Options describe a progress line.
type Options struct {
	// Label starts the line ("send", "receive").
	Label string
	// Unit names what is counted ("messages").
	Unit string
	// Count returns the count so far and the count that means done (0:
	// unknown, no ETA; both 0: nothing counted, only the time is shown).
	// It is called from the Meter's own goroutine and must be safe for
	// concurrent use.
	Count func() (n, total int64)
	// Note, if set, returns a short text appended to the line.
	Note func() string
}

// Meter draws a progress line until Stop. A Meter on a writer that is not a
// terminal draws nothing, and its Wrap returns the writer unchanged. The
// zero of *Meter (nil) is such a Meter too.
type Meter struct {
	w     io.Writer
	opts  Options
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	// terminal is IsTerminal (tests replace it).
	terminal func(io.Writer) bool

	mu      sync.Mutex // guards w's writes and the fields below
	shown   int        // width of the line on screen (0: none)
	samples []sample   // (time, count), oldest first, within rateWindow
}

type sample struct {
	at time.Time
	n  int64
}

// Start starts a Meter that draws on w if it is a terminal.
func Start(w io.Writer, opts Options) *Meter {
	return start(w, opts, IsTerminal(w))
}

// start is Start with the terminal test decided by the caller (tests).
func start(w io.Writer, opts Options, terminal bool) *Meter {
	if !terminal || opts.Count == nil {
		return nil
	}
	m := &Meter{w: w, opts: opts, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), terminal: IsTerminal}
	go m.loop()
	return m
}

func (m *Meter) loop() {
	defer close(m.done)
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.draw(now)
		}
	}
}

// draw writes the line for now, over the previous one.
func (m *Meter) draw(now time.Time) {
	n, total := m.opts.Count()
	note := ""
	if m.opts.Note != nil {
		note = m.opts.Note()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, sample{now, n})
	for len(m.samples) > 2 && now.Sub(m.samples[1].at) >= rateWindow {
		m.samples = m.samples[1:]
	}
	first := sample{m.start, 0}
	if len(m.samples) > 1 && now.Sub(m.start) > rateWindow {
		first = m.samples[0]
	}
	line := Format(m.opts, n, total, now.Sub(m.start), rate(first, sample{now, n}), note)
	pad := ""
	if w := len(line); w < m.shown {
		pad = strings.Repeat(" ", m.shown-w)
	}
	fmt.Fprint(m.w, "\r"+line+pad)
	m.shown = len(line)
}

func rate(a, b sample) float64 {
	d := b.at.Sub(a.at).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(b.n-a.n) / d
}

// Format is one progress line: "send: 1200/5000 messages (24%), 830/s,
// 4.6s left, 1.4s", the note after the elapsed time.
func Format(o Options, n, total int64, elapsed time.Duration, perSec float64, note string) string {
	var b strings.Builder
	if o.Label != "" {
		b.WriteString(o.Label + ": ")
	}
	unit := ""
	if o.Unit != "" {
		unit = " " + o.Unit
	}
	switch {
	case total > 0:
		fmt.Fprintf(&b, "%d/%d%s (%d%%), %s/s, ", n, total, unit, n*100/total, formatRate(perSec))
		if n < total && perSec > 0 {
			left := time.Duration(float64(total-n) / perSec * float64(time.Second))
			fmt.Fprintf(&b, "%s left, ", formatDuration(left))
		} else if n < total {
			b.WriteString("-- left, ")
		}
	case n > 0:
		fmt.Fprintf(&b, "%d%s, %s/s, ", n, unit, formatRate(perSec))
	}
	b.WriteString(formatDuration(elapsed))
	if note != "" {
		b.WriteString(", " + note)
	}
	return b.String()
}

func formatRate(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 10:
		return fmt.Sprintf("%.1f", r)
	default:
		return fmt.Sprintf("%.2f", r)
	}
}

// formatDuration keeps a duration short: tenths of seconds under a minute
// ("4.6s"), whole seconds above ("6m40s").
func formatDuration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// clear erases the line; m.mu is held.
func (m *Meter) clear() {
	if m.shown > 0 {
		fmt.Fprint(m.w, "\r"+strings.Repeat(" ", m.shown)+"\r")
		m.shown = 0
	}
}

// Stop stops drawing and erases the line, so that what the program prints
// next starts on a clean line. It waits for the Meter's goroutine. Stop is
// idempotent; on a nil Meter it does nothing.
func (m *Meter) Stop() {
	if m == nil {
		return
	}
	m.mu.Lock()
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	m.mu.Unlock()
	<-m.done
	m.mu.Lock()
	m.clear()
	m.mu.Unlock()
}

// Wrap returns a writer that writes to w after erasing the progress line,
// one write at a time with the line's drawing. When w is not a terminal
// (stdout sent to a file while the line is drawn on stderr), or on a nil
// Meter, it returns w: nothing of w's can land in the line.
func (m *Meter) Wrap(w io.Writer) io.Writer {
	if m == nil || !m.terminal(w) {
		return w
	}
	return &wrapped{m: m, w: w}
}

type wrapped struct {
	m *Meter
	w io.Writer
}

func (x *wrapped) Write(p []byte) (int, error) {
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	x.m.clear()
	return x.w.Write(p)
}
