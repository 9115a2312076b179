package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

func TestOptionsValidate(t *testing.T) {
	db, _ := openSQLite(t)
	for _, p := range []string{"x; DROP TABLE y; --", "a-b", "1abc", "a b", "tbl\"", "名前", "a`b", strings.Repeat("a", 32), "a'b"} {
		_, err := Open(db, SQLite, &Options{TablePrefix: p})
		assert.Error(t, err, "table prefix %q must be rejected", p)
	}
	_, err := Open(db, Dialect(0), nil)
	assert.Error(t, err, "unknown dialect")
	_, err = Open(nil, SQLite, nil)
	assert.Error(t, err, "nil db")
	_, err = Open(db, SQLite, &Options{Writers: -1})
	assert.Error(t, err, "negative Writers")
	s, err := Open(db, SQLite, &Options{TablePrefix: strings.Repeat("a", 31)})
	require.NoError(t, err, "a 31-byte identifier is allowed")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close must be idempotent")
	_, err = storetest.ReserveOne(context.Background(), s, seqstore.Stream{Queue: "q"}, 1, nil)
	assert.ErrorIs(t, err, seqstore.ErrClosed)
	_, err = storetest.CursorOne(context.Background(), s, seqstore.Stream{Queue: "q"})
	assert.ErrorIs(t, err, seqstore.ErrClosed)
	assert.NoError(t, db.Ping(), "Close must leave the caller's *sql.DB open")
	assert.Equal(t, "postgres", Postgres.String())
	assert.Equal(t, "Dialect(9)", Dialect(9).String())
}

func TestMigrate(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		require.NoError(t, s.Migrate(ctx), "Migrate must be idempotent")
		var rows, version int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*), MAX(version) FROM "+prefix+"schema_version").Scan(&rows, &version))
		assert.Equal(t, 1, rows, "one version row")
		assert.Equal(t, migrations[len(migrations)-1].version, version)

		// Several processes migrating a fresh prefix at once.
		fresh := prefix + "c"
		t.Cleanup(func() {
			for _, tb := range tableNames {
				_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+fresh+tb)
			}
		})
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				st, err := Open(db, b.dialect, &Options{TablePrefix: fresh})
				if err != nil {
					errs[i] = err
					return
				}
				defer func() { _ = st.Close() }()
				errs[i] = st.Migrate(ctx)
			})
		}
		wg.Wait()
		for i, err := range errs {
			assert.NoError(t, err, "concurrent Migrate %d", i)
		}
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*), MAX(version) FROM "+fresh+"schema_version").Scan(&rows, &version))
		assert.Equal(t, 1, rows, "one version row after concurrent migrations")

		_, err := db.ExecContext(ctx, "UPDATE "+prefix+"schema_version SET version = 99")
		require.NoError(t, err)
		err = s.Migrate(ctx)
		require.ErrorIs(t, err, ErrSchemaTooNew, "a newer schema must be refused")
		assert.Contains(t, err.Error(), "99")
	})
}

func TestHostileNames(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		names := []seqstore.Stream{
			{Queue: "q", Group: "'; DROP TABLE " + prefix + "send; --"},
			{Queue: "q", Group: `\'"` + "`$1?"},
			{Queue: "q", Group: "A"},
			{Queue: "q", Group: "a"},
			{Queue: "q", Group: "a "},
			{Queue: "q", Group: "é\u00a0\U0001F600\x01"},
			{Queue: "q", Group: ""},
			{Queue: "q", Group: strings.Repeat("g", seqstore.MaxGroupLen)},
			{Queue: strings.Repeat("é", seqstore.MaxQueueLen/2), Group: "x"},
		}
		for i, st := range names {
			r, err := storetest.ReserveOne(ctx, s, st, i+1, makeBodies(i+1, st.Group))
			require.NoError(t, err, "reserve %q", st)
			assert.Equal(t, uint64(1), r.First, "stream %q is new, so its first seq is 1 (names must not collide)", st)
			to := seqstore.Cursor{Epoch: r.Epoch, Next: uint64(i + 2)}
			require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: to}}), "advance %q", st)
		}
		for i, st := range names {
			c, err := storetest.CursorOne(ctx, s, st)
			require.NoError(t, err)
			assert.Equal(t, uint64(i+2), c.Next, "cursor of %q read back", st)
		}
		p, err := s.Pending(ctx, "q")
		require.NoError(t, err)
		groups := map[string]int{}
		for _, e := range p {
			groups[e.Stream.Group]++
			assert.Equal(t, fmt.Sprintf("%s/%d", e.Stream.Group, e.Seq), string(e.Body), "body stored verbatim")
		}
		for i, st := range names[:len(names)-1] {
			assert.Equal(t, i+1, groups[st.Group], "pending entries of %q", st.Group)
		}
		var n int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+prefix+"send").Scan(&n), "the send table is still there")
		assert.Equal(t, len(names), n)
	})
}

