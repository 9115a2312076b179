package mnstest

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests speak HTTP directly, to reach what the SDK never sends.

// signRequest signs r as the SDK does (written from the protocol
// description, independently of the server's code).
func signRequest(r *http.Request, body []byte, keyID, secret string) {
	sum := md5.Sum(body)
	r.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString([]byte(hex.EncodeToString(sum[:]))))
	r.Header.Set("Content-Type", "application/xml")
	r.Header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	r.Header.Set("x-mns-version", "2015-06-06")
	var mns []string
	for k, v := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-mns-") {
			mns = append(mns, lk+":"+strings.TrimSpace(v[0]))
		}
	}
	sort.Strings(mns)
	toSign := r.Method + "\n" + r.Header.Get("Content-MD5") + "\n" + r.Header.Get("Content-Type") + "\n" +
		r.Header.Get("Date") + "\n" + strings.Join(mns, "\n") + "\n" + r.URL.RequestURI()
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(toSign))
	r.Header.Set("Authorization", "MNS "+keyID+":"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
}

type rawAnswer struct {
	status int
	body   string
	err    struct {
		XMLName xml.Name `xml:"Error"`
		Code    string   `xml:"Code"`
	}
}

// do serves one signed request in process (no network).
func do(t testing.TB, s *Server, method, uri, body string, edit func(*http.Request)) rawAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, method, uri, strings.NewReader(body))
	signRequest(r, []byte(body), s.AccessKeyID(), s.AccessKeySecret())
	if edit != nil {
		edit(r)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	res := w.Result()
	b, _ := io.ReadAll(res.Body)
	a := rawAnswer{status: res.StatusCode, body: string(b)}
	if res.StatusCode >= 300 {
		_ = xml.Unmarshal(b, &a.err)
	}
	require.NotEmpty(t, res.Header.Get("x-mns-request-id"), "every answer carries a request id")
	return a
}

func newRawServer(t testing.TB) *Server {
	t.Helper()
	s, err := NewServer(nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.CreateQueue("raw", nil))
	return s
}

func TestRawContentMD5(t *testing.T) {
	s := newRawServer(t)
	body := "<Message><MessageBody>x</MessageBody></Message>"
	a := do(t, s, "POST", "/queues/raw/messages", body, func(r *http.Request) {
		r.Body = io.NopCloser(strings.NewReader("<Message><MessageBody>y</MessageBody></Message>"))
	})
	assert.Equal(t, 400, a.status, "body changed after signing: %s", a.body)
	assert.Equal(t, CodeInvalidDigest, a.err.Code)
	a = do(t, s, "POST", "/queues/raw/messages", body, func(r *http.Request) {
		// RFC 1864 form: base64 of the raw digest. Re-sign with it.
		sum := md5.Sum([]byte(body))
		r.Header.Del("Authorization")
		signRequest(r, []byte(body), s.AccessKeyID(), s.AccessKeySecret())
		r.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	})
	assert.Equal(t, 403, a.status, "Content-MD5 is signed: changing it breaks the signature")
	assert.Equal(t, CodeSignatureDoesNotMatch, a.err.Code)
}

func TestRawAuthHeaders(t *testing.T) {
	s := newRawServer(t)
	cases := []struct {
		name   string
		edit   func(*http.Request)
		status int
		code   string
	}{
		{"no authorization", func(r *http.Request) { r.Header.Del("Authorization") }, 400, CodeMissingAuthorizationHeader},
		{"not MNS scheme", func(r *http.Request) { r.Header.Set("Authorization", "Basic abc") }, 400, CodeInvalidAuthorizationHeader},
		{"no date", func(r *http.Request) { r.Header.Del("Date") }, 400, CodeMissingDateHeader},
		{"no version", func(r *http.Request) { r.Header.Del("x-mns-version") }, 400, CodeMissingVersionHeader},
		{"date changed after signing", func(r *http.Request) {
			r.Header.Set("Date", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat))
		}, 403, CodeSignatureDoesNotMatch},
		{"extra signed header", func(r *http.Request) { r.Header.Set("x-mns-extra", "1") }, 403, CodeSignatureDoesNotMatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, s, "GET", "/queues/raw/messages", "", tc.edit)
			assert.Equal(t, tc.status, a.status, a.body)
			assert.Equal(t, tc.code, a.err.Code, a.body)
		})
	}
}

