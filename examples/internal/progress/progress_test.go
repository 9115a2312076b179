package progress

import (
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestFormat(t *testing.T) {
	o := Options{Label: "send", Unit: "messages"}
	assert.Equal(t, "send: 1200/5000 messages (24%), 830/s, 4.6s left, 1.4s",
		Format(o, 1200, 5000, 1400*time.Millisecond, 830, ""))
	assert.Equal(t, "send: 0/5000 messages (0%), 0.00/s, -- left, 0.2s, connecting",
		Format(o, 0, 5000, 200*time.Millisecond, 0, "connecting"), "no rate yet: no ETA")
	assert.Equal(t, "send: 5000/5000 messages (100%), 12.5/s, 6m40s",
		Format(o, 5000, 5000, 400*time.Second, 12.5, ""), "done: no time left shown")
	assert.Equal(t, "bench: 7 rows, 0.50/s, 14.0s", Format(Options{Label: "bench", Unit: "rows"}, 7, 0, 14*time.Second, 0.5, ""),
		"unknown total: no percentage, no ETA")
	assert.Equal(t, "bench: 3.0s", Format(Options{Label: "bench", Unit: "rows"}, 0, 0, 3*time.Second, 0, ""),
		"nothing counted: the time alone")
}

// TestNotATerminal: on a buffer, a file or a pipe, nothing is drawn and
// Wrap hands the writer back unchanged.
func TestNotATerminal(t *testing.T) {
	var b strings.Builder
	assert.False(t, IsTerminal(&b))
	m := Start(&b, Options{Label: "x", Count: func() (int64, int64) { return 3, 10 }})
	assert.Nil(t, m, "no Meter off a terminal")
	assert.Same(t, &b, m.Wrap(&b).(*strings.Builder))
	m.Stop() // a nil Meter stops quietly
	assert.Empty(t, b.String())

	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, IsTerminal(f), "a regular file is not a terminal")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.False(t, IsTerminal(w), "a pipe is not a terminal")
}

// syncBuffer is a strings.Builder safe for the Meter's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDrawOnTerminal: on a terminal the line is drawn with \r every
// Interval, output through Wrap erases it first, and Stop erases it.
func TestDrawOnTerminal(t *testing.T) {
	var screen syncBuffer
	var n atomic.Int64
	m := start(&screen, Options{Label: "receive", Unit: "messages", Count: func() (int64, int64) { return n.Load(), 20 }}, true)
	require.NotNil(t, m)
	m.terminal = func(w io.Writer) bool { return w == &screen }
	var file strings.Builder
	assert.Same(t, &file, m.Wrap(&file).(*strings.Builder), "output that does not go to the terminal is not wrapped")
	n.Store(5)
	require.Eventually(t, func() bool { return strings.Contains(screen.String(), "\rreceive: 5/20 messages (25%)") },
		5*time.Second, 10*time.Millisecond, "the line is drawn: %q", screen.String())
	out := m.Wrap(&screen)
	_, err := out.Write([]byte("receive message body is 1\n"))
	require.NoError(t, err)
	text := screen.String()
	i := strings.LastIndex(text, "receive message body is 1\n")
	require.Positive(t, i)
	assert.True(t, strings.HasSuffix(text[:i], "\r"), "the line is erased (\\r, blanks, \\r) before other output: %q", text)
	require.Eventually(t, func() bool { return !strings.HasSuffix(screen.String(), "\n") },
		5*time.Second, 10*time.Millisecond, "the next tick draws the line again")
	m.Stop()
	m.Stop()
	assert.True(t, strings.HasSuffix(screen.String(), "\r"), "Stop leaves the cursor at the start of a clean line: %q", screen.String())
}
