package seqstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/inorder/inorder/seqstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStreamValidate(t *testing.T) {
	t.Parallel()
	valid := []seqstore.Stream{
		{Queue: "q"},
		{Queue: "q", Group: "g"},
		{Queue: strings.Repeat("q", seqstore.MaxQueueLen), Group: strings.Repeat("g", seqstore.MaxGroupLen)},
		{Queue: "订单", Group: strings.Repeat("é", seqstore.MaxGroupLen/2)},
		{Queue: "'; DROP TABLE x; --", Group: "a/b%{}\n\t\x7f"},
	}
	for _, s := range valid {
		assert.NoError(t, s.Validate(), "Validate(%q)", s)
	}
	invalid := []struct {
		s    seqstore.Stream
		text string
	}{
		{seqstore.Stream{}, "queue name must be 1..256 bytes, got 0"},
		{seqstore.Stream{Group: "g"}, "queue name must be 1..256 bytes, got 0"},
		{seqstore.Stream{Queue: strings.Repeat("q", seqstore.MaxQueueLen+1)}, "got 257"},
		{seqstore.Stream{Queue: "q", Group: strings.Repeat("g", seqstore.MaxGroupLen+1)}, "group must be at most 128 bytes, got 129"},
		{seqstore.Stream{Queue: "q", Group: strings.Repeat("é", seqstore.MaxGroupLen/2) + "x"}, "got 129"},
		{seqstore.Stream{Queue: "q\xff"}, "not valid UTF-8"},
		{seqstore.Stream{Queue: "q", Group: "\xc3"}, "not valid UTF-8"},
		{seqstore.Stream{Queue: "q\x00"}, "NUL"},
		{seqstore.Stream{Queue: "q", Group: "a\x00"}, "NUL"},
	}
	for _, tc := range invalid {
		err := tc.s.Validate()
		require.Error(t, err, "Validate(%q) accepted an invalid stream", tc.s)
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream, "Validate(%q)", tc.s)
		assert.Contains(t, err.Error(), tc.text, "error text of Validate(%q)", tc.s)
		assert.True(t, strings.HasPrefix(err.Error(), "seqstore: "), "error %q lacks the package prefix", err)
	}
}

func TestKeyExamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s   seqstore.Stream
		key string
	}{
		{seqstore.Stream{Queue: "q"}, "q/"},
		{seqstore.Stream{Queue: "orders", Group: "customer-42"}, "orders/customer-42"},
		{seqstore.Stream{Queue: "a/b", Group: "c"}, "a%2Fb/c"},
		{seqstore.Stream{Queue: "a", Group: "b/c"}, "a/b%2Fc"},
		{seqstore.Stream{Queue: "a%2Fb", Group: "c"}, "a%252Fb/c"},
		{seqstore.Stream{Queue: "q", Group: "{tag} x"}, "q/%7Btag%7D%20x"},
		{seqstore.Stream{Queue: "q", Group: "订"}, "q/%E8%AE%A2"},
		{seqstore.Stream{Queue: "A.b_c~d-9", Group: ".."}, "A.b_c~d-9/.."},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.key, tc.s.Key(), "Key of %#v", tc.s)
		assert.Equal(t, tc.key, tc.s.String(), "String of %#v", tc.s)
		got, err := seqstore.ParseKey(tc.key)
		require.NoError(t, err, "ParseKey(%q)", tc.key)
		assert.Equal(t, tc.s, got, "ParseKey(%q)", tc.key)
	}
}

func TestParseKeyInvalid(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"",
		"no-slash",
		"a/b/c",
		"/g",     // empty queue
		"q/%",    // truncated escape
		"q/%4",   // truncated escape
		"q/%zz",  // not hex
		"q/%2f",  // lower-case hex is not produced by Key
		"q/a b",  // unescaped space
		"q/{}",   // unescaped braces
		"q/%FF",  // not UTF-8
		"q%00/g", // NUL
		strings.Repeat("q", seqstore.MaxQueueLen+1) + "/", // queue too long
	} {
		_, err := seqstore.ParseKey(key)
		assert.ErrorIs(t, err, seqstore.ErrCorrupt, "ParseKey(%q)", key)
	}
}