func TestRawDateSkew(t *testing.T) {
	s := newRawServer(t)
	a := do(t, s, "GET", "/queues/raw", "", func(r *http.Request) {
		r.Header.Set("Date", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat))
		resign(r, s) // correctly signed, but an hour old
	})
	assert.Equal(t, 408, a.status, "a Date an hour off is answered 408 as the service does: %s", a.body)
	assert.Equal(t, CodeTimeExpired, a.err.Code, a.body)
}

// resign recomputes the signature over the request's current headers.
func resign(r *http.Request, s *Server) {
	var mns []string
	for k, v := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-mns-") {
			mns = append(mns, lk+":"+strings.TrimSpace(v[0]))
		}
	}
	sort.Strings(mns)
	toSign := r.Method + "\n" + r.Header.Get("Content-MD5") + "\n" + r.Header.Get("Content-Type") + "\n" +
		r.Header.Get("Date") + "\n" + strings.Join(mns, "\n") + "\n" + r.URL.RequestURI()
	mac := hmac.New(sha1.New, []byte(s.AccessKeySecret()))
	mac.Write([]byte(toSign))
	r.Header.Set("Authorization", "MNS "+s.AccessKeyID()+":"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
}

func TestRawProtocolVariants(t *testing.T) {
	s := newRawServer(t)
	// Namespaced bodies, as in the service's documentation.
	a := do(t, s, "POST", "/queues/raw/messages",
		`<?xml version="1.0" encoding="UTF-8"?><Message xmlns="http://mns.aliyuncs.com/doc/v1/"><MessageBody>ns</MessageBody><Priority>3</Priority></Message>`, nil)
	require.Equal(t, 201, a.status, a.body)
	// Lower-case query names, as in the documentation.
	a = do(t, s, "GET", "/queues/raw/messages?numofmessages=2&waitSeconds=0", "", nil)
	require.Equal(t, 200, a.status, a.body)
	var got struct {
		Messages []struct {
			MessageBody   string
			ReceiptHandle string
			Priority      int
		} `xml:"Message"`
	}
	require.NoError(t, xml.Unmarshal([]byte(a.body), &got))
	require.Len(t, got.Messages, 1)
	assert.Equal(t, "ns", got.Messages[0].MessageBody)
	assert.Equal(t, 3, got.Messages[0].Priority)
	h := got.Messages[0].ReceiptHandle
	a = do(t, s, "PUT", "/queues/raw/messages?receiptHandle="+url.QueryEscape(h)+"&visibilityTimeout=5", "", nil)
	assert.Equal(t, 200, a.status, a.body)

	for _, tc := range []struct{ method, uri, body, code string }{
		{"POST", "/queues/raw/messages", "<Message><MessageBody>x", CodeMalformedXML},
		{"POST", "/queues/raw/messages", "<Other/>", CodeMalformedXML},
		{"POST", "/queues/raw/messages", "<Message><MessageBody>x</MessageBody><Priority>high</Priority></Message>", CodeInvalidArgument},
		{"POST", "/queues/raw/messages", "<Messages></Messages>", CodeInvalidArgument},
		{"DELETE", "/queues/raw/messages", "<ReceiptHandles></ReceiptHandles>", CodeInvalidArgument},
		{"DELETE", "/queues/raw/messages?ReceiptHandle=", "", CodeMissingReceiptHandle},
		{"PUT", "/queues/raw/messages?ReceiptHandle=abc", "", CodeMissingVisibilityTimeout},
		{"GET", "/queues/raw/messages?waitseconds=31", "", CodeInvalidArgument},
		{"GET", "/queues/raw/messages?numOfMessages=0", "", CodeInvalidArgument},
		{"GET", "/topics/t", "", CodeTopicNotExist},
		{"GET", "/other", "", CodeInvalidRequestURL},
		{"GET", "/topics/t/other", "", CodeInvalidRequestURL},
		{"POST", "/topics/t", "", CodeInvalidRequestURL},
		{"PUT", "/topics/t", "<Topic><MaximumMessageSize>big</MaximumMessageSize></Topic>", CodeInvalidArgument},
		{"PUT", "/topics/t/subscriptions/s", "<Subscription><Endpoint>", CodeMalformedXML},
		{"POST", "/topics/t/messages", "<Message><MessageBody>x</MessageBody></Message>", CodeTopicNotExist},
		{"PUT", "/queues/raw", "<Queue><VisibilityTimeout>0x</VisibilityTimeout></Queue>", CodeInvalidArgument},
		{"PUT", "/queues/raw?metaoverride=true", "<Queue><PollingWaitSeconds>31</PollingWaitSeconds></Queue>", CodeInvalidArgument},
		{"GET", "/queues/bad_name/messages", "", CodeQueueNotExist},
	} {
		a := do(t, s, tc.method, tc.uri, tc.body, nil)
		assert.Equal(t, tc.code, a.err.Code, "%s %s %q: %s", tc.method, tc.uri, tc.body, a.body)
	}
}