func makeBodies(n int, group string) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s/%d", group, i+1)
	}
	return out
}

func TestGroupCommit(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		const workers, per = 16, 20
		var wg sync.WaitGroup
		var mu sync.Mutex
		seqs := map[string][]uint64{}
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(w % 4)}
				own := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("own%d", w)}
				var cur seqstore.Cursor
				for i := range per {
					r, err := storetest.ReserveOne(ctx, s, st, 1, [][]byte{[]byte("x")})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					seqs[st.Group] = append(seqs[st.Group], r.First)
					mu.Unlock()
					to := seqstore.Cursor{Epoch: 1, Next: uint64(i + 1)}
					if err := s.Advance(ctx, []seqstore.Advance{{Stream: own, From: cur, To: to}}); err != nil {
						errs <- err
						return
					}
					cur = to
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for g, q := range seqs {
			sort.Slice(q, func(i, j int) bool { return q[i] < q[j] })
			for i, v := range q {
				require.Equal(t, uint64(i+1), v, "group %s: seqs 1..N without holes or repeats", g)
			}
		}
		st := s.Stats()
		t.Logf("%d ops in %d transactions, %d statements", st.Ops, st.Transactions, st.Statements)
		assert.Equal(t, uint64(2*workers*per), st.Ops)
		assert.Less(t, st.Transactions, st.Ops, "concurrent calls must share transactions")
	})
}

func TestAdvanceTx(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		app := prefix + "app"
		_, err := db.ExecContext(ctx, "CREATE TABLE "+app+" (id BIGINT NOT NULL)")
		require.NoError(t, err)
		st := seqstore.Stream{Queue: "q", Group: "g"}
		insert := "INSERT INTO " + app + " (id) VALUES (?)"
		if b.dialect == Postgres {
			insert = "INSERT INTO " + app + " (id) VALUES ($1)"
		}
		count := func() int {
			var n int
			require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+app).Scan(&n))
			return n
		}
		step := func(from, to seqstore.Cursor, id int, commit bool) error {
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			if _, err := tx.ExecContext(ctx, insert, id); err != nil {
				_ = tx.Rollback()
				return err
			}
			if err := s.AdvanceTx(ctx, tx, []seqstore.Advance{{Stream: st, From: from, To: to}}); err != nil {
				_ = tx.Rollback()
				return err
			}
			if !commit {
				return tx.Rollback()
			}
			return tx.Commit()
		}
		c1 := seqstore.Cursor{Epoch: 1, Next: 2}
		require.NoError(t, step(seqstore.Cursor{}, c1, 1, true))
		assert.Equal(t, 1, count(), "committed: the app row is there")
		cur, err := storetest.CursorOne(ctx, s, st)
		require.NoError(t, err)
		assert.Equal(t, c1, cur, "committed: the cursor moved")

		c2 := seqstore.Cursor{Epoch: 1, Next: 3}
		require.NoError(t, step(c1, c2, 2, false))
		assert.Equal(t, 1, count(), "rolled back: no app row")
		cur, err = storetest.CursorOne(ctx, s, st)
		require.NoError(t, err)
		assert.Equal(t, c1, cur, "rolled back: the cursor did not move")

		err = step(seqstore.Cursor{}, c2, 3, true)
		var be *seqstore.BatchError
		require.ErrorAs(t, err, &be, "a stale From conflicts")
		require.Len(t, be.Errs, 1)
		assert.ErrorIs(t, be.Errs[0], seqstore.ErrConflict, "the stream's own error is the conflict")
		assert.Equal(t, 1, count())

		require.NoError(t, step(c1, c2, 2, true))
		assert.Equal(t, 2, count())
		cur, err = storetest.CursorOne(ctx, s, st)
		require.NoError(t, err)
		assert.Equal(t, c2, cur)

		err = s.AdvanceTx(ctx, nil, nil)
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument)
	})
}