// genName draws valid UTF-8 without NUL of at most maxLen bytes, biased
// towards bytes that need escaping.
func genName(minLen, maxLen int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		r := rapid.OneOf(
			rapid.RuneFrom([]rune("/%{}#;:. ~_-aZ09\n\\'\"")),
			rapid.Rune(),
		)
		rs := rapid.SliceOfN(r, minLen, maxLen).Draw(t, "runes")
		var b strings.Builder
		for _, c := range rs {
			if c == 0 || !utf8.ValidRune(c) {
				c = 'x'
			}
			if b.Len()+utf8.RuneLen(c) > maxLen {
				break
			}
			b.WriteRune(c)
		}
		return b.String()
	})
}

func TestKeyRoundTripProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := seqstore.Stream{
			Queue: genName(1, seqstore.MaxQueueLen).Draw(t, "queue"),
			Group: genName(0, seqstore.MaxGroupLen).Draw(t, "group"),
		}
		if s.Queue == "" {
			s.Queue = "q"
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("generated an invalid stream %q: %v", s, err)
		}
		key := s.Key()
		if strings.Count(key, "/") != 1 {
			t.Fatalf("Key(%q) = %q has %d slashes, want 1", s, key, strings.Count(key, "/"))
		}
		for i := 0; i < len(key); i++ {
			c := key[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._~-/%", c) >= 0) {
				t.Fatalf("Key(%q) = %q contains byte %q", s, key, c)
			}
		}
		got, err := seqstore.ParseKey(key)
		if err != nil || got != s {
			t.Fatalf("ParseKey(Key(%q)) = %q, %v", s, got, err)
		}
	})
}

func TestKeyDistinct(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		gen := genName(1, 8)
		a := seqstore.Stream{Queue: gen.Draw(t, "qa"), Group: gen.Draw(t, "ga")}
		b := seqstore.Stream{Queue: gen.Draw(t, "qb"), Group: gen.Draw(t, "gb")}
		if (a == b) != (a.Key() == b.Key()) {
			t.Fatalf("streams %q and %q: equal=%v but keys %q and %q", a, b, a == b, a.Key(), b.Key())
		}
	})
}

func TestNewEpoch(t *testing.T) {
	t.Parallel()
	for _, base := range []time.Time{
		time.Date(2026, 11, 29, 23, 59, 59, 999e6, time.UTC),
		time.Date(2240, 1, 1, 0, 0, 0, 0, time.UTC), // close to the end of the 43-bit millisecond range
	} {
		prev := uint64(0)
		for i := range 2000 {
			now := base.Add(time.Duration(i) * time.Millisecond)
			e := seqstore.NewEpoch(now)
			require.GreaterOrEqual(t, e, uint64(1), "NewEpoch(%v)", now)
			require.LessOrEqual(t, e, uint64(seqstore.MaxSeq), "NewEpoch(%v)", now)
			assert.Equal(t, uint64(now.UnixMilli()), e>>20, "NewEpoch(%v) must carry the milliseconds above 20 bits", now)
			require.Greater(t, e, prev, "NewEpoch(%v) must exceed the epoch of the millisecond before", now)
			prev = e
		}
	}
	// Within one millisecond the low bits are random.
	now := time.Now()
	seen := map[uint64]bool{}
	for range 100 {
		seen[seqstore.NewEpoch(now)] = true
	}
	assert.Greater(t, len(seen), 1, "100 epochs of one millisecond were all equal: no random low bits")
}

