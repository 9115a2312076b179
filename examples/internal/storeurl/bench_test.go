package storeurl

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// BenchmarkOpen measures what a program pays at start and exit for its
// -store: Parse, connect and ping, Migrate (SQL; the tables already exist
// after the first iteration), and Close. Real servers run when their
// INORDER_TEST_* variables are set.
func BenchmarkOpen(b *testing.B) {
	mr := miniredis.RunT(b)
	specs := []struct{ name, spec string }{
		{"file", "file:" + filepath.Join(b.TempDir(), "state")},
		{"sqlite", "sqlite:" + filepath.Join(b.TempDir(), "s.db")},
		{"miniredis", "redis://" + mr.Addr() + "/0"},
	}
	if addr := os.Getenv("INORDER_TEST_REDIS_ADDR"); addr != "" {
		specs = append(specs, struct{ name, spec string }{"redis", "redis://" + addr + "/0?prefix=inorderbench:" + uniqueName() + ":"})
	}
	withPrefix := func(spec, prefix string) string {
		u, err := url.Parse(spec)
		if err != nil {
			b.Fatal(err)
		}
		q := u.Query()
		q.Set("prefix", prefix)
		u.RawQuery = q.Encode()
		return u.String()
	}
	prefix := uniqueName() + "_"
	if dsn := os.Getenv("INORDER_TEST_POSTGRES_DSN"); dsn != "" {
		dropTables(b, "pgx", dsn, prefix)
		specs = append(specs, struct{ name, spec string }{"postgres", withPrefix(dsn, prefix)})
	}
	if dsn := os.Getenv("INORDER_TEST_MYSQL_DSN"); dsn != "" {
		dropTables(b, "mysql", dsn, prefix)
		specs = append(specs, struct{ name, spec string }{"mysql", withPrefix(mysqlURL(b, dsn), prefix)})
	}
	for _, s := range specs {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				be, err := Open(ctx, s.spec, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := be.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
