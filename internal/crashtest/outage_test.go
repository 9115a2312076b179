package crashtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/seqstore"
)

// outageRun sends and receives through stores that go down for a while
// (down, then up) and requires the checker's verdict: nothing that Send
// confirmed is lost, order is kept, no duplicate.
func outageRun(t *testing.T, sstore, rstore seqstore.Store, down, up func()) {
	e := newEnv(t, nil, nil)
	rec := newRecorder()
	tx := e.open(sstore, nil)
	rx := e.open(rstore, &ordered.Options{Receive: ordered.ReceiveOptions{SyncAck: true}})
	stop := run(t, rx, rec.handler("r", 1, nil))
	failed := 0
	for round := range 6 {
		switch round {
		case 2:
			down()
		case 4:
			up()
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		for g := range 4 {
			failed += 10 - rec.send(ctx, tx, "s", 1, fmt.Sprintf("g%d", g), 10)
		}
		cancel()
		time.Sleep(300 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		// The journal may still be unreadable for a moment after up().
		if _, err := tx.Recover(ctx); err == nil || ctx.Err() != nil {
			require.NoError(t, err, "Recover after the outage")
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	rec.waitDelivered(t, 30*time.Second, rx)
	stop()
	rep := rec.check(t, Config{Leftover: e.waitEmpty(10 * time.Second)})
	assert.Positive(t, failed, "sends failed during the outage")
	t.Logf("failed sends %d; %s", failed, rep.Figures())
}

// TestFaultRedisOutage: the Redis server behind both stores becomes
// unreachable for a while (a TCP proxy in front of it closes its port and
// every connection, then listens again) and comes back with its data. The
// real Redis of INORDER_TEST_REDIS_ADDR (required with CI=true), else a
// miniredis. (redisstore: TestOutageUnderLoad.)
func TestFaultRedisOutage(t *testing.T) {
	redis.SetLogger(quiet{}) // dial failures are the point of the test
	addr := redisAddr(t)
	p := newProxy(t, addr)
	open := redisStores(t, p.addr, addr)
	outageRun(t, open(), open(), p.down, func() { require.NoError(t, p.up(), "proxy up") })
}

// TestFaultSQLOutage: the PostgreSQL server behind both stores becomes
// unreachable for a while (a TCP proxy in front of it closes its port and
// every connection, then listens again). Needs INORDER_TEST_POSTGRES_DSN;
// with CI=true its absence fails the test.
func TestFaultSQLOutage(t *testing.T) {
	dsn := serverVar(t, "INORDER_TEST_POSTGRES_DSN")
	u, err := url.Parse(dsn)
	require.NoError(t, err, "INORDER_TEST_POSTGRES_DSN")
	p := newProxy(t, u.Host)
	u.Host = p.addr
	open := postgresStores(t, u.String(), dsn)
	outageRun(t, open(), open(), p.down, func() { require.NoError(t, p.up(), "proxy up") })
}

// proxy forwards TCP connections to a target and can be taken down (port
// closed, connections cut) and up again on the same port, or black-holed
// (connections and the port stay open, and nothing goes through, either
// way, until it is restored: then what was held goes on, late).
type proxy struct {
	t      *testing.T
	target string
	addr   string
	holed  atomic.Bool
	closed atomic.Bool

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.closed.Store(true); p.down(); p.wg.Wait() })
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *proxy) pipe(c net.Conn) {
	defer c.Close()
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	up, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(up, c); _ = up.Close() })
	p.copy(c, up)
	_ = c.Close()
	wg.Wait()
}

// copy copies src to dst, holding each chunk while the proxy is
// black-holed.
func (p *proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.holed.Load() && !p.closed.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// blackhole holds all traffic through the proxy (on) or lets it go on
// (off), with what was held.
func (p *proxy) blackhole(on bool) { p.holed.Store(on) }

// down closes the port and cuts every connection.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// up listens on the same port again.
func (p *proxy) up() error {
	var ln net.Listener
	var err error
	for range 50 { // the port may linger briefly
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(ln)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.Join(errors.New("crashtest: proxy cannot listen again"), err)
}

// quiet discards go-redis's logs.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
