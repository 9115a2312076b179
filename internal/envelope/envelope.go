package envelope

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Header is the decoded header of a tagged body.
type Header struct {
	// Legacy marks the "#<seq>#" form of the MNS ordered-queue sample: no
	// group, no epoch.
	Legacy bool
	// Group is the message group; "" is the default group.
	Group string
	// Epoch is the sender epoch, 0..MaxNumber.
	Epoch uint64
	// Seq is the sequence id, 1..MaxNumber.
	Seq uint64
	// Signed marks a default-form header that carries MAC, a truncated
	// HMAC-SHA256 over group, epoch, seq and payload (see Sign).
	Signed bool
	MAC    [MACLen]byte
	// Meta is the encoded metadata block (see AppendMetadata and
	// DecodeMetadata) of a v2 header; nil for none. A header with
	// metadata is written in the v2 form, one without in the v1 form.
	// Parse returns it aliasing the body.
	Meta []byte
}

const (
	// MaxHeaderLen bounds the encoded length of every valid header.
	MaxHeaderLen = 255
	// MaxGroupLen is the longest group, in bytes.
	MaxGroupLen = 128
	// MaxNumber is the largest epoch and seq a header carries: one less
	// than the largest signed 64-bit integer, so that the cursor past any
	// seq a header names (seq+1) still fits the stores' signed columns.
	MaxNumber = 1<<63 - 2
	// MACLen is the length of a header's MAC, in bytes (128 bits).
	MACLen = 16
)

// ErrInvalidHeader is wrapped by the errors of ValidateGroup and
// Header.Validate.
var ErrInvalidHeader = errors.New("envelope: invalid header")

const (
	version    = "v1"
	prefixV1   = "#" + version + ";"
	versionV2  = "v2" // v1 plus a metadata block
	prefixV2   = "#" + versionV2 + ";"
	encodedTag = '~'
	maxDigits  = 19 // len("9223372036854775806")
	macChars   = 22 // base64url of MACLen bytes, unpadded
)

// b64 is the group encoding: base64url without padding, and strict so that
// non-zero trailing bits are rejected (one encoding per group).
var b64 = base64.RawURLEncoding.Strict()

// ValidateGroup reports whether group can be carried in a header: at most
// MaxGroupLen bytes of valid UTF-8 without NUL bytes.
func ValidateGroup(group string) error {
	if len(group) > MaxGroupLen {
		return fmt.Errorf("%w: group must be at most %d bytes, got %d", ErrInvalidHeader, MaxGroupLen, len(group))
	}
	if !utf8.ValidString(group) {
		return fmt.Errorf("%w: group %q is not valid UTF-8", ErrInvalidHeader, group)
	}
	if strings.IndexByte(group, 0) >= 0 {
		return fmt.Errorf("%w: group %q contains a NUL byte", ErrInvalidHeader, group)
	}
	return nil
}

// Validate reports whether h can be encoded: Seq in 1..MaxNumber, Epoch in
// 0..MaxNumber, a valid group, Meta empty or a canonical metadata block, and
// for the legacy form neither group nor epoch nor metadata.
func (h Header) Validate() error {
	if h.Seq < 1 || h.Seq > MaxNumber {
		return fmt.Errorf("%w: seq must be 1..%d, got %d", ErrInvalidHeader, uint64(MaxNumber), h.Seq)
	}
	if h.Epoch > MaxNumber {
		return fmt.Errorf("%w: epoch must be at most %d, got %d", ErrInvalidHeader, uint64(MaxNumber), h.Epoch)
	}
	if h.Legacy && (h.Group != "" || h.Epoch != 0 || h.Signed || len(h.Meta) > 0) {
		return fmt.Errorf("%w: the legacy form carries no group, no epoch, no MAC and no metadata", ErrInvalidHeader)
	}
	if len(h.Meta) > 0 && !ValidMetadata(h.Meta) {
		return fmt.Errorf("%w: metadata block %q is not as AppendMetadata writes it (at most %d bytes)", ErrInvalidHeader, h.Meta, MaxMetadataLen)
	}
	return ValidateGroup(h.Group)
}

