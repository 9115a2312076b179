package seqstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FormatSkipped encodes skipped ranges as text: "epoch:first-last" per range,
// in decimal, joined by commas ("" for none). Stores that keep a cursor's
// Skipped list in a text field (Redis, SQL) use this form.
func FormatSkipped(rs []Range) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(r.Epoch, 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(r.First, 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatUint(r.Last, 10))
	}
	return b.String()
}

// ParseSkipped is the inverse of FormatSkipped. Text that FormatSkipped
// cannot have written for a cursor that Advance accepted (more than
// MaxSkipped ranges, non-canonical or out-of-range numbers, a missing
// separator, a range with first 0 or first after last) gives an error
// wrapping ErrCorrupt.
func ParseSkipped(v string) ([]Range, error) {
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > MaxSkipped {
		return nil, fmt.Errorf("%w: %d skipped ranges, at most %d", ErrCorrupt, len(parts), MaxSkipped)
	}
	out := make([]Range, len(parts))
	for i, p := range parts {
		e, rest, ok1 := strings.Cut(p, ":")
		a, b, ok2 := strings.Cut(rest, "-")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: skipped range %q", ErrCorrupt, p)
		}
		var errs [3]error
		out[i].Epoch, errs[0] = ParseNum(e)
		out[i].First, errs[1] = ParseNum(a)
		out[i].Last, errs[2] = ParseNum(b)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("skipped range %q: %w", p, err)
		}
		if !out[i].valid() {
			// Advance.Check refuses such a range: no store wrote it.
			return nil, fmt.Errorf("%w: skipped range %q: need 1 <= first <= last", ErrCorrupt, p)
		}
	}
	return out, nil
}

// ParseNum parses a canonical decimal (no sign, no leading zero) in
// 0..MaxSeq, as stores read back counters they wrote as text. Anything else
// gives an error wrapping ErrCorrupt.
func ParseNum(v string) (uint64, error) {
	if v == "" || len(v) > 1 && v[0] == '0' {
		return 0, fmt.Errorf("%w: %q is not a canonical number", ErrCorrupt, v)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > MaxSeq {
		return 0, fmt.Errorf("%w: %q is not a number in 0..MaxSeq", ErrCorrupt, v)
	}
	return n, nil
}
