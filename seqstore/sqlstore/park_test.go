package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

func park(st seqstore.Stream, epoch, seq uint64, body string) seqstore.Parked {
	return seqstore.Parked{Stream: st, Epoch: epoch, Seq: seq, Body: []byte(body)}
}

// parkedSeqs returns "epoch/seq=body" of every parked entry of st in epoch
// from seq 0 on.
func parkedSeqs(t *testing.T, s *Store, st seqstore.Stream, epoch uint64) []string {
	t.Helper()
	got, err := s.Unpark(context.Background(), []seqstore.ParkQuery{{Stream: st, Epoch: epoch, Max: 1 << 20}})
	require.NoError(t, err, "unpark %s epoch %d", st, epoch)
	require.Len(t, got, 1)
	var out []string
	for _, p := range got[0] {
		require.Equal(t, st, p.Stream)
		require.Equal(t, epoch, p.Epoch)
		out = append(out, fmt.Sprintf("%d/%d=%s", p.Epoch, p.Seq, p.Body))
	}
	return out
}

// TestPark checks the Parker contract on each dialect: park, re-park,
// unpark by range, refusal below the cursor, the drop by Advance (and
// none by a conflicting one), the zero cursor row of a stream parked
// before its first Advance, and persistence across reopen.
func TestPark(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		z := seqstore.Stream{Queue: "q", Group: "Z '\x01"}
		other := seqstore.Stream{Queue: "q2", Group: "a"}

		require.NoError(t, s.Park(ctx, nil), "an empty call is nil")
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 5, 3, "three"), park(a, 5, 7, "seven"), park(a, 5, 4, ""),
			park(a, 6, 1, "six/one"), park(a, 4, 9, "old"), park(z, 5, 1, "z"), park(other, 5, 1, "o")}))
		cur, err := storetest.CursorOne(ctx, s, a)
		require.NoError(t, err)
		assert.Equal(t, seqstore.Cursor{}, cur, "parking creates a cursor row to lock; Cursors still reports the zero Cursor")

		assert.Equal(t, []string{"5/3=three", "5/4=", "5/7=seven"}, parkedSeqs(t, s, a, 5))
		got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: a, Epoch: 5, From: 4, Max: 1}, {Stream: a, Epoch: 5, From: 4, Max: 5},
			{Stream: a, Epoch: 7, Max: 5}, {Stream: z, Epoch: 5, Max: 1}, {Stream: a, Epoch: 5, From: 1 << 63, Max: 1}})
		require.NoError(t, err)
		require.Len(t, got, 5)
		assert.Equal(t, []seqstore.Parked{park(a, 5, 4, "")}, got[0], "From and Max bound the result")
		assert.Equal(t, []seqstore.Parked{park(a, 5, 4, ""), park(a, 5, 7, "seven")}, got[1])
		assert.Empty(t, got[2], "no entries of epoch 7")
		assert.Equal(t, []seqstore.Parked{park(z, 5, 1, "z")}, got[3])
		assert.Empty(t, got[4], "From beyond MaxSeq")
		assert.NotNil(t, got[0][0].Body, "an empty body comes back empty, not nil")
		got[1][1].Body[0] = 'X'
		assert.Equal(t, []string{"5/3=three", "5/4=", "5/7=seven"}, parkedSeqs(t, s, a, 5), "returned bodies are the caller's")

		streams, err := s.ParkedStreams(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, []seqstore.Stream{z, a}, streams, "ordered by key (%q < %q)", z.Key(), a.Key())
		streams, err = s.ParkedStreams(ctx, "none")
		require.NoError(t, err)
		assert.Empty(t, streams)

		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 5, 7, "SEVEN")}), "re-park")
		assert.Equal(t, []string{"5/3=three", "5/4=", "5/7=SEVEN"}, parkedSeqs(t, s, a, 5), "re-parking replaces the body")

		c1 := seqstore.Cursor{Epoch: 5, Next: 4}
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, To: c1}}), "advance from the zero cursor row")
		assert.Equal(t, []string{"5/4=", "5/7=SEVEN"}, parkedSeqs(t, s, a, 5), "advance drops the passed seq 3 only")
		assert.Empty(t, parkedSeqs(t, s, a, 4), "and the older epoch")
		assert.Equal(t, []string{"6/1=six/one"}, parkedSeqs(t, s, a, 6), "a later epoch stays")
		assert.Equal(t, []string{"5/1=z"}, parkedSeqs(t, s, z, 5), "other streams keep theirs")

		err = s.Park(ctx, []seqstore.Parked{park(a, 5, 9, "nine"), park(a, 5, 3, "three"), park(a, 4, 10, "old"), park(z, 5, 2, "z2")})
		var be *seqstore.BatchError
		require.ErrorAs(t, err, &be, "parks below the cursor are refused")
		require.Len(t, be.Errs, 4)
		assert.ErrorIs(t, be.Errs[0], seqstore.ErrAborted)
		assert.ErrorIs(t, be.Errs[1], seqstore.ErrConflict, "seq 3 < Next 4")
		assert.ErrorIs(t, be.Errs[2], seqstore.ErrConflict, "older epoch")
		assert.ErrorIs(t, be.Errs[3], seqstore.ErrAborted)
		assert.Equal(t, []string{"5/4=", "5/7=SEVEN"}, parkedSeqs(t, s, a, 5), "a refused call applies nothing")
		assert.Equal(t, []string{"5/1=z"}, parkedSeqs(t, s, z, 5), "a refused call applies nothing on other streams")
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(a, 5, 4, "four")}), "the cursor's Next itself may be parked")

		err = s.Advance(ctx, []seqstore.Advance{{Stream: a, From: seqstore.Cursor{}, To: seqstore.Cursor{Epoch: 6, Next: 9}}})
		require.ErrorIs(t, err, seqstore.ErrConflict)
		assert.Equal(t, []string{"5/4=four", "5/7=SEVEN"}, parkedSeqs(t, s, a, 5), "a conflicting advance drops nothing")

		// A batch whose other stream conflicts drops nothing either.
		err = s.Advance(ctx, []seqstore.Advance{{Stream: a, From: c1, To: seqstore.Cursor{Epoch: 5, Next: 8}},
			{Stream: z, From: c1, To: seqstore.Cursor{Epoch: 5, Next: 8}}})
		require.ErrorIs(t, err, seqstore.ErrConflict)
		assert.Equal(t, []string{"5/4=four", "5/7=SEVEN"}, parkedSeqs(t, s, a, 5))

		// Reopen: the parks are in the database.
		require.NoError(t, s.Close())
		_, err = s.Unpark(ctx, []seqstore.ParkQuery{{Stream: a, Epoch: 5, Max: 1}})
		assert.ErrorIs(t, err, seqstore.ErrClosed)
		assert.ErrorIs(t, s.Park(ctx, []seqstore.Parked{park(a, 5, 9, "x")}), seqstore.ErrClosed)
		_, err = s.ParkedStreams(ctx, "q")
		assert.ErrorIs(t, err, seqstore.ErrClosed)
		s = newStore(t, db, b.dialect, prefix)
		assert.Equal(t, []string{"5/4=four", "5/7=SEVEN"}, parkedSeqs(t, s, a, 5), "parks survive reopen")

		c2 := seqstore.Cursor{Epoch: 6, Next: 1}
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, From: c1, To: c2}}))
		assert.Empty(t, parkedSeqs(t, s, a, 5), "a new epoch passes every entry of the old one")
		assert.Equal(t, []string{"6/1=six/one"}, parkedSeqs(t, s, a, 6), "Next 1 passes nothing of its epoch")
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: a, From: c2, To: seqstore.Cursor{Epoch: 6, Next: 2}}}))
		assert.Empty(t, parkedSeqs(t, s, a, 6))
		streams, err = s.ParkedStreams(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, []seqstore.Stream{z}, streams)

		// Invalid arguments and a cancelled context.
		assert.ErrorIs(t, s.Park(ctx, []seqstore.Parked{park(seqstore.Stream{}, 1, 1, "x")}), seqstore.ErrInvalidStream)
		_, err = s.Unpark(ctx, []seqstore.ParkQuery{{Stream: a, Epoch: 1, Max: 0}})
		assert.ErrorIs(t, err, seqstore.ErrInvalidArgument)
		_, err = s.ParkedStreams(ctx, "")
		assert.ErrorIs(t, err, seqstore.ErrInvalidStream)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		assert.ErrorIs(t, s.Park(cctx, []seqstore.Parked{park(z, 5, 3, "c")}), context.Canceled)
		_, err = s.Unpark(cctx, []seqstore.ParkQuery{{Stream: z, Epoch: 5, Max: 1}})
		assert.ErrorIs(t, err, context.Canceled)
		_, err = s.ParkedStreams(cctx, "q")
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, []string{"5/1=z"}, parkedSeqs(t, s, z, 5), "a cancelled park applied nothing")
	})
}