// plainByte reports whether c may appear in a verbatim group.
func plainByte(c byte) bool {
	return '!' <= c && c <= '~' && c != '#' && c != ';' && c != '%' && c != encodedTag
}

// plainGroup reports whether group is written verbatim.
func plainGroup[S string | []byte](group S) bool {
	for i := 0; i < len(group); i++ {
		if !plainByte(group[i]) {
			return false
		}
	}
	return true
}

func digits(n uint64) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// HeaderLen returns the exact length of what Append writes before the
// payload (the header and its metadata block), so that callers can check a
// body's size before reserving a seq. It assumes h is valid.
func HeaderLen(h Header) int {
	return headerLen(h, plainGroup(h.Group))
}

func headerLen(h Header, plain bool) int {
	if h.Legacy {
		return 2 + digits(h.Seq)
	}
	n := len(prefixV1) + digits(h.Epoch) + 1 + digits(h.Seq) + 1 + 1
	if m := len(h.Meta); m > 0 {
		n += digits(uint64(m)) + 1 + m // prefixV2 is as long as prefixV1
	}
	if h.Signed {
		n += 1 + macChars
	}
	if plain {
		return n + len(h.Group)
	}
	return n + 1 + b64.EncodedLen(len(h.Group))
}

// Append appends the encoding of h followed by payload to dst and returns
// the extended slice. The payload is copied unchanged.
//
// Append panics if h is not valid (see Header.Validate): the seq comes from
// a store and the group is checked with ValidateGroup before anything is
// reserved, so an invalid header here is a bug in the caller.
func Append(dst []byte, h Header, payload []byte) []byte {
	plain := plainGroup(h.Group)
	// A plain group is short ASCII without NUL, so only the numbers and
	// the legacy rule need checking; other groups get the full check.
	if h.Seq < 1 || h.Seq > MaxNumber || h.Epoch > MaxNumber || h.Legacy && (h.Group != "" || h.Epoch != 0 || h.Signed) ||
		!plain || len(h.Group) > MaxGroupLen || len(h.Meta) > 0 {
		if err := h.Validate(); err != nil {
			panic(err)
		}
	}
	if n := len(dst) + headerLen(h, plain) + len(payload); cap(dst) < n {
		grown := make([]byte, len(dst), n)
		copy(grown, dst)
		dst = grown
	}
	dst = append(dst, '#')
	switch {
	case len(h.Meta) > 0:
		dst = append(dst, prefixV2[1:]...)
	case !h.Legacy:
		dst = append(dst, prefixV1[1:]...)
	}
	if !h.Legacy {
		dst = strconv.AppendUint(dst, h.Epoch, 10)
		dst = append(dst, ';')
	}
	dst = strconv.AppendUint(dst, h.Seq, 10)
	if !h.Legacy {
		dst = append(dst, ';')
		if len(h.Meta) > 0 {
			dst = strconv.AppendUint(dst, uint64(len(h.Meta)), 10)
			dst = append(dst, ';')
		}
		if plain {
			dst = append(dst, h.Group...)
		} else {
			dst = append(dst, encodedTag)
			dst = b64.AppendEncode(dst, []byte(h.Group))
		}
		if h.Signed {
			dst = append(dst, ';')
			dst = b64.AppendEncode(dst, h.MAC[:])
		}
	}
	dst = append(dst, '#')
	dst = append(dst, h.Meta...)
	return append(dst, payload...)
}

// Parse decodes the header at the start of body. It returns ok == false when
// body carries no valid, canonical header (an untagged body); then h and
// payload are zero. The payload aliases body. Parse allocates nothing except
// the group string of a default-form header with a non-empty group.
func Parse(body []byte) (h Header, payload []byte, ok bool) {
	var buf [MaxGroupLen]byte
	h, group, payload, ok := ParseRaw(body, &buf)
	if ok && len(group) > 0 {
		h.Group = string(group)
	}
	return h, payload, ok
}

