package storeurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func sqliteQuery(t *testing.T, s *Spec) url.Values {
	t.Helper()
	_, raw, ok := strings.Cut(s.sqliteDSN, "?")
	require.True(t, ok, "sqlite DSN %q has no parameters", s.sqliteDSN)
	q, err := url.ParseQuery(raw)
	require.NoError(t, err, "sqlite DSN %q", s.sqliteDSN)
	return q
}

func TestParse(t *testing.T) {
	defaults := []string{"busy_timeout(10000)", "journal_mode(WAL)"}
	tests := []struct {
		spec     string
		kind     Kind
		path     string
		prefix   string
		redacted string // "" means the spec itself
		check    func(t *testing.T, s *Spec)
	}{
		{spec: "file:/var/lib/inorder", kind: File, path: "/var/lib/inorder"},
		{spec: "file:state", kind: File, path: "state"},
		{spec: "/var/lib/inorder", kind: File, path: "/var/lib/inorder"},
		{spec: "state", kind: File, path: "state"},
		{spec: "./a:b", kind: File, path: "./a:b"},
		{spec: `C:\state`, kind: File, path: `C:\state`},
		{spec: "file:///var/lib/x%20y", kind: File, path: "/var/lib/x y"},
		{spec: "file://localhost/var/lib/x", kind: File, path: "/var/lib/x"},
		{spec: "FILE:dir", kind: File, path: "dir"},

		{spec: "sqlite:/tmp/a.db", kind: SQLite, path: "/tmp/a.db", check: func(t *testing.T, s *Spec) {
			q := sqliteQuery(t, s)
			assert.ElementsMatch(t, defaults, q["_pragma"], "default pragmas")
			assert.Equal(t, "immediate", q.Get("_txlock"), "default _txlock")
			assert.True(t, strings.HasPrefix(s.sqliteDSN, "/tmp/a.db?"), "DSN %q should start with the plain path", s.sqliteDSN)
		}},
		{spec: "sqlite:a.db?prefix=app_&_pragma=busy_timeout(500)&_txlock=deferred", kind: SQLite, path: "a.db", prefix: "app_",
			check: func(t *testing.T, s *Spec) {
				q := sqliteQuery(t, s)
				assert.ElementsMatch(t, []string{"busy_timeout(500)", "journal_mode(WAL)"}, q["_pragma"], "own busy_timeout kept, WAL added")
				assert.Equal(t, "deferred", q.Get("_txlock"), "own _txlock kept")
				assert.False(t, q.Has("prefix"), "prefix must not reach the driver: %q", s.sqliteDSN)
			}},
		{spec: "sqlite:a.db?_journal_mode=DELETE&_busy_timeout=1", kind: SQLite, path: "a.db", check: func(t *testing.T, s *Spec) {
			q := sqliteQuery(t, s)
			assert.Empty(t, q["_pragma"], "shorthand keys replace the default pragmas")
			assert.Equal(t, "DELETE", q.Get("_journal_mode"))
		}},
		{spec: "sqlite:///tmp/b.db?prefix=x_", kind: SQLite, path: "/tmp/b.db", prefix: "x_"},

		{spec: "redis://127.0.0.1:6379/2?prefix=app:", kind: Redis, prefix: "app:", check: func(t *testing.T, s *Spec) {
			assert.Equal(t, "127.0.0.1:6379", s.redis.Addr)
			assert.Equal(t, 2, s.redis.DB)
			assert.Nil(t, s.redis.TLSConfig, "redis:// is plain TCP")
		}},
		{spec: "redis://user:s3cret@h:1/0?dial_timeout=3s", kind: Redis, redacted: "redis://user:xxxxx@h:1/0?dial_timeout=3s",
			check: func(t *testing.T, s *Spec) {
				assert.Equal(t, "user", s.redis.Username)
				assert.Equal(t, "s3cret", s.redis.Password)
				assert.Equal(t, 3*time.Second, s.redis.DialTimeout)
			}},
		{spec: "redis://:p%40ss@h:1", kind: Redis, redacted: "redis://:xxxxx@h:1", check: func(t *testing.T, s *Spec) {
			assert.Equal(t, "p@ss", s.redis.Password, "escaped password decoded")
		}},
		{spec: "rediss://h:6380", kind: Redis, check: func(t *testing.T, s *Spec) {
			require.NotNil(t, s.redis.TLSConfig, "rediss:// must use TLS")
			assert.Equal(t, "h", s.redis.TLSConfig.ServerName)
		}},

		{spec: "postgres://u:pw@h:5433/db?sslmode=disable&prefix=p_", kind: Postgres, prefix: "p_",
			redacted: "postgres://u:xxxxx@h:5433/db?sslmode=disable&prefix=p_", check: func(t *testing.T, s *Spec) {
				assert.Equal(t, "h", s.pg.Host)
				assert.Equal(t, uint16(5433), s.pg.Port)
				assert.Equal(t, "db", s.pg.Database)
				assert.Equal(t, "u", s.pg.User)
				assert.Equal(t, "pw", s.pg.Password)
				assert.NotContains(t, s.pg.RuntimeParams, "prefix", "prefix must not reach the server")
			}},
		{spec: "postgresql://h/db?application_name=demo", kind: Postgres, check: func(t *testing.T, s *Spec) {
			assert.Equal(t, "demo", s.pg.RuntimeParams["application_name"])
		}},
		{spec: "postgres://u@h/db?password=pw2&sslmode=disable", kind: Postgres,
			redacted: "postgres://u@h/db?password=xxxxx&sslmode=disable", check: func(t *testing.T, s *Spec) {
				assert.Equal(t, "pw2", s.pg.Password)
			}},

		{spec: "mysql://u:p@w@h:3307/db?prefix=x_&timeout=2s&sql_mode=%27ANSI%27", kind: MySQL, prefix: "x_",
			redacted: "mysql://u:xxxxx@h:3307/db?prefix=x_&timeout=2s&sql_mode=%27ANSI%27", check: func(t *testing.T, s *Spec) {
				assert.Equal(t, "u", s.mysql.User)
				assert.Equal(t, "p@w", s.mysql.Passwd, "password with '@'")
				assert.Equal(t, "tcp", s.mysql.Net)
				assert.Equal(t, "h:3307", s.mysql.Addr)
				assert.Equal(t, "db", s.mysql.DBName)
				assert.Equal(t, 2*time.Second, s.mysql.Timeout)
				assert.Equal(t, map[string]string{"sql_mode": "'ANSI'"}, s.mysql.Params, "system variables pass through")
			}},
		{spec: "mysql://u@db.example:3306/x?tls=true", kind: MySQL, check: func(t *testing.T, s *Spec) {
			require.NotNil(t, s.mysql.TLS, "tls=true must enable TLS")
			assert.Equal(t, "db.example", s.mysql.TLS.ServerName, "TLS server name from the URL's host")
		}},
		{spec: "mysql://root@127.0.0.1/test", kind: MySQL, check: func(t *testing.T, s *Spec) {
			assert.Equal(t, "127.0.0.1:3306", s.mysql.Addr, "default port")
			assert.Equal(t, "root", s.mysql.User)
			assert.Empty(t, s.mysql.Passwd)
		}},
		{spec: "mysql://u:a%2Fb@[::1]/my%20db", kind: MySQL, redacted: "mysql://u:xxxxx@[::1]/my%20db", check: func(t *testing.T, s *Spec) {
			assert.Equal(t, "a/b", s.mysql.Passwd)
			assert.Equal(t, "[::1]:3306", s.mysql.Addr)
			assert.Equal(t, "my db", s.mysql.DBName)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := Parse(tt.spec)
			require.NoError(t, err, "Parse(%q)", tt.spec)
			assert.Equal(t, tt.kind, s.Kind, "kind")
			assert.Equal(t, tt.path, s.Path, "path")
			assert.Equal(t, tt.prefix, s.Prefix, "prefix")
			want := tt.redacted
			if want == "" {
				want = tt.spec
			}
			assert.Equal(t, want, s.String(), "redacted spec")
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		spec string
		want error
		msg  string // a piece of the message
	}{
		{"", ErrInvalidSpec, "empty"},
		{"mongodb://h/db", ErrUnknownScheme, `"mongodb"`},
		{"http://h/x", ErrUnknownScheme, "want file, sqlite"},
		{"file:", ErrInvalidSpec, "empty directory"},
		{"file:dir?prefix=x", ErrInvalidSpec, "no parameters"},
		{"file:///dir?x=1", ErrInvalidSpec, "no parameters"},
		{"file://host/dir", ErrInvalidSpec, "host"},
		{"sqlite:", ErrInvalidSpec, "empty database"},
		{"sqlite::memory:", ErrInvalidSpec, "in-memory"},
		{"sqlite:file:a.db", ErrInvalidSpec, "plain file path"},
		{"sqlite:a.db?mode=memory", ErrInvalidSpec, "in-memory"},
		{"sqlite:a.db?prefix=a&prefix=b", ErrInvalidSpec, "one non-empty prefix"},
		{"sqlite:a.db?prefix=", ErrInvalidSpec, "one non-empty prefix"},
		{"sqlite:a.db?x=%zz", ErrInvalidSpec, "parameters"},
		{"redis://h:1/0?bogus=1", ErrInvalidSpec, "unexpected option"},
		{"redis://h:1/x", ErrInvalidSpec, "database"},
		{"redis://h:port", ErrInvalidSpec, "malformed URL"},
		{"postgres://h:notaport/db", ErrInvalidSpec, "malformed URL"},
		{"postgres://h/db?sslmode=bogus", ErrInvalidSpec, "sslmode"},
		{"mysql://u:p@h", ErrInvalidSpec, "one database name"},
		{"mysql://h/a/b", ErrInvalidSpec, "one database name"},
		{"mysql:///db", ErrInvalidSpec, "mysql://user:pass@host:port/db"},
		{"mysql:h/db", ErrInvalidSpec, "mysql://user:pass@host:port/db"},
		{"mysql://h/db?timeout=abc", ErrInvalidSpec, "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := Parse(tt.spec)
			require.Error(t, err, "Parse(%q) should fail, got %v", tt.spec, s)
			assert.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.msg)
			assert.True(t, strings.HasPrefix(err.Error(), "storeurl: "), "message %q should start with the package prefix", err)
		})
	}
}

