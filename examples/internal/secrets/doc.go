// Package secrets holds one test, TestNoSecretInOutput: it builds the example
// programs (demo, send, receive), runs them with known secrets (MNS
// credentials and the header key INORDER_KEY through the environment, store
// URLs with passwords) on paths that succeed and paths that fail, with their
// logs on, and requires that no secret, in any of the forms it could be
// printed in, appears in anything they write: log lines, progress, usage and
// errors.
//
// It runs against the embedded MNS emulator and miniredis, and against the
// real PostgreSQL and MariaDB named by INORDER_TEST_POSTGRES_DSN and
// INORDER_TEST_MYSQL_DSN (required with CI=true, skipped otherwise).
package secrets
