package seqstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Review 2 (security): ParseSkipped accepted a range from seq 0 to MaxSeq
// and an inverted range, which no Advance can have stored (Advance.Check
// refuses them); a cursor holding one is corrupt. Every range an Advance
// accepts still parses back.
func TestSec3ParseSkipped(t *testing.T) {
	for _, v := range []string{"1:0-9223372036854775807", "1:9-3", "1:0-0", "1:5-5,1:9-3", "1:1-9223372036854775808"} {
		r, err := ParseSkipped(v)
		assert.ErrorIs(t, err, ErrCorrupt, "ParseSkipped(%q) = %+v", v, r)
	}
	for _, rs := range [][]Range{
		{{Epoch: 0, First: 1, Last: 1}}, // epoch 0: the legacy form
		{{Epoch: 1, First: 1, Last: 2}, {Epoch: 1, First: 1, Last: 2}},
		{{Epoch: MaxSeq, First: 7, Last: MaxSeq}}, // an epoch switch
	} {
		a := Advance{Stream: Stream{Queue: "q", Group: "g"}, To: Cursor{Epoch: 1, Next: 2, Skipped: rs}}
		require.NoError(t, a.Check(), "%+v", rs)
		got, err := ParseSkipped(FormatSkipped(rs))
		require.NoError(t, err, "%+v", rs)
		assert.Equal(t, rs, got)
	}
}
