// Package storeurl opens a seqstore.Store from one string, the -store flag of
// the example programs:
//
//	file:DIR or DIR                         filestore in DIR (created if missing, mode 0700)
//	file:///abs/dir                         the same, as a URL
//	sqlite:FILE[?prefix=P&_pragma=...]      sqlstore on SQLite (modernc.org/sqlite)
//	redis://[user:pass@]host:port/db[?prefix=P&dial_timeout=...]
//	rediss://...                            redisstore, TLS
//	postgres://user:pass@host:port/db[?prefix=P&sslmode=...]
//	postgresql://...                        sqlstore on PostgreSQL (pgx)
//	mysql://user:pass@host:port/db[?prefix=P&tls=...]
//	                                        sqlstore on MySQL or MariaDB
//
// A string that does not start with a scheme of two or more letters followed
// by ':' is a directory path, so "./state" and "C:\state" are file stores;
// write "./a:b" or "file:a:b" for a directory whose name looks like a scheme.
// Such a bare path is refused when it looks like connection parameters rather
// than a directory: when it has '=' (libpq's "host=h password=p dbname=d"),
// '@' (user:pass@host), or a ':' in its first element other than a drive
// letter's (HOST:PORT). A mistyped connection string would otherwise become
// a directory named after it, password included. file:DIR takes any name as
// it is.
//
// UserDir is the examples' default location: a directory of the user's own
// cache directory, which no other user can create first or redirect, unlike
// a fixed path under the shared temporary directory.
//
// # Parameters
//
// prefix sets the key prefix of a Redis store (redisstore.Options.Prefix) and
// the table prefix of a SQL store (sqlstore.Options.TablePrefix); it is taken
// out before the rest reaches the driver, and file stores refuse it. Every
// other query parameter goes to the driver as its own URL or DSN parameter:
// go-redis's ParseURL options, pgx's connection parameters, go-sql-driver's
// DSN parameters. A mysql:// URL becomes the DSN user:pass@tcp(host:port)/db;
// the store needs none of the driver's optional parameters (it stores no
// times). A sqlite: file gets the settings sqlstore documents for SQLite,
// each unless the spec sets its own: journal_mode(WAL), busy_timeout(10000)
// and _txlock=immediate; its directory is created (mode 0700) if missing,
// and the database file too, mode 0600 (SQLite gives its -wal and -shm files
// the database file's mode: all of them hold message bodies). An existing
// file keeps its mode.
// In-memory SQLite databases are refused: each pooled connection would see a
// different database.
//
// # Opening
//
// Open connects, pings the server within Options.ConnectTimeout and, for SQL
// stores, runs Migrate (idempotent), so the store is ready to use. The
// returned Backend owns what it opened: its Close closes the store and then
// the *sql.DB or Redis client. With Options.ReadOnly it creates and
// migrates nothing, and opens a file store read-only.
//
// # Errors
//
// Errors wrap ErrUnknownScheme, ErrInvalidSpec or ErrUnreachable, and the
// drivers' errors stay reachable with errors.As. No error message and no
// String of a Spec or Backend ever contains a password: the spec is shown
// with its password (and any password query parameter) replaced by "xxxxx",
// and every message that passes through this package has the password
// scrubbed from it, the drivers' messages included. A spec that is neither a
// URL nor a plain path (a refused bare path, an unknown scheme without "//")
// is not shown at all, as no password in it can be told from the rest.
package storeurl
