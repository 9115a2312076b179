package mnsqueue

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"

	"github.com/inorder/inorder/ordered/driver"
)

// session is what a Queue and a Topic share: the SDK client over the
// driver's own transport, the bound on requests in progress, and the
// goroutines of calls in progress, which close ends and waits for.
type session struct {
	opts   Options
	log    *slog.Logger
	client ali_mns.MNSClient
	tr     *transport
	sem    chan struct{}

	mu     sync.RWMutex // guards closed against calls.Add
	closed bool
	calls  sync.WaitGroup // goroutines running SDK calls
	once   sync.Once
	cerr   error
}

// newSession builds the SDK client for endpoint, without any request.
// kind and name ("queue", "orders") go into the log lines.
func newSession(endpoint string, cred Credentials, o Options, kind, name string) (*session, error) {
	endpoint, err := checkEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	cred, err = cred.resolve()
	if err != nil {
		return nil, err
	}
	client, err := newClient(endpoint, cred, o.Timeout)
	if err != nil {
		return nil, err
	}
	tr := newTransport(o.Timeout, o.MaxConns, userAgent)
	client.SetTransport(tr)
	return &session{
		opts:   o,
		log:    o.Logger.With(kind, name),
		client: client,
		tr:     tr,
		sem:    make(chan struct{}, o.MaxConns),
	}, nil
}

// userAgent is what the SDK sends; the driver keeps it.
var userAgent = "aliyun-sdk-go/" + ali_mns.Version + " inorder-mnsqueue"

// newClient calls the SDK's constructor, turning its panics into an error.
func newClient(endpoint string, cred Credentials, timeout time.Duration) (c ali_mns.MNSClient, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("mnsqueue: SDK rejected the configuration: %v", r)
		}
	}()
	return ali_mns.NewAliMNSClientWithConfig(ali_mns.AliMNSClientConfig{
		EndPoint:        endpoint,
		AccessKeyId:     cred.AccessKeyID,
		AccessKeySecret: cred.AccessKeySecret,
		Token:           cred.SecurityToken,
		TimeoutSecond:   int64(timeout / time.Second),
	}), nil
}

// checkEndpoint validates endpoint as the SDK will and returns it without a
// trailing slash.
func checkEndpoint(endpoint string) (string, error) {
	endpoint = strings.TrimSuffix(endpoint, "/")
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("mnsqueue: bad endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("mnsqueue: bad endpoint %q: want http(s)://host[:port] with no user, query or fragment", endpoint)
	}
	if n := strings.Count(endpoint, "."); n != 4 {
		return "", fmt.Errorf("mnsqueue: bad endpoint %q: the SDK requires exactly four dots, it has %d "+
			"(http://<account>.mns.<region>.aliyuncs.com; for an IPv4 host append \"/.\")", endpoint, n)
	}
	return endpoint, nil
}

// checkName accepts the queue, topic or subscription names the service
// documents: letters, digits and hyphens, starting with a letter or digit.
// The name goes into request paths unescaped, so nothing else is let
// through.
func checkName(kind, name string) error {
	if name == "" || len(name) > 256 {
		return fmt.Errorf("mnsqueue: %s name %q must have 1..256 characters", kind, name)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' && i > 0
		if !ok {
			return fmt.Errorf("mnsqueue: %s name %q: want letters, digits and hyphens, starting with a letter or digit", kind, name)
		}
	}
	return nil
}

// run runs fn, a blocking SDK call. The SDK has no context, so fn runs in a
// goroutine owned by s and ctx only ends the wait: run then returns ctx's
// error while the call goes on, and abandon (if not nil) gets its result.
// close ends calls in progress by closing their connections and waits for
// the goroutines.
func run[T any](s *session, ctx context.Context, op string, fn func() T, abandon func(T)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("mnsqueue: %s: %w", op, err)
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return zero, fmt.Errorf("mnsqueue: %s: %w", op, driver.ErrClosed)
	}
	s.calls.Add(1)
	s.mu.RUnlock()
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		s.calls.Done()
		return zero, fmt.Errorf("mnsqueue: %s: %w", op, ctx.Err())
	}
	finish := func() {
		<-s.sem
		s.calls.Done()
	}
	if ctx.Done() == nil {
		defer finish()
		return fn(), nil
	}
	done := make(chan T)
	abandoned := make(chan struct{})
	go func() {
		defer finish()
		v := fn()
		select {
		case done <- v:
		case <-abandoned:
			if abandon != nil {
				abandon(v)
			}
		}
	}()
	select {
	case v := <-done:
		return v, nil
	case <-ctx.Done():
		// A call that has already finished is not abandoned: its outcome
		// is known, and throwing it away would hide messages received or
		// make a send look failed.
		select {
		case v := <-done:
			return v, nil
		default:
		}
		close(abandoned)
		return zero, fmt.Errorf("mnsqueue: %s: %w", op, ctx.Err())
	}
}

// isClosed reports whether close was called.
func (s *session) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// sdkError classifies err, an SDK error of op; after close it reports
// driver.ErrClosed, since close is what cut the request.
func (s *session) sdkError(op string, kind opKind, err error) error {
	if s.isClosed() {
		return fmt.Errorf("mnsqueue: %s: %w (%v)", op, driver.ErrClosed, err)
	}
	return classify(op, kind, err)
}

// IsRetryable implements driver.Queue: network errors and timeouts, answers
// that do not parse, InternalError and throttling (driver.ErrThrottled:
// TooManyRequests, QpsLimitExceeded) are transient; a *driver.BatchError is
// retryable when every failed entry is.
func (s *session) IsRetryable(err error) bool { return isRetryable(err) }

// close refuses new calls, closes the connections, which ends the requests
// in progress (they report driver.ErrClosed), and waits for their
// goroutines for at most Options.CloseTimeout. It is idempotent.
func (s *session) close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.tr.close()
		done := make(chan struct{})
		go func() {
			s.calls.Wait()
			close(done)
		}()
		t := time.NewTimer(s.opts.CloseTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.cerr = fmt.Errorf("mnsqueue: close: requests still in progress after %v", s.opts.CloseTimeout)
		}
	})
	return s.cerr
}