// secret is the password of the redaction tests; its pieces must not appear
// either.
const secret = "S3cr3tPw"

func assertRedacted(t *testing.T, text string) {
	t.Helper()
	assert.NotContains(t, text, "S3cr3t", "password (or a piece of it) leaked")
	assert.NotContains(t, text, "Pw", "a piece of the password leaked")
}

func TestParseErrorsRedactPasswords(t *testing.T) {
	for _, spec := range []string{
		"postgres://u:" + secret + "@h:bad/db",
		"postgres://u:" + secret + "/x@h/db", // '/' in the password: url.Parse sees host "u:S3cr3t"
		"postgres://u:" + secret + "?x@h/db", // '?' in the password
		"postgres://u:S3cr3t%zzPw@h/db",      // bad escape inside the password
		"postgres://u@h/db?sslmode=bogus&password=" + secret,
		"postgres://u:" + secret + "@h/db?sslmode=bogus", // pgx's own parse error
		"redis://u:" + secret + "@h:1/0?bogus=1",
		"redis://:" + secret + "@h:1/nodb",
		"rediss://u:S3cr3t%2FPw@h:1/0?bogus=1",
		"mysql://u:" + secret + "@h/db?timeout=zz",
		"mysql://u:" + secret + "@h",
		"mysql://u:S3cr3t%40Pw@h",
		"mongodb://u:" + secret + "@h/db",
	} {
		t.Run(spec, func(t *testing.T) {
			_, err := Parse(spec)
			require.Error(t, err, "Parse should fail")
			assertRedacted(t, err.Error())
			assert.Contains(t, err.Error(), redactedText, "the spec should appear with its password redacted: %v", err)
		})
	}
}