// ParseRaw is Parse without the group string: it returns the group's bytes
// (aliasing body, or buf for an encoded group) and leaves h.Group empty. It
// allocates nothing, so that a receiver can look its groups up by
// string(group) without making a string per message.
func ParseRaw(body []byte, buf *[MaxGroupLen]byte) (h Header, group, payload []byte, ok bool) {
	if len(body) < 3 || body[0] != '#' {
		return Header{}, nil, nil, false
	}
	limit := min(len(body), MaxHeaderLen)
	end := -1
	for i := 1; i < limit; i++ {
		if body[i] == '#' {
			end = i
			break
		}
	}
	if end < 0 {
		return Header{}, nil, nil, false
	}
	hdr, payload := body[1:end], body[end+1:]
	if len(hdr) == 0 {
		return Header{}, nil, nil, false
	}
	if hdr[0] != 'v' {
		seq, ok := parseNumber(hdr)
		if !ok || seq == 0 {
			return Header{}, nil, nil, false
		}
		return Header{Legacy: true, Seq: seq}, nil, payload, true
	}
	rest, ok := cutPrefix(hdr, version+";")
	v2 := false
	if !ok {
		if rest, v2 = cutPrefix(hdr, versionV2+";"); !v2 {
			return Header{}, nil, nil, false
		}
	}
	epochField, rest, ok := cutField(rest)
	if !ok {
		return Header{}, nil, nil, false
	}
	seqField, groupField, ok := cutField(rest)
	if !ok {
		return Header{}, nil, nil, false
	}
	if v2 {
		// The metadata block follows the header: its length comes first,
		// so that the header stays within MaxHeaderLen whatever it is.
		var metaField []byte
		if metaField, groupField, ok = cutField(groupField); !ok {
			return Header{}, nil, nil, false
		}
		n, ok := parseNumber(metaField)
		if !ok || n == 0 || n > MaxMetadataLen || n > uint64(len(payload)) || !ValidMetadata(payload[:n]) {
			return Header{}, nil, nil, false
		}
		h.Meta, payload = payload[:n:n], payload[n:]
	}
	if group, macField, signed := cutField(groupField); signed {
		// Strict base64url of exactly MACLen bytes: one encoding per MAC.
		if len(macField) != macChars {
			return Header{}, nil, nil, false
		}
		for _, c := range macField {
			if !b64Byte(c) {
				return Header{}, nil, nil, false
			}
		}
		if n, err := b64.Decode(h.MAC[:], macField); err != nil || n != MACLen {
			return Header{}, nil, nil, false
		}
		h.Signed = true
		groupField = group
	}
	if h.Epoch, ok = parseNumber(epochField); !ok {
		return Header{}, nil, nil, false
	}
	if h.Seq, ok = parseNumber(seqField); !ok || h.Seq == 0 {
		return Header{}, nil, nil, false
	}
	if group, ok = parseGroup(groupField, buf); !ok {
		return Header{}, nil, nil, false
	}
	return h, group, payload, true
}

func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return nil, false
	}
	return b[len(prefix):], true
}

// cutField splits b at its first ';'.
func cutField(b []byte) (field, rest []byte, ok bool) {
	for i, c := range b {
		if c == ';' {
			return b[:i], b[i+1:], true
		}
	}
	return nil, nil, false
}

// parseNumber parses a canonical decimal in 0..MaxNumber: digits only, no
// sign, no leading zeros.
func parseNumber(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > maxDigits || b[0] == '0' && len(b) > 1 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0') // 19 digits cannot overflow uint64
	}
	if n > MaxNumber {
		return 0, false
	}
	return n, true
}

func b64Byte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// parseGroup decodes a group field, accepting only the encoding Append
// would produce for the decoded group.
func parseGroup(field []byte, buf *[MaxGroupLen]byte) ([]byte, bool) {
	if len(field) == 0 || field[0] != encodedTag {
		if len(field) > MaxGroupLen || !plainGroup(field) {
			return nil, false
		}
		return field, true // verbatim groups are short ASCII: valid by construction
	}
	enc := field[1:]
	if len(enc) == 0 || len(enc) > b64.EncodedLen(MaxGroupLen) {
		return nil, false
	}
	// The decoder skips '\r' and '\n'; accept only the alphabet so that
	// one group has one encoding.
	for _, c := range enc {
		if !b64Byte(c) {
			return nil, false
		}
	}
	n, err := b64.Decode(buf[:], enc)
	if err != nil {
		return nil, false
	}
	raw := buf[:n]
	if plainGroup(raw) || !utf8.Valid(raw) {
		return nil, false // a plain group is written verbatim; others must be UTF-8
	}
	for _, c := range raw {
		if c == 0 {
			return nil, false
		}
	}
	return raw, true
}

