package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inorder/inorder/examples/internal/storeurl"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// memStores are the memstores a test's "mem:NAME" specs name.
var memStores sync.Map // name -> seqstore.Store

// testOpen opens "mem:NAME" as the memstore registered under NAME (closed
// by the test, not the command), and anything else as the command does.
func testOpen(ctx context.Context, spec string, readOnly bool) (seqstore.Store, func() error, error) {
	if name, ok := strings.CutPrefix(spec, "mem:"); ok {
		st, ok := memStores.Load(name)
		if !ok {
			return nil, nil, fmt.Errorf("no memstore %q", name)
		}
		return st.(seqstore.Store), func() error { return nil }, nil
	}
	return openURL(ctx, spec, readOnly)
}

// memSpec registers st for the test and returns its spec.
func memSpec(t *testing.T, st seqstore.Store) string {
	name := t.Name()
	memStores.Store(name, st)
	t.Cleanup(func() { memStores.Delete(name) })
	return "mem:" + name
}

// result is what one run of the command printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
	err            error
}

// ctl runs the command line args in-process.
func ctl(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), args, &stdout, &stderr, testOpen)
	code := exitCode(err, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code, err: err}
}

// ok runs args and requires success.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := ctl(t, args...)
	require.Equal(t, 0, r.code, "inorderctl %q: exit %d, stderr:\n%s", args, r.code, r.stderr)
	return r.stdout
}

// fixture is what fill writes in queue "q".
type fixture struct {
	epoch uint64 // the sender epoch of stream g, also its cursor's
	g     seqstore.Stream
}