// TestParkApplyOrder drives one transaction of Park and Advance calls on
// one stream: each sees the ones before it.
func TestParkApplyOrder(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		fresh := seqstore.Stream{Queue: "q", Group: "fresh"}
		c1 := seqstore.Cursor{Epoch: 1, Next: 3}
		ops := []*op{
			{kind: opPark, parks: []seqstore.Parked{park(a, 1, 2, "2"), park(a, 1, 5, "5"), park(a, 1, 8, "8")}},
			{kind: opAdvance, batch: []seqstore.Advance{{Stream: a, To: c1}}},
			{kind: opPark, parks: []seqstore.Parked{park(a, 1, 2, "again")}},
			{kind: opPark, parks: []seqstore.Parked{park(a, 1, 6, "6"), park(a, 1, 8, "eight"), park(fresh, 1, 1, "f")}},
			{kind: opAdvance, batch: []seqstore.Advance{{Stream: a, From: c1, To: seqstore.Cursor{Epoch: 1, Next: 6}}}},
		}
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		out, err := s.applyBatch(ctx, tx, ops)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		assert.NoError(t, out[0].err)
		assert.NoError(t, out[1].err)
		assert.ErrorIs(t, out[2].err, seqstore.ErrConflict, "a park sees the advance before it")
		assert.NoError(t, out[3].err)
		assert.NoError(t, out[4].err)
		assert.Equal(t, []string{"1/6=6", "1/8=eight"}, parkedSeqs(t, s, a, 1),
			"the parks of this transaction that a later advance passed are gone; the last body wins")
		assert.Equal(t, []string{"1/1=f"}, parkedSeqs(t, s, fresh, 1))
		cur, err := storetest.CursorOne(ctx, s, fresh)
		require.NoError(t, err)
		assert.Equal(t, seqstore.Cursor{}, cur)
	})
}

