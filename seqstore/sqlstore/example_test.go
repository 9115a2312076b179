package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

// Exactly-once processing: the handler's own write and the cursor advance
// commit in one transaction, so after a crash a message is either processed
// and behind the cursor, or neither.
func ExampleStore_AdvanceTx() {
	dir, err := os.MkdirTemp("", "sqlstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	dsn := "file:" + filepath.Join(dir, "app.db") +
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = db.Close() }()

	ctx := context.Background()
	store, err := sqlstore.Open(db, sqlstore.SQLite, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE ledger (account TEXT, seq INTEGER, amount INTEGER)"); err != nil {
		log.Fatal(err)
	}

	// The receiver got message 1 of epoch 7 for account "alice".
	stream := seqstore.Stream{Queue: "payments", Group: "alice"}
	from := seqstore.Cursor{}
	to := seqstore.Cursor{Epoch: 7, Next: 2}

	// process handles one message: the ledger row and the cursor commit
	// together or not at all.
	process := func(seq, amount int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO ledger VALUES (?, ?, ?)", stream.Group, seq, amount); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := store.AdvanceTx(ctx, tx, []seqstore.Advance{{Stream: stream, From: from, To: to}}); err != nil {
			_ = tx.Rollback() // the ledger row goes too
			return err
		}
		return tx.Commit()
	}
	if err := process(1, 100); err != nil {
		log.Fatal(err)
	}
	// A second receiver working from the same stale cursor (or a replay of
	// the same message) conflicts, and its ledger row is rolled back.
	err = process(1, 100)
	fmt.Println("second attempt conflicts:", errors.Is(err, seqstore.ErrConflict))

	curs, err := store.Cursors(ctx, []seqstore.Stream{stream})
	if err != nil {
		log.Fatal(err)
	}
	cur := curs[0]
	var rows int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ledger").Scan(&rows); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ledger rows: %d, cursor: epoch %d next %d\n", rows, cur.Epoch, cur.Next)
	// Output:
	// second attempt conflicts: true
	// ledger rows: 1, cursor: epoch 7 next 2
}
