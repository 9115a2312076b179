package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// do queues o for the group commit and waits for its outcome or for ctx.
func (s *Store) do(ctx context.Context, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o.cancel = ctx.Done()
	o.done = make(chan struct{})
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return seqstore.ErrClosed
	}
	select {
	case s.queue <- o:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case <-o.done:
		if o.skipped {
			return ctx.Err()
		}
		return o.err
	case <-ctx.Done():
		// The op may still commit; the caller treats it as failed, which
		// for a Reserve leaves a gap and for an Advance a stale view that
		// the next compare-and-set reports.
		return ctx.Err()
	}
}

// writer commits queued ops, everything queued at once in one transaction,
// until Close closes the queue.
func (s *Store) writer() {
	defer s.wg.Done()
	batch := make([]*op, 0, maxBatchOps)
	for first := range s.queue {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < maxBatchOps {
			select {
			case o, ok := <-s.queue:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		s.commit(batch)
	}
}

func (s *Store) commit(batch []*op) {
	live := make([]*op, 0, len(batch))
	for _, o := range batch {
		select {
		case <-o.cancel:
			o.skipped = true // the caller has gone; do not write on its behalf
			close(o.done)
		default:
			live = append(live, o)
		}
	}
	if len(live) == 0 {
		return
	}
	s.ops.Add(uint64(len(live)))
	err, unknown := s.runTx(live)
	if err != nil && !unknown && len(live) > 1 {
		// One op's statement may have broken the shared transaction; run
		// each alone so that the others still succeed. Not after a failed
		// COMMIT: the transaction may have committed, and running its ops
		// again would reserve twice or report a conflict for a success.
		s.log.Debug("sqlstore: group transaction failed, running its ops one by one", "ops", len(live), "err", err.Error())
		for _, o := range live {
			if err, _ := s.runTx([]*op{o}); err != nil {
				o.err = err
			}
			close(o.done)
		}
		return
	}
	for _, o := range live {
		if err != nil {
			o.err = err
		}
		close(o.done)
	}
}

// runTx applies ops in one transaction and sets each op's own outcome once
// the transaction committed. Transient failures (SQLite busy, deadlocks,
// serialization failures) are retried a few times.
//
// unknown reports that the error came from COMMIT itself, so the
// transaction may or may not have committed.
func (s *Store) runTx(ops []*op) (err error, unknown bool) {
	for attempt := range 4 {
		if attempt > 0 {
			s.retries.Add(1)
			time.Sleep(time.Duration(5<<attempt) * time.Millisecond)
		}
		var beforeCommit bool
		err, beforeCommit = s.tryTx(ops)
		if err == nil {
			return nil, false
		}
		// A connection lost before COMMIT was sent wrote nothing: one
		// more try on a fresh connection is safe. After COMMIT the outcome
		// is unknown, so the error goes to the callers.
		if !transient(err) && !(beforeCommit && attempt == 0 && connectionLost(err)) {
			return err, !beforeCommit
		}
	}
	return err, false
}

// tryTx runs ops in one transaction. beforeCommit reports that the error
// came before COMMIT was sent.
func (s *Store) tryTx(ops []*op) (err error, beforeCommit bool) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
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
		o.res, o.err = outcomes[i].res, outcomes[i].err
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