func TestAdvanceCheck(t *testing.T) {
	t.Parallel()
	s := seqstore.Stream{Queue: "q", Group: "g"}
	skipped := func(n int) []seqstore.Range {
		rs := make([]seqstore.Range, n)
		for i := range rs {
			rs[i] = seqstore.Range{Epoch: 5, First: uint64(2*i + 1), Last: uint64(2*i + 1)}
		}
		return rs
	}
	tests := []struct {
		name string
		a    seqstore.Advance
		want error // nil: valid
	}{
		{"first advance", seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: 5, Next: 1}}, nil},
		{"forward", seqstore.Advance{Stream: s, From: seqstore.Cursor{Epoch: 5, Next: 3}, To: seqstore.Cursor{Epoch: 5, Next: 4}}, nil},
		{"unchanged", seqstore.Advance{Stream: s, From: seqstore.Cursor{Epoch: 5, Next: 3}, To: seqstore.Cursor{Epoch: 5, Next: 3}}, nil},
		{"owner change only", seqstore.Advance{Stream: s, From: seqstore.Cursor{Epoch: 5, Next: 3, Owner: 1}, To: seqstore.Cursor{Epoch: 5, Next: 3, Owner: 2}}, nil},
		{"new epoch restarts at 1", seqstore.Advance{Stream: s, From: seqstore.Cursor{Epoch: 5, Next: 300}, To: seqstore.Cursor{Epoch: 6, Next: 1}}, nil},
		{"MaxSkipped ranges", seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: 5, Next: 40, Skipped: skipped(seqstore.MaxSkipped)}}, nil},
		{"MaxSeq", seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: seqstore.MaxSeq, Next: seqstore.MaxSeq}}, nil},
		{"backwards", seqstore.Advance{Stream: s, From: seqstore.Cursor{Epoch: 5, Next: 3}, To: seqstore.Cursor{Epoch: 5, Next: 2}}, seqstore.ErrInvalidArgument},
		{"older epoch", seqstore.Advance{Stream: s, From: seqstore.Cursor{Epoch: 5, Next: 3}, To: seqstore.Cursor{Epoch: 4, Next: 9}}, seqstore.ErrInvalidArgument},
		{"back to zero", seqstore.Advance{Stream: s, From: seqstore.Cursor{Epoch: 5, Next: 3}}, seqstore.ErrInvalidArgument},
		{"too many skipped", seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: 5, Next: 40, Skipped: skipped(seqstore.MaxSkipped + 1)}}, seqstore.ErrInvalidArgument},
		{"next beyond MaxSeq", seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: 5, Next: seqstore.MaxSeq + 1}}, seqstore.ErrOverflow},
		{"epoch beyond MaxSeq", seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: seqstore.MaxSeq + 1, Next: 1}}, seqstore.ErrOverflow},
		{"invalid stream", seqstore.Advance{To: seqstore.Cursor{Epoch: 5, Next: 1}}, seqstore.ErrInvalidStream},
	}
	for _, tc := range tests {
		err := tc.a.Check()
		if tc.want == nil {
			assert.NoError(t, err, "Check of %s", tc.name)
			continue
		}
		assert.ErrorIs(t, err, tc.want, "Check of %s", tc.name)
	}
}

func TestRangeContains(t *testing.T) {
	t.Parallel()
	r := seqstore.Range{Epoch: 7, First: 10, Last: 12}
	for _, tc := range []struct {
		epoch, seq uint64
		want       bool
	}{{7, 9, false}, {7, 10, true}, {7, 11, true}, {7, 12, true}, {7, 13, false}, {6, 11, false}, {8, 11, false}} {
		assert.Equal(t, tc.want, r.Contains(tc.epoch, tc.seq), "%+v contains epoch %d seq %d", r, tc.epoch, tc.seq)
	}
}

func TestCursorSame(t *testing.T) {
	t.Parallel()
	c := seqstore.Cursor{Epoch: 1, Next: 2, Owner: 3}
	d := c
	d.Skipped = []seqstore.Range{{Epoch: 1, First: 1, Last: 1}}
	assert.True(t, c.Same(d), "Same must ignore Skipped")
	for _, e := range []seqstore.Cursor{{Epoch: 9, Next: 2, Owner: 3}, {Epoch: 1, Next: 9, Owner: 3}, {Epoch: 1, Next: 2}} {
		assert.False(t, c.Same(e), "%+v and %+v differ", c, e)
	}
}

