package ordered_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestSendSizeLimitIsExact checks the size check at its boundary for groups
// of every kind: a payload that fits with the longest header its group can
// need (largest epoch and seq) is admitted, one byte more is ErrTooLarge.
func TestSendSizeLimitIsExact(t *testing.T) {
	d := newSendDriver()
	d.limits.MaxBody = 300
	q := newSendQueue(t, d, memstore.New(), &ordered.Options{Send: ordered.SendOptions{Mode: ordered.SendFast}})
	for _, group := range []string{"", "g", "group-17", "with space", "é#;%~", strings.Repeat("z", envelope.MaxGroupLen)} {
		worst := envelope.HeaderLen(envelope.Header{Group: group, Epoch: envelope.MaxNumber, Seq: envelope.MaxNumber})
		fits := make([]byte, 300-worst)
		require.NoError(t, q.Send(t.Context(), group, fits), "group %q: a payload of %d bytes fits a %d-byte header in 300", group, len(fits), worst)
		err := q.Send(t.Context(), group, append(fits, 'x'))
		assert.ErrorIs(t, err, ordered.ErrTooLarge, "group %q: a payload of %d bytes does not fit a %d-byte header in 300", group, len(fits)+1, worst)
	}
}