// fill writes into st: stream q/g with a sender counter at 3 whose
// journal holds seqs 2 ("two") and 3 ("three") unsent, a cursor at
// epoch/5 that skipped 2-3, and parks 7, 8 ("seven", "eight") and 10
// ("ten"); stream q/idle with only a cursor; and a stream of queue q2.
func fill(t *testing.T, st seqstore.Store) fixture {
	t.Helper()
	ctx := t.Context()
	g := seqstore.Stream{Queue: "q", Group: "g"}
	rs, err := st.Reserve(ctx, []seqstore.ReserveRequest{{Stream: g, N: 3, Journal: [][]byte{[]byte("one"), []byte("two"), []byte("three")}}})
	require.NoError(t, err)
	e := rs[0].Epoch
	require.NoError(t, st.Sent(ctx, []seqstore.SentMark{{Stream: g, Seqs: []uint64{1}}}))
	require.NoError(t, st.Advance(ctx, []seqstore.Advance{
		{Stream: g, To: seqstore.Cursor{Epoch: e, Next: 5, Skipped: []seqstore.Range{{Epoch: e, First: 2, Last: 3}}}},
		{Stream: seqstore.Stream{Queue: "q", Group: "idle"}, To: seqstore.Cursor{Epoch: 9, Next: 4}},
		{Stream: seqstore.Stream{Queue: "q2", Group: "g"}, To: seqstore.Cursor{Epoch: 1, Next: 2}},
	}))
	require.NoError(t, st.Park(ctx, []seqstore.Parked{
		{Stream: g, Epoch: e, Seq: 7, Body: []byte("seven")},
		{Stream: g, Epoch: e, Seq: 8, Body: []byte("eight")},
		{Stream: g, Epoch: e, Seq: 10, Body: []byte("ten")},
	}))
	// Sent may be lazy: wait until the journal shows the mark.
	deadline := time.Now().Add(5 * time.Second)
	for {
		es, err := st.Pending(ctx, "q")
		require.NoError(t, err)
		if len(es) == 2 || time.Now().After(deadline) {
			require.Len(t, es, 2, "journal of q after Sent")
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fixture{epoch: e, g: g}
}

// backend is a store the commands run against.
type backend struct {
	name string
	// spec fills a fresh store with fill and returns its -store spec.
	spec func(t *testing.T) (string, fixture)
}

func memBackend() backend {
	return backend{"memstore", func(t *testing.T) (string, fixture) {
		st := memstore.New()
		t.Cleanup(func() { st.Close() })
		return memSpec(t, st), fill(t, st)
	}}
}

func fileBackend() backend {
	return backend{"filestore", func(t *testing.T) (string, fixture) {
		dir := filepath.Join(t.TempDir(), "state")
		st, err := filestore.Open(dir, nil)
		require.NoError(t, err)
		f := fill(t, st)
		require.NoError(t, st.Close())
		return "file:" + dir, f
	}}
}

func uniqueName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "inorderctl" + hex.EncodeToString(b[:])
}

// serverBackends are Redis and PostgreSQL when INORDER_TEST_REDIS_ADDR and
// INORDER_TEST_POSTGRES_DSN name them (required with CI=true), each test
// under a fresh key or table prefix, removed at the end.
func serverBackends(t *testing.T) []backend {
	var bs []backend
	viaURL := func(t *testing.T, spec string) (string, fixture) {
		b, err := storeurl.Open(t.Context(), spec, nil)
		require.NoError(t, err)
		f := fill(t, b.Store)
		require.NoError(t, b.Close())
		return spec, f
	}
	if addr := os.Getenv("INORDER_TEST_REDIS_ADDR"); addr != "" {
		bs = append(bs, backend{"redis", func(t *testing.T) (string, fixture) {
			prefix := uniqueName() + ":"
			t.Cleanup(func() {
				c := redis.NewClient(&redis.Options{Addr: addr})
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if keys, err := c.Keys(ctx, prefix+"*").Result(); err == nil && len(keys) > 0 {
					c.Del(ctx, keys...)
				}
			})
			return viaURL(t, "redis://"+addr+"/0?prefix="+url.QueryEscape(prefix))
		}})
	} else if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but INORDER_TEST_REDIS_ADDR is not set: the real Redis test is required in CI")
	}
	if dsn := os.Getenv("INORDER_TEST_POSTGRES_DSN"); dsn != "" {
		bs = append(bs, backend{"postgres", func(t *testing.T) (string, fixture) {
			u, err := url.Parse(dsn)
			require.NoError(t, err, "INORDER_TEST_POSTGRES_DSN must be a postgres:// URL")
			prefix := uniqueName() + "_"
			t.Cleanup(func() {
				db, err := sql.Open("pgx", dsn)
				require.NoError(t, err)
				defer db.Close()
				for _, tb := range []string{"send", "journal", "cursor", "parked", "lease_ns", "lease", "member", "schema_version"} {
					_, err := db.Exec("DROP TABLE IF EXISTS " + prefix + tb)
					assert.NoError(t, err, "drop %s%s", prefix, tb)
				}
			})
			q := u.Query()
			q.Set("prefix", prefix)
			u.RawQuery = q.Encode()
			return viaURL(t, u.String())
		}})
	} else if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but INORDER_TEST_POSTGRES_DSN is not set: the real PostgreSQL test is required in CI")
	}
	return bs
}

func backends(t *testing.T) []backend {
	return append([]backend{memBackend(), fileBackend()}, serverBackends(t)...)
}

