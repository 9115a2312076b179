package sqlstore

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestAdvanceCASWaitsForRowLock pins the compare-and-set of Advance to the
// row it compares: another transaction (a second receiver's store on
// another machine) holds the cursor row's lock, Advance starts and waits,
// the other transaction moves the cursor and commits. Advance must then see
// the moved cursor and fail with ErrConflict. An Advance that read the row
// without locking it compares the old value, waits only at its write, and
// then overwrites the other receiver's cursor. The order is forced, not
// raced: the test commits only once the server shows Advance waiting for a
// lock on this test's table.
func TestAdvanceCASWaitsForRowLock(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		var waiting string // counts the sessions waiting for a lock on this test's cursor table (MariaDB: running a statement on it)
		switch b.dialect {
		case Postgres:
			waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%" + prefix + "cursor%'"
		case MySQL:
			// MariaDB lists a statement waiting for a row lock in the
			// process list (state "Statistics" or "Updating") before
			// innodb_trx shows its transaction.
			waiting = "SELECT count(*) FROM information_schema.processlist WHERE id <> CONNECTION_ID() AND info LIKE '%" + prefix + "cursor%'"
		default:
			t.Skip("SQLite: a write transaction holds the database's write lock; there is no row lock to take")
		}
		ph := func(n int) string {
			if b.dialect == Postgres {
				return "$" + string(rune('0'+n))
			}
			return "?"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := newStore(t, db, b.dialect, prefix)
		st := seqstore.Stream{Queue: "q", Group: "g"}
		at5 := seqstore.Cursor{Epoch: 1, Next: 5}
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: at5}}))

		other, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = other.Rollback() }()
		var next int64
		require.NoError(t, other.QueryRowContext(ctx,
			"SELECT next_seq FROM "+prefix+"cursor WHERE queue = "+ph(1)+" AND grp = "+ph(2)+" FOR UPDATE",
			st.Queue, []byte(st.Group)).Scan(&next))
		require.EqualValues(t, 5, next)

		done := make(chan error, 1)
		go func() {
			done <- s.Advance(ctx, []seqstore.Advance{{Stream: st, From: at5, To: seqstore.Cursor{Epoch: 1, Next: 9}}})
		}()
		for {
			var n int
			require.NoError(t, db.QueryRowContext(ctx, waiting).Scan(&n))
			if n > 0 {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("Advance returned (%v) while another transaction held the cursor row's lock", err)
			case <-ctx.Done():
				t.Fatal("Advance never waited for the cursor row's lock")
			case <-time.After(5 * time.Millisecond):
			}
		}
		_, err = other.ExecContext(ctx, "UPDATE "+prefix+"cursor SET next_seq = 7 WHERE queue = "+ph(1)+" AND grp = "+ph(2), st.Queue, []byte(st.Group))
		require.NoError(t, err)
		require.NoError(t, other.Commit())

		select {
		case err = <-done:
		case <-ctx.Done():
			t.Fatal("Advance did not return after the other transaction committed")
		}
		require.ErrorIs(t, err, seqstore.ErrConflict, "Advance compared a cursor another transaction was moving")
		cur, err := s.Cursors(ctx, []seqstore.Stream{st})
		require.NoError(t, err)
		require.EqualValues(t, 7, cur[0].Next, "the other receiver's cursor was overwritten")
	})
}
