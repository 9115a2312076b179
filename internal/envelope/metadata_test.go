package envelope_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/inorder/inorder/internal/envelope"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func encodeMeta(t testing.TB, md map[string]string) []byte {
	t.Helper()
	b, err := envelope.AppendMetadata(nil, md)
	require.NoError(t, err, "AppendMetadata(%v)", md)
	return b
}

// TestNoMetadataBytesUnchanged pins the bodies written without metadata to
// the bytes of the release before v2 (computed with that release's code):
// the SDK readers and the MNS sample's legacy reader keep reading them, and
// signed ones keep verifying at receivers that predate metadata.
func TestNoMetadataBytesUnchanged(t *testing.T) {
	t.Parallel()
	key := []byte("golden key 0123456789abcdef")
	payload := []byte(`{"amount":10}`)
	tests := []struct {
		h    envelope.Header
		want string
	}{
		{envelope.Header{Legacy: true, Seq: 7}, `#7#{"amount":10}`},
		{envelope.Header{Seq: 1}, `#v1;0;1;#{"amount":10}`},
		{envelope.Header{Group: "order-17", Epoch: 1700000000000 << 20, Seq: 42}, `#v1;1782579200000000000;42;order-17#{"amount":10}`},
		{envelope.Header{Group: "订单", Epoch: 5, Seq: 9}, `#v1;5;9;~6K6i5Y2V#{"amount":10}`},
		{envelope.Header{Group: "acct-7", Epoch: 1700000000000 << 20, Seq: 42, Signed: true},
			`#v1;1782579200000000000;42;acct-7;2py0ON-3z9lur90HcnhvEg#{"amount":10}`},
	}
	for _, tt := range tests {
		for _, meta := range [][]byte{nil, {}} {
			h := tt.h
			h.Meta = meta
			if h.Signed {
				h.MAC = envelope.Sign(key, h, payload)
			}
			assert.Equal(t, tt.want, string(envelope.Append(nil, h, payload)), "Append(%+v) without metadata", h)
			md, err := envelope.AppendMetadata(nil, nil)
			assert.NoError(t, err)
			assert.Empty(t, md, "no metadata encodes to nothing")
		}
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	t.Parallel()
	md := map[string]string{
		"traceparent": traceparent,
		"tracestate":  "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
		"user.id":     "a b;c%d<e>&f\n\x00\xff订",
		"empty":       "",
		"Z-_.9":       "=",
	}
	meta := encodeMeta(t, md)
	assert.Equal(t, "Z-_.9==;empty=;traceparent="+traceparent+";tracestate=rojo=00f067aa0ba902b7,congo=t61rcWkgMzE;"+
		"user.id=a b%3Bc%25d%3Ce%3E%26f%0A%00%FF%E8%AE%A2", string(meta), "canonical encoding: keys sorted, values escaped")
	n, err := envelope.MetadataLen(md)
	require.NoError(t, err)
	assert.Equal(t, len(meta), n, "MetadataLen")

	for _, signed := range []bool{false, true} {
		h := envelope.Header{Group: "订单", Epoch: 1700000000000 << 20, Seq: 42, Meta: meta, Signed: signed}
		payload := []byte("#v1;1;1;x#payload that looks tagged")
		if signed {
			h.MAC = envelope.Sign([]byte("key 0123456789abcdef"), h, payload)
		}
		body := envelope.Append(nil, h, payload)
		assert.True(t, bytes.HasPrefix(body, []byte("#v2;")), "a header with metadata is v2: %q", body)
		assert.Equal(t, len(body)-len(payload), envelope.HeaderLen(h), "HeaderLen counts the metadata block")
		got, gotPayload, ok := envelope.Parse(body)
		require.True(t, ok, "Parse(%q)", body)
		assert.True(t, equalHeader(h, got), "Parse(Append(%+v)) = %+v", h, got)
		assert.Equal(t, payload, gotPayload)
		assert.Equal(t, md, envelope.DecodeMetadata(got.Meta))
		for k, v := range md {
			gotV, ok := envelope.LookupMetadata(got.Meta, k)
			assert.True(t, ok, "LookupMetadata(%q)", k)
			assert.Equal(t, v, gotV, "LookupMetadata(%q)", k)
		}
		_, ok = envelope.LookupMetadata(got.Meta, "absent")
		assert.False(t, ok, "LookupMetadata of an absent key")
		if signed {
			assert.True(t, envelope.Verify(got, gotPayload, []byte("key 0123456789abcdef")))
		}
	}
}

func TestMetadataBound(t *testing.T) {
	t.Parallel()
	// "k=" and 1022 plain bytes: exactly MaxMetadataLen.
	fits := map[string]string{"k": strings.Repeat("v", envelope.MaxMetadataLen-2)}
	n, err := envelope.MetadataLen(fits)
	require.NoError(t, err, "a block of exactly MaxMetadataLen bytes")
	assert.Equal(t, envelope.MaxMetadataLen, n)
	h := envelope.Header{Group: strings.Repeat("#", envelope.MaxGroupLen), Epoch: maxNumber, Seq: maxNumber, Signed: true, Meta: encodeMeta(t, fits)}
	assert.LessOrEqual(t, envelope.HeaderLen(h)-len(h.Meta), envelope.MaxHeaderLen, "the worst v2 header, metadata aside, fits MaxHeaderLen")
	got, _, ok := envelope.Parse(envelope.Append(nil, h, []byte("p")))
	require.True(t, ok, "the largest block parses")
	assert.Equal(t, fits, envelope.DecodeMetadata(got.Meta))

	for name, md := range map[string]map[string]string{
		"one byte over":         {"k": strings.Repeat("v", envelope.MaxMetadataLen-1)},
		"escapes count thrice":  {"k": strings.Repeat("\n", envelope.MaxMetadataLen/3)},
		"many entries":          manyEntries(200),
		"empty key":             {"": "v"},
		"key with a space":      {"a b": "v"},
		"key with '='":          {"a=b": "v"},
		"key with ';'":          {"a;b": "v"},
		"key with a non-ASCII":  {"é": "v"},
		"key with a percent":    {"a%20": "v"},
		"valid and invalid key": {"ok": "v", "not ok": "v"},
	} {
		_, err := envelope.MetadataLen(md)
		require.Error(t, err, "%s: MetadataLen accepted it", name)
		assert.ErrorIs(t, err, envelope.ErrInvalidMetadata, name)
		assert.True(t, strings.HasPrefix(err.Error(), "envelope: "), "error %q lacks the package prefix", err)
		dst, err := envelope.AppendMetadata([]byte("x"), md)
		assert.ErrorIs(t, err, envelope.ErrInvalidMetadata, name)
		assert.Equal(t, "x", string(dst), "%s: dst unchanged on error", name)
	}
	assert.ErrorContains(t, func() error { _, err := envelope.MetadataLen(fitsPlus(1)); return err }(), "1025 bytes, more than 1024")
}

func fitsPlus(extra int) map[string]string {
	return map[string]string{"k": strings.Repeat("v", envelope.MaxMetadataLen-2+extra)}
}

func manyEntries(n int) map[string]string {
	md := make(map[string]string, n)
	for i := range n {
		md["key"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	return md
}

func TestParseInvalidMetadata(t *testing.T) {
	t.Parallel()
	v2 := func(metalen, rest string) string { return "#v2;1;2;" + metalen + ";g#" + rest }
	for name, body := range map[string]string{
		"metalen 0":             v2("0", "payload"),
		"metalen leading zero":  v2("03", "a=bpayload"),
		"metalen over the max":  v2("1025", "k="+strings.Repeat("v", 1023)),
		"metalen past the body": v2("10", "a=b"),
		"no metalen field":      "#v2;1;2;g#a=b",
		"empty key":             v2("2", "=b"),
		"no '='":                v2("3", "abc"),
		"bad key byte":          v2("4", "a b=c"),
		"keys out of order":     v2("7", "b=1;a=2"),
		"key twice":             v2("7", "a=1;a=2"),
		"trailing ';'":          v2("4", "a=b;"),
		"lower-case hex":        v2("5", "a=%0a"),
		"escaped plain byte":    v2("5", "a=%41"),
		"truncated escape":      v2("4", "a=%0"),
		"raw '<'":               v2("3", "a=<"),
		"raw newline":           v2("3", "a=\n"),
		"raw non-ASCII":         v2("3", "a=\xff"),
		"metadata ends in key":  v2("5", "a=b;c"),
		"v3":                    "#v3;1;2;3;g#a=b",
		"v2 legacy-like":        "#v2;3#a=bp",
	} {
		h, payload, ok := envelope.Parse([]byte(body))
		assert.False(t, ok, "%s: Parse(%q) = %+v, %q", name, body, h, payload)
	}
	// Validate and Append refuse what Parse would.
	for _, meta := range []string{"b=1;a=2", "a=%41", "=b", strings.Repeat("a", 1025)} {
		h := envelope.Header{Seq: 1, Meta: []byte(meta)}
		assert.ErrorIs(t, h.Validate(), envelope.ErrInvalidHeader, "Validate with metadata %q", meta)
		assert.Panics(t, func() { envelope.Append(nil, h, nil) }, "Append with metadata %q", meta)
	}
	h := envelope.Header{Legacy: true, Seq: 1, Meta: []byte("a=b")}
	assert.ErrorIs(t, h.Validate(), envelope.ErrInvalidHeader, "the legacy form carries no metadata")
}

// TestMetadataMAC: with a key, the MAC covers the metadata block: a changed
// byte, a block added to a signed v1 body or removed from a signed v2 body
// does not verify.
func TestMetadataMAC(t *testing.T) {
	t.Parallel()
	key := []byte("current key 0123456789")
	payload := []byte(`{"amount":10}`)
	meta := encodeMeta(t, map[string]string{"traceparent": traceparent, "user": "alice"})
	h := envelope.Header{Group: "acct-7", Epoch: 1700000000000 << 20, Seq: 42, Signed: true, Meta: meta}
	h.MAC = envelope.Sign(key, h, payload)
	body := envelope.Append(nil, h, payload)
	got, gotPayload, ok := envelope.Parse(body)
	require.True(t, ok)
	require.True(t, envelope.Verify(got, gotPayload, key), "the signed v2 body verifies")

	// Every byte of the block that can change and stay canonical.
	start := bytes.Index(body, []byte("traceparent="))
	require.Positive(t, start)
	for i := start; i < start+len(meta); i++ {
		for _, c := range []byte{'0', 'a', 'b', 'f', 'A', '-'} {
			if body[i] == c {
				continue
			}
			tampered := bytes.Clone(body)
			tampered[i] = c
			th, tp, ok := envelope.Parse(tampered)
			if !ok {
				continue // no longer canonical: untagged anyway
			}
			assert.False(t, envelope.Verify(th, tp, key), "metadata byte %d changed to %q (%q) must not verify", i-start, c, th.Meta)
		}
	}

	stripped := got
	stripped.Meta = nil
	assert.False(t, envelope.Verify(stripped, gotPayload, key), "the v2 MAC on the body without its metadata")
	v1 := envelope.Header{Group: "acct-7", Epoch: h.Epoch, Seq: 42, Signed: true}
	v1.MAC = envelope.Sign(key, v1, payload)
	added := v1
	added.Meta = meta
	assert.False(t, envelope.Verify(added, payload, key), "a v1 MAC with metadata added")
	// Bytes moved between the block and the payload change the MAC.
	moved := got
	moved.Meta = meta[:len(meta)-1]
	assert.False(t, envelope.Verify(moved, append([]byte{meta[len(meta)-1]}, payload...), key), "a byte moved from the block to the payload")
}

func TestMetadataRoundTripProperty(t *testing.T) {
	t.Parallel()
	key := rapid.StringMatching(`[A-Za-z0-9._-]{1,12}`)
	rapid.Check(t, func(t *rapid.T) {
		md := rapid.MapOfN(key, rapid.String(), 1, 8).Draw(t, "md")
		meta, err := envelope.AppendMetadata(nil, md)
		if err != nil {
			n := 0
			for k, v := range md {
				n += len(k) + 1 + len(v)
			}
			if n <= envelope.MaxMetadataLen/3 {
				t.Fatalf("AppendMetadata(%q) refused %d bytes of entries: %v", md, n, err)
			}
			return
		}
		h := envelope.Header{Group: genGroup().Draw(t, "group"), Epoch: rapid.Uint64Range(0, maxNumber).Draw(t, "epoch"),
			Seq: rapid.Uint64Range(1, maxNumber).Draw(t, "seq"), Meta: meta}
		payload := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "payload")
		body := envelope.Append(nil, h, payload)
		got, gotPayload, ok := envelope.Parse(body)
		if !ok || !equalHeader(got, h) || !bytes.Equal(gotPayload, payload) {
			t.Fatalf("Parse(Append(%+v, %q)) = %+v, %q, %v", h, payload, got, gotPayload, ok)
		}
		if dec := envelope.DecodeMetadata(got.Meta); len(dec) != len(md) {
			t.Fatalf("DecodeMetadata = %q, want %q", dec, md)
		} else {
			for k, v := range md {
				if dec[k] != v {
					t.Fatalf("DecodeMetadata = %q, want %q", dec, md)
				}
			}
		}
		if bytes.ContainsAny(meta, "<>&\x00\n\r") {
			t.Fatalf("metadata block %q is not XML-safe text", meta)
		}
	})
}

func TestParseMetadataAllocations(t *testing.T) {
	body := envelope.Append(nil, envelope.Header{Epoch: 1, Seq: 2, Meta: []byte("traceparent=" + traceparent)}, []byte("payload"))
	allocs := testing.AllocsPerRun(100, func() { envelope.Parse(body) })
	assert.Zero(t, allocs, "Parse of a v2 body in the default group allocates nothing: its block aliases the body")
}