// TestStreams: the table and the JSON list every stream of the queue with
// its sender counter, cursor, skipped ranges, parks and journal, and
// nothing of another queue.
func TestStreams(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			spec, f := b.spec(t)
			out := ok(t, "streams", "-store", spec, "-queue", "q")
			e := f.epoch
			assert.Contains(t, out, `queue "q": 2 streams with state`)
			lines := strings.Split(out, "\n")
			require.GreaterOrEqual(t, len(lines), 5, "a header, two streams:\n%s", out)
			assert.Equal(t, []string{"GROUP", "SENDER", "EPOCH/LAST", "CURSOR", "EPOCH/NEXT", "OWNER", "SKIPPED", "PARKED", "JOURNAL"},
				strings.Fields(lines[2]), "the header:\n%s", out)
			assert.Equal(t, []string{`"g"`, fmt.Sprintf("%d/3", e), fmt.Sprintf("%d/5", e), "-", "2-3", "3:", "7-8,", "10", "2"},
				strings.Fields(lines[3]), "the row of g:\n%s", out)
			assert.Equal(t, []string{`"idle"`, "-", "9/4", "-", "-", "-", "0"}, strings.Fields(lines[4]), "the row of idle:\n%s", out)
			assert.NotContains(t, out, "q2")

			var got listJSON
			require.NoError(t, json.Unmarshal([]byte(ok(t, "streams", "-store", spec, "-queue", "q", "-json")), &got))
			require.Equal(t, "q", got.Queue)
			require.Len(t, got.Streams, 2)
			g := got.Streams[0]
			assert.Equal(t, "g", g.Group)
			assert.Equal(t, "q/g", g.Key)
			assert.Equal(t, &senderJSON{Epoch: e, Last: 3}, g.Sender)
			assert.Equal(t, &cursorJSON{Epoch: e, Next: 5, Skipped: []rangeJSON{{Epoch: e, First: 2, Last: 3}}}, g.Cursor)
			assert.Equal(t, heldJSON{Count: 3, Bytes: 13, Ranges: []spanJSON{
				{Epoch: e, First: 7, Last: 8, Count: 2, Bytes: 10}, {Epoch: e, First: 10, Last: 10, Count: 1, Bytes: 3}}}, g.Parked)
			assert.Equal(t, heldJSON{Count: 2, Bytes: 8, Ranges: []spanJSON{{Epoch: e, First: 2, Last: 3, Count: 2, Bytes: 8}}}, g.Journal)
			idle := got.Streams[1]
			assert.Nil(t, idle.Sender, "idle has no sender")
			assert.Equal(t, &cursorJSON{Epoch: 9, Next: 4, Skipped: []rangeJSON{}}, idle.Cursor)
			assert.Zero(t, idle.Parked.Count)

			out = ok(t, "streams", "-store", spec, "-queue", "none")
			assert.Equal(t, "queue \"none\": 0 streams with state\n", out)
		})
	}
}

// TestShow: one stream in detail: parks as ranges with count and bytes,
// journal entries with seqs and sizes, bodies only with -bodies.
func TestShow(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			spec, f := b.spec(t)
			e := f.epoch
			out := ok(t, "show", "-store", spec, "-queue", "q", "-group", "g")
			for _, want := range []string{
				`stream "q" group "g" (key q/g)`,
				fmt.Sprintf("sender:   epoch %d, last seq 3", e),
				fmt.Sprintf("cursor:   epoch %d, next 5, no owner", e),
				fmt.Sprintf("skipped:  1 range\n  epoch %d seqs 2-3\n", e),
				"parked:   3 messages, 13 bytes, in 2 ranges",
				fmt.Sprintf("  epoch %d seqs 7-8: 2 messages, 10 bytes\n  epoch %d seqs 10: 1 message, 3 bytes\n", e, e),
				"journal:  2 entries not marked sent, 8 bytes\n  seq 2: 3 bytes\n  seq 3: 5 bytes\n",
			} {
				assert.Contains(t, out, want)
			}
			assert.NotContains(t, out, "two", "no body without -bodies")
			assert.NotContains(t, out, "seven", "no body without -bodies")

			out = ok(t, "show", "-store", spec, "-queue", "q", "-group", "g", "-bodies")
			assert.Contains(t, out, "  seq 2: 3 bytes: \"two\"\n  seq 3: 5 bytes: \"three\"\n")
			assert.Contains(t, out, fmt.Sprintf("  epoch %d seq 7: \"seven\"\n  epoch %d seq 8: \"eight\"\n  epoch %d seq 10: \"ten\"\n", e, e, e))

			var got streamJSON
			require.NoError(t, json.Unmarshal([]byte(ok(t, "show", "-store", spec, "-queue", "q", "-group", "g", "-json")), &got))
			assert.Equal(t, []entryJSON{{Epoch: e, Seq: 2, Size: 3}, {Epoch: e, Seq: 3, Size: 5}}, got.Journal.Entries)
			assert.Equal(t, []entryJSON{{Epoch: e, Seq: 7, Size: 5}, {Epoch: e, Seq: 8, Size: 5}, {Epoch: e, Seq: 10, Size: 3}}, got.Parked.Entries)
			require.NoError(t, json.Unmarshal([]byte(ok(t, "show", "-store", spec, "-queue", "q", "-group", "g", "-json", "-bodies")), &got))
			assert.Equal(t, "three", string(got.Journal.Entries[1].Body))
			assert.Equal(t, "ten", string(got.Parked.Entries[2].Body))

			out = ok(t, "show", "-store", spec, "-queue", "q", "-group", "nobody")
			assert.Contains(t, out, "no state")
		})
	}
}