func TestSpecPrintsNoPassword(t *testing.T) {
	for _, spec := range []string{
		"postgres://u:" + secret + "@h/db",
		"postgres://u@h/db?sslpassword=" + secret,
		"redis://u:" + secret + "@h:1/0",
		"mysql://u:" + secret + "@h/db",
	} {
		s, err := Parse(spec)
		require.NoError(t, err, "Parse(%q)", spec)
		for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
			assertRedacted(t, fmt.Sprintf(f, s))
			assertRedacted(t, fmt.Sprintf(f, *s))
			assertRedacted(t, fmt.Sprintf(f, []*Spec{s}))
		}
		assert.Contains(t, s.String(), redactedText, "String of %q", s)
	}
}

func TestRedactSpec(t *testing.T) {
	tests := []struct{ in, out string }{
		{"redis://h:1/0", "redis://h:1/0"},
		{"redis://u@h:1/0", "redis://u@h:1/0"},
		{"redis://u:p@h:1/0", "redis://u:xxxxx@h:1/0"},
		{"mysql://u:p/q?r#s@h/db?x=1", "mysql://u:xxxxx@h/db?x=1"},
		{"postgres://u@h/db?a=1&PassWord=p&b=2", "postgres://u@h/db?a=1&PassWord=xxxxx&b=2"},
		{"sqlite:a.db?prefix=x", "sqlite:a.db?prefix=x"},
	}
	for _, tt := range tests {
		got, _ := redactSpec(tt.in)
		assert.Equal(t, tt.out, got, "redactSpec(%q)", tt.in)
	}
	_, secrets := redactSpec("mysql://u:a%2Fb@h/db")
	assert.Subset(t, secrets, []string{"a%2Fb", "a/b"}, "secrets as written and decoded")
}