// TestParkAdvanceTx: AdvanceTx drops the passed parks inside the caller's
// transaction, and a rollback keeps them.
func TestParkAdvanceTx(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		st := seqstore.Stream{Queue: "q", Group: "g"}
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(st, 1, 1, "1"), park(st, 1, 2, "2"), park(st, 1, 3, "3")}))
		to := seqstore.Cursor{Epoch: 1, Next: 3}
		for _, commit := range []bool{false, true} {
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			require.NoError(t, s.AdvanceTx(ctx, tx, []seqstore.Advance{{Stream: st, To: to}}))
			if commit {
				require.NoError(t, tx.Commit())
				assert.Equal(t, []string{"1/3=3"}, parkedSeqs(t, s, st, 1), "committed: the passed parks are gone")
			} else {
				require.NoError(t, tx.Rollback())
				assert.Equal(t, []string{"1/1=1", "1/2=2", "1/3=3"}, parkedSeqs(t, s, st, 1), "rolled back: the parks stay")
			}
		}
	})
}

// TestParkCorrupt: a changed body, CRC, seq or row of another stream is
// reported as ErrCorrupt and left as it was.
func TestParkCorrupt(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		st := seqstore.Stream{Queue: "q", Group: "g"}
		exec := func(q string, args ...any) {
			t.Helper()
			_, err := db.ExecContext(ctx, s.ph(q), args...)
			require.NoError(t, err, q)
		}
		for _, tc := range []struct {
			name   string
			change func()
		}{
			{"body", func() { exec("UPDATE "+prefix+"parked SET body = ? WHERE seq = 2", []byte("tw0")) }},
			{"crc", func() { exec("UPDATE " + prefix + "parked SET crc = crc + 1 WHERE seq = 2") }},
			{"crc out of range", func() { exec("UPDATE " + prefix + "parked SET crc = 4294967296 WHERE seq = 2") }},
			{"seq", func() { exec("UPDATE " + prefix + "parked SET seq = 3 WHERE seq = 2") }},
			{"zero seq", func() { exec("UPDATE " + prefix + "parked SET seq = 0 WHERE seq = 2") }},
			{"epoch", func() { exec("UPDATE " + prefix + "parked SET epoch = 2 WHERE seq = 2") }},
			{"group", func() { exec("UPDATE "+prefix+"parked SET grp = ? WHERE seq = 2", "h") }},
		} {
			exec("DELETE FROM " + prefix + "parked")
			require.NoError(t, s.Park(ctx, []seqstore.Parked{park(st, 1, 1, "one"), park(st, 1, 2, "two")}))
			tc.change()
			var err error
			for _, g := range []string{"g", "h"} {
				for _, epoch := range []uint64{1, 2} {
					if _, e := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: seqstore.Stream{Queue: "q", Group: g}, Epoch: epoch, Max: 10}}); e != nil {
						err = e
					}
				}
			}
			assert.ErrorIs(t, err, seqstore.ErrCorrupt, "%s: a changed row must fail Unpark", tc.name)
			var n int
			require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+prefix+"parked").Scan(&n))
			assert.Equal(t, 2, n, "%s: nothing is deleted", tc.name)
		}
		if b.dialect == Postgres {
			return // TEXT holds only valid UTF-8
		}
		exec("DELETE FROM " + prefix + "parked")
		exec("INSERT INTO "+prefix+"parked (queue, grp, epoch, seq, crc, body) VALUES (?, ?, ?, ?, ?, ?)", "q", []byte{0xff}, 1, 1, 0, []byte("x"))
		_, err := s.ParkedStreams(ctx, "q")
		assert.ErrorIs(t, err, seqstore.ErrCorrupt, "a group name that is not UTF-8")
	})
}

