package filestore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadJournalAnyOrder: a snapshot written while the journal was a map
// holds its entries in any order; loaded, they are in seq order, and Sent
// finds each of them. A seq held twice is refused.
func TestLoadJournalAnyOrder(t *testing.T) {
	st := newState()
	ss := &streamState{epoch: 1, next: 10}
	held := []snapEntry{{7, []byte("g")}, {2, []byte("b")}, {9, []byte("i")}, {5, []byte("e")}, {3, []byte("c")}}
	require.NoError(t, st.loadJournal(ss, held))
	var seqs []uint64
	var bodies []string
	for q, b := range ss.journal.All() {
		seqs = append(seqs, q)
		bodies = append(bodies, string(b))
	}
	assert.Equal(t, []uint64{2, 3, 5, 7, 9}, seqs)
	assert.Equal(t, []string{"b", "c", "e", "g", "i"}, bodies)
	assert.Equal(t, [2]int64{5, 5}, [2]int64{int64(st.entries), st.journalBytes})
	for _, q := range []uint64{9, 2, 5, 3, 7} {
		_, ok := ss.journal.Remove(q)
		assert.True(t, ok, "seq %d found", q)
	}

	err := st.loadJournal(&streamState{epoch: 1, next: 10}, []snapEntry{{4, nil}, {2, nil}, {4, nil}})
	assert.ErrorContains(t, err, "bad seq 4")
}
