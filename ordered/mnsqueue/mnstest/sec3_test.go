package mnstest

// Security review 2 of the emulator (issue 21). Nothing here listens beyond
// 127.0.0.1.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Off loopback, a secret must be at least MinRemoteSecretLen bytes and not
// the published default. Before, any other secret was accepted, even "x".
// (validate only: nothing is bound.)
func TestSec3NonLoopbackWeakSecret(t *testing.T) {
	for _, o := range []Options{
		{Addr: "0.0.0.0:0"},
		{Addr: "192.0.2.1:0"},
		{Addr: "0.0.0.0:0", AccessKeySecret: "x"},
		{Addr: "0.0.0.0:0", AccessKeySecret: " "},
		{Addr: "0.0.0.0:0", AccessKeySecret: "fifteen bytes!!"},
		{Addr: "0.0.0.0:0", AccessKeyID: "me", AccessKeySecret: DefaultAccessKeySecret},
	} {
		err := o.validate()
		assert.ErrorIs(t, err, ErrInvalidArgument, "Addr %s secret %q", o.Addr, o.AccessKeySecret)
		assert.ErrorContains(t, err, "not loopback")
	}
	for _, o := range []Options{
		{Addr: "0.0.0.0:0", AccessKeySecret: "sixteen bytes!!!"},
		{Addr: "127.0.0.1:0", AccessKeySecret: "x"}, // loopback: any secret
		{Addr: "127.0.0.2:0"},
	} {
		assert.NoError(t, o.validate(), "Addr %s secret %q", o.Addr, o.AccessKeySecret)
	}
}

// rawReq returns a signed request to s, ready to send several times.
func rawReq(t *testing.T, s *Server, method, uri, body string, withMD5 bool) *http.Request {
	r, err := http.NewRequest(method, "http://"+s.Addr()+uri, strings.NewReader(body))
	require.NoError(t, err)
	signRequest(r, []byte(body), s.AccessKeyID(), s.AccessKeySecret())
	if !withMD5 {
		r.Header.Del("Content-MD5")
		resign(r, s)
	}
	return r
}

