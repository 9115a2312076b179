package envelope_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/inorder/inorder/internal/envelope"
)

const maxNumber = envelope.MaxNumber

func TestParseValid(t *testing.T) {
	t.Parallel()
	binary := []byte{0, 1, '#', 0xff, ';', '\n', 0xfe, '#', '9', '#'}
	tests := []struct {
		name    string
		body    []byte
		header  envelope.Header
		payload []byte
	}{
		{"legacy", []byte("#1#hello"), envelope.Header{Legacy: true, Seq: 1}, []byte("hello")},
		{"legacy max seq, empty payload", []byte("#9223372036854775806#"), envelope.Header{Legacy: true, Seq: maxNumber}, []byte{}},
		{"legacy binary payload", append([]byte("#12#"), binary...), envelope.Header{Legacy: true, Seq: 12}, binary},
		{"legacy payload that looks tagged", []byte("#3##5#x"), envelope.Header{Legacy: true, Seq: 3}, []byte("#5#x")},
		{"default group, epoch 0", []byte("#v1;0;1;#x"), envelope.Header{Seq: 1}, []byte("x")},
		{"plain group", []byte(`#v1;1700000000000;42;order-17#{"a":1}`),
			envelope.Header{Group: "order-17", Epoch: 1700000000000, Seq: 42}, []byte(`{"a":1}`)},
		{"plain group with punctuation", []byte("#v1;5;6;a/b:c=d!?[]{}'\"`^&*()+,<>@\\|#"),
			envelope.Header{Group: "a/b:c=d!?[]{}'\"`^&*()+,<>@\\|", Epoch: 5, Seq: 6}, []byte{}},
		{"max numbers", []byte("#v1;9223372036854775806;9223372036854775806;g#p"),
			envelope.Header{Group: "g", Epoch: maxNumber, Seq: maxNumber}, []byte("p")},
		{"encoded unicode group", []byte("#v1;7;8;~6K6i5Y2V#p"), envelope.Header{Group: "订单", Epoch: 7, Seq: 8}, []byte("p")},
		{"encoded group with separators", []byte("#v1;7;8;~YSNiO2MlZH5lIGY#p"), envelope.Header{Group: "a#b;c%d~e f", Epoch: 7, Seq: 8}, []byte("p")},
		{"default binary payload", append([]byte("#v1;1;2;g#"), binary...), envelope.Header{Group: "g", Epoch: 1, Seq: 2}, binary},
		{"signed", []byte("#v1;1;2;g;AAECAwQFBgcICQoLDA0ODw#p"),
			envelope.Header{Group: "g", Epoch: 1, Seq: 2, Signed: true, MAC: [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}, []byte("p")},
		{"signed default group", []byte("#v1;1;2;;AAECAwQFBgcICQoLDA0ODw#p"),
			envelope.Header{Epoch: 1, Seq: 2, Signed: true, MAC: [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}, []byte("p")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, payload, ok := envelope.Parse(tt.body)
			require.True(t, ok, "Parse(%q) reported untagged, want %+v", tt.body, tt.header)
			assert.Equal(t, tt.header, h, "header of %q", tt.body)
			assert.Equal(t, tt.payload, payload, "payload of %q", tt.body)
			got := envelope.Append(nil, h, payload)
			assert.Equal(t, tt.body, got, "re-encoding %+v", h)
			assert.Equal(t, len(tt.body)-len(tt.payload), envelope.HeaderLen(h), "HeaderLen(%+v)", h)
		})
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"no hash", "hello"},
		{"lone hash", "#"},
		{"empty header", "##x"},
		{"missing closing hash", "#1"},
		{"missing opening hash", "1#x"},
		{"legacy seq 0", "#0#x"},
		{"legacy leading zero", "#01#x"},
		{"legacy sign", "#+1#x"},
		{"legacy negative", "#-1#x"},
		{"legacy letter", "#1a#x"},
		{"legacy space", "# 1#x"},
		{"legacy overflow 2^63", "#9223372036854775808#x"},
		{"legacy 2^63-1: no seq after it", "#9223372036854775807#x"},
		{"legacy 20 digits", "#18446744073709551615#x"},
		{"legacy 21 digits", "#100000000000000000000#x"},
		{"bad version", "#v2;1;1;g#x"},
		{"upper-case version", "#V1;1;1;g#x"},
		{"version without fields", "#v1#x"},
		{"missing group field", "#v1;1;1#x"},
		{"empty epoch", "#v1;;1;g#x"},
		{"empty seq", "#v1;1;;g#x"},
		{"epoch leading zero", "#v1;01;1;g#x"},
		{"epoch overflow", "#v1;9223372036854775808;1;g#x"},
		{"seq 0", "#v1;1;0;g#x"},
		{"seq leading zero", "#v1;1;007;g#x"},
		{"seq overflow", "#v1;1;9223372036854775808;g#x"},
		{"seq 2^63-1: no cursor past it", "#v1;1;9223372036854775807;g#x"},
		{"epoch 2^63-1", "#v1;9223372036854775807;1;g#x"},
		{"MAC too short", "#v1;1;2;g;AAECAwQFBgcICQoLDA0ODg#x"[:len("#v1;1;2;g;AAECAwQFBgcICQoLDA0OD")] + "#x"},
		{"MAC too long", "#v1;1;2;g;AAECAwQFBgcICQoLDA0ODwA#x"},
		{"MAC padded", "#v1;1;2;g;AAECAwQFBgcICQoLDA0ODw==#x"},
		{"MAC std alphabet", "#v1;1;2;g;AAECAwQFBgcICQoLDA0OD+#x"},
		{"MAC non-zero trailing bits", "#v1;1;2;g;AAECAwQFBgcICQoLDA0ODx#x"},
		{"empty MAC", "#v1;1;2;g;#x"},
		{"two MACs", "#v1;1;2;g;AAECAwQFBgcICQoLDA0ODw;AAECAwQFBgcICQoLDA0ODw#x"},
		{"legacy with MAC", "#1;AAECAwQFBgcICQoLDA0ODw#x"},
		{"semicolon in group", "#v1;1;1;a;b#x"},
		{"space in group", "#v1;1;1;a b#x"},
		{"percent in group", "#v1;1;1;a%20b#x"},
		{"control byte in group", "#v1;1;1;a\tb#x"},
		{"raw UTF-8 group", "#v1;1;1;订单#x"},
		{"tilde alone", "#v1;1;1;~#x"},
		{"encoded plain group", "#v1;1;1;~" + b64("abc") + "#x"},
		{"encoded empty group", "#v1;1;1;~#x"},
		{"bad base64 length", "#v1;1;1;~6K6i5#x"},
		{"base64 padding", "#v1;1;1;~6K6i5Y2V6K6i5Y2V6K6i5Y2V6K6i5Q==#x"},
		{"base64 std alphabet", "#v1;1;1;~+/+/#x"},
		{"base64 non-zero trailing bits", "#v1;1;1;~w6l#x"},
		{"base64 with newline", "#v1;1;1;~6K6i\n5Y2V#x"},
		{"non-UTF-8 group", "#v1;1;1;~" + b64("\xff\xfe") + "#x"},
		{"NUL in group", "#v1;1;1;~" + b64("a\x00") + "#x"},
		{"plain group of 129 bytes", "#v1;1;1;" + strings.Repeat("a", 129) + "#x"},
		{"encoded group of 129 bytes", "#v1;1;1;~" + b64(strings.Repeat("é", 64)+"#") + "#x"},
		{"header longer than 255", "#v1;1;1;" + strings.Repeat("a", 300) + "#x"},
		{"closing hash at byte 256", "#v1;1;1;~" + strings.Repeat("A", 255-len("#v1;1;1;~")) + "#x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, payload, ok := envelope.Parse([]byte(tt.body))
			assert.False(t, ok, "Parse(%q) = %+v, %q, want untagged", tt.body, h, payload)
			assert.Zero(t, h, "header of an untagged body")
			assert.Nil(t, payload, "payload of an untagged body")
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		h    envelope.Header
		ok   bool
	}{
		{"legacy", envelope.Header{Legacy: true, Seq: 1}, true},
		{"default", envelope.Header{Group: "g", Epoch: 9, Seq: maxNumber}, true},
		{"seq 0", envelope.Header{Seq: 0}, false},
		{"seq beyond max", envelope.Header{Seq: maxNumber + 1}, false},
		{"epoch beyond max", envelope.Header{Seq: 1, Epoch: maxNumber + 1}, false},
		{"legacy with group", envelope.Header{Legacy: true, Seq: 1, Group: "g"}, false},
		{"legacy with epoch", envelope.Header{Legacy: true, Seq: 1, Epoch: 1}, false},
		{"group too long", envelope.Header{Seq: 1, Group: strings.Repeat("g", 129)}, false},
		{"group not UTF-8", envelope.Header{Seq: 1, Group: "\xff"}, false},
		{"group with NUL", envelope.Header{Seq: 1, Group: "a\x00"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Validate()
			if tt.ok {
				assert.NoError(t, err, "Validate(%+v)", tt.h)
				return
			}
			require.Error(t, err, "Validate(%+v) accepted an invalid header", tt.h)
			assert.ErrorIs(t, err, envelope.ErrInvalidHeader)
			assert.True(t, strings.HasPrefix(err.Error(), "envelope: "), "error %q lacks the package prefix", err)
			assert.Panics(t, func() { envelope.Append(nil, tt.h, nil) }, "Append(%+v) must panic", tt.h)
		})
	}
}

func TestValidateGroup(t *testing.T) {
	t.Parallel()
	for _, g := range []string{"", "a", "订单", strings.Repeat("#", 128), "a b;c%d~e\n"} {
		assert.NoError(t, envelope.ValidateGroup(g), "ValidateGroup(%q)", g)
	}
	for _, g := range []string{strings.Repeat("a", 129), "\xff", "a\x00b", strings.Repeat("é", 64) + "a"} {
		err := envelope.ValidateGroup(g)
		assert.ErrorIs(t, err, envelope.ErrInvalidHeader, "ValidateGroup(%q)", g)
	}
	assert.ErrorContains(t, envelope.ValidateGroup(strings.Repeat("a", 129)), "at most 128 bytes, got 129")
}

// TestWorstCaseHeaderLen checks that the longest headers stay within
// MaxHeaderLen: maximal numbers with a 128-byte group that must be encoded.
func TestWorstCaseHeaderLen(t *testing.T) {
	t.Parallel()
	for _, g := range []string{strings.Repeat("#", 128), strings.Repeat("\u07ff", 64), strings.Repeat("a", 128)} {
		h := envelope.Header{Group: g, Epoch: maxNumber, Seq: maxNumber}
		n := envelope.HeaderLen(h)
		assert.LessOrEqual(t, n, envelope.MaxHeaderLen, "header of group %q", g)
		body := envelope.Append(nil, h, []byte("p"))
		assert.Len(t, body, n+1, "Append length vs HeaderLen")
		got, payload, ok := envelope.Parse(body)
		require.True(t, ok, "Parse of the worst-case header %q", body)
		assert.Equal(t, h, got)
		assert.Equal(t, []byte("p"), payload)
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	t.Parallel()
	dst := []byte("prefix")
	h := envelope.Header{Group: "g", Epoch: 1, Seq: 2}
	got := envelope.Append(dst, h, []byte("body"))
	assert.Equal(t, "prefix#v1;1;2;g#body", string(got))
	assert.Equal(t, "prefix", string(dst), "Append must not modify dst's existing bytes")
}

func TestPayloadAliasesBody(t *testing.T) {
	t.Parallel()
	body := []byte("#v1;1;2;g#abc")
	_, payload, ok := envelope.Parse(body)
	require.True(t, ok)
	body[len(body)-1] = 'z'
	assert.Equal(t, "abz", string(payload), "payload must alias the body, not copy it")
}

func TestParseAllocations(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		want float64
	}{
		{"legacy", []byte("#123#payload"), 0},
		{"default group", []byte("#v1;1700000000000;123;#payload"), 0},
		{"plain group", []byte("#v1;1700000000000;123;order-17#payload"), 1},
		{"encoded group", []byte("#v1;1700000000000;123;~6K6i5Y2V#payload"), 1},
		{"signed", []byte("#v1;1700000000000;123;;AAECAwQFBgcICQoLDA0ODw#payload"), 0},
		{"untagged", bytes.Repeat([]byte("#"), 1), 0},
		{"hostile", append([]byte("#"), bytes.Repeat([]byte("9"), 1<<16)...), 0},
	}
	for _, tt := range tests {
		allocs := testing.AllocsPerRun(100, func() { envelope.Parse(tt.body) })
		assert.Equal(t, tt.want, allocs, "allocations of Parse(%s)", tt.name)
	}
}

func TestAppendAllocations(t *testing.T) {
	buf := make([]byte, 0, 512)
	for _, h := range []envelope.Header{
		{Legacy: true, Seq: 123},
		{Group: "order-17", Epoch: 1700000000000, Seq: 123},
		{Group: "订单", Epoch: 1700000000000, Seq: 123},
	} {
		allocs := testing.AllocsPerRun(100, func() { envelope.Append(buf[:0], h, []byte("payload")) })
		assert.Zero(t, allocs, "allocations of Append(%+v) into a buffer with room", h)
	}
}

// genGroup draws valid groups: plain ones (written verbatim) and arbitrary
// UTF-8 ones (mostly encoded), up to MaxGroupLen bytes.
func genGroup() *rapid.Generator[string] {
	plain := rapid.StringMatching(`[!-~]{0,128}`).Filter(func(s string) bool {
		return !strings.ContainsAny(s, "#;%~")
	})
	any := rapid.Custom(func(t *rapid.T) string {
		rs := rapid.SliceOfN(rapid.Rune().Filter(func(r rune) bool { return r != 0 && utf8.ValidRune(r) }), 0, 128).Draw(t, "runes")
		var b strings.Builder
		for _, r := range rs {
			if b.Len()+utf8.RuneLen(r) > envelope.MaxGroupLen {
				break
			}
			b.WriteRune(r)
		}
		return b.String()
	})
	return rapid.OneOf(plain, any)
}

func TestRoundTripProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var h envelope.Header
		h.Seq = rapid.Uint64Range(1, maxNumber).Draw(t, "seq")
		if h.Legacy = rapid.Bool().Draw(t, "legacy"); !h.Legacy {
			h.Epoch = rapid.Uint64Range(0, maxNumber).Draw(t, "epoch")
			h.Group = genGroup().Draw(t, "group")
			if h.Signed = rapid.Bool().Draw(t, "signed"); h.Signed {
				copy(h.MAC[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "mac"))
			}
		}
		payload := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "payload")
		body := envelope.Append(nil, h, payload)
		if len(body)-len(payload) != envelope.HeaderLen(h) {
			t.Fatalf("HeaderLen(%+v) = %d, encoded %d bytes", h, envelope.HeaderLen(h), len(body)-len(payload))
		}
		if envelope.HeaderLen(h) > envelope.MaxHeaderLen {
			t.Fatalf("header of %+v is %d bytes, more than %d", h, envelope.HeaderLen(h), envelope.MaxHeaderLen)
		}
		got, gotPayload, ok := envelope.Parse(body)
		if !ok || !equalHeader(got, h) || !bytes.Equal(gotPayload, payload) {
			t.Fatalf("Parse(Append(%+v, %q)) = %+v, %q, %v", h, payload, got, gotPayload, ok)
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"#1#x", "#v1;0;1;#", "#v1;7;8;~6K6i5Y2V#p", "#v1;1;1;a;b#", "##", "#0#", "#v1;1;1;~YQ#",
		"#v2;1;2;3;g#a=bp", "#v2;1;2;11;;AAECAwQFBgcICQoLDA0ODw#a=%0A;b=c d#x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h, payload, ok := envelope.Parse(body)
		if !ok {
			if h.Meta != nil || !equalHeader(h, envelope.Header{}) || payload != nil {
				t.Fatalf("untagged Parse(%q) returned %+v, %q", body, h, payload)
			}
			return
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("Parse(%q) returned an invalid header %+v: %v", body, h, err)
		}
		if got := envelope.Append(nil, h, payload); !bytes.Equal(got, body) {
			t.Fatalf("Parse(%q) = %+v; re-encoded as %q", body, h, got)
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(false, "order-17", uint64(1700000000000), uint64(1), []byte("x"))
	f.Add(false, "订单#;", uint64(0), uint64(maxNumber), []byte{0, '#', 0xff})
	f.Add(true, "", uint64(0), uint64(42), []byte{})
	f.Fuzz(func(t *testing.T, legacy bool, group string, epoch, seq uint64, payload []byte) {
		if envelope.ValidateGroup(group) != nil {
			return
		}
		h := envelope.Header{Legacy: legacy, Group: group, Epoch: epoch & maxNumber, Seq: max(seq&maxNumber, 1)}
		if legacy {
			h.Group, h.Epoch = "", 0
		} else if seq&1 == 1 {
			h.Signed, h.MAC = true, envelope.Sign([]byte(group), h, payload)
		}
		body := envelope.Append(nil, h, payload)
		if envelope.HeaderLen(h) > envelope.MaxHeaderLen || len(body) != envelope.HeaderLen(h)+len(payload) {
			t.Fatalf("Append(%+v): %d bytes, HeaderLen %d", h, len(body), envelope.HeaderLen(h))
		}
		got, gotPayload, ok := envelope.Parse(body)
		if !ok || !equalHeader(got, h) || !bytes.Equal(gotPayload, payload) {
			t.Fatalf("Parse(Append(%+v, %q)) = %+v, %q, %v", h, payload, got, gotPayload, ok)
		}
	})
}

// TestWorstCaseSignedHeaderLen checks the longest signed headers.
func TestWorstCaseSignedHeaderLen(t *testing.T) {
	t.Parallel()
	for _, g := range []string{strings.Repeat("#", 128), strings.Repeat("a", 128)} {
		h := envelope.Header{Group: g, Epoch: maxNumber, Seq: maxNumber, Signed: true}
		h.MAC = envelope.Sign([]byte("k"), h, nil)
		assert.LessOrEqual(t, envelope.HeaderLen(h), envelope.MaxHeaderLen, "signed header of group %q", g)
		got, _, ok := envelope.Parse(envelope.Append(nil, h, nil))
		require.True(t, ok)
		assert.Equal(t, h, got)
	}
}

func TestSignVerify(t *testing.T) {
	t.Parallel()
	key, old, other := []byte("current key 0123456789"), []byte("previous key 0123456789"), []byte("attacker 0123456789")
	h := envelope.Header{Group: "acct-7", Epoch: 1700000000000 << 20, Seq: 42, Signed: true}
	payload := []byte(`{"amount":10}`)
	h.MAC = envelope.Sign(key, h, payload)
	body := envelope.Append(nil, h, payload)
	got, gotPayload, ok := envelope.Parse(body)
	require.True(t, ok, "a signed body parses")
	assert.True(t, envelope.Verify(got, gotPayload, key), "the signing key verifies")
	assert.True(t, envelope.Verify(got, gotPayload, old, key), "any of the accepted keys verifies (rotation)")
	assert.False(t, envelope.Verify(got, gotPayload, other), "another key does not verify")
	assert.False(t, envelope.Verify(got, gotPayload), "no key verifies nothing")

	tamper := map[string]func(h *envelope.Header, p *[]byte){
		"payload":  func(h *envelope.Header, p *[]byte) { *p = []byte(`{"amount":99}`) },
		"group":    func(h *envelope.Header, p *[]byte) { h.Group = "acct-8" },
		"epoch":    func(h *envelope.Header, p *[]byte) { h.Epoch++ },
		"seq":      func(h *envelope.Header, p *[]byte) { h.Seq = 1 },
		"mac":      func(h *envelope.Header, p *[]byte) { h.MAC[0] ^= 1 },
		"unsigned": func(h *envelope.Header, p *[]byte) { h.Signed = false },
		// Group and payload are length-prefixed apart: moving a byte from
		// one to the other changes the MAC.
		"boundary": func(h *envelope.Header, p *[]byte) { h.Group = "acct-7{"; *p = []byte(`"amount":10}`) },
	}
	for name, f := range tamper {
		h2, p2 := got, append([]byte(nil), gotPayload...)
		f(&h2, &p2)
		assert.False(t, envelope.Verify(h2, p2, key), "tampered %s must not verify", name)
	}
}

func TestErrorsAreSentinels(t *testing.T) {
	t.Parallel()
	err := envelope.ValidateGroup("\xff")
	assert.True(t, errors.Is(err, envelope.ErrInvalidHeader), "ValidateGroup error %v must wrap ErrInvalidHeader", err)
}

// equalHeader compares headers, whose Meta makes them incomparable with ==.
func equalHeader(a, b envelope.Header) bool {
	return a.Legacy == b.Legacy && a.Group == b.Group && a.Epoch == b.Epoch && a.Seq == b.Seq &&
		a.Signed == b.Signed && a.MAC == b.MAC && bytes.Equal(a.Meta, b.Meta)
}
