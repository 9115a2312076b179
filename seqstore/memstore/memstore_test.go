package memstore_test

import (
	"testing"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// TestConformance runs the suite on instances that share one memstore
// (storetest.Share), so that the reopen and cross-instance tests run too.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Persistent: true,
		Shared:     true,
		Open:       storetest.OpenShared(func() seqstore.Store { return memstore.New() }),
	})
}

// TestConformanceOneInstance runs the suite on plain, unshared stores.
func TestConformanceOneInstance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(*testing.T) func(*testing.T) seqstore.Store {
			return func(*testing.T) seqstore.Store { return memstore.New() }
		},
	})
}