func sendRaw(t *testing.T, r *http.Request, body string) (int, string) {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(strings.NewReader(body))
	r2.ContentLength = int64(len(body))
	resp, err := http.DefaultClient.Do(r2)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// As the service: a captured signed request is accepted again within the
// 15 minutes of the Date window (no nonce); a Content-MD5 that does not
// match the body is refused; without Content-MD5 the signature does not
// cover the body, so a captured request carries any other (the gap the
// package documentation states; the SDK always sends Content-MD5).
func TestSec3ReplayAndUnsignedBody(t *testing.T) {
	s := newRawServer(t)
	body := "<Message><MessageBody>original</MessageBody></Message>"
	swapped := "<Message><MessageBody>SWAPPED</MessageBody></Message>"
	r := rawReq(t, s, "POST", "/queues/raw/messages", body, true)
	for i := 0; i < 3; i++ {
		st, b := sendRaw(t, r, body)
		assert.Equal(t, 201, st, "replay %d of a signed SendMessage: %s", i, b)
	}
	st, b := sendRaw(t, r, swapped)
	assert.Equal(t, 400, st, "signed with Content-MD5, body swapped: %s", b)
	assert.Contains(t, b, CodeInvalidDigest)

	r = rawReq(t, s, "POST", "/queues/raw/messages", body, false)
	st, b = sendRaw(t, r, swapped)
	assert.Equal(t, 201, st, "signed without Content-MD5, body swapped: accepted, as by the service: %s", b)
	info, err := s.Queue("raw")
	require.NoError(t, err)
	assert.Equal(t, 4, info.Active, "three replays and the swapped body")
}

// Body cap: a signed 5 MiB body is refused; an unsigned 64 MiB upload is
// answered without being read.
func TestSec3BodyCap(t *testing.T) {
	s := newRawServer(t)
	big := "<Message><MessageBody>" + strings.Repeat("a", 5<<20) + "</MessageBody></Message>"
	r := rawReq(t, s, "POST", "/queues/raw/messages", big, true)
	st, b := sendRaw(t, r, big)
	assert.Equal(t, 400, st, "signed 5 MiB body: %.120s", b)

	conn, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /queues/raw/messages HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 64<<20)
	var sent int64
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	for sent < 64<<20 {
		n, err := conn.Write(chunk)
		sent += int64(n)
		if err != nil {
			break
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	assert.True(t, strings.HasPrefix(line, "HTTP/1.1 4"), "unsigned 64 MiB upload: answered %q", strings.TrimSpace(line))
	assert.Less(t, sent, int64(64<<20), "the server read the whole unsigned upload")
}

// Topics: an http:// subscription endpoint is stored, never called (no
// SSRF).
func TestSec3TopicSSRF(t *testing.T) {
	s := newRawServer(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	var hits atomic.Int64
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			_ = c.Close()
		}
	}()
	defer func() { _ = ln.Close(); <-accepted }()
	require.NoError(t, s.CreateTopic("t", nil))
	for _, ep := range []string{"http://" + ln.Addr().String() + "/hook", "https://" + ln.Addr().String() + "/hook",
		"http://169.254.169.254/latest/meta-data/", "mail:directmail:a@b.c"} {
		a := do(t, s, "PUT", "/topics/t/subscriptions/s"+fmt.Sprint(len(ep)), "<Subscription><Endpoint>"+ep+"</Endpoint></Subscription>", nil)
		assert.Equal(t, 201, a.status, "subscribe %s: %s", ep, a.body)
	}
	for i := 0; i < 5; i++ {
		a := do(t, s, "POST", "/topics/t/messages", "<Message><MessageBody>ping</MessageBody></Message>", nil)
		require.Equal(t, 201, a.status, a.body)
	}
	time.Sleep(200 * time.Millisecond)
	assert.Zero(t, hits.Load(), "connections the emulator made to a subscribed http endpoint")
}

// Caps: topics, subscriptions per topic, stored bytes under fan-out.
func TestSec3TopicCaps(t *testing.T) {
	s, err := NewServer(&Options{MaxTopics: 3, MaxQueues: 200, MaxMessageBytes: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	for i := 0; i < 4; i++ {
		err := s.CreateTopic(fmt.Sprintf("t%d", i), nil)
		if i < 3 {
			require.NoError(t, err)
		} else {
			assert.ErrorIs(t, err, ErrLimitExceeded, "topic %d", i)
		}
	}
	for i := 0; i < 101; i++ {
		require.NoError(t, s.CreateQueue(fmt.Sprintf("q%d", i), nil))
		err := s.Subscribe("t0", fmt.Sprintf("s%d", i), Subscription{Endpoint: s.QueueEndpoint(fmt.Sprintf("q%d", i)), NotifyContentFormat: FormatSimplified})
		if i < 100 {
			require.NoError(t, err)
		} else {
			assert.ErrorIs(t, err, ErrLimitExceeded, "subscription %d", i)
		}
	}
	body := "<Message><MessageBody>" + strings.Repeat("z", 60<<10) + "</MessageBody></Message>"
	for i := 0; i < 3; i++ {
		a := do(t, s, "POST", "/topics/t0/messages", body, nil)
		require.Equal(t, 201, a.status, a.body)
	}
	st := s.Stats()
	assert.Equal(t, int64(300), st.Pushed+st.PushFailed, "every push landed or failed")
	assert.LessOrEqual(t, s.storedBytes.Load(), int64(1<<20), "stored bytes within MaxMessageBytes")
}

// Idle connections: the header timeout closes connections that send
// nothing.
func TestSec3IdleConnections(t *testing.T) {
	s, err := NewServer(&Options{ReadTimeout: time.Second})
	require.NoError(t, err)
	defer s.Close()
	var conns []net.Conn
	for i := 0; i < 500; i++ {
		c, err := net.Dial("tcp4", s.Addr())
		require.NoError(t, err, "dial %d", i)
		conns = append(conns, c)
	}
	time.Sleep(1500 * time.Millisecond)
	closed := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			closed++
		}
		_ = c.Close()
	}
	assert.Equal(t, len(conns), closed, "idle connections closed by the server after the header timeout")
}

// Pushes delayed by Faults.PushDelay count against MaxMessages and
// MaxMessageBytes from the publish on. Before, they waited in memory
// uncounted: 30 publishes to 100 JSON subscriptions held 58 MiB under a
// 1 MiB cap, and failed only when they landed.
func TestSec3DelayedPushesUncapped(t *testing.T) {
	s, err := NewServer(&Options{MaxQueues: 200, MaxMessageBytes: 1 << 20, Faults: Faults{PushDelay: 30 * time.Second}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("t", nil))
	for i := 0; i < 100; i++ {
		require.NoError(t, s.CreateQueue(fmt.Sprintf("q%d", i), nil))
		require.NoError(t, s.Subscribe("t", fmt.Sprintf("s%d", i), Subscription{Endpoint: s.QueueEndpoint(fmt.Sprintf("q%d", i)), NotifyContentFormat: FormatJSON}))
	}
	h0 := sec3Heap()
	body := "<Message><MessageBody>" + strings.Repeat("&quot;", 10<<10) + "</MessageBody></Message>"
	for i := 0; i < 30; i++ {
		a := do(t, s, "POST", "/topics/t/messages", body, nil)
		require.Equal(t, 201, a.status, a.body)
	}
	h1 := sec3Heap()
	st := s.Stats()
	t.Logf("30 publishes of 10 KiB to 100 JSON subscriptions, pushes delayed: heap +%.1f MiB held; pushed %d failed %d; reserved %d bytes",
		float64(h1-h0)/(1<<20), st.Pushed, st.PushFailed, s.storedBytes.Load())
	assert.LessOrEqual(t, s.storedBytes.Load(), int64(1<<20), "pushes on their way count against MaxMessageBytes")
	assert.Greater(t, st.PushFailed, int64(2900), "pushes beyond the cap fail at once")
	assert.Less(t, h1-h0, int64(8<<20), "heap held for delayed pushes, under a 1 MiB cap")

	// Deleting a queue gives back the room of its pushes on their way.
	before := s.storedBytes.Load()
	require.NoError(t, s.DeleteQueue("q0"))
	assert.Less(t, s.storedBytes.Load(), before, "room of a deleted queue's pushes given back")
}

func sec3Heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