func TestBatchError(t *testing.T) {
	t.Parallel()
	own := fmt.Errorf("memstore: %w: stream q/a", seqstore.ErrConflict)
	var err error = &seqstore.BatchError{Errs: []error{nil, own, seqstore.ErrAborted}}
	assert.ErrorIs(t, err, seqstore.ErrConflict, "errors.Is must find a request's sentinel")
	assert.ErrorIs(t, err, seqstore.ErrAborted)
	assert.NotErrorIs(t, err, seqstore.ErrCorrupt)
	assert.Equal(t, "seqstore: 1 of 3 requests failed (first: memstore: seqstore: cursor conflict: stream q/a)", err.Error())
	wrapped := fmt.Errorf("redisstore: advance: %w", err)
	var be *seqstore.BatchError
	require.True(t, errors.As(wrapped, &be), "a wrapped BatchError must stay reachable with errors.As")
	assert.Len(t, be.Errs, 3)

	assert.Equal(t, "seqstore: 2 of 2 requests not applied",
		(&seqstore.BatchError{Errs: []error{seqstore.ErrAborted, seqstore.ErrAborted}}).Error())
}

func TestFailed(t *testing.T) {
	t.Parallel()
	own := fmt.Errorf("x: %w", seqstore.ErrOverflow)
	be := fmt.Errorf("wrapped: %w", &seqstore.BatchError{Errs: []error{nil, own, seqstore.ErrAborted}})
	assert.NoError(t, seqstore.Failed(nil, 0, 3), "a call that succeeded")
	assert.NoError(t, seqstore.Failed(be, 0, 3), "request 0 took effect")
	assert.Same(t, own, seqstore.Failed(be, 1, 3), "request 1 failed with its own error")
	assert.ErrorIs(t, seqstore.Failed(be, 2, 3), seqstore.ErrAborted)
	outage := errors.New("connection refused")
	assert.Same(t, outage, seqstore.Failed(outage, 1, 3), "a plain error: every outcome is unknown")
	assert.Same(t, be, seqstore.Failed(be, 1, 4), "a BatchError of another length says nothing about this call")
}

func TestSplit(t *testing.T) {
	t.Parallel()
	own := fmt.Errorf("x: %w", seqstore.ErrConflict)
	be := fmt.Errorf("wrapped: %w", &seqstore.BatchError{Errs: []error{nil, seqstore.ErrAborted, own, seqstore.ErrAborted}})
	got := map[int]error{}
	aborted := seqstore.Split(be, 4, func(i int, err error) { got[i] = err })
	assert.Equal(t, []int{1, 3}, aborted, "the aborted requests are returned for a retry")
	assert.Equal(t, map[int]error{0: nil, 2: own}, got, "the others are done: applied, or failed with their own error")

	clear(got)
	outage := fmt.Errorf("outage: %w", seqstore.ErrAborted) // not a BatchError: unknown, not retryable as aborted
	assert.Empty(t, seqstore.Split(outage, 2, func(i int, err error) { got[i] = err }))
	assert.Equal(t, map[int]error{0: outage, 1: outage}, got, "a plain error is every request's outcome")

	clear(got)
	assert.Empty(t, seqstore.Split(nil, 2, func(i int, err error) { got[i] = err }))
	assert.Equal(t, map[int]error{0: nil, 1: nil}, got, "success")
}

func TestAbort(t *testing.T) {
	t.Parallel()
	assert.NoError(t, seqstore.Abort(nil))
	assert.NoError(t, seqstore.Abort(make([]error, 3)), "no request at fault")
	own := errors.New("own")
	err := seqstore.Abort([]error{nil, own, nil})
	var be *seqstore.BatchError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, []error{seqstore.ErrAborted, own, seqstore.ErrAborted}, be.Errs,
		"the request at fault keeps its error, the others are aborted")
}