func TestCorruptRows(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		st := seqstore.Stream{Queue: "q", Group: "g"}
		ph := func(q string) string {
			if b.dialect == Postgres {
				return dollarParams(q)
			}
			return q
		}
		exec := func(q string, args ...any) {
			t.Helper()
			_, err := db.ExecContext(ctx, ph(q), args...)
			require.NoError(t, err, q)
		}
		dump := func(table string) string {
			t.Helper()
			rows, err := db.QueryContext(ctx, "SELECT * FROM "+prefix+table)
			require.NoError(t, err)
			defer func() { _ = rows.Close() }()
			cols, err := rows.Columns()
			require.NoError(t, err)
			var out []string
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				require.NoError(t, rows.Scan(ptrs...))
				out = append(out, fmt.Sprintf("%s", vals))
			}
			return strings.Join(out, ";")
		}
		reset := func() {
			for _, tb := range []string{"send", "journal", "cursor"} {
				exec("DELETE FROM " + prefix + tb)
			}
		}
		cases := []struct {
			name  string
			setup func()
			table string
			check func() error
		}{
			{"negative last_seq", func() {
				exec("INSERT INTO "+prefix+"send (queue, grp, epoch, last_seq) VALUES (?, ?, ?, ?)", "q", "g", 5, -1)
			}, "send", func() error { _, err := storetest.ReserveOne(ctx, s, st, 1, nil); return err }},
			{"zero epoch", func() {
				exec("INSERT INTO "+prefix+"send (queue, grp, epoch, last_seq) VALUES (?, ?, ?, ?)", "q", "g", 0, 3)
			}, "send", func() error { _, err := storetest.ReserveOne(ctx, s, st, 1, [][]byte{[]byte("x")}); return err }},
			{"negative next_seq", func() {
				exec("INSERT INTO "+prefix+"cursor (queue, grp, epoch, next_seq, owner, skipped) VALUES (?, ?, ?, ?, ?, ?)", "q", "g", 1, -4, 0, "")
			}, "cursor", func() error {
				return s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 5}}})
			}},
			{"unparsable skipped", func() {
				exec("INSERT INTO "+prefix+"cursor (queue, grp, epoch, next_seq, owner, skipped) VALUES (?, ?, ?, ?, ?, ?)", "q", "g", 1, 4, 0, "1:2-x")
			}, "cursor", func() error { _, err := storetest.CursorOne(ctx, s, st); return err }},
			{"too many skipped", func() {
				exec("INSERT INTO "+prefix+"cursor (queue, grp, epoch, next_seq, owner, skipped) VALUES (?, ?, ?, ?, ?, ?)", "q", "g", 1, 4, 0,
					strings.TrimSuffix(strings.Repeat("1:2-3,", seqstore.MaxSkipped+1), ","))
			}, "cursor", func() error { _, err := storetest.CursorOne(ctx, s, st); return err }},
			{"journal without sender row", func() {
				exec("INSERT INTO "+prefix+"journal (queue, grp, seq, body) VALUES (?, ?, ?, ?)", "q", "g", 1, []byte("x"))
			}, "journal", func() error { _, err := s.Pending(ctx, "q"); return err }},
			{"journal seq beyond last", func() {
				exec("INSERT INTO "+prefix+"send (queue, grp, epoch, last_seq) VALUES (?, ?, ?, ?)", "q", "g", 5, 1)
				exec("INSERT INTO "+prefix+"journal (queue, grp, seq, body) VALUES (?, ?, ?, ?)", "q", "g", 2, []byte("x"))
			}, "journal", func() error { _, err := s.Pending(ctx, "q"); return err }},
		}
		for _, tc := range cases {
			reset()
			tc.setup()
			before := dump(tc.table)
			err := tc.check()
			assert.ErrorIs(t, err, seqstore.ErrCorrupt, "%s: want ErrCorrupt, got %v", tc.name, err)
			assert.Equal(t, before, dump(tc.table), "%s: the corrupt row must be left as it was", tc.name)
		}
		// A corrupt stream fails only its own call in a shared transaction.
		reset()
		exec("INSERT INTO "+prefix+"send (queue, grp, epoch, last_seq) VALUES (?, ?, ?, ?)", "q", "g", 5, -1)
		var wg sync.WaitGroup
		var goodErr error
		wg.Go(func() { _, goodErr = storetest.ReserveOne(ctx, s, seqstore.Stream{Queue: "q", Group: "ok"}, 1, nil) })
		_, err := storetest.ReserveOne(ctx, s, st, 1, nil)
		wg.Wait()
		assert.ErrorIs(t, err, seqstore.ErrCorrupt)
		assert.NoError(t, goodErr, "a healthy stream's reserve is not failed by another's corrupt row")
	})
}

func TestClosedPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		driver, dsn string
		d           Dialect
	}{
		{"pgx", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", Postgres},
		{"mysql", "root@tcp(127.0.0.1:1)/test?timeout=2s", MySQL},
	} {
		db, err := sql.Open(tc.driver, tc.dsn)
		require.NoError(t, err)
		s, err := Open(db, tc.d, nil)
		require.NoError(t, err)
		_, err = storetest.ReserveOne(ctx, s, seqstore.Stream{Queue: "q"}, 1, nil)
		require.Error(t, err, "%s: reserve against a closed port", tc.d)
		assert.Contains(t, err.Error(), "sqlstore: reserve q/", "the error names the package and operation")
		assert.Contains(t, err.Error(), "refused", "%s: the error says the connection was refused: %v", tc.d, err)
		err = s.Advance(ctx, []seqstore.Advance{{Stream: seqstore.Stream{Queue: "q"}, To: seqstore.Cursor{Epoch: 1}}})
		require.Error(t, err)
		assert.False(t, errors.Is(err, seqstore.ErrConflict), "an outage is not a conflict")
		_, err = storetest.CursorOne(ctx, s, seqstore.Stream{Queue: "q"})
		require.Error(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, db.Close())
	}
}

// TestKilledConnections kills the server side of every connection of the
// store's pool between calls (PostgreSQL pg_terminate_backend, MySQL KILL):
// calls after that either succeed on a fresh connection or fail with a clear
// error, and nothing acknowledged before is lost.
func TestKilledConnections(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		if b.dialect == SQLite {
			t.Skip("SQLite is in-process: no connection to kill")
		}
		ctx := context.Background()
		// One connection, so that its server id names the store's only
		// connection and no other test's is killed.
		db.SetMaxOpenConns(1)
		s := newStore(t, db, b.dialect, prefix)
		st := seqstore.Stream{Queue: "q"}
		var acked []uint64
		killed := map[int64]bool{}
		var cur seqstore.Cursor
		var failures int
		for round := range 5 {
			for i := range 10 {
				r, err := storetest.ReserveOne(ctx, s, st, 1, [][]byte{fmt.Appendf(nil, "%d/%d", round, i)})
				if err != nil {
					failures++
					assert.Contains(t, err.Error(), "sqlstore: reserve", "a failure names the operation")
					continue
				}
				acked = append(acked, r.First)
				to := seqstore.Cursor{Epoch: r.Epoch, Next: r.First + 1}
				if err := s.Advance(ctx, []seqstore.Advance{{Stream: st, From: cur, To: to}}); err != nil {
					failures++
					assert.False(t, errors.Is(err, seqstore.ErrConflict), "a killed connection must not look like a conflict: %v", err)
					continue
				}
				cur = to
			}
			killed[killConnection(t, b.dialect, db)] = true
		}
		t.Logf("%d acknowledged reservations, %d failed calls, %d transactions retried", len(acked), failures, s.Stats().Retries)
		assert.Len(t, killed, 5, "every round killed a different connection: the store reconnected each time (killed %v)", killed)
		var p []seqstore.Entry
		var err error
		for range 3 { // a read on the killed connection fails once
			if p, err = s.Pending(ctx, "q"); err == nil {
				break
			}
		}
		require.NoError(t, err)
		got := map[uint64]bool{}
		for _, e := range p {
			got[e.Seq] = true
		}
		for _, q := range acked {
			assert.True(t, got[q], "acknowledged seq %d must still be journaled", q)
		}
		c, err := storetest.CursorOne(ctx, s, st)
		require.NoError(t, err)
		assert.Equal(t, cur, c, "the last acknowledged advance is the stored cursor")
	})
}

