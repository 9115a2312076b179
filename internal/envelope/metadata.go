package envelope

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MaxMetadataLen bounds a metadata block (see the package doc), in bytes as
// encoded: an entry of plain ASCII costs len(key)+len(value)+1 bytes, plus one
// between entries, and each escaped byte of a value three.
const MaxMetadataLen = 1024

// ErrInvalidMetadata is wrapped by the errors of AppendMetadata: a key
// outside [A-Za-z0-9._-], or an encoding longer than MaxMetadataLen.
var ErrInvalidMetadata = errors.New("envelope: invalid metadata")

// metaKeyByte reports whether c may appear in a metadata key.
func metaKeyByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// metaPlainByte reports whether c is written verbatim in a metadata value:
// printable ASCII and space, but for the escape '%', the separator ';', and
// '<', '>' and '&', which the MNS SDKs that put bodies into XML unescaped
// (raw mode) would break on.
func metaPlainByte(c byte) bool {
	return ' ' <= c && c <= '~' && c != '%' && c != ';' && c != '<' && c != '>' && c != '&'
}

const upperHex = "0123456789ABCDEF"

// ValidateMetadataKey reports whether key can name a metadata entry: one
// or more bytes of [A-Za-z0-9._-].
func ValidateMetadataKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidMetadata)
	}
	for i := 0; i < len(key); i++ {
		if !metaKeyByte(key[i]) {
			return fmt.Errorf("%w: key %q: only A-Z, a-z, 0-9, '.', '_' and '-' are allowed", ErrInvalidMetadata, key)
		}
	}
	return nil
}

// MetadataLen returns the length of md's encoding (0 for an empty md), or an
// error wrapping ErrInvalidMetadata if a key is invalid or the encoding is
// longer than MaxMetadataLen.
func MetadataLen(md map[string]string) (int, error) {
	n := 0
	for k, v := range md {
		if err := ValidateMetadataKey(k); err != nil {
			return 0, err
		}
		if n > 0 {
			n++ // ';'
		}
		n += len(k) + 1
		for i := 0; i < len(v); i++ {
			if metaPlainByte(v[i]) {
				n++
			} else {
				n += 3
			}
		}
	}
	if n > MaxMetadataLen {
		return 0, fmt.Errorf("%w: %d entries encode to %d bytes, more than %d", ErrInvalidMetadata, len(md), n, MaxMetadataLen)
	}
	return n, nil
}

// AppendMetadata appends the canonical encoding of md to dst: its entries
// in key order, "key=value" joined by ';', each value byte that is not
// written verbatim escaped as '%' and two upper-case hex digits. An empty md
// appends nothing (a header without metadata). The error, when a key is
// invalid or the encoding is longer than MaxMetadataLen, wraps
// ErrInvalidMetadata; dst is then returned unchanged.
func AppendMetadata(dst []byte, md map[string]string) ([]byte, error) {
	n, err := MetadataLen(md)
	if err != nil || n == 0 {
		return dst, err
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = slices.Grow(dst, n)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ';')
		}
		dst = append(dst, k...)
		dst = append(dst, '=')
		v := md[k]
		for j := 0; j < len(v); j++ {
			if c := v[j]; metaPlainByte(c) {
				dst = append(dst, c)
			} else {
				dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
			}
		}
	}
	return dst, nil
}

// metaEntries calls f for each entry of a metadata block, with the key and
// the value as encoded, until f returns false. It reports whether block is
// a canonical encoding (as AppendMetadata writes it) of at least one entry
// and at most MaxMetadataLen bytes; f sees entries only up to the first
// defect.
func metaEntries(block []byte, f func(key, value []byte) bool) bool {
	if len(block) == 0 || len(block) > MaxMetadataLen {
		return false
	}
	var prev []byte
	for len(block) > 0 {
		i := 0
		for i < len(block) && metaKeyByte(block[i]) {
			i++
		}
		if i == 0 || i == len(block) || block[i] != '=' {
			return false
		}
		key := block[:i]
		if prev != nil && string(prev) >= string(key) {
			return false // out of order, or a key twice
		}
		prev = key
		rest := block[i+1:]
		j := 0
		for j < len(rest) && rest[j] != ';' {
			c := rest[j]
			switch {
			case metaPlainByte(c):
				j++
			case c == '%' && j+2 < len(rest) && upperHexDigit(rest[j+1]) && upperHexDigit(rest[j+2]) &&
				!metaPlainByte(unhex(rest[j+1])<<4|unhex(rest[j+2])):
				j += 3
			default:
				return false
			}
		}
		if !f(key, rest[:j]) {
			return true
		}
		if j == len(rest) {
			return true
		}
		block = rest[j+1:]
		if len(block) == 0 {
			return false // a trailing ';'
		}
	}
	return true
}

func upperHexDigit(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'A' + 10
}

// ValidMetadata reports whether block is a metadata block as
// AppendMetadata writes it: canonical, non-empty, at most MaxMetadataLen
// bytes.
func ValidMetadata(block []byte) bool {
	return metaEntries(block, func(_, _ []byte) bool { return true })
}

// unescape decodes a value as encoded in a canonical block.
func unescape(v []byte) string {
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '%' {
			b.WriteByte(unhex(v[i+1])<<4 | unhex(v[i+2]))
			i += 2
			continue
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// DecodeMetadata returns the entries of a header's metadata block
// (Header.Meta): nil for an empty block or one that is not canonical
// (Parse never returns such a block).
func DecodeMetadata(block []byte) map[string]string {
	if len(block) == 0 {
		return nil
	}
	md := make(map[string]string)
	if !metaEntries(block, func(k, v []byte) bool {
		md[string(k)] = unescape(v)
		return true
	}) {
		return nil
	}
	return md
}

// LookupMetadata returns the value of key in a metadata block, without
// decoding the others.
func LookupMetadata(block []byte, key string) (value string, ok bool) {
	metaEntries(block, func(k, v []byte) bool {
		if string(k) == key {
			value, ok = unescape(v), true
			return false
		}
		return string(k) < key // entries are in key order
	})
	return value, ok
}
