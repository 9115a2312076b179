package sqlstore

import (
	"fmt"
	"strconv"
	"strings"
)

// Dialect selects the SQL flavour of a database.
type Dialect int

// The supported dialects.
const (
	// Postgres is PostgreSQL, e.g. through github.com/jackc/pgx/v5/stdlib.
	Postgres Dialect = iota + 1
	// MySQL is MySQL or MariaDB through github.com/go-sql-driver/mysql.
	MySQL
	// SQLite is SQLite, e.g. through modernc.org/sqlite. Open the database
	// with WAL, a busy timeout and immediate transactions, e.g.
	// "file:app.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate".
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	case SQLite:
		return "sqlite"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

func (d Dialect) valid() bool { return d == Postgres || d == MySQL || d == SQLite }

// queries holds every statement of one dialect and table prefix, built once
// in Open. Names of streams only ever travel as bound parameters.
type queries struct {
	selectSend, selectSendLocked, insertSend, updateSend string
	selectCursor, selectCursorLocked, insertCursor       string
	updateCursor                                         string
	pending                                              string
	// insertJournal and deleteJournal take a row count and return a
	// statement with that many rows / seqs.
	insertJournal func(rows int) string
	deleteJournal func(seqs int) string
	// checkUpdate reports whether RowsAffected counts matched rows (MySQL
	// counts changed rows unless the DSN sets clientFoundRows).
	checkUpdate bool
}

func buildQueries(d Dialect, p string) *queries {
	lock := " FOR UPDATE"
	if d == SQLite {
		lock = "" // the transaction itself holds the database's write lock
	}
	q := &queries{
		selectSend:         "SELECT epoch, last_seq FROM " + p + "send WHERE queue = ? AND grp = ?",
		insertSend:         "INSERT INTO " + p + "send (queue, grp, epoch, last_seq) VALUES (?, ?, ?, ?)",
		updateSend:         "UPDATE " + p + "send SET last_seq = ? WHERE queue = ? AND grp = ? AND last_seq = ?",
		selectCursor:       "SELECT epoch, next_seq, owner, skipped FROM " + p + "cursor WHERE queue = ? AND grp = ?",
		insertCursor:       "INSERT INTO " + p + "cursor (queue, grp, epoch, next_seq, owner, skipped) VALUES (?, ?, ?, ?, ?, ?)",
		updateCursor:       "UPDATE " + p + "cursor SET epoch = ?, next_seq = ?, owner = ?, skipped = ? WHERE queue = ? AND grp = ? AND epoch = ? AND next_seq = ? AND owner = ?",
		pending:            "SELECT j.grp, j.seq, j.body, s.epoch, s.last_seq FROM " + p + "journal j LEFT JOIN " + p + "send s ON s.queue = j.queue AND s.grp = j.grp WHERE j.queue = ?",
		checkUpdate:        d != MySQL,
		selectSendLocked:   "",
		selectCursorLocked: "",
	}
	q.selectSendLocked = q.selectSend + lock
	q.selectCursorLocked = q.selectCursor + lock
	q.insertJournal = func(rows int) string {
		var b strings.Builder
		b.WriteString("INSERT INTO " + p + "journal (queue, grp, seq, body) VALUES ")
		for i := range rows {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?)")
		}
		return b.String()
	}
	q.deleteJournal = func(seqs int) string {
		var b strings.Builder
		b.WriteString("DELETE FROM " + p + "journal WHERE queue = ? AND grp = ? AND seq IN (")
		for i := range seqs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
		}
		b.WriteByte(')')
		return b.String()
	}
	if d == Postgres {
		for _, s := range []*string{&q.selectSend, &q.selectSendLocked, &q.insertSend, &q.updateSend,
			&q.selectCursor, &q.selectCursorLocked, &q.insertCursor, &q.updateCursor, &q.pending} {
			*s = dollarParams(*s)
		}
		ij, dj := q.insertJournal, q.deleteJournal
		q.insertJournal = func(rows int) string { return dollarParams(ij(rows)) }
		q.deleteJournal = func(seqs int) string { return dollarParams(dj(seqs)) }
	}
	return q
}

// dollarParams rewrites ? placeholders as $1, $2, ... Our statements hold no
// other question marks.
func dollarParams(s string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// migration is one schema version: statements run in order. Every statement
// is idempotent (IF NOT EXISTS), because MySQL commits DDL at once and a
// Migrate interrupted halfway must be able to run again.
type migration struct {
	version int
	stmts   func(d Dialect, p string) []string
}

var migrations = []migration{
	{version: 1, stmts: func(d Dialect, p string) []string {
		name, grp, body, text, tail := "TEXT", "TEXT", "BYTEA", "TEXT", ""
		switch d {
		case MySQL:
			// Binary columns: names compare byte for byte, case and
			// trailing spaces included, and are stored verbatim.
			name, grp, body, tail = "VARBINARY(256)", "VARBINARY(128)", "LONGBLOB", " ENGINE=InnoDB"
		case SQLite:
			body = "BLOB"
		}
		return []string{
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %ssend (queue %s NOT NULL, grp %s NOT NULL, epoch BIGINT NOT NULL, last_seq BIGINT NOT NULL, PRIMARY KEY (queue, grp))%s", p, name, grp, tail),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %sjournal (queue %s NOT NULL, grp %s NOT NULL, seq BIGINT NOT NULL, body %s NOT NULL, PRIMARY KEY (queue, grp, seq))%s", p, name, grp, body, tail),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %scursor (queue %s NOT NULL, grp %s NOT NULL, epoch BIGINT NOT NULL, next_seq BIGINT NOT NULL, owner BIGINT NOT NULL, skipped %s NOT NULL, PRIMARY KEY (queue, grp))%s", p, name, grp, text, tail),
		}
	}},
}
