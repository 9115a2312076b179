package mnstest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of issue 15 item 5: an emulator safe to leave running.

// dripRequest opens a connection to s, writes a correctly signed POST of
// body whose headers and body go out at once up to cut bytes and then one
// byte every gap, and returns how long it took until the server answered
// or closed the connection, and what it answered.
func dripRequest(t *testing.T, s *Server, body string, headersOnly bool, gap time.Duration) (time.Duration, string) {
	t.Helper()
	r, err := http.NewRequest("POST", "http://"+s.Addr()+"/queues/raw/messages", strings.NewReader(body))
	require.NoError(t, err)
	signRequest(r, []byte(body), s.AccessKeyID(), s.AccessKeySecret())
	var head strings.Builder
	fmt.Fprintf(&head, "POST /queues/raw/messages HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", s.Addr(), len(body))
	for k, v := range r.Header {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v[0])
	}
	head.WriteString("\r\n")
	conn, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	answered := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(bufio.NewReader(conn)) // until the server closes
		answered <- string(b)
	}()
	drip := body
	if headersOnly {
		drip = head.String()
	} else {
		_, err = io.WriteString(conn, head.String())
		require.NoError(t, err)
	}
	for i := 0; i < len(drip); i++ {
		if _, err := conn.Write([]byte{drip[i]}); err != nil {
			break // closed by the server
		}
		select {
		case a := <-answered:
			return time.Since(start), a
		case <-time.After(gap):
		}
	}
	select {
	case a := <-answered:
		return time.Since(start), a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer and no close 10 s after the whole request was sent")
		return 0, ""
	}
}

// TestSlowBodyIsCut: a body dripped a byte every 50 ms (4 s in all) gets
// an answer or a closed connection about ReadTimeout after the request
// began, instead of holding the connection for as long as the client likes.
func TestSlowBodyIsCut(t *testing.T) {
	s, err := NewServer(&Options{ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.CreateQueue("raw", nil))
	body := "<Message><MessageBody>" + strings.Repeat("d", 58) + "</MessageBody></Message>"
	took, answer := dripRequest(t, s, body, false, 50*time.Millisecond)
	assert.Less(t, took, 2*time.Second, "cut near ReadTimeout, not after the 4 s of dripping; answered %q", answer)
	assert.NotContains(t, answer, "201 Created", "the message was not stored")
	info, err := s.Queue("raw")
	require.NoError(t, err)
	assert.Zero(t, info.Active, "nothing stored from a cut request")
}

// TestSlowHeadersAreCut: headers dripped slowly are cut too.
func TestSlowHeadersAreCut(t *testing.T) {
	s, err := NewServer(&Options{ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	took, answer := dripRequest(t, s, "<Message><MessageBody>x</MessageBody></Message>", true, 50*time.Millisecond)
	assert.Less(t, took, 2*time.Second, "cut near the header timeout; answered %q", answer)
}

// TestLongPollOutlastsReadTimeout: the read deadline ends with the request's
// body; a long poll still waits its whole wait and returns a message that
// comes late.
func TestLongPollOutlastsReadTimeout(t *testing.T) {
	s, err := NewServer(&Options{ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.CreateQueue("raw", nil))
	time.AfterFunc(time.Second, func() {
		a := do(t, s, "POST", "/queues/raw/messages", "<Message><MessageBody>late</MessageBody></Message>", nil)
		assert.Equal(t, 201, a.status, a.body)
	})
	r, err := http.NewRequest("GET", "http://"+s.Addr()+"/queues/raw/messages?waitseconds=3", nil)
	require.NoError(t, err)
	signRequest(r, nil, s.AccessKeyID(), s.AccessKeySecret())
	start := time.Now()
	resp, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "the message sent 1 s into the wait: %s", b)
	assert.Contains(t, string(b), "<MessageBody>late</MessageBody>")
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "waited past ReadTimeout for the message")
}

// TestNonLoopbackNeedsCredentials: listening beyond loopback with the
// published default credentials is refused.
func TestNonLoopbackNeedsCredentials(t *testing.T) {
	for _, o := range []Options{
		{Addr: "0.0.0.0:0"},
		{Addr: "0.0.0.0:0", AccessKeyID: "me", AccessKeySecret: DefaultAccessKeySecret},
		{Addr: "0.0.0.0:0", AccessKeyID: "me"},
	} {
		_, err := NewServer(&o)
		assert.ErrorIs(t, err, ErrInvalidArgument, "%+v", o)
		assert.ErrorContains(t, err, "not loopback", "%+v", o)
	}
	// Validated without binding: NewServer would listen on every interface.
	o := Options{Addr: "0.0.0.0:0", AccessKeyID: "me", AccessKeySecret: "a secret of my own"}
	require.NoError(t, o.validate(), "explicit credentials")
	s, err := NewServer(&Options{Addr: "127.0.0.2:0"})
	require.NoError(t, err, "any loopback address with the defaults")
	assert.NoError(t, s.Close())
}