// TestWrites: reset-cursor and drop-journal write only with -write; the
// reset is a compare-and-set from the cursor shown, records what it skips,
// and never goes backwards; drop-journal marks one entry sent.
func TestWrites(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			spec, f := b.spec(t)
			e := f.epoch
			cur := fmt.Sprintf("%d/5", e)
			before := ok(t, "show", "-store", spec, "-queue", "q", "-group", "g")

			r := ctl(t, "reset-cursor", "-store", spec, "-queue", "q", "-group", "g", "-from", cur, "-to", fmt.Sprintf("%d/7", e))
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "reset-cursor changes the store and is refused without -write (nothing was written)")
			r = ctl(t, "drop-journal", "-store", spec, "-queue", "q", "-group", "g", "-seq", "2")
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "drop-journal changes the store and is refused without -write")
			assert.Equal(t, before, ok(t, "show", "-store", spec, "-queue", "q", "-group", "g"), "a refused write changed the stream")

			// A stale -from: the compare fails, nothing is written.
			r = ctl(t, "reset-cursor", "-write", "-store", spec, "-queue", "q", "-group", "g", "-from", fmt.Sprintf("%d/4", e), "-to", fmt.Sprintf("%d/7", e))
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, fmt.Sprintf("conflict: the cursor of q/g is %d/5, not %d/4 as -from says", e, e))
			// Backwards: the store refuses.
			r = ctl(t, "reset-cursor", "-write", "-store", spec, "-queue", "q", "-group", "g", "-from", cur, "-to", fmt.Sprintf("%d/3", e))
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "refused by the store")
			assert.Contains(t, r.stderr, "backwards")
			assert.Equal(t, before, ok(t, "show", "-store", spec, "-queue", "q", "-group", "g"), "a failed reset changed the stream")

			// Past parked messages: refused unless -drop-parked.
			reset := []string{"reset-cursor", "-write", "-store", spec, "-queue", "q", "-group", "g", "-from", cur, "-to", fmt.Sprintf("%d/9", e)}
			r = ctl(t, reset...)
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "refused: the reset passes 2 parked messages (7-8) of q/g: they were deleted from the queue when they were parked")
			assert.Equal(t, before, ok(t, "show", "-store", spec, "-queue", "q", "-group", "g"), "a refused reset changed the stream")
			assert.Equal(t, fmt.Sprintf("cursor of q/g: %d/5 -> %d/7, skipped 2-3, 5-6\n", e, e),
				ok(t, "reset-cursor", "-write", "-store", spec, "-queue", "q", "-group", "g", "-from", cur, "-to", fmt.Sprintf("%d/7", e)))
			reset[len(reset)-3] = fmt.Sprintf("%d/7", e)
			out := ok(t, append(reset, "-drop-parked")...)
			assert.Equal(t, fmt.Sprintf("cursor of q/g: %d/7 -> %d/9, skipped 2-3, 5-8, dropped 2 parked messages (7-8)\n", e, e), out)
			out = ok(t, "show", "-store", spec, "-queue", "q", "-group", "g")
			assert.Contains(t, out, fmt.Sprintf("cursor:   epoch %d, next 9, no owner", e))
			assert.Contains(t, out, fmt.Sprintf("skipped:  2 ranges\n  epoch %d seqs 2-3\n  epoch %d seqs 5-8\n", e, e))
			assert.Contains(t, out, "parked:   1 message, 3 bytes, in 1 range", "the parks the reset passed are gone")

			out = ok(t, "drop-journal", "-write", "-store", spec, "-queue", "q", "-group", "g", "-seq", "2")
			assert.Equal(t, "journal entry 2 of q/g (3 bytes) marked sent: the sender will not send it\n", out)
			assert.Contains(t, ok(t, "show", "-store", spec, "-queue", "q", "-group", "g"), "journal:  1 entry not marked sent, 5 bytes\n  seq 3: 5 bytes\n")
			r = ctl(t, "drop-journal", "-write", "-store", spec, "-queue", "q", "-group", "g", "-seq", "2")
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "q/g has no unsent journal entry 2: nothing written")
		})
	}
}