// killConnection ends, from another connection, the server side of the
// only connection of db, and returns its id: the next call on it finds it
// dead.
func killConnection(t *testing.T, d Dialect, db *sql.DB) int64 {
	t.Helper()
	ctx := context.Background()
	idQuery, driverName, env, kill := "SELECT pg_backend_pid()", "pgx", "INORDER_TEST_POSTGRES_DSN", "SELECT pg_terminate_backend(%d)"
	if d == MySQL {
		idQuery, driverName, env, kill = "SELECT CONNECTION_ID()", "mysql", "INORDER_TEST_MYSQL_DSN", "KILL %d"
	}
	var id int64
	var err error
	for range 3 { // the connection may be the one killed last round
		if err = db.QueryRowContext(ctx, idQuery).Scan(&id); err == nil {
			break
		}
	}
	require.NoError(t, err)
	killer, err := sql.Open(driverName, envDSN(t, env))
	require.NoError(t, err)
	defer func() { _ = killer.Close() }()
	_, err = killer.ExecContext(ctx, fmt.Sprintf(kill, id))
	require.NoError(t, err, "kill connection %d", id)
	return id
}

// TestKilledConnectionsUnderLoad (PostgreSQL) terminates the store's server
// connections again and again while 8 callers reserve and advance through
// the group commit: calls fail with errors or succeed, and everything
// acknowledged is found afterwards.
func TestKilledConnectionsUnderLoad(t *testing.T) {
	dsn := os.Getenv("INORDER_TEST_POSTGRES_DSN")
	if dsn == "" {
		backends(t) // fails in CI
		t.Skip("INORDER_TEST_POSTGRES_DSN not set")
	}
	ctx := context.Background()
	app := "inorder_" + strings.TrimSuffix(uniquePrefix(), "_")
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db, prefix := openServer(t, "pgx", "INORDER_TEST_POSTGRES_DSN", dsn+sep+"application_name="+app)
	s := newStore(t, db, Postgres, prefix)
	killer, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer func() { _ = killer.Close() }()

	const workers = 8
	type acked struct {
		seqs []uint64
		cur  seqstore.Cursor
	}
	results := make([]acked, workers)
	var failed, succeeded atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(w)}
			r := &results[w]
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := storetest.ReserveOne(ctx, s, st, 1, [][]byte{[]byte("m")})
				if err != nil {
					failed.Add(1)
					continue
				}
				r.seqs = append(r.seqs, res.First)
				to := seqstore.Cursor{Epoch: res.Epoch, Next: r.cur.Next + 1}
				if err := s.Advance(ctx, []seqstore.Advance{{Stream: st, From: r.cur, To: to}}); err != nil {
					failed.Add(1)
					for { // the outcome is unknown: re-read, as a receiver would
						if c, err := storetest.CursorOne(ctx, s, st); err == nil {
							r.cur = c
							break
						}
					}
					continue
				}
				r.cur = to
				succeeded.Add(1)
			}
		})
	}
	kills := 0
	for range 20 {
		time.Sleep(10 * time.Millisecond)
		var n int
		err := killer.QueryRowContext(ctx, "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n)
		require.NoError(t, err)
		kills += n
	}
	before := succeeded.Load()
	deadline := time.Now().Add(10 * time.Second)
	for succeeded.Load() < before+20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	require.Greater(t, succeeded.Load(), before+19, "the store must recover after the kills")
	t.Logf("%d connections killed, %d acknowledged advances, %d failed calls, %d transactions retried",
		kills, succeeded.Load(), failed.Load(), s.Stats().Retries)
	assert.Positive(t, kills, "the test must have killed connections")

	p, err := s.Pending(ctx, "q")
	require.NoError(t, err)
	journaled := map[string]bool{}
	for _, e := range p {
		journaled[fmt.Sprintf("%s#%d", e.Stream.Group, e.Seq)] = true
	}
	for w, r := range results {
		for _, q := range r.seqs {
			assert.True(t, journaled[fmt.Sprintf("%d#%d", w, q)], "acknowledged reservation %d of group %d must be journaled", q, w)
		}
		c, err := storetest.CursorOne(ctx, s, seqstore.Stream{Queue: "q", Group: fmt.Sprint(w)})
		require.NoError(t, err)
		assert.Equal(t, r.cur, c, "group %d: the stored cursor is the last acknowledged one", w)
	}
}

