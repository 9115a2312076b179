package memstore_test

import (
	"testing"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(*testing.T) func(*testing.T) seqstore.Store {
			return func(*testing.T) seqstore.Store { return memstore.New() }
		},
	})
}
