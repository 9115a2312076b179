package envelope

// The header MAC under attack (review 2, security): single-byte and random
// mutations, truncated and padded tags, ambiguous inputs, weak keys, and a
// signed body replayed into another context.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var sec3Key = []byte("0123456789abcdef0123456789abcdef")

func sec3Signed(key []byte, group string, epoch, seq uint64, payload string) []byte {
	h := Header{Group: group, Epoch: epoch, Seq: seq, Signed: true}
	h.MAC = Sign(key, h, []byte(payload))
	return Append(nil, h, []byte(payload))
}

func sec3Verifies(body []byte, keys ...[]byte) bool {
	h, p, ok := Parse(body)
	return ok && Verify(h, p, keys...)
}

// Every single-byte change and every truncation or extension of a signed
// body fails.
func TestSec3MACMutations(t *testing.T) {
	body := sec3Signed(sec3Key, "order-42", 1883428433496122248, 7, "paid 10")
	require.True(t, sec3Verifies(body, sec3Key), "genuine body does not verify")
	for i := range body {
		for c := 0; c < 256; c++ {
			if byte(c) == body[i] {
				continue
			}
			m := bytes.Clone(body)
			m[i] = byte(c)
			assert.False(t, sec3Verifies(m, sec3Key), "mutation at %d to %q verifies: %q", i, byte(c), m)
		}
	}
	for n := 0; n < len(body); n++ {
		assert.False(t, sec3Verifies(body[:n], sec3Key), "truncated to %d verifies", n)
	}
	// HMAC resists length extension (a bare hash would not).
	assert.False(t, sec3Verifies(append(bytes.Clone(body), "0"...), sec3Key), "extended payload verifies")
}

// A shorter MAC (truncation of the tag), a padded one, or an unsigned header
// never verifies; a legacy header is never signed.
func TestSec3MACForms(t *testing.T) {
	body := string(sec3Signed(sec3Key, "g", 5, 1, "x"))
	i := strings.LastIndexByte(body[:strings.LastIndexByte(body, '#')], ';')
	mac := body[i+1 : strings.LastIndexByte(body, '#')]
	for _, tc := range []string{
		body[:i+1] + mac[:21] + "#x",                // 21 chars
		body[:i+1] + mac[:16] + "#x",                // 12 bytes of tag
		body[:i+1] + mac + "==#x",                   // padded
		body[:i+1] + mac + "A#x",                    // 23 chars
		body[:i] + "#x",                             // unsigned
		"#1#x",                                      // legacy
		body[:i+1] + strings.Repeat("A", 22) + "#x", // zero tag
	} {
		assert.False(t, sec3Verifies([]byte(tc), sec3Key), "%q verifies", tc)
	}
}

