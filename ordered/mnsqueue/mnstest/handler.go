package mnstest

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"hash"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// maxRequestBody bounds what a request may carry: 16 messages of 64 KiB,
	// escaped, fit well within it.
	maxRequestBody = 4 << 20
	// maxClockSkew is how far a request's Date may be from the server's wall
	// clock, as the service documents.
	maxClockSkew = 15 * time.Minute
	apiVersion   = "2015-06-06"
)

var (
	hdrContentType = []string{"text/xml;charset=utf-8"}
	hdrVersion     = []string{apiVersion}
)

// fault is the injected failure planned for one request.
type fault uint8

const (
	faultNone       fault = iota
	faultErrBefore        // 500 before the operation takes effect
	faultErrAfter         // 500 after it took effect
	faultPartial          // batch: some entries fail with InternalError
	faultDropBefore       // connection closed, nothing done
	faultDropAfter        // connection closed after the operation took effect
)

var faultNames = [...]string{"", "error-before", "error-after", "partial", "drop-before", "drop-after"}

func (f fault) String() string { return faultNames[f] }

// call is one request in flight.
type call struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	op     op
	reqID  string
	qname  string // queue of a queue operation
	tname  string // topic of a topic operation
	sname  string // subscription of a subscription operation
	query  url.Values
	body   []byte
	faults *Faults
	fault  fault
	status int
	code   string // error code answered, for the log
	out    []byte
	// admitted: the request passed the throttles (charged once, even when
	// a long poll looks at its queue many times).
	admitted bool
}

// Request and response buffers are reused: a batch is up to ~1 MiB of XML.
var (
	inPool  = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	outPool = sync.Pool{New: func() any { return new([]byte) }}
)

const maxPooled = 1 << 20

// ServeHTTP serves the MNS queue API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handlers.Add(1)
	defer s.handlers.Done()
	start := time.Now()
	c := &call{s: s, w: w, r: r, reqID: s.requestID(), faults: s.faults.Load()}
	inBuf := inPool.Get().(*bytes.Buffer)
	outBuf := outPool.Get().(*[]byte)
	c.out = (*outBuf)[:0]
	defer func() {
		if inBuf.Cap() <= maxPooled {
			inBuf.Reset()
			inPool.Put(inBuf)
		}
		if cap(c.out) <= maxPooled {
			*outBuf = c.out[:0]
			outPool.Put(outBuf)
		}
	}()
	err := c.serve(inBuf)
	s.stats.requests[c.op].Add(1)
	if err != nil {
		if isThrottle(err) {
			// The service holds a throttled request before it answers.
			c.wait(nil, s.opts.Throttle.Hold)
		}
		c.fail(err)
	}
	c.finish()
	if log := s.opts.Logger; log.Enabled(r.Context(), slog.LevelDebug) {
		log.Debug("mnstest: request", "op", c.op.String(), "queue", c.qname, "status", c.status,
			"code", c.code, "fault", c.fault.String(), "took", time.Since(start), "request_id", c.reqID)
	}
}

// serve runs the request up to the answer, which it leaves in c.
func (c *call) serve(inBuf *bytes.Buffer) *apiError {
	if err := c.route(); err != nil {
		return err
	}
	if err := c.authenticate(); err != nil {
		return err
	}
	if err := c.readBody(inBuf); err != nil {
		return err
	}
	if c.op == opSendMessage && isBatchSend(c.body) {
		c.op = opBatchSendMessage
	}
	if c.op.faultable() {
		if !c.delay() {
			// The server is closing or the client went away.
			if c.op >= opReceiveMessage && c.op <= opBatchPeekMessage {
				return errMessageNotExist
			}
			return errInternal
		}
		c.plan()
		if c.fault == faultNone && (c.op == opReceiveMessage || c.op == opBatchReceiveMessage) && c.s.draw(c.faults.EarlyEmpty) {
			c.s.stats.earlyEmpty.Add(1)
			return errMessageNotExist
		}
		switch c.fault {
		case faultErrBefore:
			return errInternal
		case faultDropBefore:
			return nil
		}
	}
	return c.dispatch()
}

