package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// TestApplyBatch drives the set-based group commit directly: many ops of
// every kind in one transaction, including ops on the same stream that must
// see each other's effects in queue order, a conflicting op and a corrupt
// row that fail alone, and batches larger than one statement's chunk.
func TestApplyBatch(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		a := seqstore.Stream{Queue: "q", Group: "a"}
		bad := seqstore.Stream{Queue: "q", Group: "bad"}
		_, err := db.ExecContext(ctx, s.ph("INSERT INTO "+prefix+"send (queue, grp, epoch, last_seq) VALUES (?, ?, ?, ?)"), "q", "bad", 3, -1)
		require.NoError(t, err)

		many := make([]seqstore.Advance, 2*rowChunk+7)
		for i := range many {
			many[i] = seqstore.Advance{Stream: seqstore.Stream{Queue: "q", Group: fmt.Sprintf("m%04d", i)}, To: seqstore.Cursor{Epoch: 1, Next: uint64(i)}}
		}
		c1 := seqstore.Cursor{Epoch: 9, Next: 2}
		c2 := seqstore.Cursor{Epoch: 9, Next: 3, Skipped: []seqstore.Range{{Epoch: 9, First: 2, Last: 2}}}
		bodies := make([][]byte, rowChunk+3)
		for i := range bodies {
			bodies[i] = fmt.Appendf(nil, "b%d", i)
		}
		rq := func(st seqstore.Stream, n int, journal [][]byte) seqstore.ReserveRequest {
			return seqstore.ReserveRequest{Stream: st, N: n, Journal: journal}
		}
		fresh := seqstore.Stream{Queue: "q", Group: "fresh"}
		ops := []*op{
			{kind: opReserve, reqs: []seqstore.ReserveRequest{rq(a, 2, [][]byte{[]byte("1"), nil})}},
			{kind: opAdvance, batch: []seqstore.Advance{{Stream: a, To: c1}}},
			{kind: opReserve, reqs: []seqstore.ReserveRequest{rq(bad, 1, nil)}},
			{kind: opReserve, reqs: []seqstore.ReserveRequest{rq(a, len(bodies), bodies)}},
			{kind: opAdvance, batch: []seqstore.Advance{{Stream: a, From: c1, To: c2}}},
			{kind: opAdvance, batch: []seqstore.Advance{{Stream: a, From: c1, To: c2}, {Stream: many[0].Stream, To: many[0].To}}},
			{kind: opSent, marks: []seqstore.SentMark{{Stream: a, Seqs: []uint64{2, 3, 1 << 63}}}},
			{kind: opAdvance, batch: many[1:]},
			{kind: opReserve, reqs: []seqstore.ReserveRequest{rq(a, 1, nil)}},
			// An op with the corrupt stream applies none of its requests.
			{kind: opReserve, reqs: []seqstore.ReserveRequest{rq(fresh, 1, [][]byte{[]byte("no")}), rq(a, 5, nil), rq(bad, 1, nil)}},
			// An op with the same stream twice continues its own counter.
			{kind: opReserve, reqs: []seqstore.ReserveRequest{rq(a, 1, nil), rq(fresh, 2, nil), rq(a, 2, nil)}},
		}
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		out, err := s.applyBatch(ctx, tx, ops)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())

		require.NoError(t, out[0].err)
		assert.Equal(t, uint64(1), out[0].res[0].First)
		epoch := out[0].res[0].Epoch
		assert.NoError(t, out[1].err)
		assert.ErrorIs(t, seqstore.Failed(out[2].err, 0, 1), seqstore.ErrCorrupt, "the corrupt stream fails alone")
		assert.Equal(t, []seqstore.Reservation{{Epoch: epoch, First: 3}}, out[3].res, "a second reserve of the stream in the same transaction continues the counter")
		assert.NoError(t, out[4].err, "an advance sees the earlier advance of the same transaction")
		assert.ErrorIs(t, seqstore.Failed(out[5].err, 0, 2), seqstore.ErrConflict, "the same From again conflicts")
		assert.ErrorIs(t, seqstore.Failed(out[5].err, 1, 2), seqstore.ErrAborted, "the conflicting op's other stream is aborted")
		assert.NoError(t, out[6].err)
		assert.NoError(t, out[7].err)
		next := uint64(3 + len(bodies))
		assert.Equal(t, []seqstore.Reservation{{Epoch: epoch, First: next}}, out[8].res)
		assert.ErrorIs(t, seqstore.Failed(out[9].err, 2, 3), seqstore.ErrCorrupt, "an op with a corrupt stream fails")
		assert.ErrorIs(t, seqstore.Failed(out[9].err, 0, 3), seqstore.ErrAborted)
		assert.ErrorIs(t, seqstore.Failed(out[9].err, 1, 3), seqstore.ErrAborted)
		require.NoError(t, out[10].err)
		fe := out[10].res[1].Epoch
		assert.Equal(t, []seqstore.Reservation{{Epoch: epoch, First: next + 1}, {Epoch: fe, First: 1}, {Epoch: epoch, First: next + 2}}, out[10].res,
			"the failed op consumed nothing; the same stream twice in one op gets consecutive ranges")

		cur, err := storetest.CursorOne(ctx, s, a)
		require.NoError(t, err)
		assert.Equal(t, c2, cur)
		cur, err = storetest.CursorOne(ctx, s, many[0].Stream)
		require.NoError(t, err)
		assert.Equal(t, seqstore.Cursor{}, cur, "the conflicting op's other stream was not written")
		for i := 1; i < len(many); i += 37 { // a sample across the chunks, and the last
			m := many[i]
			if i+37 >= len(many) {
				m = many[len(many)-1]
			}
			cur, err := storetest.CursorOne(ctx, s, m.Stream)
			require.NoError(t, err)
			require.Equal(t, m.To, cur, "stream %s of the large batch", m.Stream)
		}
		p, err := s.Pending(ctx, "q")
		require.NoError(t, err)
		seqs := map[uint64]string{}
		for _, e := range p {
			assert.Equal(t, a, e.Stream, "only stream a journaled (not the failed op's)")
			seqs[e.Seq] = string(e.Body)
		}
		assert.Equal(t, 2+len(bodies)-2, len(seqs), "the 2+%d journaled entries minus the two marked sent (and nothing of the failed op)", len(bodies))
		assert.Equal(t, "1", seqs[1])
		assert.Equal(t, "b2", seqs[5], "journal seqs follow the reservation order")
		_, ok := seqs[2]
		assert.False(t, ok, "seq 2 was marked sent")
	})
}

