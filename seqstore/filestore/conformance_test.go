package filestore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

var harness = storetest.Harness{
	Open: func(t *testing.T) func(t *testing.T) seqstore.Store {
		dir := t.TempDir()
		return func(t *testing.T) seqstore.Store {
			s, err := Open(dir, nil)
			require.NoError(t, err, "open %s", dir)
			return s
		}
	},
	Persistent: true,
	OpenBench: func(b *testing.B) seqstore.Store {
		s, err := Open(b.TempDir(), nil)
		require.NoError(b, err)
		return s
	},
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness)
}

// BenchmarkPark is storetest.BenchPark: parallel Park calls of 16 entries
// of 1 KiB, and the Advances that hand them out.
func BenchmarkPark(b *testing.B) {
	storetest.BenchPark(b, harness)
}
