package mnstest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The V4 signature, which the Java SDK 2.0.0 recommends
// (ClientConfiguration SignVersion.V4): "MNS4-HMAC-SHA256
// Credential=<AccessKeyId>/<yyyyMMdd>/<region>/mns/aliyun_v4_request,
// Signature=<hex>". Verified here from the behaviour of the SDK's signer
// (src/main/java/com/aliyun/mns/common/auth/MNSV4Signer.java):
//
//   - The canonical request is the method, the path URI-encoded with its
//     slashes kept, the query (each name lower-cased and trimmed, each value
//     trimmed, both URI-encoded; sorted by name; "name=value", or the name
//     alone when the value is empty; joined by "&"), then one
//     "name:trimmed value" line for each of Content-Type, Content-MD5 and
//     every x-mns-* header present, names lower-cased and sorted, then an
//     empty line. Each part ends with "\n".
//   - The string to sign is the algorithm, the request time as
//     yyyyMMdd'T'HHmmss'Z', the scope (yyyyMMdd/region/mns/aliyun_v4_request)
//     and the canonical request, joined by "\n".
//   - The key is HMAC-SHA256 chained from "aliyun_v4"+secret over the date,
//     the region, "mns" and "aliyun_v4_request"; the signature is the lower
//     hex HMAC-SHA256 of the string to sign.
//
// The request time is the one the SDK writes into the Date header, so the
// server takes it from there, and the scope's date must be its date. The
// region is the one the Credential names: the emulator serves every region.
// The Apsara Stack variant (APSARA-MNS4-HMAC-SHA256, apsara_v4,
// apsara_v4_request) differs in those names only.
//
// The SDK writes query parameters into the resource path unescaped (a
// receipt handle as it is), and signs them as written; they reach the
// server as written too, so the server decodes percent escapes only (a '+'
// stays a '+') before encoding them again, as handleParam reads them.

type v4Scheme struct {
	algorithm, keyPrefix, terminator string
}

var v4Schemes = [...]v4Scheme{
	{"MNS4-HMAC-SHA256", "aliyun_v4", "aliyun_v4_request"},
	{"APSARA-MNS4-HMAC-SHA256", "apsara_v4", "apsara_v4_request"},
}

const v4Product = "mns"

// isV4 tells a V4 Authorization header by its algorithm.
func isV4(auth string) bool {
	_, _, ok := v4SchemeOf(auth)
	return ok
}

func v4SchemeOf(auth string) (*v4Scheme, string, bool) {
	for i := range v4Schemes {
		if rest, ok := strings.CutPrefix(auth, v4Schemes[i].algorithm+" "); ok {
			return &v4Schemes[i], rest, true
		}
	}
	return nil, "", false
}

func errBadAuthHeader() *apiError {
	return newAPIError(http.StatusBadRequest, CodeInvalidAuthorizationHeader, "The Authorization header you provided is not valid.")
}

func errSignature() *apiError {
	return newAPIError(http.StatusForbidden, CodeSignatureDoesNotMatch,
		"The request signature we calculated does not match the signature you provided.")
}

// verifyV4 checks a V4-signed request for the key keyID with secret, its
// Date within maxClockSkew of now; nil means it is good. (That the request
// has an x-mns-version header is authenticate's to check.)
func verifyV4(r *http.Request, keyID, secret string, now time.Time) *apiError {
	scheme, rest, ok := v4SchemeOf(r.Header.Get("Authorization"))
	if !ok {
		return errBadAuthHeader()
	}
	var cred, sig string
	var haveCred, haveSig bool
	for _, f := range strings.Split(rest, ",") {
		f = strings.TrimSpace(f)
		if v, ok := strings.CutPrefix(f, "Credential="); ok {
			cred, haveCred = v, true
		} else if v, ok := strings.CutPrefix(f, "Signature="); ok {
			sig, haveSig = v, true
		}
	}
	scope := strings.Split(cred, "/")
	if !haveCred || !haveSig || len(scope) != 5 || scope[0] == "" || len(scope[1]) != 8 || scope[2] == "" ||
		scope[3] != v4Product || scope[4] != scheme.terminator {
		return errBadAuthHeader()
	}
	id, day, region := scope[0], scope[1], scope[2]
	date := r.Header.Get("Date")
	if date == "" {
		return newAPIError(http.StatusBadRequest, CodeMissingDateHeader, "Date header is required.")
	}
	if id != keyID {
		return newAPIError(http.StatusForbidden, CodeInvalidAccessKeyID, "The access Id you provided is not exist.")
	}
	t, err := http.ParseTime(date)
	if err != nil {
		return newAPIError(http.StatusBadRequest, "InvalidDateHeader", "The Date header you provided is not valid.")
	}
	t = t.UTC()
	if t.Format("20060102") != day {
		return errSignature()
	}
	key := []byte(scheme.keyPrefix + secret)
	for _, part := range [...]string{day, region, v4Product, scheme.terminator} {
		key = hmacSHA256(key, []byte(part))
	}
	want := hmacSHA256(key, v4StringToSign(r, scheme, t, region))
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(want, got) {
		return errSignature()
	}
	if d := now.Sub(t); d > maxClockSkew || d < -maxClockSkew {
		return newAPIError(http.StatusRequestTimeout, CodeTimeExpired, "The http request you sent is expired.")
	}
	return nil
}

