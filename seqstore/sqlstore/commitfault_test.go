package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// faultConnector opens connections of another driver and lets a test stand
// between a transaction and its COMMIT: onCommit, when set, is called with
// the real Commit and returns what the caller of Commit is told.
type faultConnector struct {
	drv driver.Driver
	dsn string

	mu       sync.Mutex
	onCommit func(commit func() error) error
}

func (c *faultConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: conn, c: c}, nil
}

func (c *faultConnector) Driver() driver.Driver { return c.drv }

func (c *faultConnector) setOnCommit(f func(commit func() error) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onCommit = f
}

// faultConn forwards to the wrapped connection what database/sql looks
// for; it wraps only the transactions.
type faultConn struct {
	driver.Conn
	c *faultConnector
}

func (fc *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := fc.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, fmt.Errorf("faultConn: %T has no BeginTx", fc.Conn)
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &faultTx{Tx: tx, c: fc.c}, nil
}

func (fc *faultConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := fc.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return fc.Conn.Prepare(query)
}

func (fc *faultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := fc.Conn.(driver.ExecerContext); ok {
		return e.ExecContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (fc *faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := fc.Conn.(driver.QueryerContext); ok {
		return q.QueryContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (fc *faultConn) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := fc.Conn.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (fc *faultConn) ResetSession(ctx context.Context) error {
	if r, ok := fc.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (fc *faultConn) IsValid() bool {
	if v, ok := fc.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

type faultTx struct {
	driver.Tx
	c *faultConnector
}

func (tx *faultTx) Commit() error {
	tx.c.mu.Lock()
	f := tx.c.onCommit
	tx.c.mu.Unlock()
	if f == nil {
		return tx.Tx.Commit()
	}
	return f(tx.Tx.Commit)
}

// TestGroupCommitUnknownOutcomeNotRerun (SQLite, through a driver wrapper)
// makes the COMMIT of a group transaction of two Reserve calls apply and
// then fail, as a connection lost once COMMIT was sent does. The outcome
// is unknown to the store, which must not run the calls again one by one:
// a reservation that did commit would be applied twice, its journal left
// under the first seqs (recovery re-sends them) and the same bodies
// journaled again under a second range. A failed Reserve may have taken
// its seqs (a gap), but only once: each stream's counter and journal must
// show at most one application of its call.
func TestGroupCommitUnknownOutcomeNotRerun(t *testing.T) {
	ctx := context.Background()
	lite, err := sql.Open("sqlite", "")
	require.NoError(t, err)
	drv := lite.Driver()
	require.NoError(t, lite.Close())
	fc := &faultConnector{drv: drv, dsn: sqliteDSN(filepath.Join(t.TempDir(), "store.db"))}
	db := sql.OpenDB(fc)
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { _ = db.Close() })
	s := newStore(t, db, SQLite, uniquePrefix())

	const n = 3
	streams := []seqstore.Stream{{Queue: "q", Group: "b"}, {Queue: "q", Group: "c"}}
	bodies := func(st seqstore.Stream) [][]byte {
		var bs [][]byte
		for i := range n {
			bs = append(bs, fmt.Appendf(nil, "%s #%d", st.Group, i))
		}
		return bs
	}

	// Commit 1 (call A) is held until B and C are queued behind it, so
	// that the group commit takes them into one transaction; commit 2
	// (theirs) applies and then fails; any later one passes.
	held := make(chan struct{})
	release := make(chan struct{})
	lost := errors.New("read tcp: connection reset after COMMIT was sent (injected)")
	var mu sync.Mutex
	commits := 0
	fc.setOnCommit(func(commit func() error) error {
		mu.Lock()
		commits++
		k := commits
		mu.Unlock()
		switch k {
		case 1:
			close(held)
			<-release
			return commit()
		case 2:
			if err := commit(); err != nil {
				return err
			}
			return lost
		}
		return commit()
	})
	t.Cleanup(func() { fc.setOnCommit(nil) })

	a := s.commits.AddNoWait(&op{kind: opReserve, reqs: []seqstore.ReserveRequest{{Stream: seqstore.Stream{Queue: "q", Group: "a"}, N: 1}}})
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("call A reached no COMMIT within 10s")
	}
	ops := make([]*op, len(streams))
	dones := make([]<-chan error, len(streams))
	for i, st := range streams {
		ops[i] = &op{kind: opReserve, reqs: []seqstore.ReserveRequest{{Stream: st, N: n, Journal: bodies(st)}}}
		dones[i] = s.commits.AddNoWait(ops[i]) // queued when it returns
	}
	close(release)
	require.NoError(t, <-a, "call A")
	for i, st := range streams {
		var err error
		select {
		case err = <-dones[i]:
		case <-time.After(30 * time.Second):
			t.Fatalf("the Reserve of %s did not return within 30s", st)
		}
		if err == nil {
			t.Logf("the Reserve of %s was told it succeeded: %+v", st, ops[i].res)
		} else {
			t.Logf("the Reserve of %s was told it failed: %v", st, err)
		}
	}
	mu.Lock()
	got := commits
	mu.Unlock()
	require.GreaterOrEqual(t, got, 2, "commits: B and C's transaction was committed")

	pending, err := s.Pending(ctx, "q")
	require.NoError(t, err)
	for i, st := range streams {
		next, err := storetest.ReserveOne(ctx, s, st, 1, nil)
		require.NoError(t, err, "reserve on %s afterwards", st)
		assert.LessOrEqual(t, next.First, uint64(n+1), "the counter of %s: one Reserve of %d seqs (its COMMIT applied, then reported an unknown outcome) was applied more than once", st, n)
		if ops[i].err == nil {
			r := ops[i].res[0]
			assert.Equal(t, r.First+n, next.First, "the counter of %s follows the reservation its caller was told of", st)
		}
		seen := map[string][]uint64{}
		for _, e := range pending {
			if e.Stream == st {
				seen[string(e.Body)] = append(seen[string(e.Body)], e.Seq)
			}
		}
		for b, seqs := range seen {
			assert.Len(t, seqs, 1, "journal of %s: body %q is journaled under seqs %v: recovery would send it twice", st, b, seqs)
		}
	}
}