// TestParkLargeBody parks MaxParkBody bytes (MySQL needs MEDIUMBLOB) and a
// call of many entries, more than one statement's chunk.
func TestParkLargeBody(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		st := seqstore.Stream{Queue: "q", Group: "big"}
		big := bytes.Repeat([]byte("0123456789abcdef"), seqstore.MaxParkBody/16)
		require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: 1, Body: big}, {Stream: st, Epoch: 1, Seq: 2, Body: big}}))
		got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 2}})
		require.NoError(t, err)
		require.Len(t, got[0], 2)
		assert.True(t, bytes.Equal(big, got[0][1].Body), "a MaxParkBody body comes back whole (%d bytes)", len(got[0][1].Body))

		var many []seqstore.Parked
		var queries []seqstore.ParkQuery
		for i := range 2*rowChunk + 5 {
			g := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("m%04d", i%(unparkChunk+3))}
			many = append(many, park(g, 1, uint64(i+1), fmt.Sprint(i)))
			if i < unparkChunk+3 {
				queries = append(queries, seqstore.ParkQuery{Stream: g, Epoch: 1, Max: 100})
			}
		}
		require.NoError(t, s.Park(ctx, many))
		got, err = s.Unpark(ctx, queries)
		require.NoError(t, err)
		total := 0
		for i, ps := range got {
			for k, p := range ps {
				assert.Equal(t, queries[i].Stream, p.Stream)
				assert.Equal(t, fmt.Sprint(p.Seq-1), string(p.Body))
				if k > 0 {
					assert.Less(t, ps[k-1].Seq, p.Seq, "in seq order")
				}
			}
			total += len(ps)
		}
		assert.Equal(t, len(many), total, "every entry of the large call, over more queries than one statement holds")
	})
}