// macDomain separates inorder's header MACs from any other use of the key;
// macDomainV2 is that of a header with metadata (v2), so that no MAC of one
// form verifies for the other.
const (
	macDomain   = "inorder/envelope/v1 mac\x00"
	macDomainV2 = "inorder/envelope/v2 mac\x00"
)

// contextDomain separates the derivation of context keys (ContextKey) from
// header MACs and from any other use of the key.
const contextDomain = "inorder/envelope/v1 context\x00"

// MinKeyLen is the length, in bytes, of the shortest key that signs or
// verifies a header: 128 bits. Verify never accepts a MAC under a shorter
// key, so that an empty key (an unset variable) or a guessable one cannot
// authenticate anything.
const MinKeyLen = 16

// ErrWeakKey is wrapped by the error of ValidateKey.
var ErrWeakKey = errors.New("envelope: key too short")

// ValidateKey reports whether key is long enough to sign headers (at least
// MinKeyLen bytes).
func ValidateKey(key []byte) error {
	if len(key) < MinKeyLen {
		return fmt.Errorf("%w: %d bytes, need at least %d (128 bits) of secret, random bytes", ErrWeakKey, len(key), MinKeyLen)
	}
	return nil
}

// ContextKey returns the key that signs and verifies the headers of one
// context, such as a queue's name: HMAC-SHA256 under key of a domain
// string, the context's length (8 bytes, big-endian) and the context. A MAC
// made under ContextKey(key, "a") does not verify under ContextKey(key, "b")
// nor under key itself, so a signed body copied into a queue of another
// context is not authenticated there, even when both share key. The header
// does not change: the context is known to both ends, never sent.
func ContextKey(key []byte, context string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(contextDomain))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(context)))
	m.Write(n[:])
	m.Write([]byte(context))
	return m.Sum(nil)
}

// Sign returns the MAC that a signed header of h over payload carries: the
// first MACLen bytes of HMAC-SHA256 under key of a length-prefixed encoding
// of h's group, epoch and seq, followed by the payload. With metadata
// (h.Meta), the domain string is v2's and the block, length-prefixed, comes
// before the payload. h.Signed and h.MAC are ignored. Senders sign with a context key (ContextKey); a MAC under
// the bare key is the context-free form of earlier releases.
func Sign(key []byte, h Header, payload []byte) [MACLen]byte {
	m := hmac.New(sha256.New, key)
	var buf [len(macDomain) + 1 + 3*8]byte
	domain := macDomain
	if len(h.Meta) > 0 {
		domain = macDomainV2
	}
	b := append(buf[:0], domain...)
	b = append(b, byte(len(h.Group)))
	m.Write(b)
	m.Write([]byte(h.Group))
	b = binary.BigEndian.AppendUint64(buf[:0], h.Epoch)
	b = binary.BigEndian.AppendUint64(b, h.Seq)
	if len(h.Meta) > 0 {
		b = binary.BigEndian.AppendUint64(b, uint64(len(h.Meta)))
		m.Write(b)
		m.Write(h.Meta)
	} else {
		m.Write(b)
	}
	m.Write(payload)
	var sum [sha256.Size]byte
	var mac [MACLen]byte
	copy(mac[:], m.Sum(sum[:0]))
	return mac
}

// Verify reports whether h is signed with a MAC of payload under one of
// keys. Keys shorter than MinKeyLen are ignored: no MAC verifies under them.
// It compares in constant time.
func Verify(h Header, payload []byte, keys ...[]byte) bool {
	if !h.Signed {
		return false
	}
	ok := false
	for _, k := range keys {
		if len(k) < MinKeyLen {
			continue
		}
		want := Sign(k, h, payload)
		if hmac.Equal(want[:], h.MAC[:]) {
			ok = true
		}
	}
	return ok
}
