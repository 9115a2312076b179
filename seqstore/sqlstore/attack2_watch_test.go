package sqlstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestAttack2WatchStarvesSmallPool: a user whose *sql.DB is capped at one
// connection (db.SetMaxOpenConns(1), common for a small service, and enough
// for every lease call until today) upgrades and starts a scaleout
// Receiver: its Keeper subscribes on its own (the store is a LeaseWatcher)
// and the watch keeps the pool's only connection for good, so every
// Heartbeat, Acquire, Renew and cursor call of the process waits for a
// connection until its deadline: the member never joins and never gets a
// shard (or, if it held one, cannot renew it and is fenced), with nothing
// but timeouts in the log. Cause: WatchLeases takes a connection from the
// caller's pool for the watch's life (listenOnce: db.Conn) without
// checking db.Stats().MaxOpenConnections; the go doc's "count it in
// SetMaxOpenConns" is not something the Keeper's automatic subscription
// lets the user decide. Suggested fix: refuse the watch with
// seqstore.ErrNotSupported (the keeper then polls) when the pool's
// MaxOpenConnections leaves no connection for the store (<= 1, or
// <= Writers), or listen on a connection opened outside the pool (pgx.Connect
// with the pool's config).
func TestAttack2WatchStarvesSmallPool(t *testing.T) {
	db, prefix := openServer(t, "pgx", "INORDER_TEST_POSTGRES_DSN", postgresDSN(t))
	s := newStore(t, db, Postgres, prefix)
	db.SetMaxOpenConns(1)
	// Before the watch: a heartbeat goes through on the one connection.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := s.Heartbeat(ctx, "ns", seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}, time.Minute)
	require.NoError(t, err, "heartbeat before the watch")

	// What lease.Keeper does on its own when the store is a LeaseWatcher.
	wctx, wcancel := context.WithCancel(t.Context())
	defer wcancel()
	_, err = s.WatchLeases(wctx, "ns")
	if err != nil {
		return // refused: the keeper polls, the pool stays usable
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel2()
	_, err = s.Heartbeat(ctx2, "ns", seqstore.Member{Name: "a", Incarnation: "a-1", Weight: 1}, time.Minute)
	require.NoError(t, err, "a heartbeat while the keeper's watch runs on a pool of one connection (SetMaxOpenConns(1))")
}
