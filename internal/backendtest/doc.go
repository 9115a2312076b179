// Package backendtest holds the tests that run ordered.Queue over the
// stores kept in servers and databases: redisstore (go-redis) and sqlstore
// on SQLite (modernc.org/sqlite). It has no code outside its tests.
//
// It is a package of its own, rather than test files of package ordered,
// so that a program importing ordered does not download those drivers:
// go mod tidy loads the tests of every package the program imports, and
// module zips are whole (modernc.org/sqlite and modernc.org/libc alone
// took about 250 MB of a user's module cache). Nothing imports this
// package, so its tests are outside every user's build.
//
// The Redis tests need INORDER_TEST_REDIS_ADDR (a Redis they may write
// under a fresh key prefix); without it they skip, and fail when CI=true.
package backendtest