// route finds the operation and its queue, or topic and subscription, from
// the method, path and query.
func (c *call) route() *apiError {
	r := c.r
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return newAPIError(http.StatusBadRequest, CodeInvalidQueryString, "The query string is not valid.")
	}
	c.query = q
	if rest, ok := strings.CutPrefix(r.URL.Path, "/topics"); ok {
		return c.routeTopic(rest)
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/queues")
	if !ok {
		return errBadURL
	}
	if rest == "" || rest == "/" {
		if r.Method == http.MethodGet {
			c.op = opListQueue
			return nil
		}
		return badMethod()
	}
	if rest[0] != '/' {
		return errBadURL
	}
	name, sub, _ := strings.Cut(rest[1:], "/")
	c.qname = name
	switch sub {
	case "":
		switch r.Method {
		case http.MethodPut:
			c.op = opCreateQueue
			if strings.EqualFold(c.param("metaoverride"), "true") {
				c.op = opSetQueueAttributes
			}
		case http.MethodGet:
			c.op = opGetQueueAttributes
		case http.MethodDelete:
			c.op = opDeleteQueue
		default:
			return badMethod()
		}
	case "messages":
		switch r.Method {
		case http.MethodPost:
			c.op = opSendMessage // or batch, told by the body's root element
		case http.MethodGet:
			batch := c.has("numOfMessages")
			peek := strings.EqualFold(c.param("peekonly"), "true")
			switch {
			case peek && batch:
				c.op = opBatchPeekMessage
			case peek:
				c.op = opPeekMessage
			case batch:
				c.op = opBatchReceiveMessage
			default:
				c.op = opReceiveMessage
			}
		case http.MethodDelete:
			c.op = opBatchDeleteMessage
			if c.has("ReceiptHandle") {
				c.op = opDeleteMessage
			}
		case http.MethodPut:
			c.op = opChangeMessageVisibility
		default:
			return badMethod()
		}
	default:
		return errBadURL
	}
	if c.op != opCreateQueue {
		// Any other operation on a name that cannot exist is QueueNotExist,
		// as the service answers.
		if checkQueueName(name) != nil {
			return errQueueNotExist
		}
	}
	return nil
}

// routeTopic routes /topics[/{t}[/messages|/subscriptions[/{s}]]].
func (c *call) routeTopic(rest string) *apiError {
	m := c.r.Method
	override := strings.EqualFold(c.param("metaoverride"), "true")
	if rest == "" || rest == "/" {
		if m != http.MethodGet {
			return badMethod()
		}
		c.op = opListTopic
		return nil
	}
	if rest[0] != '/' {
		return errBadURL
	}
	parts := strings.Split(rest[1:], "/")
	c.tname = parts[0]
	switch {
	case len(parts) == 1:
		c.op = pick(m, map[string]op{http.MethodGet: opGetTopicAttributes, http.MethodDelete: opDeleteTopic,
			http.MethodPut: opCreateTopic})
		if c.op == opCreateTopic && override {
			c.op = opSetTopicAttributes
		}
	case len(parts) == 2 && parts[1] == "messages":
		c.op = pick(m, map[string]op{http.MethodPost: opPublishMessage})
	case len(parts) == 2 && parts[1] == "subscriptions":
		c.op = pick(m, map[string]op{http.MethodGet: opListSubscriptionByTopic})
	case len(parts) == 3 && parts[1] == "subscriptions":
		c.sname = parts[2]
		c.op = pick(m, map[string]op{http.MethodGet: opGetSubscriptionAttributes, http.MethodDelete: opUnsubscribe,
			http.MethodPut: opSubscribe})
		if c.op == opSubscribe && override {
			c.op = opSetSubscriptionAttributes
		}
		if c.op != opSubscribe && checkSubscriptionName(c.sname) != nil {
			return errSubNotExist
		}
	default:
		return errBadURL
	}
	if c.op == opUnknown {
		return badMethod()
	}
	if c.op != opCreateTopic && checkTopicName(c.tname) != nil {
		// Any other operation on a name that cannot exist.
		return errTopicNotExist
	}
	return nil
}

