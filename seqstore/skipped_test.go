package seqstore_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/inorder/inorder/seqstore"
)

func TestSkippedRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, seqstore.MaxSkipped).Draw(t, "n")
		var rs []seqstore.Range
		for range n {
			first := rapid.Uint64Range(1, seqstore.MaxSeq).Draw(t, "first")
			rs = append(rs, seqstore.Range{
				Epoch: rapid.Uint64Range(0, seqstore.MaxSeq).Draw(t, "epoch"),
				First: first,
				Last:  rapid.Uint64Range(first, seqstore.MaxSeq).Draw(t, "last"),
			})
		}
		got, err := seqstore.ParseSkipped(seqstore.FormatSkipped(rs))
		require.NoError(t, err)
		assert.Equal(t, rs, got)
	})
}

func TestParseSkippedCorrupt(t *testing.T) {
	tooMany := strings.Repeat("1:1-1,", seqstore.MaxSkipped) + "1:1-1"
	for _, v := range []string{"1", "1:2", "1:2-", "01:2-3", "1:2-3,", "-1:2-3", "1:2-9223372036854775808", "a:b-c", tooMany} {
		_, err := seqstore.ParseSkipped(v)
		assert.ErrorIs(t, err, seqstore.ErrCorrupt, "ParseSkipped(%q)", v)
	}
	got, err := seqstore.ParseSkipped("")
	require.NoError(t, err)
	assert.Nil(t, got)
}