// FuzzRequest feeds arbitrary methods, URIs, query strings and XML bodies,
// correctly signed, to the handler: it must answer without panicking, with
// a status the SDK understands.
func FuzzRequest(f *testing.F) {
	s, err := NewServer(&Options{Shards: 2})
	require.NoError(f, err)
	f.Cleanup(func() { _ = s.Close() })
	require.NoError(f, s.CreateQueue("fz", nil))
	seeds := []struct {
		method uint8
		uri    string
		body   string
	}{
		{0, "/queues/fz/messages", "<Message><MessageBody>a</MessageBody><DelaySeconds>0</DelaySeconds><Priority>0</Priority></Message>"},
		{0, "/queues/fz/messages", "<Messages><Message><MessageBody>a</MessageBody></Message><Message><MessageBody>b</MessageBody><Priority>16</Priority></Message></Messages>"},
		{1, "/queues/fz/messages?numOfMessages=16&waitseconds=1", ""},
		{1, "/queues/fz/messages?peekonly=true", ""},
		{2, "/queues/fz/messages", "<ReceiptHandles><ReceiptHandle>AAAA</ReceiptHandle></ReceiptHandles>"},
		{2, "/queues/fz/messages?ReceiptHandle=AAAAAQAAAAAAAAABAAAAAQAAAAA%3D", ""},
		{3, "/queues/fz/messages?ReceiptHandle=x&VisibilityTimeout=10", ""},
		{3, "/queues/fz2", "<Queue><DelaySeconds>0</DelaySeconds><VisibilityTimeout>30</VisibilityTimeout></Queue>"},
		{3, "/queues/fz?metaoverride=true", "<Queue><PollingWaitSeconds>1</PollingWaitSeconds></Queue>"},
		{1, "/queues", ""},
		{1, "/queues/fz", ""},
		{3, "/topics/tz", "<Topic><MaximumMessageSize>65536</MaximumMessageSize><LoggingEnabled>false</LoggingEnabled></Topic>"},
		{3, "/topics/tz/subscriptions/s", "<Subscription><Endpoint>acs:mns:0:127:queues/fz</Endpoint><NotifyContentFormat>JSON</NotifyContentFormat></Subscription>"},
		{3, "/topics/tz/subscriptions/s?metaoverride=true", "<Subscription><NotifyStrategy>EXPONENTIAL_DECAY_RETRY</NotifyStrategy></Subscription>"},
		{0, "/topics/tz/messages", "<Message><MessageBody>#1#x</MessageBody><MessageTag>t</MessageTag></Message>"},
		{1, "/topics/tz/subscriptions", ""},
		{2, "/topics/tz/subscriptions/s", ""},
		{1, "/topics", ""},
	}
	for _, sd := range seeds {
		f.Add(sd.method, sd.uri, []byte(sd.body))
	}
	methods := []string{"POST", "GET", "DELETE", "PUT", "PATCH"}
	var runs atomic.Int64
	f.Fuzz(func(t *testing.T, m uint8, uri string, body []byte) {
		// Fuzzed sends store messages (up to 64 KiB each) in a server that
		// lives as long as the fuzzing process: start afresh now and then so
		// that memory stays bounded.
		if runs.Add(1)%512 == 0 {
			for _, q := range s.Queues() {
				_ = s.DeleteQueue(q.Name)
			}
			for _, tp := range s.Topics() {
				_ = s.DeleteTopic(tp.Name)
			}
			require.NoError(t, s.CreateQueue("fz", nil))
		}
		if !strings.HasPrefix(uri, "/") || strings.HasPrefix(uri, "//") {
			t.Skip()
		}
		u, err := url.ParseRequestURI(uri)
		if err != nil {
			t.Skip()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		r, err := http.NewRequestWithContext(ctx, methods[int(m)%len(methods)], "http://127.0.0.1"+u.RequestURI(), strings.NewReader(string(body)))
		if err != nil {
			t.Skip()
		}
		r.RequestURI = u.RequestURI()
		signRequest(r, body, s.AccessKeyID(), s.AccessKeySecret())
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		st := w.Code
		if st != 200 && st != 201 && st != 204 {
			var e struct {
				Code string `xml:"Code"`
			}
			batch := strings.Contains(w.Body.String(), "<Errors") || strings.Contains(w.Body.String(), "<Messages")
			if !batch {
				require.NoError(t, xml.Unmarshal(w.Body.Bytes(), &e), "error body must be XML: %q", w.Body.String())
				require.NotEmpty(t, e.Code, "error body must carry a code: %q", w.Body.String())
			}
		}
	})
}

// FuzzFastXML checks that the fast parser agrees with encoding/xml whenever
// it accepts a body.
func FuzzFastXML(f *testing.F) {
	for _, s := range []string{
		"<Message><MessageBody>a&amp;b&#x9;&#13;&lt;</MessageBody><DelaySeconds>0</DelaySeconds><Priority>0</Priority></Message>",
		"<Messages><Message><MessageBody>x</MessageBody></Message><Message><MessageBody></MessageBody><Priority>3</Priority></Message></Messages>",
		"<ReceiptHandles><ReceiptHandle>AAAA+/==</ReceiptHandle><ReceiptHandle>b</ReceiptHandle></ReceiptHandles>",
		"<Message><MessageBody>&#65;&#x42;&quot;&apos;&gt;</MessageBody></Message>",
		"<Message><MessageBody>a</MessageBody><DelaySeconds>0</DelaySeconds><Priority>8</Priority><MessageGroupId>g&amp;1</MessageGroupId></Message>",
		"<Messages><Message><MessageBody>x</MessageBody><MessageGroupId>g</MessageGroupId></Message><Message><MessageBody>y</MessageBody><MessageGroupId></MessageGroupId></Message></Messages>",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast sendBody
		if fastSendBody(body, &fast) {
			var slow sendBody
			require.NoError(t, xml.Unmarshal(body, &slow), "fast path accepted %q", body)
			assert.Equal(t, slow.XMLName.Local, fast.XMLName.Local)
			assert.Equal(t, slow.MessageBody, fast.MessageBody, "body of %q", body)
			assert.Equal(t, slow.DelaySeconds, fast.DelaySeconds)
			assert.Equal(t, slow.Priority, fast.Priority)
			assert.Equal(t, slow.MessageGroupID, fast.MessageGroupID, "group of %q", body)
			require.Equal(t, len(slow.Messages), len(fast.Messages), "entries of %q", body)
			for i := range slow.Messages {
				assert.Equal(t, slow.Messages[i], fast.Messages[i], "entry %d of %q", i, body)
			}
		}
		var fh handlesBody
		if fastHandlesBody(body, &fh) {
			var sh handlesBody
			require.NoError(t, xml.Unmarshal(body, &sh), "fast path accepted %q", body)
			assert.Equal(t, sh.XMLName.Local, fh.XMLName.Local)
			assert.Equal(t, sh.Handles, fh.Handles, "handles of %q", body)
		}
	})
}

