package crashtest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/redisstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

// FuzzParse feeds arbitrary bytes to the history parser and the checker:
// neither may panic; a parsed history re-encodes to events that parse to
// the same, and only a file without a final newline is torn.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"p":"r","i":1,"r":"recv","k":"start","m":"alo"}` + "\n" + `{"p":"r","i":1,"r":"recv","k":"delivered","g":"g","e":3,"s":1,"id":"s.1.0.1"}` + "\n"))
	f.Add([]byte(`{"p":"s","i":2,"r":"send","k":"attempt","g":"g","id":"s.2.0.1"}` + "\n" + `{"p":"s","i":2,"r":"send","k":"sent","g":"g","e":3,"s":9,"id":"s.2.0.1"}`))
	f.Add([]byte("\n\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Parse("fuzz", bytes.NewReader(data))
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed, "parse errors of in-memory input")
			return
		}
		if h.Torn {
			assert.False(t, bytes.HasSuffix(data, []byte("\n")) && len(h.Events) == bytes.Count(data, []byte("\n")), "torn with every line complete")
		}
		var buf bytes.Buffer
		for _, ev := range h.Events {
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			buf.Write(b)
			buf.WriteByte('\n')
		}
		h2, err := Parse("fuzz", &buf)
		require.NoError(t, err, "re-encoded history")
		require.Len(t, h2.Events, len(h.Events), "re-encoded events")
		for i := range h.Events {
			a, b := h.Events[i], h2.Events[i]
			a.File, a.Line, b.File, b.Line = "", 0, "", 0
			assert.Equal(t, a, b, "event %d round trip", i)
		}
		for _, mode := range []string{ModeAtLeastOnce, ModeAtMostOnce, ModeExactlyOnce} {
			rep := Check([]*History{h}, Config{Mode: mode})
			for _, v := range rep.Violations {
				assert.NotEmpty(t, v.Rule, "violation without a rule")
			}
		}
	})
}

// corruptOrValid requires err to wrap seqstore.ErrCorrupt, or to be nil.
func corruptOrValid(t *testing.T, err error, what string) {
	if err != nil && !errors.Is(err, seqstore.ErrCorrupt) {
		t.Fatalf("%s: want nil or an error wrapping seqstore.ErrCorrupt, got %v", what, err)
	}
}

// FuzzRedisStoreValues writes arbitrary values into a stream's Redis hashes
// (cursor, send counter, journal) through a miniredis and reads them back
// through redisstore's public API: every read either succeeds with values
// that are canonical, or fails with ErrCorrupt; nothing panics or resets.
func FuzzRedisStoreValues(f *testing.F) {
	f.Add("7", "3", "0", "", "7", "2", "3", "body")
	f.Add("07", "-1", "x", "1:2-3", "18446744073709551616", "1e3", "0", "")
	f.Add("1", "1", "1", "1:1-1,2:5-4", " 1", "2", "abc", "b")
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		f.Fatal(err)
	}
	defer mr.Close()
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	s, err := redisstore.New(c, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	st := seqstore.Stream{Queue: "q", Group: "g"}
	key := redisstore.DefaultPrefix + "{" + st.Key() + "}"
	f.Fuzz(func(t *testing.T, epoch, next, owner, skipped, sEpoch, sLast, jSeq, jBody string) {
		mr.FlushAll()
		mr.HSet(key+":cursor", "epoch", epoch, "next", next, "owner", owner, "skipped", skipped)
		mr.HSet(key+":send", "epoch", sEpoch, "last", sLast)
		mr.HSet(key+":journal", jSeq, jBody)
		mr.SetAdd(redisstore.DefaultPrefix+"pending:{q}", st.Key())
		ctx := context.Background()
		curs, err := s.Cursors(ctx, []seqstore.Stream{st})
		corruptOrValid(t, err, "Cursors")
		if err == nil {
			cur := curs[0]
			assert.Equal(t, epoch, uitoa(cur.Epoch), "cursor epoch read back")
			assert.Equal(t, next, uitoa(cur.Next), "cursor next read back")
			assert.LessOrEqual(t, len(cur.Skipped), seqstore.MaxSkipped, "skipped ranges")
		}
		es, err := s.Pending(ctx, "q")
		corruptOrValid(t, err, "Pending")
		for _, e := range es {
			assert.Positive(t, e.Seq, "journal seq")
		}
		_, err = s.Reserve(ctx, []seqstore.ReserveRequest{{Stream: st, N: 1}})
		corruptOrValid(t, err, "Reserve")
	})
}

// FuzzSQLiteStoreRows writes arbitrary rows into sqlstore's tables (SQLite)
// and reads them back through the public API: every read either succeeds or
// fails with ErrCorrupt.
func FuzzSQLiteStoreRows(f *testing.F) {
	f.Add(int64(7), int64(3), int64(0), "", int64(7), int64(2), int64(3), []byte("b"))
	f.Add(int64(-1), int64(-5), int64(-2), "1:2-3,x", int64(-1), int64(-1), int64(0), []byte{})
	f.Add(int64(1), int64(1), int64(1), "1:5-4", int64(1<<62), int64(1<<62), int64(-3), []byte{0xff})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(f.TempDir(), "fuzz.db")+"?_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	s, err := sqlstore.Open(db, sqlstore.SQLite, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(context.Background()); err != nil {
		f.Fatal(err)
	}
	st := seqstore.Stream{Queue: "q", Group: "g"}
	p := sqlstore.DefaultTablePrefix
	f.Fuzz(func(t *testing.T, epoch, next, owner int64, skipped string, sEpoch, sLast, jSeq int64, jBody []byte) {
		ctx := context.Background()
		for _, q := range []string{"DELETE FROM " + p + "cursor", "DELETE FROM " + p + "send", "DELETE FROM " + p + "journal"} {
			_, err := db.ExecContext(ctx, q)
			require.NoError(t, err)
		}
		_, err := db.ExecContext(ctx, "INSERT INTO "+p+"cursor (queue, grp, epoch, next_seq, owner, skipped) VALUES (?, ?, ?, ?, ?, ?)", "q", "g", epoch, next, owner, skipped)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, "INSERT INTO "+p+"send (queue, grp, epoch, last_seq) VALUES (?, ?, ?, ?)", "q", "g", sEpoch, sLast)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, "INSERT INTO "+p+"journal (queue, grp, seq, body) VALUES (?, ?, ?, ?)", "q", "g", jSeq, jBody)
		require.NoError(t, err)
		curs, err := s.Cursors(ctx, []seqstore.Stream{st})
		corruptOrValid(t, err, "Cursors")
		if err == nil {
			cur := curs[0]
			assert.Equal(t, epoch, int64(cur.Epoch), "cursor epoch read back")
			assert.Equal(t, next, int64(cur.Next), "cursor next read back")
			assert.False(t, strings.Contains(skipped, "\x00") && len(cur.Skipped) > 0, "NUL in skipped accepted")
		}
		es, err := s.Pending(ctx, "q")
		corruptOrValid(t, err, "Pending")
		for _, e := range es {
			assert.Positive(t, e.Seq, "journal seq")
		}
		_, err = s.Reserve(ctx, []seqstore.ReserveRequest{{Stream: st, N: 1}})
		corruptOrValid(t, err, "Reserve")
	})
}

func uitoa(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
