package sqlstore

import (
	"testing"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// TestLeaser runs the lease section on SQLite and, when configured, on
// PostgreSQL and MariaDB/MySQL, on the databases' clocks (the suite
// sleeps); each subtest gets its own table prefix, and several Stores over
// one *sql.DB race as several processes would.
func TestLeaser(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.RunLeaser(t, storetest.LeaseHarness{Persistent: true, Shared: true,
				Open: func(t *testing.T) (func(t *testing.T) seqstore.Store, storetest.Clock) {
					db, prefix := b.open(t)
					newStore(t, db, b.dialect, prefix).Close() // migrate once
					return func(t *testing.T) seqstore.Store {
						s, err := Open(db, b.dialect, &Options{TablePrefix: prefix})
						if err != nil {
							t.Fatalf("Open: %v", err)
						}
						return s
					}, nil
				}})
		})
	}
}
