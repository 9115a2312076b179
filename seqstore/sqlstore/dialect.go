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
	{version: 2, stmts: func(d Dialect, p string) []string {
		// A parked body is at most seqstore.MaxParkBody (1 MiB): BYTEA and
		// SQLite's BLOB hold it, MySQL's BLOB (64 KiB) does not.
		name, grp, body, tail := "TEXT", "TEXT", "BYTEA", ""
		switch d {
		case MySQL:
			name, grp, body, tail = "VARBINARY(256)", "VARBINARY(128)", "MEDIUMBLOB", " ENGINE=InnoDB"
		case SQLite:
			body = "BLOB"
		}
		return []string{
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %sparked (queue %s NOT NULL, grp %s NOT NULL, epoch BIGINT NOT NULL, seq BIGINT NOT NULL, crc BIGINT NOT NULL, body %s NOT NULL, PRIMARY KEY (queue, grp, epoch, seq))%s", p, name, grp, body, tail),
		}
	}},
	{version: 3, stmts: func(d Dialect, p string) []string {
		// The lease capability (lease.go). Expiries are microseconds since
		// 1970 by the database's clock (nowMicros), so that every dialect
		// compares plain integers.
		name, text, tail := "TEXT", "TEXT", ""
		switch d {
		case MySQL:
			name, text, tail = "VARBINARY(256)", "LONGBLOB", " ENGINE=InnoDB"
		}
		return []string{
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %slease_ns (ns %s NOT NULL, topology %s, next_token BIGINT NOT NULL DEFAULT 0, view_version BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (ns))%s", p, name, text, tail),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %slease (ns %s NOT NULL, shard INT NOT NULL, owner %s NOT NULL, token BIGINT NOT NULL, expires_at BIGINT NOT NULL, PRIMARY KEY (ns, shard))%s", p, name, name, tail),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %smember (ns %s NOT NULL, incarnation %s NOT NULL, name %s NOT NULL, weight INT NOT NULL, expires_at BIGINT NOT NULL, PRIMARY KEY (ns, incarnation))%s", p, name, name, name, tail),
		}
	}},
}

// nowMicros is the database's clock in microseconds since 1970, the time of
// every lease and heartbeat expiry: the members' clocks never count.
func (d Dialect) nowMicros() string {
	switch d {
	case Postgres:
		return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)"
	case MySQL:
		return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
	}
	return "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"
}
