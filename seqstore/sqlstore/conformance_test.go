package sqlstore

import (
	"testing"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// TestConformance runs storetest on SQLite and, when configured, on
// PostgreSQL and MariaDB/MySQL; each subtest gets its own table prefix.
func TestConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, storetest.Harness{Persistent: true, Shared: true, Open: func(t *testing.T) func(t *testing.T) seqstore.Store {
				db, prefix := b.open(t)
				newStore(t, db, b.dialect, prefix).Close() // migrate once
				return func(t *testing.T) seqstore.Store {
					s, err := Open(db, b.dialect, &Options{TablePrefix: prefix})
					if err != nil {
						t.Fatalf("Open: %v", err)
					}
					return s
				}
			}, PlantParked: func(t *testing.T, st seqstore.Store, entries []seqstore.Parked) {
				plantPassed(t, st.(*Store), entries...)
			}})
		})
	}
}