// pick returns the operation of method, or opUnknown.
func pick(method string, ops map[string]op) op { return ops[method] }

func badMethod() *apiError {
	return newAPIError(http.StatusBadRequest, CodeInvalidRequestURL, "The request method is not allowed here.")
}

// param returns a query parameter, matching its name case-insensitively:
// the SDK sends ReceiptHandle where the documentation says receiptHandle.
func (c *call) param(name string) string {
	if v, ok := c.query[name]; ok && len(v) > 0 {
		return v[0]
	}
	for k, v := range c.query {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// handleParam returns the ReceiptHandle query parameter with '+' taken
// literally. Handles are URL-safe, yet the Python and Node.js SDKs put them
// in the query string without escaping, and a handle in the standard base64
// alphabet (some services issue those) would lose its '+' to the form
// decoding of url.ParseQuery, which reads '+' as a space. Percent escapes,
// as the Go SDK sends them, are decoded.
func (c *call) handleParam() string {
	for _, kv := range strings.Split(c.r.URL.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.EqualFold(k, "ReceiptHandle") {
			continue
		}
		if u, err := url.PathUnescape(v); err == nil {
			return u
		}
		return v
	}
	return ""
}

func (c *call) has(name string) bool {
	if _, ok := c.query[name]; ok {
		return true
	}
	for k := range c.query {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// signers pools HMAC-SHA1 states keyed with the server's secret.
type signers struct {
	pool sync.Pool
}

func (s *Server) signer() hash.Hash {
	if h, ok := s.macs.pool.Get().(hash.Hash); ok {
		h.Reset()
		return h
	}
	return hmac.New(sha1.New, []byte(s.opts.AccessKeySecret))
}

// authenticate checks the Authorization header as the service does:
// "MNS <AccessKeyId>:<base64 HMAC-SHA1>" over method, Content-MD5,
// Content-Type, Date, the sorted x-mns-* headers and the raw request URI
// (the Go, Python and Node.js SDKs, and the Java SDK's default V2), or the
// V4 signature "MNS4-HMAC-SHA256 Credential=…,Signature=…" (see verifyV4).
func (c *call) authenticate() *apiError {
	h := c.r.Header
	auth := h.Get("Authorization")
	if auth == "" {
		return newAPIError(http.StatusBadRequest, CodeMissingAuthorizationHeader, "Authorization header is required.")
	}
	if isV4(auth) {
		if h.Get("Date") != "" && h.Get("X-Mns-Version") == "" {
			return errMissingVersion
		}
		return verifyV4(c.r, c.s.opts.AccessKeyID, c.s.opts.AccessKeySecret, time.Now())
	}
	cred, ok := strings.CutPrefix(auth, "MNS ")
	i := strings.LastIndexByte(cred, ':')
	if !ok || i <= 0 {
		return newAPIError(http.StatusBadRequest, CodeInvalidAuthorizationHeader, "The Authorization header you provided is not valid.")
	}
	keyID, sig := cred[:i], cred[i+1:]
	date := h.Get("Date")
	if date == "" {
		return newAPIError(http.StatusBadRequest, CodeMissingDateHeader, "Date header is required.")
	}
	if h.Get("X-Mns-Version") == "" {
		return errMissingVersion
	}
	if keyID != c.s.opts.AccessKeyID {
		return newAPIError(http.StatusForbidden, CodeInvalidAccessKeyID, "The access Id you provided is not exist.")
	}
	var mns []string
	for k, v := range h {
		if len(k) > 6 && strings.EqualFold(k[:6], "x-mns-") && len(v) > 0 {
			mns = append(mns, strings.ToLower(k)+":"+strings.TrimSpace(v[0]))
		}
	}
	slices.Sort(mns)
	b := make([]byte, 0, 256)
	b = append(b, c.r.Method...)
	b = append(b, '\n')
	b = append(b, h.Get("Content-MD5")...)
	b = append(b, '\n')
	b = append(b, h.Get("Content-Type")...)
	b = append(b, '\n')
	b = append(b, date...)
	b = append(b, '\n')
	for i, m := range mns {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, m...)
	}
	b = append(b, '\n')
	b = append(b, c.r.RequestURI...)
	mac := c.s.signer()
	mac.Write(b)
	var sum [sha1.Size]byte
	want := base64.StdEncoding.AppendEncode(b[:0], mac.Sum(sum[:0]))
	c.s.macs.pool.Put(mac)
	if !hmac.Equal(want, []byte(sig)) {
		return newAPIError(http.StatusForbidden, CodeSignatureDoesNotMatch,
			"The request signature we calculated does not match the signature you provided.")
	}
	t, err := http.ParseTime(date)
	if err != nil {
		return newAPIError(http.StatusBadRequest, "InvalidDateHeader", "The Date header you provided is not valid.")
	}
	if d := time.Since(t); d > maxClockSkew || d < -maxClockSkew {
		// 408, as the service answers (not 403): the SDK maps the code only.
		return newAPIError(http.StatusRequestTimeout, CodeTimeExpired, "The http request you sent is expired.")
	}
	return nil
}

// readBody reads the body and checks Content-MD5. The SDK sends base64 of the
// lower-case hex MD5 (not RFC 1864's base64 of the raw digest); both forms
// are accepted.
func (c *call) readBody(buf *bytes.Buffer) *apiError {
	if c.r.Body != nil {
		_, err := buf.ReadFrom(http.MaxBytesReader(c.w, c.r.Body, maxRequestBody))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return invalidArgument("The request body is too large.")
			}
			return invalidArgument("The request body could not be read.")
		}
	}
	c.body = buf.Bytes()
	got := c.r.Header.Get("Content-MD5")
	if got == "" {
		return nil
	}
	sum := md5.Sum(c.body)
	var hx [2 * md5.Size]byte
	hex.Encode(hx[:], sum[:])
	var enc [64]byte
	if string(base64.StdEncoding.AppendEncode(enc[:0], hx[:])) == got ||
		string(base64.StdEncoding.AppendEncode(enc[:0], sum[:])) == got {
		return nil
	}
	return newAPIError(http.StatusBadRequest, CodeInvalidDigest, "The Content-MD5 you specified is not valid.")
}

// delay applies the injected latency; false means the server is closing.
func (c *call) delay() bool {
	f := c.faults
	if f.Latency <= 0 && f.Jitter <= 0 {
		return true
	}
	d := f.Latency + time.Duration(c.s.drawN(int64(f.Jitter)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.s.done:
		return false
	case <-c.r.Context().Done():
		return false
	}
}

// plan decides the injected error or drop for this request.
func (c *call) plan() {
	f := c.faults
	batch := c.op == opBatchSendMessage || c.op == opBatchDeleteMessage
	switch {
	case c.s.draw(f.Drop):
		c.fault = faultDropBefore
		if c.s.draw(0.5) {
			c.fault = faultDropAfter
		}
	case c.s.draw(f.Error5xx):
		switch n := c.s.drawN(6); {
		case batch && n >= 4:
			c.fault = faultPartial
		case n%2 == 0:
			c.fault = faultErrBefore
		default:
			c.fault = faultErrAfter
		}
		c.s.stats.errors5xx.Add(1)
	}
}

func (c *call) dispatch() *apiError {
	switch c.op {
	case opCreateQueue:
		return c.createQueue()
	case opSetQueueAttributes:
		return c.setQueueAttributes()
	case opGetQueueAttributes:
		return c.getQueueAttributes()
	case opDeleteQueue:
		if !c.s.deleteQueue(c.qname) {
			return errQueueNotExist
		}
		c.status = http.StatusNoContent
		return nil
	case opListQueue:
		return c.listQueues()
	case opSendMessage:
		return c.sendMessage()
	case opBatchSendMessage:
		return c.batchSendMessage()
	case opReceiveMessage, opBatchReceiveMessage:
		return c.receiveMessage()
	case opPeekMessage, opBatchPeekMessage:
		return c.peekMessage()
	case opDeleteMessage:
		return c.deleteMessage()
	case opBatchDeleteMessage:
		return c.batchDeleteMessage()
	case opChangeMessageVisibility:
		return c.changeVisibility()
	case opCreateTopic:
		return c.createTopic()
	case opSetTopicAttributes:
		return c.setTopicAttributes()
	case opGetTopicAttributes:
		return c.getTopicAttributes()
	case opDeleteTopic:
		if !c.s.deleteTopic(c.tname) {
			return errTopicNotExist
		}
		c.status = http.StatusNoContent
		return nil
	case opListTopic:
		return c.listTopics()
	case opPublishMessage:
		return c.publishMessage()
	case opSubscribe:
		return c.subscribe()
	case opSetSubscriptionAttributes:
		return c.setSubscriptionAttributes()
	case opGetSubscriptionAttributes:
		return c.getSubscriptionAttributes()
	case opUnsubscribe:
		return c.unsubscribe()
	case opListSubscriptionByTopic:
		return c.listSubscriptions()
	}
	return errBadURL
}

// fail turns err into the answer.
func (c *call) fail(err *apiError) {
	c.status = err.status
	c.code = err.code
	c.out = appendError(c.out[:0], err, c.reqID, "http://"+c.r.Host)
	c.s.stats.countError(err.code)
}

// finish writes the answer, or applies the injected fault.
func (c *call) finish() {
	switch c.fault {
	case faultDropBefore, faultDropAfter:
		c.s.stats.drops.Add(1)
		c.status = 0
		c.drop()
		return
	case faultErrAfter:
		c.fail(errInternal)
	}
	h := c.w.Header()
	h["Content-Type"] = hdrContentType
	h["X-Mns-Version"] = hdrVersion
	h["X-Mns-Request-Id"] = []string{c.reqID}
	if len(c.out) > 0 {
		h["Content-Length"] = []string{strconv.Itoa(len(c.out))}
	}
	c.w.WriteHeader(c.status)
	if len(c.out) > 0 {
		_, _ = c.w.Write(c.out)
	}
}

// drop closes the connection without an answer.
func (c *call) drop() {
	conn, _, err := http.NewResponseController(c.w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2, a recorder): abort as net/http allows.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// requestID makes an x-mns-request-id: 24 upper-case hex digits.
func (s *Server) requestID() string {
	b := make([]byte, 0, 24)
	b = append(b, s.tag[:8]...)
	b = appendHex(b, s.reqSeq.Add(1), 16)
	return string(b)
}

// isBatchSend tells a batch send from a single one by the root element.
func isBatchSend(body []byte) bool {
	if bytes.HasPrefix(body, []byte("<Messages>")) {
		return true
	}
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.RawToken()
		if err != nil {
			return false
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name.Local == "Messages"
		}
	}
}

// decode unmarshals an XML body whose root must be one of roots.
func decode(body []byte, v any, root *xml.Name, roots ...string) *apiError {
	if err := xml.Unmarshal(body, v); err != nil {
		return errMalformedXML
	}
	if !slices.Contains(roots, root.Local) {
		return errMalformedXML
	}
	return nil
}
