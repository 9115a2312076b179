package backendtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/redisstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

// sendStores opens one fresh store of every kind this machine offers. Real
// Redis needs INORDER_TEST_REDIS_ADDR; with CI=true it is required.
func sendStores(t *testing.T) map[string]seqstore.Store {
	t.Helper()
	stores := map[string]seqstore.Store{"memstore": memstore.New()}

	fs, err := filestore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { fs.Close() })
	stores["filestore"] = fs

	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "s.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ss, err := sqlstore.Open(db, sqlstore.SQLite, nil)
	require.NoError(t, err)
	require.NoError(t, ss.Migrate(t.Context()))
	t.Cleanup(func() { ss.Close() })
	stores["sqlstore-sqlite"] = ss

	if addr := os.Getenv("INORDER_TEST_REDIS_ADDR"); addr != "" {
		client := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { client.Close() })
		rs, err := redisstore.New(client, &redisstore.Options{Prefix: fmt.Sprintf("inorder-send-test:%d:", time.Now().UnixNano())})
		require.NoError(t, err)
		t.Cleanup(func() { rs.Close() })
		stores["redisstore"] = rs
	} else if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but INORDER_TEST_REDIS_ADDR is not set: the real Redis test is required in CI")
	}
	return stores
}

// TestSendRecoverOverStores runs the durable send path over every store:
// messages whose send failed for good stay journaled, and the next Queue on
// the same store sends them under their own seqs.
func TestSendRecoverOverStores(t *testing.T) {
	for name, store := range sendStores(t) {
		t.Run(name, func(t *testing.T) {
			broken := newSendDriver()
			broken.fail = func(call int, bodies [][]byte) error {
				if call%2 == 0 {
					return errPermanent
				}
				return nil
			}
			q1, err := ordered.New(t.Context(), broken, store, nil)
			require.NoError(t, err)
			// A sender that never finishes must fail the test, with a
			// message, not hang it until go test's timeout.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var results []*ordered.SendResult
			for i := range 200 {
				r, err := q1.SendAsync(ctx, "g"+strconv.Itoa(i%5), []byte(strconv.Itoa(i)))
				require.NoError(t, err, "admission %d (within 20s)", i)
				results = append(results, r)
			}
			failed := 0
			for _, r := range results {
				if r.Wait(ctx) != nil {
					failed++
				}
			}
			require.NoError(t, ctx.Err(), "every message finished, sent or failed, within 20s")
			require.NoError(t, q1.Close(ctx))
			require.Positive(t, failed, "some sends failed")
			pending, err := store.Pending(t.Context(), "default")
			require.NoError(t, err)
			require.Len(t, pending, failed, "the journal holds exactly the failed messages")

			good := newSendDriver()
			broken.mu.Lock()
			good.accepted = append(good.accepted, broken.accepted...)
			broken.mu.Unlock()
			q2, err := ordered.New(t.Context(), good, store, nil)
			require.NoError(t, err)
			ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			require.NoError(t, q2.Close(ctx))
			assert.Equal(t, int64(failed), q2.Stats().Send.Recovered)
			byGroup := checkStreams(t, good)
			for g := range 5 {
				assert.Len(t, byGroup["g"+strconv.Itoa(g)], 40, "group g%d complete after recovery", g)
			}
			pending, err = store.Pending(t.Context(), "default")
			require.NoError(t, err)
			assert.Empty(t, pending, "recovered messages are marked sent")
		})
	}
}
