package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

// ExactlyOnce over sqlstore (SQLite): the application's AdvanceTx keeps
// the claimed Owner (an advance does not un-claim the stream), and once a
// newer owner claimed the stream, a stale owner's AdvanceTx fails with
// ErrConflict, so its transaction (and the application's writes in it)
// rolls back.
func TestAttackExactlyOnceAdvanceTxIsFenced(t *testing.T) {
	ctx := context.Background()
	dsn := "file:" + filepath.Join(t.TempDir(), "app.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	defer db.Close()
	st, err := sqlstore.Open(db, sqlstore.SQLite, nil)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Migrate(ctx))
	_, err = db.ExecContext(ctx, "CREATE TABLE ledger (grp TEXT, seq INTEGER)")
	require.NoError(t, err)

	mq := memqueue.New(nil)
	shards := []scaleout.Shard{{Name: "orders", Queue: mq}}
	snd, err := scaleout.NewSender(ctx, shards, st, &ordered.Options{Name: "orders"})
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, snd.Send(ctx, "g", []byte("x")))
	}
	require.NoError(t, snd.Close(ctx))

	s := seqstore.Stream{Queue: "orders", Group: "g"}
	var mu sync.Mutex
	var errs []error
	var ownerAfter1 uint64
	var token uint64
	h := func(ctx context.Context, m *ordered.Message) error {
		tok, _ := scaleout.Token(ctx)
		if m.Seq == 2 {
			// A newer owner claims g before this (now stale) handler
			// commits.
			_, err := seqstore.Claim(ctx, st, s, tok+100)
			require.NoError(t, err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "INSERT INTO ledger VALUES (?, ?)", m.Group, m.Seq); err != nil {
			return err
		}
		if err := st.AdvanceTx(ctx, tx, []seqstore.Advance{m.CursorAdvance()}); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if m.Seq == 1 {
			cs, err := st.Cursors(ctx, []seqstore.Stream{s})
			require.NoError(t, err)
			mu.Lock()
			ownerAfter1, token = cs[0].Owner, tok
			mu.Unlock()
		}
		return nil
	}
	r, err := scaleout.NewReceiver(ctx, shards, st, &scaleout.Options{
		Queue:  ordered.Options{Name: "orders", Receive: ordered.ReceiveOptions{Mode: ordered.ExactlyOnce, Wait: 50 * time.Millisecond}},
		Member: "a", Lease: scaleout.LeaseOptions{TTL: 1500 * time.Millisecond, RenewEvery: 500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond, RenewDeadline: time.Second, RebalanceDelay: 300 * time.Millisecond, CloseDrain: 5 * time.Second}, DrainTimeout: time.Second,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx, h) }()
	time.Sleep(4 * time.Second)
	stop()
	<-done

	mu.Lock()
	defer mu.Unlock()
	require.NotZero(t, token)
	require.Equal(t, token, ownerAfter1, "the application's AdvanceTx kept the claimed Owner")
	require.NotEmpty(t, errs, "the stale owner's AdvanceTx was refused")
	require.True(t, errors.Is(errs[0], seqstore.ErrConflict), "%v", errs[0])
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ledger WHERE seq = 2").Scan(&n))
	require.Zero(t, n, "the stale owner's write rolled back with its advance")
}