// The MAC input is unambiguous: moving bytes between group and payload, or
// between epoch and seq, changes it; and it is the documented construction.
func TestSec3MACBoundaries(t *testing.T) {
	a := Sign(sec3Key, Header{Group: "ab", Epoch: 1, Seq: 2}, []byte("c"))
	b := Sign(sec3Key, Header{Group: "a", Epoch: 1, Seq: 2}, []byte("bc"))
	c := Sign(sec3Key, Header{Group: "ab", Epoch: 2, Seq: 1}, []byte("c"))
	assert.NotEqual(t, a, b, "MAC input is ambiguous between group and payload")
	assert.NotEqual(t, a, c, "MAC input is ambiguous between epoch and seq")
	m := hmac.New(sha256.New, sec3Key)
	m.Write([]byte(macDomain))
	m.Write([]byte{2})
	m.Write([]byte("ab"))
	m.Write([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	m.Write([]byte("c"))
	var want [MACLen]byte
	copy(want[:], m.Sum(nil))
	assert.Equal(t, want, a, "MAC is not HMAC-SHA256(domain || len(group) || group || epoch || seq || payload) truncated")
}

// Keys: rotation accepts any listed key and nothing else; an empty key
// list verifies nothing; an empty or short key authenticates nothing, even
// the MACs made under it (review 2 recovered a 1-byte key from one message
// in 91 tries), and ValidateKey refuses it.
func TestSec3Keys(t *testing.T) {
	old, cur := []byte("old-key-0123456789abcdef"), []byte("new-key-0123456789abcdef")
	bOld := sec3Signed(old, "g", 1, 1, "p")
	assert.True(t, sec3Verifies(bOld, cur, old), "an old key in the list verifies")
	assert.False(t, sec3Verifies(bOld, cur), "a dropped key verifies")
	assert.False(t, sec3Verifies(bOld), "no key verifies")

	bEmpty := sec3Signed(nil, "g", 1, 1, "p")
	assert.False(t, sec3Verifies(bEmpty, []byte{}), "a MAC under the empty key verifies")
	assert.False(t, sec3Verifies(bEmpty, cur, nil), "an empty key among good ones verifies")
	weak := []byte{0x5a}
	target := sec3Signed(weak, "g", 1, 1, "real")
	for k := 0; k < 256; k++ {
		assert.False(t, sec3Verifies(target, []byte{byte(k)}), "a 1-byte key (%#x) verifies", k)
	}
	short := []byte("fifteen bytes!!")
	assert.False(t, sec3Verifies(sec3Signed(short, "g", 1, 1, "p"), short), "a 15-byte key verifies")

	for _, k := range [][]byte{nil, {}, weak, short} {
		assert.ErrorIs(t, ValidateKey(k), ErrWeakKey, "key of %d bytes", len(k))
	}
	assert.NoError(t, ValidateKey([]byte("sixteen bytes!!!")), "a 16-byte key")
}

// Random mutations (multi-byte) of signed bodies never verify.
func TestSec3MACRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		body := sec3Signed(sec3Key, []string{"", "g", "ü-group", "a;b"}[i%4], r.Uint64N(MaxNumber), 1+r.Uint64N(MaxNumber-1), "payload")
		m := bytes.Clone(body)
		for k := 0; k < 1+r.IntN(4); k++ {
			m[r.IntN(len(m))] = byte(r.IntN(256))
		}
		if !bytes.Equal(m, body) && sec3Verifies(m, sec3Key) {
			t.Fatalf("mutated body verifies: %q -> %q", body, m)
		}
	}
}

// A body signed for one context (a queue) does not verify in another that
// shares the key, nor under the bare key (the context-free form of earlier
// releases); the derivation is the documented one.
func TestSec3ContextKeys(t *testing.T) {
	billing, refunds := ContextKey(sec3Key, "billing"), ContextKey(sec3Key, "refunds")
	body := sec3Signed(refunds, "acct-42", 7, 1, "refund 1000")
	assert.True(t, sec3Verifies(body, refunds), "the context's own key verifies")
	assert.False(t, sec3Verifies(body, billing), "a body signed for refunds verifies in billing")
	assert.False(t, sec3Verifies(body, sec3Key), "a context-bound MAC verifies as context-free")
	assert.False(t, sec3Verifies(sec3Signed(sec3Key, "acct-42", 7, 1, "x"), billing), "a context-free MAC verifies as context-bound")
	// Length-prefixed: no two contexts share a key.
	assert.NotEqual(t, ContextKey(sec3Key, ""), ContextKey(sec3Key, "\x00"))
	assert.NotEqual(t, ContextKey(sec3Key, "a"), ContextKey([]byte("0123456789abcdef0123456789abcdea"), "a"))

	m := hmac.New(sha256.New, sec3Key)
	m.Write([]byte(contextDomain))
	m.Write(binary.BigEndian.AppendUint64(nil, 7))
	m.Write([]byte("billing"))
	assert.Equal(t, m.Sum(nil), billing, "ContextKey is not HMAC-SHA256(key, domain || len(context) || context)")
	assert.NoError(t, ValidateKey(billing), "a context key is a valid key")
}