// TestRawVisibilityTimeoutZero: a CreateQueue body that gives
// VisibilityTimeout 0 is refused (1..43200), not taken as the default; an
// attribute left out still takes its default.
func TestRawVisibilityTimeoutZero(t *testing.T) {
	s := newRawServer(t)
	for _, body := range []string{
		"<Queue><VisibilityTimeout>0</VisibilityTimeout></Queue>",
		"<Queue><MaximumMessageSize>0</MaximumMessageSize></Queue>",
		"<Queue><MessageRetentionPeriod>0</MessageRetentionPeriod></Queue>",
	} {
		a := do(t, s, "PUT", "/queues/zero", body, nil)
		assert.Equal(t, 400, a.status, "%s: %s", body, a.body)
		assert.Equal(t, CodeInvalidArgument, a.err.Code, "%s: %s", body, a.body)
	}
	a := do(t, s, "PUT", "/queues/zero", "<Queue><DelaySeconds>0</DelaySeconds></Queue>", nil)
	require.Equal(t, 201, a.status, a.body)
	info, err := s.Queue("zero")
	require.NoError(t, err)
	assert.Equal(t, 30, info.Attributes.VisibilityTimeout, "left out: the default")
}

// TestRawReceiptHandlePlusLiteral: the ReceiptHandle parameter keeps a '+'
// as a '+' (clients that do not escape handles send it so) and decodes
// percent escapes (the Go SDK escapes), where form decoding would turn '+'
// into a space.
func TestRawReceiptHandlePlusLiteral(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"ReceiptHandle=a+b/c==", "a+b/c=="},
		{"ReceiptHandle=a%2Bb%2Fc%3D%3D", "a+b/c=="},
		{"receipthandle=x-y_z&VisibilityTimeout=5", "x-y_z"},
		{"VisibilityTimeout=5&ReceiptHandle=a%20b", "a b"},
		{"VisibilityTimeout=5", ""},
	} {
		c := &call{r: httptest.NewRequest("PUT", "/queues/q/messages?"+tc.query, nil)}
		assert.Equal(t, tc.want, c.handleParam(), "query %q", tc.query)
	}
	// End to end: a handle sent without escaping deletes its message.
	s := newRawServer(t)
	a := do(t, s, "POST", "/queues/raw/messages", "<Message><MessageBody>x</MessageBody></Message>", nil)
	require.Equal(t, 201, a.status, a.body)
	a = do(t, s, "GET", "/queues/raw/messages", "", nil)
	require.Equal(t, 200, a.status, a.body)
	var m struct{ ReceiptHandle string }
	require.NoError(t, xml.Unmarshal([]byte(a.body), &m))
	a = do(t, s, "DELETE", "/queues/raw/messages?ReceiptHandle="+m.ReceiptHandle, "", nil)
	assert.Equal(t, 204, a.status, "delete with the handle as issued, unescaped: %s", a.body)
}