// TestTwoStoresSameStreams runs two Stores (as two processes would) on the
// same tables, both creating and reserving on the same new streams at once:
// no seq is handed out twice and none is skipped, so a lost race to create a
// stream never overwrites the winner's counter.
func TestTwoStoresSameStreams(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		stores := []*Store{newStore(t, db, b.dialect, prefix), newStore(t, db, b.dialect, prefix)}
		const perStore, rounds, streams = 8, 10, 4
		var mu sync.Mutex
		got := map[int][]uint64{}
		epochs := map[int]map[uint64]bool{}
		var wg sync.WaitGroup
		errs := make(chan error, 2*perStore)
		for si, s := range stores {
			for w := range perStore {
				wg.Go(func() {
					for i := range rounds {
						g := (si + w + i) % streams
						r, err := storetest.ReserveOne(ctx, s, seqstore.Stream{Queue: "q", Group: fmt.Sprint(g)}, 1, [][]byte{[]byte("x")})
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						got[g] = append(got[g], r.First)
						if epochs[g] == nil {
							epochs[g] = map[uint64]bool{}
						}
						epochs[g][r.Epoch] = true
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for g, seqs := range got {
			assert.Len(t, epochs[g], 1, "group %d: one epoch, whichever store created the stream", g)
			sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
			for i, q := range seqs {
				require.Equal(t, uint64(i+1), q, "group %d: seqs 1..N without repeats or holes", g)
			}
		}
	})
}

// TestCancelRace cancels contexts at random moments while calls are queued
// or in flight: a call returns a context error or a real result, never a nil
// error with an empty result.
func TestCancelRace(t *testing.T) {
	db, prefix := openSQLite(t)
	s := newStore(t, db, SQLite, prefix)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			st := seqstore.Stream{Queue: "q", Group: fmt.Sprint(w)}
			for i := range 40 {
				ctx, cancel := context.WithCancel(context.Background())
				go func() {
					time.Sleep(time.Duration(i%7) * 50 * time.Microsecond)
					cancel()
				}()
				r, err := storetest.ReserveOne(ctx, s, st, 1, nil)
				if err == nil {
					assert.NotZero(t, r.First, "a nil error comes with a reservation")
				} else {
					assert.ErrorIs(t, err, context.Canceled)
				}
				cancel()
			}
		})
	}
	wg.Wait()
}