func TestScrubOnePass(t *testing.T) {
	// "xxxx" is a piece of the password; it must not match inside the text
	// that replaced the whole password.
	_, err := Parse("postgres://u:" + secret + "/xxxx@h/db")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid port ":xxxxx" after host`)
	assert.Contains(t, err.Error(), "postgres://u:xxxxx@h/db")
}

func TestScrubKeepsChain(t *testing.T) {
	s, err := Parse("redis://u:" + secret + "@h:1/0")
	require.NoError(t, err)
	inner := errors.New("dial " + secret)
	err = s.scrub(fmt.Errorf("%w: %w", ErrUnreachable, inner))
	assert.Equal(t, "storeurl: server unreachable or refused the connection: dial xxxxx", err.Error())
	assert.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorIs(t, err, inner)
}

// TestParseRefusesWhatIsNotAPath checks that a spec with no scheme that looks
// like connection parameters is refused, without being quoted, instead of
// becoming a directory named after it, password included; and that file:
// takes such a name as it is.
func TestParseRefusesWhatIsNotAPath(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want error
		msg  string // a piece of the message
	}{
		{"host=127.0.0.1 user=u password=" + secret + " dbname=test", ErrInvalidSpec, "key=value"},
		{"password='" + secret + " x' host=h", ErrInvalidSpec, "key=value"},
		{"dbname=test", ErrInvalidSpec, "key=value"},
		{"state/run=1", ErrInvalidSpec, "key=value"},
		{"u@h/db", ErrInvalidSpec, "'@'"},
		{"1u:" + secret + "@tcp(h:3306)/db", ErrInvalidSpec, "'@'"},
		{"127.0.0.1:6379", ErrInvalidSpec, "HOST:PORT"},
		{"[::1]:6379/0", ErrInvalidSpec, "HOST:PORT"},
		// go-sql-driver's DSN: its user reads as a scheme.
		{"root:" + secret + "@tcp(127.0.0.1:3306)/test", ErrUnknownScheme, `"root"`},
		{"user:" + secret + "@h/db", ErrUnknownScheme, "mysql://user:pass@host:3306/db"},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := Parse(tt.spec)
			require.Error(t, err, "Parse(%q) should be refused, got %v", tt.spec, s)
			assert.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.msg, "the message should say what the spec looks like")
			assert.NotContains(t, err.Error(), tt.spec, "the spec must not be quoted")
			assertRedacted(t, err.Error())
			if tt.want == ErrInvalidSpec {
				assert.Contains(t, err.Error(), "file:DIR", "the message should say how to name such a directory")
			}
		})
	}
	for _, dir := range []string{"a=b", "u@h", "h:1", "host=h password=p"} {
		s, err := Parse("file:" + dir)
		require.NoError(t, err, "file:%s names a directory", dir)
		assert.Equal(t, dir, s.Path, "file:%s", dir)
	}
	for _, dir := range []string{`C:\state`, `C:state`, "./h:1", "/srv/h:1"} {
		s, err := Parse(dir)
		require.NoError(t, err, "%s is a plain path", dir)
		assert.Equal(t, dir, s.Path, "path of %s", dir)
	}
}

// TestScrubKeepsShortPieces: the pieces of a password between URL
// delimiters are scrubbed only from 4 bytes on, so that a piece such as "db"
// does not garble every word it is part of; the whole password always is.
func TestScrubKeepsShortPieces(t *testing.T) {
	s, err := Parse("redis://u:db%2F" + secret + "@h:1/0")
	require.NoError(t, err)
	err = s.scrub(errors.New("no dbname given; db/" + secret + "; " + secret))
	assert.Equal(t, "no dbname given; xxxxx; xxxxx", err.Error())
	s, err = Parse("redis://u:ab@h:1/0")
	require.NoError(t, err)
	assert.Equal(t, "AUTH xxxxx failed", s.scrub(errors.New("AUTH ab failed")).Error(), "a short password is scrubbed whole")
}