// movingStore moves the cursor of a stream right after the second Cursors
// call (the first is the command's check that the store exists, the
// second its read of the cursor), as a receiver running beside the
// command would.
type movingStore struct {
	seqstore.Store
	t     *testing.T
	move  seqstore.Advance
	calls int
}

func (m *movingStore) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	cs, err := m.Store.Cursors(ctx, streams)
	if m.calls++; m.calls == 2 {
		require.NoError(m.t, m.Store.Advance(ctx, []seqstore.Advance{m.move}))
	}
	return cs, err
}

// TestResetConflict: a receiver that moves the cursor between the read
// and the compare-and-set makes the reset fail with a conflict, and the
// receiver's move stands.
func TestResetConflict(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	f := fill(t, st)
	e := f.epoch
	moved := seqstore.Cursor{Epoch: e, Next: 6, Skipped: []seqstore.Range{{Epoch: e, First: 2, Last: 3}}}
	ms := &movingStore{Store: st, t: t, move: seqstore.Advance{Stream: f.g,
		From: seqstore.Cursor{Epoch: e, Next: 5, Skipped: []seqstore.Range{{Epoch: e, First: 2, Last: 3}}}, To: moved}}
	r := ctl(t, "reset-cursor", "-write", "-store", memSpec(t, ms), "-queue", "q", "-group", "g", "-from", fmt.Sprintf("%d/5", e), "-to", fmt.Sprintf("%d/7", e))
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "conflict: the cursor of q/g moved between the read and the compare-and-set (a receiver is running?): nothing written")
	cs, err := st.Cursors(t.Context(), []seqstore.Stream{f.g})
	require.NoError(t, err)
	assert.Equal(t, moved, cs[0], "the receiver's move stands")
}

// TestResetOwner: a cursor with a fencing owner is refused, with the
// reason, unless -force, which keeps the owner.
func TestResetOwner(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	s := seqstore.Stream{Queue: "q", Group: "held"}
	require.NoError(t, st.Advance(t.Context(), []seqstore.Advance{{Stream: s, To: seqstore.Cursor{Epoch: 3, Next: 10, Owner: 77}}}))
	spec := memSpec(t, st)
	assert.Contains(t, ok(t, "streams", "-store", spec, "-queue", "q"), `"held"  -                  3/10               77`)
	args := []string{"reset-cursor", "-write", "-store", spec, "-queue", "q", "-group", "held", "-from", "3/10", "-to", "3/12"}
	r := ctl(t, args...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "refused: the cursor of q/held has fencing owner 77: a receiver holds a lease on the stream")
	assert.Contains(t, r.stderr, "add -force")
	assert.Contains(t, ok(t, "show", "-store", spec, "-queue", "q", "-group", "held"), "epoch 3, next 10, fencing owner 77")

	assert.Equal(t, "cursor of q/held: 3/10 -> 3/12, skipped 10-11\n", ok(t, append(args, "-force")...))
	cs, err := st.Cursors(t.Context(), []seqstore.Stream{s})
	require.NoError(t, err)
	assert.Equal(t, seqstore.Cursor{Epoch: 3, Next: 12, Owner: 77, Skipped: []seqstore.Range{{Epoch: 3, First: 10, Last: 11}}}, cs[0])
}

