package storeurl

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Review 2 (security), findings of the first round kept as regressions:
// DSN-like specs are refused and no spec or error prints its password;
// SQLite files are 0600.
func TestSec3(t *testing.T) {
	for _, spec := range []string{
		"host=db user=u password=hunter2hunter2 dbname=x",
		"u:hunter2hunter2@tcp(db:3306)/x",
		"postgres://u:hunter2hunter2@127.0.0.1:1/x?sslmode=disable&connect_timeout=1",
	} {
		s, err := Parse(spec)
		var msg string
		if err != nil {
			msg = err.Error()
		} else {
			assert.True(t, s.HasPassword(), "%q carries a password", spec)
			msg = s.String()
			if b, err := s.Open(context.Background(), nil); err != nil {
				msg += " | open: " + err.Error()
			} else {
				_ = b.Close()
			}
		}
		assert.NotContains(t, msg, "hunter2", "password printed for %q", spec)
	}
	dir := t.TempDir()
	b, err := Open(context.Background(), "sqlite:"+filepath.Join(dir, "x.db"), nil)
	require.NoError(t, err)
	defer b.Close()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		info, err := e.Info()
		require.NoError(t, err)
		assert.Zero(t, info.Mode().Perm()&0o077, "%s is %v", e.Name(), info.Mode())
	}
}
