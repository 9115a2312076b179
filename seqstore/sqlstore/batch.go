package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/inorder/inorder/internal/batcher"
	"github.com/inorder/inorder/internal/retry"
	"github.com/inorder/inorder/seqstore"
)

// txBackoff and txAttempts bound the retries of a group-commit transaction
// that failed transiently (a busy database, a deadlock).
var txBackoff = retry.Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond}

const txAttempts = 4

// do submits o to the group commit and waits for its outcome or for ctx.
// A call whose ctx ends before its transaction began is withdrawn; one whose
// ctx ends later may still commit: the caller treats it as failed, which
// for a Reserve leaves a gap and for an Advance a stale view that the next
// compare-and-set reports.
func (s *Store) do(ctx context.Context, o *op) error {
	err := s.commits.Add(ctx, o)
	if errors.Is(err, batcher.ErrShutdown) {
		return seqstore.ErrClosed
	}
	return err
}

// commit is the group commit's handler: it runs a batch of calls in one
// transaction and reports each call's own outcome.
func (s *Store) commit(ops []*op, errs []error) {
	s.ops.Add(uint64(len(ops)))
	err, unknown := s.runTx(ops)
	if err != nil && !unknown && len(ops) > 1 {
		// One call's statement may have broken the shared transaction; run
		// each alone so that the others still succeed. Not after a failed
		// COMMIT: the transaction may have committed, and running its calls
		// again would reserve twice or report a conflict for a success.
		s.log.Debug("sqlstore: group transaction failed, running its calls one by one", "calls", len(ops), "err", err.Error())
		for _, o := range ops {
			if err, _ := s.runTx([]*op{o}); err != nil {
				o.err = err
			}
		}
	} else if err != nil {
		for _, o := range ops {
			o.err = err
		}
	}
	for i, o := range ops {
		errs[i] = o.err
	}
}

// runTx applies ops in one transaction and sets each op's own outcome once
// the transaction committed. Transient failures are retried with backoff,
// all within TxTimeout; a connection lost before COMMIT was sent wrote
// nothing, so one more try on a fresh connection is safe.
//
// unknown reports that the transaction may or may not have committed: the
// error came from COMMIT itself.
func (s *Store) runTx(ops []*op) (err error, unknown bool) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	var last error // the last attempt's own error
	var beforeCommit, first bool
	p := retry.Policy{
		Backoff:     txBackoff,
		MaxAttempts: txAttempts,
		Sleep:       s.sleep,
		Retryable: func(err error) bool {
			return transient(err) || first && beforeCommit && connectionLost(err)
		},
		OnRetry: func(int, error, time.Duration) { s.retries.Add(1) },
	}
	err = retry.Call(ctx, p, func(ctx context.Context, attempt int) error {
		last, beforeCommit = s.tryTx(ctx, ops)
		first = attempt == 1
		return last
	})
	return err, last != nil && !beforeCommit && !transient(last)
}

// tryTx runs ops in one transaction. beforeCommit reports that the error
// came before COMMIT was sent.
func (s *Store) tryTx(ctx context.Context, ops []*op) (err error, beforeCommit bool) {
	s.txs.Add(1)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err), true
	}
	outcomes, err := s.applyBatch(ctx, tx, ops)
	if err != nil {
		_ = tx.Rollback()
		return err, true
	}
	s.stmts.Add(1)
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err), false
	}
	for i, o := range ops {
		o.res, o.err, o.more = outcomes[i].res, outcomes[i].err, outcomes[i].more
	}
	return nil, false
}

// connectionLost reports errors that mean the server connection died.
func connectionLost(err error) bool {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"57P01", "invalid connection", "broken pipe", "connection reset", "bad connection", "conn closed"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// transient reports errors worth retrying the whole transaction for: busy
// databases, deadlocks, serialization failures and lost creation races.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	msg := err.Error()
	// A duplicate key means another process created the same stream or
	// cursor row first; the next attempt sees its row.
	for _, s := range []string{"database is locked", "SQLITE_BUSY", "deadlock", "40P01", "40001", "Error 1213", "Error 1205",
		"23505", "Error 1062", "UNIQUE constraint failed"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