// TestUsage: -h exits 0 with the usage, a bad command line exits 2 with a
// message, an unknown store scheme names the accepted ones.
func TestUsage(t *testing.T) {
	t.Setenv("INORDER_STORE", "")
	r := ctl(t, "streams", "-h")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stderr, "Usage of inorderctl streams:")
	assert.Contains(t, r.stderr, "-queue")
	r = ctl(t, "help")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "reset-cursor  move a stream's cursor forward")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "inorderctl: no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"streams", "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"streams", "-queue", "q"}, "-store (or INORDER_STORE) is required"},
		{[]string{"streams", "-store", "mem:x"}, "-queue is required"},
		{[]string{"streams", "-store", "mem:x", "-queue", "q", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"streams", "-store", "foo://host/x", "-queue", "q"}, `unknown scheme "foo" in foo://host/x (want file, sqlite, redis, rediss, postgres, postgresql or mysql)`},
		{[]string{"reset-cursor", "-store", "mem:x", "-queue", "q", "-from", "5", "-to", "1/2"}, `-from: "5": want EPOCH/NEXT`},
		{[]string{"reset-cursor", "-store", "mem:x", "-queue", "q", "-from", "1/2"}, "-from and -to are required"},
		{[]string{"drop-journal", "-store", "mem:x", "-queue", "q"}, "-seq is required"},
		{[]string{"show", "-store", "mem:x", "-queue", "q", "-group", strings.Repeat("g", 129)}, "invalid stream"},
	} {
		r := ctl(t, tc.args...)
		assert.Equal(t, 2, r.code, "inorderctl %q: stderr %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "inorderctl %q", tc.args)
	}

	missing := filepath.Join(t.TempDir(), "missing")
	r = ctl(t, "streams", "-store", "file:"+missing, "-queue", "q")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no such file or directory")
	r = ctl(t, "reset-cursor", "-write", "-store", "file:"+missing, "-queue", "q", "-from", "0/0", "-to", "1/5")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no store to write (nothing written)")
	_, err := os.Stat(missing)
	assert.ErrorIs(t, err, fs.ErrNotExist, "a write command created a store")
}

// dirSums returns the SHA-256 and mode of every file under dir.
func dirSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			sums[rel+"/"] = info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		sums[rel] = info.Mode().String() + " " + hex.EncodeToString(h[:])
		return nil
	}))
	return sums
}

// TestReadOnlyFileStore: the commands that read, and the writes refused,
// leave a file store's directory byte for byte as it was, also after a
// crash left a torn tail that recovery would cut.
func TestReadOnlyFileStore(t *testing.T) {
	spec, f := fileBackend().spec(t)
	dir := strings.TrimPrefix(spec, "file:")
	runAll := func() {
		ok(t, "streams", "-store", spec, "-queue", "q")
		ok(t, "streams", "-store", spec, "-queue", "q", "-json")
		ok(t, "show", "-store", spec, "-queue", "q", "-group", "g", "-bodies")
		ok(t, "show", "-store", spec, "-queue", "q", "-group", "g", "-json", "-bodies")
		assert.Equal(t, 1, ctl(t, "reset-cursor", "-store", spec, "-queue", "q", "-group", "g", "-from", fmt.Sprintf("%d/5", f.epoch), "-to", fmt.Sprintf("%d/9", f.epoch)).code)
		assert.Equal(t, 1, ctl(t, "drop-journal", "-store", spec, "-queue", "q", "-group", "g", "-seq", "2").code)
	}
	before := dirSums(t, dir)
	runAll()
	assert.Equal(t, before, dirSums(t, dir), "a read-only run changed the store's directory")

	logs, err := filepath.Glob(filepath.Join(dir, "log*"))
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	fh, err := os.OpenFile(logs[len(logs)-1], os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = fh.Write([]byte{0x40, 0, 0, 0, 'x', 'y'}) // a torn frame
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	before = dirSums(t, dir)
	runAll()
	assert.Equal(t, before, dirSums(t, dir), "a read-only run repaired a torn tail")

	// A store open in another process (here: this one) is locked.
	st, err := filestore.Open(dir, nil)
	require.NoError(t, err)
	defer st.Close()
	r := ctl(t, "streams", "-store", spec, "-queue", "q")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "a sender or receiver has the store open: stop it")
}

// TestNoTables: on a database without the store's tables, the commands
// fail and create none (a mistyped prefix must not become a new store).
func TestNoTables(t *testing.T) {
	dsn := os.Getenv("INORDER_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but INORDER_TEST_POSTGRES_DSN is not set: the real PostgreSQL test is required in CI")
		}
		t.Skip("INORDER_TEST_POSTGRES_DSN not set")
	}
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	prefix := uniqueName() + "_"
	q := u.Query()
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	spec := u.String()
	assert.Equal(t, 1, ctl(t, "streams", "-store", spec, "-queue", "q").code)
	r := ctl(t, "reset-cursor", "-write", "-store", spec, "-queue", "q", "-from", "0/0", "-to", "1/5")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no store to write (nothing written)")
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE $1", prefix+"%").Scan(&n))
	assert.Zero(t, n, "tables created under prefix %s", prefix)
}