// TestRawDeadLetterPolicy: the policy travels as <DlqPolicy> in CreateQueue,
// SetQueueAttributes and GetQueueAttributes.
func TestRawDeadLetterPolicy(t *testing.T) {
	s := newRawServer(t)
	a := do(t, s, "PUT", "/queues/src", `<Queue><DlqPolicy><Enabled>true</Enabled><DeadLetterTargetQueue>raw</DeadLetterTargetQueue><MaxReceiveCount>4</MaxReceiveCount></DlqPolicy></Queue>`, nil)
	require.Equal(t, 201, a.status, a.body)
	a = do(t, s, "GET", "/queues/src", "", nil)
	require.Equal(t, 200, a.status, a.body)
	assert.Contains(t, a.body, "<DlqPolicy><Enabled>true</Enabled><DeadLetterTargetQueue>raw</DeadLetterTargetQueue><MaxReceiveCount>4</MaxReceiveCount></DlqPolicy>")
	for _, body := range []string{
		`<Queue><DlqPolicy><Enabled>true</Enabled><DeadLetterTargetQueue>src</DeadLetterTargetQueue><MaxReceiveCount>4</MaxReceiveCount></DlqPolicy></Queue>`,
		`<Queue><DlqPolicy><Enabled>true</Enabled><DeadLetterTargetQueue>nope</DeadLetterTargetQueue><MaxReceiveCount>4</MaxReceiveCount></DlqPolicy></Queue>`,
		`<Queue><DlqPolicy><Enabled>true</Enabled><DeadLetterTargetQueue>raw</DeadLetterTargetQueue><MaxReceiveCount>0</MaxReceiveCount></DlqPolicy></Queue>`,
		`<Queue><DlqPolicy><Enabled>maybe</Enabled></DlqPolicy></Queue>`,
	} {
		a = do(t, s, "PUT", "/queues/src?metaoverride=true", body, nil)
		assert.Equal(t, CodeInvalidArgument, a.err.Code, "%s: %s", body, a.body)
	}
	a = do(t, s, "PUT", "/queues/src?metaoverride=true", `<Queue><DlqPolicy><Enabled>false</Enabled></DlqPolicy></Queue>`, nil)
	require.Equal(t, 204, a.status, a.body)
	info, err := s.Queue("src")
	require.NoError(t, err)
	assert.Zero(t, info.Attributes.MaxReceiveCount, "Enabled false removes the policy")
}
