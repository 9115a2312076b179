package filestore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) func(t *testing.T) seqstore.Store {
			dir := t.TempDir()
			return func(t *testing.T) seqstore.Store {
				s, err := Open(dir, nil)
				require.NoError(t, err, "open %s", dir)
				return s
			}
		},
		Persistent: true,
	})
}