// TestParkRacesAdvance parks and advances the same fresh streams from two
// stores at once (two processes), the first Park of each stream racing its
// first Advance (the cursor row does not exist yet): whichever wins, no
// parked entry is left below its stream's cursor.
func TestParkRacesAdvance(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		parker, advancer := newStore(t, db, b.dialect, prefix), newStore(t, db, b.dialect, prefix)
		const rounds, streams = 20, 8
		for r := range rounds {
			var wg sync.WaitGroup
			errs := make(chan error, 2*streams)
			for g := range streams {
				st := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("%d-%d", r, g)}
				wg.Go(func() {
					if err := advancer.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 3}}}); err != nil {
						errs <- err
					}
				})
				wg.Go(func() {
					err := parker.Park(ctx, []seqstore.Parked{park(st, 1, 1, "x"), park(st, 1, 2, "y")})
					if errors.Is(err, seqstore.ErrConflict) {
						return
					}
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for g := range streams {
				st := seqstore.Stream{Queue: "q", Group: fmt.Sprintf("%d-%d", r, g)}
				cur, err := storetest.CursorOne(ctx, parker, st)
				require.NoError(t, err)
				require.Equal(t, uint64(3), cur.Next)
				got, err := parker.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 100}})
				require.NoError(t, err)
				require.Empty(t, got[0], "%s: parked below the cursor %d/%d", st, cur.Epoch, cur.Next)
			}
		}
		t.Logf("parker %+v, advancer %+v", parker.Stats(), advancer.Stats())
	})
}

// TestMigrateToParked upgrades a database migrated by code that knew only
// schema version 1: its data stays and parking works.
func TestMigrateToParked(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		_, err := db.ExecContext(ctx, "CREATE TABLE "+prefix+"schema_version (version INTEGER NOT NULL)")
		require.NoError(t, err)
		for _, stmt := range migrations[0].stmts(b.dialect, prefix) {
			_, err := db.ExecContext(ctx, stmt)
			require.NoError(t, err, stmt)
		}
		_, err = db.ExecContext(ctx, "INSERT INTO "+prefix+"schema_version (version) VALUES (1)")
		require.NoError(t, err)
		st := seqstore.Stream{Queue: "q", Group: "g"}
		c := seqstore.Cursor{Epoch: 3, Next: 5}
		_, err = db.ExecContext(ctx, (&Store{dialect: b.dialect}).ph("INSERT INTO "+prefix+"cursor (queue, grp, epoch, next_seq, owner, skipped) VALUES (?, ?, ?, ?, ?, ?)"),
			st.Queue, st.Group, 3, 5, 0, "")
		require.NoError(t, err, "a cursor written by the old code")

		s := newStore(t, db, b.dialect, prefix) // Migrate
		var version int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT MAX(version) FROM "+prefix+"schema_version").Scan(&version))
		assert.Equal(t, migrations[len(migrations)-1].version, version)
		cur, err := storetest.CursorOne(ctx, s, st)
		require.NoError(t, err)
		assert.Equal(t, c, cur, "the cursor survives the upgrade")
		require.NoError(t, s.Park(ctx, []seqstore.Parked{park(st, 3, 6, "six")}))
		assert.Equal(t, []string{"3/6=six"}, parkedSeqs(t, s, st, 3))
		require.ErrorIs(t, s.Park(ctx, []seqstore.Parked{park(st, 3, 4, "four")}), seqstore.ErrConflict)
	})
}