func TestCheckReserve(t *testing.T) {
	t.Parallel()
	s := seqstore.Stream{Queue: "q"}
	good := seqstore.ReserveRequest{Stream: s, N: 2, Journal: [][]byte{nil, {}}}
	require.NoError(t, seqstore.CheckReserve([]seqstore.ReserveRequest{good, {Stream: s, N: 1}}))
	for _, tc := range []struct {
		name string
		bad  seqstore.ReserveRequest
		want error
	}{
		{"n=0", seqstore.ReserveRequest{Stream: s}, seqstore.ErrInvalidArgument},
		{"n<0", seqstore.ReserveRequest{Stream: s, N: -1}, seqstore.ErrInvalidArgument},
		{"short journal", seqstore.ReserveRequest{Stream: s, N: 2, Journal: [][]byte{nil}}, seqstore.ErrInvalidArgument},
		{"empty journal", seqstore.ReserveRequest{Stream: s, N: 1, Journal: [][]byte{}}, seqstore.ErrInvalidArgument},
		{"invalid stream", seqstore.ReserveRequest{Stream: seqstore.Stream{}, N: 1}, seqstore.ErrInvalidStream},
	} {
		err := seqstore.CheckReserve([]seqstore.ReserveRequest{good, tc.bad, good})
		assert.ErrorIs(t, seqstore.Failed(err, 1, 3), tc.want, "%s: the request at fault", tc.name)
		assert.ErrorIs(t, seqstore.Failed(err, 0, 3), seqstore.ErrAborted, "%s: an innocent request", tc.name)
		assert.ErrorIs(t, seqstore.Failed(err, 2, 3), seqstore.ErrAborted, "%s: an innocent request", tc.name)
	}
}

func TestCheckAdvance(t *testing.T) {
	t.Parallel()
	a := seqstore.Advance{Stream: seqstore.Stream{Queue: "q", Group: "a"}, To: seqstore.Cursor{Epoch: 1, Next: 2}}
	b := seqstore.Advance{Stream: seqstore.Stream{Queue: "q", Group: "b"}, To: seqstore.Cursor{Epoch: 1, Next: 2}}
	require.NoError(t, seqstore.CheckAdvance([]seqstore.Advance{a, b}))
	require.NoError(t, seqstore.CheckAdvance(nil))
	err := seqstore.CheckAdvance([]seqstore.Advance{a, b, a})
	assert.ErrorIs(t, seqstore.Failed(err, 2, 3), seqstore.ErrInvalidArgument, "the second appearance of a stream is at fault")
	assert.ErrorIs(t, seqstore.Failed(err, 0, 3), seqstore.ErrAborted)
	back := b
	back.From = seqstore.Cursor{Epoch: 1, Next: 5}
	err = seqstore.CheckAdvance([]seqstore.Advance{a, back})
	assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrInvalidArgument, "a backwards move")
	assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrAborted)
}

func TestCheckSent(t *testing.T) {
	t.Parallel()
	good := seqstore.SentMark{Stream: seqstore.Stream{Queue: "q"}, Seqs: []uint64{1}}
	assert.NoError(t, seqstore.CheckSent(nil))
	require.NoError(t, seqstore.CheckSent([]seqstore.SentMark{good, {Stream: seqstore.Stream{Queue: "q", Group: "g"}}}))
	err := seqstore.CheckSent([]seqstore.SentMark{good, {Stream: seqstore.Stream{Queue: "q\x00"}}})
	assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrInvalidStream)
	assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrAborted)
}

func TestParseKeyCanonical(t *testing.T) {
	_, err := seqstore.ParseKey("q%61/g")
	assert.ErrorIs(t, err, seqstore.ErrCorrupt, "an escaped safe byte is a second spelling of the key")
	s, err := seqstore.ParseKey("q%2F/g")
	require.NoError(t, err)
	assert.Equal(t, seqstore.Stream{Queue: "q/", Group: "g"}, s)
}

func TestCheckSkippedRanges(t *testing.T) {
	s := seqstore.Stream{Queue: "q"}
	for _, r := range []seqstore.Range{{Epoch: 1, First: 5, Last: 4}, {Epoch: 1, First: 0, Last: 4}, {Epoch: 1, First: 1, Last: seqstore.MaxSeq + 1}} {
		a := seqstore.Advance{Stream: s, To: seqstore.Cursor{Epoch: 1, Next: 9, Skipped: []seqstore.Range{r}}}
		assert.ErrorIs(t, a.Check(), seqstore.ErrInvalidArgument, "range %+v", r)
	}
}