func hmacSHA256(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

// v4StringToSign builds the string to sign of r, sent at t.
func v4StringToSign(r *http.Request, scheme *v4Scheme, t time.Time, region string) []byte {
	b := make([]byte, 0, 512)
	b = append(b, scheme.algorithm...)
	b = append(b, '\n')
	b = t.AppendFormat(b, "20060102T150405Z")
	b = append(b, '\n')
	b = t.AppendFormat(b, "20060102")
	b = append(b, '/')
	b = append(b, region...)
	b = append(b, "/"+v4Product+"/"...)
	b = append(b, scheme.terminator...)
	b = append(b, '\n')

	b = append(b, r.Method...)
	b = append(b, '\n')
	path := r.URL.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	b = appendV4Escaped(b, path, true)
	b = append(b, '\n')

	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		params := map[string]string{}
		for _, pair := range strings.Split(r.URL.RawQuery, "&") {
			k, v := pair, ""
			if i := strings.IndexByte(pair, '='); i > 0 {
				k, v = pair[:i], pair[i+1:]
			}
			k, v = pathUnescape(k), pathUnescape(v)
			params[string(appendV4Escaped(nil, strings.TrimSpace(strings.ToLower(k)), false))] =
				string(appendV4Escaped(nil, strings.TrimSpace(v), false))
		}
		names := make([]string, 0, len(params))
		for k := range params {
			names = append(names, k)
		}
		slices.Sort(names)
		for i, k := range names {
			if i > 0 {
				b = append(b, '&')
			}
			b = append(b, k...)
			if v := params[k]; v != "" {
				b = append(b, '=')
				b = append(b, v...)
			}
		}
	}
	b = append(b, '\n')

	var hdrs []string
	for k, v := range r.Header {
		lk := strings.ToLower(k)
		if len(v) > 0 && (lk == "content-type" || lk == "content-md5" || strings.HasPrefix(lk, "x-mns-")) {
			hdrs = append(hdrs, lk+":"+strings.TrimSpace(v[0]))
		}
	}
	sortHeaderLines(hdrs)
	for _, h := range hdrs {
		b = append(b, h...)
		b = append(b, '\n')
	}
	return append(b, '\n')
}

// sortHeaderLines sorts "name:value" lines by name, as the SDK's TreeMap
// of names does (a plain sort of the lines would put "x-mns-a-b:…" before
// "x-mns-a:…", since '-' is below ':').
func sortHeaderLines(lines []string) {
	slices.SortFunc(lines, func(a, b string) int {
		an, _, _ := strings.Cut(a, ":")
		bn, _, _ := strings.Cut(b, ":")
		return strings.Compare(an, bn)
	})
}

// pathUnescape decodes percent escapes, leaving '+' as it is; s itself
// when it is not validly escaped.
func pathUnescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// appendV4Escaped URI-encodes s as the SDK does (java.net.URLEncoder, then
// "+" -> "%20", "*" -> "%2A", "%7E" -> "~"): every byte but A-Z a-z 0-9
// '-' '_' '.' '~' (and '/' when keepSlash) as %XX in upper case.
func appendV4Escaped(b []byte, s string, keepSlash bool) []byte {
	const hexUpper = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || keepSlash && c == '/' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexUpper[c>>4], hexUpper[c&15])
	}
	return b
}