// TestLargeBodies reserves more body bytes in one call than one statement
// carries (and than MySQL's default max_allowed_packet), so the journal
// INSERT is split by size.
func TestLargeBodies(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		ctx := context.Background()
		s := newStore(t, db, b.dialect, prefix)
		st := seqstore.Stream{Queue: "q", Group: "big"}
		bodies := make([][]byte, 257) // 257 × 64 KiB > 16 MiB
		for i := range bodies {
			bodies[i] = make([]byte, 64<<10)
			bodies[i][0] = byte(i)
		}
		r, err := storetest.ReserveOne(ctx, s, st, len(bodies), bodies)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), r.First)
		p, err := s.Pending(ctx, "q")
		require.NoError(t, err)
		require.Len(t, p, len(bodies))
		for i, e := range p {
			require.Len(t, e.Body, 64<<10)
			require.Equal(t, byte(i), e.Body[0], "entry %d", i)
		}
	})
}

// TestTransactionRowBound: concurrent calls share transactions, but one
// transaction carries at most maxTxRows rows (a call larger than that goes
// alone): a statement's cost grows faster than its rows, so a few
// transactions of bounded size beat one huge one.
func TestTransactionRowBound(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, prefix string) {
		s := newStore(t, db, b.dialect, prefix)
		const callers, streams = 16, 100 // 100 rows per call: at most 5 calls per transaction
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, callers)
		for c := range callers {
			reqs := make([]seqstore.ReserveRequest, streams)
			for i := range reqs {
				reqs[i] = seqstore.ReserveRequest{Stream: seqstore.Stream{Queue: "q", Group: fmt.Sprintf("c%d-%d", c, i)}, N: 1}
			}
			wg.Go(func() {
				<-start
				_, errs[c] = s.Reserve(t.Context(), reqs)
			})
		}
		before := s.Stats()
		close(start)
		wg.Wait()
		for c, err := range errs {
			require.NoError(t, err, "caller %d", c)
		}
		st := s.Stats()
		txs := st.Transactions - before.Transactions
		t.Logf("%d calls of %d rows in %d transactions", callers, streams, txs)
		assert.GreaterOrEqual(t, txs, uint64((callers*streams+maxTxRows-1)/maxTxRows),
			"no transaction may carry more than %d rows", maxTxRows)
		assert.Equal(t, (&op{reqs: make([]seqstore.ReserveRequest, 3)}).Size(), 3)
		assert.Equal(t, (&op{reqs: []seqstore.ReserveRequest{{N: 2, Journal: [][]byte{nil, nil}}}}).Size(), 3, "a request and its journal rows")
		assert.Equal(t, (&op{marks: []seqstore.SentMark{{Seqs: []uint64{1, 2}}, {}}}).Size(), 2, "the marked seqs")
	})
}