// TestCorruptCursorFailsAlone: a cursor row with garbage is ErrCorrupt for
// its own stream only: Cursors reads the others, an Advance batch naming it
// fails as a whole with the others aborted, and a batch without it succeeds.
func TestCorruptCursorFailsAlone(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		good := seqstore.Stream{Queue: "q", Group: "good"}
		other := seqstore.Stream{Queue: "q", Group: "other"}
		cg := seqstore.Cursor{Epoch: 2, Next: 3}
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: good, To: cg}}))
		garbage := []struct {
			name string
			row  []any // epoch, next_seq, owner, skipped
		}{
			{"negative next_seq", []any{1, -4, 0, ""}},
			{"unparsable skipped", []any{1, 4, 0, "1:2-x"}},
		}
		if b.dialect == SQLite { // columns without enforced types
			garbage = append(garbage, struct {
				name string
				row  []any
			}{"text in an integer column", []any{"seven", 4, 0, ""}})
		}
		for i, g := range garbage {
			bad := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("bad%d", i)}
			_, err := db.ExecContext(ctx, s.ph("INSERT INTO "+prefix+"cursor (queue, grp, epoch, next_seq, owner, skipped) VALUES (?, ?, ?, ?, ?, ?)"),
				append([]any{bad.Queue, bad.Group}, g.row...)...)
			require.NoError(t, err, g.name)

			cs, err := s.Cursors(ctx, []seqstore.Stream{good, bad, other})
			var be *seqstore.BatchError
			require.ErrorAs(t, err, &be, "%s: Cursors must fail the corrupt stream alone", g.name)
			assert.NoError(t, be.Errs[0], "%s: the good stream is read", g.name)
			assert.ErrorIs(t, be.Errs[1], seqstore.ErrCorrupt, "%s: the corrupt stream", g.name)
			assert.NoError(t, be.Errs[2], "%s: the absent stream is read", g.name)
			require.Len(t, cs, 3)
			assert.Equal(t, cg, cs[0], "%s: the good cursor", g.name)
			assert.Equal(t, seqstore.Cursor{}, cs[2], "%s: the absent cursor", g.name)

			err = s.Advance(ctx, []seqstore.Advance{{Stream: good, From: cg, To: seqstore.Cursor{Epoch: 2, Next: 9}}, {Stream: bad, To: seqstore.Cursor{Epoch: 1, Next: 9}}})
			assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrCorrupt, "%s: an Advance of the corrupt stream", g.name)
			assert.ErrorIs(t, seqstore.Failed(err, 0, 2), seqstore.ErrAborted, "%s: the good stream of that batch is aborted", g.name)
			c, err := storetest.CursorOne(ctx, s, good)
			require.NoError(t, err)
			assert.Equal(t, cg, c, "%s: the aborted stream did not move", g.name)
		}
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: good, From: cg, To: seqstore.Cursor{Epoch: 2, Next: 4}}, {Stream: other, To: cg}}),
			"a batch without a corrupt stream succeeds")
	})
}

// TestRetryBusy: a transaction that finds the database busy is retried
// with backoff through the Store's sleep (internal/retry; it honours the
// transaction's deadline, where a time.Sleep would not), a bounded number
// of times; a wait cut short by the deadline ends the retries.
func TestRetryBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	// No busy timeout: a locked database fails a transaction at once.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(0)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s := newStore(t, db, SQLite, "busy_")
	holder, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	lock, err := holder.BeginTx(t.Context(), nil) // holds the write lock
	require.NoError(t, err)
	t.Cleanup(func() { _ = lock.Rollback() })

	var waits []time.Duration
	s.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	_, err = storetest.ReserveOne(t.Context(), s, seqstore.Stream{Queue: "q"}, 1, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "locked", "the busy error comes back after the retries: %v", err)
	assert.Len(t, waits, txAttempts-1, "one backoff between each of %d attempts", txAttempts)
	for i, d := range waits {
		assert.LessOrEqual(t, d, txBackoff.Max, "wait %d", i)
	}
	assert.Equal(t, uint64(txAttempts-1), s.Stats().Retries)

	waits = nil
	s.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return context.DeadlineExceeded // TxTimeout ran out during the wait
	}
	_, err = storetest.ReserveOne(t.Context(), s, seqstore.Stream{Queue: "q"}, 1, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the deadline ends the retries")
	assert.Len(t, waits, 1, "no attempt after the deadline")

	require.NoError(t, lock.Rollback())
	s.sleep = func(context.Context, time.Duration) error { t.Error("no retry expected"); return nil }
	_, err = storetest.ReserveOne(t.Context(), s, seqstore.Stream{Queue: "q"}, 1, nil)
	require.NoError(t, err, "the lock released, the call succeeds at once")
}
