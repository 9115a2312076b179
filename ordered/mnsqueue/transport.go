package mnsqueue

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// errTransportClosed is what requests made after Close fail with inside the
// SDK; the driver's methods report driver.ErrClosed instead.
var errTransportClosed = errors.New("mnsqueue: transport closed")

// transport carries the SDK's requests (installed with SetTransport) over a
// fasthttp client of its own, configured as the SDK's cannot be:
//
//   - no automatic retry: fasthttp repeats idempotent requests (GET, HEAD,
//     PUT) that failed or timed out up to five times (v1.52 also repeated
//     any request whose connection closed before an answer came), so one
//     ReceiveBatch could receive (and hide) several batches, one
//     ChangeVisibility could rotate the receipt several times and, with
//     v1.52, one SendBatch could enqueue twice. Every request is
//     made once, as the driver contract asks; a failure is reported as a
//     retryable error and the portable layer decides. The price is that a
//     request sent on a keep-alive connection that the server had just
//     closed fails instead of being repeated; idle connections are closed
//     by the client after 10s, well before the service closes them;
//   - requests beyond MaxConns wait for a connection instead of failing with
//     ErrNoFreeConns;
//   - every connection is tracked, so Close ends requests in progress
//     (long polls included) at once instead of leaving them to their
//     timeout.
type transport struct {
	client *fasthttp.Client
	dialer net.Dialer

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func newTransport(timeout time.Duration, maxConns int, userAgent string) *transport {
	t := &transport{
		conns:  make(map[*trackedConn]struct{}),
		dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
	}
	t.client = &fasthttp.Client{
		Name:               userAgent,
		ReadTimeout:        timeout,
		WriteTimeout:       timeout,
		MaxConnsPerHost:    maxConns,
		MaxConnWaitTimeout: timeout,
		Dial:               t.dial,
		// One attempt: Do retries while attempts < MaxIdemponentCallAttempts
		// and RetryIfErr says so.
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (resetTimeout, retry bool) { return false, false },
	}
	return t
}

// RoundTrip implements fasthttp.RoundTripper. It tells the SDK's client never
// to retry: the retry policy is the one of t.client.
func (t *transport) RoundTrip(_ *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (retry bool, err error) {
	return false, t.client.Do(req, resp)
}

func (t *transport) dial(addr string) (net.Conn, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, errTransportClosed
	}
	c, err := t.dialer.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: t}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return nil, errTransportClosed
	}
	t.conns[tc] = struct{}{}
	return tc, nil
}

// close closes every connection and refuses new ones.
func (t *transport) close() {
	t.mu.Lock()
	t.closed = true
	conns := t.conns
	t.conns = map[*trackedConn]struct{}{}
	t.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	t.client.CloseIdleConnections()
}

// trackedConn removes itself from its transport when closed.
type trackedConn struct {
	net.Conn
	t    *transport
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return err
}
