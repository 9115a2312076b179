package storeurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Sentinel errors.
var (
	// ErrUnknownScheme means the spec starts with a scheme this package does
	// not know.
	ErrUnknownScheme = errors.New("storeurl: unknown scheme")
	// ErrInvalidSpec means the spec is malformed or its parameters do not fit
	// its scheme.
	ErrInvalidSpec = errors.New("storeurl: invalid spec")
	// ErrUnreachable means a ping of the server failed: it did not answer
	// within Options.ConnectTimeout (or before ctx ended), or refused the
	// connection or its credentials.
	ErrUnreachable = errors.New("storeurl: server unreachable or refused the connection")
)

// Kind is the kind of store a spec opens.
type Kind string

// The kinds of store.
const (
	File     Kind = "file"     // filestore
	SQLite   Kind = "sqlite"   // sqlstore on SQLite
	Redis    Kind = "redis"    // redisstore (redis:// and rediss://)
	Postgres Kind = "postgres" // sqlstore on PostgreSQL (postgres:// and postgresql://)
	MySQL    Kind = "mysql"    // sqlstore on MySQL or MariaDB
)

// redactedText replaces passwords in specs and error messages.
const redactedText = "xxxxx"

// Spec is a parsed store spec. Create it with Parse. Its String, and its
// GoString, show the spec with passwords redacted.
type Spec struct {
	// Kind is the kind of store.
	Kind Kind
	// Path is the directory of a file store or the database file of a
	// SQLite store; empty for servers.
	Path string
	// Prefix is the prefix query parameter: the Redis key prefix or the SQL
	// table prefix. Empty means the store's default.
	Prefix string

	redacted string
	secrets  []string // passwords as they appear in the spec and decoded, longest first

	sqliteDSN string
	redis     *redis.Options
	pg        *pgx.ConnConfig
	mysql     *mysql.Config
}

// String returns the spec with its passwords replaced by "xxxxx". It has a
// value receiver so that a Spec printed by value shows no password either.
func (s Spec) String() string { return s.redacted }

// HasPassword reports whether the spec carries a password. A program that
// took it from its command line should say that other users of the machine
// can read it there (ps, /proc), and suggest the environment instead.
func (s *Spec) HasPassword() bool { return len(s.secrets) > 0 }

// GoString is String, so that %#v shows no password either.
func (s Spec) GoString() string { return "storeurl.Spec(" + s.redacted + ")" }

// Parse parses and checks spec without connecting to anything. See the
// package documentation for the forms it accepts. The error wraps
// ErrUnknownScheme or ErrInvalidSpec and contains no password.
func Parse(spec string) (*Spec, error) {
	red, secrets := redactSpec(spec)
	s := &Spec{redacted: red, secrets: secrets}
	if spec == "" {
		return nil, fmt.Errorf("%w: empty spec", ErrInvalidSpec)
	}
	scheme, rest, ok := splitScheme(spec)
	var err error
	switch {
	case !ok:
		if why := notAPath(spec); why != "" {
			return nil, fmt.Errorf("%w: neither a URL nor taken for a directory: %s; "+
				"write a URL such as postgres://user:pass@host:5432/db, or file:DIR for a directory of that name", ErrInvalidSpec, why)
		}
		s.Kind = File
		err = s.parseFile(spec)
	case scheme == "file":
		s.Kind = File
		err = s.parseFileURL(spec, rest)
	case scheme == "sqlite":
		s.Kind = SQLite
		err = s.parseSQLite(spec, rest)
	case scheme == "redis" || scheme == "rediss":
		s.Kind = Redis
		err = s.parseRedis(spec)
	case scheme == "postgres" || scheme == "postgresql":
		s.Kind = Postgres
		err = s.parsePostgres(spec)
	case scheme == "mysql":
		s.Kind = MySQL
		err = s.parseMySQL(spec)
	case strings.HasPrefix(rest, "//"):
		return nil, fmt.Errorf("%w %q in %s (want file, sqlite, redis, rediss, postgres, postgresql or mysql)",
			ErrUnknownScheme, scheme, red)
	default:
		// Not a URL, so redactSpec found no password to hide in it
		// (user:pass@tcp(host)/db, go-sql-driver's form): none of it is shown.
		return nil, fmt.Errorf("%w %q (want file, sqlite, redis, rediss, postgres, postgresql or mysql; "+
			"a server is named by a URL such as mysql://user:pass@host:3306/db)", ErrUnknownScheme, scheme)
	}
	if err != nil {
		return nil, s.scrub(fmt.Errorf("%w: %s: %w", ErrInvalidSpec, red, err))
	}
	return s, nil
}

// splitScheme splits "scheme:rest". A scheme is a letter followed by at least
// one more letter, digit, '+', '-' or '.', so that a Windows drive letter is
// a path, not a scheme.
func splitScheme(spec string) (scheme, rest string, ok bool) {
	i := strings.IndexByte(spec, ':')
	if i < 2 {
		return "", spec, false
	}
	for j, c := range []byte(spec[:i]) {
		if !isLetter(c) && (j == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", spec, false
		}
	}
	return strings.ToLower(spec[:i]), spec[i+1:], true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// notAPath says why spec, which has no scheme, looks like connection
// parameters rather than a directory, or returns "" for a plain path.
func notAPath(spec string) string {
	first := spec
	if i := strings.IndexAny(spec, `/\`); i >= 0 {
		first = spec[:i]
	}
	// C:\dir or C:dir: splitScheme leaves a one-letter scheme to the path.
	drive := len(first) >= 2 && first[1] == ':' && isLetter(first[0]) && !strings.Contains(first[2:], ":")
	switch {
	case strings.ContainsRune(spec, '='):
		return "it has '=', like key=value connection parameters (libpq's host=... password=...)"
	case strings.ContainsRune(spec, '@'):
		return "it has '@', like user:pass@host"
	case strings.ContainsRune(first, ':') && !drive:
		return "its first element has ':', like HOST:PORT"
	}
	return ""
}

func (s *Spec) parseFile(path string) error {
	if path == "" {
		return errors.New("empty directory")
	}
	if strings.ContainsRune(path, '?') {
		return errors.New("a file store takes no parameters")
	}
	s.Path = path
	return nil
}

// parseFileURL accepts file:DIR and file:///DIR (or file://localhost/DIR).
func (s *Spec) parseFileURL(spec, rest string) error {
	if !strings.HasPrefix(rest, "//") {
		return s.parseFile(rest)
	}
	u, err := parseURL(spec)
	if err != nil {
		return err
	}
	if u.Host != "" && u.Host != "localhost" {
		return fmt.Errorf("file URL with host %q: want file:///DIR", u.Host)
	}
	if u.RawQuery != "" || u.ForceQuery {
		return errors.New("a file store takes no parameters")
	}
	return s.parseFile(u.Path)
}

// sqliteDefaults are the settings sqlstore documents for SQLite, each with
// the DSN keys that, when present, mean the spec chose its own.
var sqliteDefaults = []struct {
	key, value string
	pragma     string   // the pragma name, for _pragma=name(...)
	overrides  []string // modernc's shorthand keys for the same setting
}{
	{"_pragma", "busy_timeout(10000)", "busy_timeout", []string{"_busy_timeout", "_timeout"}},
	{"_pragma", "journal_mode(WAL)", "journal_mode", []string{"_journal_mode", "_journal"}},
	{"_txlock", "immediate", "", []string{"_txlock"}},
}

// parseSQLite accepts sqlite:FILE[?params] and sqlite:///FILE[?params].
func (s *Spec) parseSQLite(spec, rest string) error {
	var path, rawQuery string
	if strings.HasPrefix(rest, "//") {
		u, err := parseURL(spec)
		if err != nil {
			return err
		}
		if u.Host != "" && u.Host != "localhost" {
			return fmt.Errorf("sqlite URL with host %q: want sqlite:///FILE", u.Host)
		}
		path, rawQuery = u.Path, u.RawQuery
	} else {
		path, rawQuery, _ = strings.Cut(rest, "?")
	}
	switch {
	case path == "":
		return errors.New("empty database file")
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return errors.New("want sqlite:FILE with a plain file path; in-memory and URI databases are refused " +
			"(each pooled connection would open its own)")
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return fmt.Errorf("parameters: %w", err)
	}
	if s.Prefix, err = takePrefix(q); err != nil {
		return err
	}
	if strings.EqualFold(q.Get("mode"), "memory") {
		return errors.New("in-memory databases are refused (each pooled connection would open its own)")
	}
	for _, d := range sqliteDefaults {
		set := slices.ContainsFunc(d.overrides, q.Has)
		if d.pragma != "" {
			set = set || slices.ContainsFunc(q["_pragma"], func(v string) bool {
				return strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), d.pragma)
			})
		}
		if !set {
			q.Add(d.key, d.value)
		}
	}
	s.Path = path
	s.sqliteDSN = path + "?" + q.Encode()
	return nil
}

func (s *Spec) parseRedis(spec string) error {
	u, err := parseURL(spec)
	if err != nil {
		return err
	}
	if err := s.takeURLPrefix(u); err != nil {
		return err
	}
	if s.redis, err = redis.ParseURL(u.String()); err != nil {
		return err
	}
	return nil
}

func (s *Spec) parsePostgres(spec string) error {
	u, err := parseURL(spec)
	if err != nil {
		return err
	}
	if err := s.takeURLPrefix(u); err != nil {
		return err
	}
	if s.pg, err = pgx.ParseConfig(u.String()); err != nil {
		return err
	}
	return nil
}

// parseMySQL translates mysql://user:pass@host:port/db?params into
// go-sql-driver's user:pass@tcp(host:port)/db?params.
func (s *Spec) parseMySQL(spec string) error {
	u, err := parseURL(spec)
	if err != nil {
		return err
	}
	if u.Opaque != "" || u.Host == "" {
		return errors.New("want mysql://user:pass@host:port/db")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return fmt.Errorf("path %q: want one database name, mysql://user:pass@host:port/db", u.Path)
	}
	if u.Fragment != "" {
		return errors.New("unexpected #fragment")
	}
	if err := s.takeURLPrefix(u); err != nil {
		return err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	// The DSN is built without the user: go-sql-driver splits a DSN's
	// userinfo at the last '@' before the last '/', which a password may
	// contain; the config's fields take them verbatim.
	dsn := "tcp(" + addr + ")/" + url.PathEscape(db)
	if u.RawQuery != "" {
		dsn += "?" + u.RawQuery
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	s.mysql = cfg
	return nil
}

// takeURLPrefix moves u's prefix parameter to s.Prefix.
func (s *Spec) takeURLPrefix(u *url.URL) error {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("parameters: %w", err)
	}
	if s.Prefix, err = takePrefix(q); err != nil {
		return err
	}
	u.RawQuery = q.Encode()
	return nil
}

func takePrefix(q url.Values) (string, error) {
	vs, ok := q["prefix"]
	if !ok {
		return "", nil
	}
	delete(q, "prefix")
	if len(vs) != 1 || vs[0] == "" {
		return "", fmt.Errorf("want one non-empty prefix parameter, got %d (%q)", len(vs), vs)
	}
	return vs[0], nil
}

// parseURL is url.Parse with the URL left out of the error: url.Error
// quotes the whole input, password included. The reason that remains can
// still quote a piece of it, so callers scrub it.
func parseURL(spec string) (*url.URL, error) {
	u, err := url.Parse(spec)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("malformed URL: %w", err)
	}
	return u, nil
}

// minPiece is the shortest piece of a password that is scrubbed on its own:
// shorter ones tell little, and scrubbing them garbles every word they are
// part of ("db" in "dbname").
const minPiece = 4

// redactSpec returns spec with the password of its userinfo and the values of
// query parameters whose name contains "pass" replaced by redactedText, and
// those secrets: as written, decoded, and (for a malformed spec) in the
// pieces a parser might quote. It works on text, so it also redacts a spec
// that does not parse; when unsure where the userinfo ends it redacts more.
func redactSpec(spec string) (string, []string) {
	var secrets []string
	add := func(raw string) {
		if raw == "" {
			return
		}
		forms := []string{raw}
		if d, err := url.PathUnescape(raw); err == nil {
			forms = append(forms, d)
		}
		if d, err := url.QueryUnescape(raw); err == nil {
			forms = append(forms, d)
		}
		secrets = append(secrets, forms...)
		// Pieces between the characters that end a URL part, as written
		// and decoded, in case a parser or driver stopped at one of them
		// and quoted the rest.
		for _, f := range forms {
			for _, p := range strings.FieldsFunc(f, func(r rune) bool { return strings.ContainsRune("/?#@%:", r) }) {
				if len(p) >= minPiece {
					secrets = append(secrets, p)
				}
			}
		}
	}
	out := spec
	if i := strings.Index(spec, "://"); i >= 0 {
		start := i + len("://")
		// The userinfo ends at the last '@': a password may hold '/', '?'
		// or '#' unescaped, which a URL parser would take as the end of
		// the authority. A later '@' (in the path or query) only makes
		// this redact more.
		if at := strings.LastIndexByte(spec[start:], '@'); at >= 0 {
			userinfo := spec[start : start+at]
			if c := strings.IndexByte(userinfo, ':'); c >= 0 {
				add(userinfo[c+1:])
				out = spec[:start+c+1] + redactedText + spec[start+at:]
			}
		}
	}
	// Query parameters named like a password (pgx reads password= and
	// sslpassword= from the query).
	if q := strings.IndexByte(out, '?'); q >= 0 {
		params := strings.Split(out[q+1:], "&")
		for i, p := range params {
			k, v, ok := strings.Cut(p, "=")
			if ok && v != "" && strings.Contains(strings.ToLower(k), "pass") {
				add(v)
				params[i] = k + "=" + redactedText
			}
		}
		out = out[:q+1] + strings.Join(params, "&")
	}
	slices.SortFunc(secrets, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return out, slices.Compact(secrets)
}

// scrubbedError is an error whose message had passwords replaced; the
// original stays reachable with errors.Is and errors.As.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrub returns err with every secret of s replaced by redactedText in its
// message.
func (s *Spec) scrub(err error) error {
	if err == nil || len(s.secrets) == 0 {
		return err
	}
	// One pass, longest secret first, so that a short piece of a
	// password does not match inside the text that replaced a longer one.
	pairs := make([]string, 0, 2*len(s.secrets))
	for _, sec := range s.secrets {
		pairs = append(pairs, sec, redactedText)
	}
	r := strings.NewReplacer(pairs...)
	// The redacted spec holds no secret, but may hold a short piece of one
	// (a host name, "xxxxx"): keep it as it is.
	parts := []string{err.Error()}
	if s.redacted != "" {
		parts = strings.Split(parts[0], s.redacted)
	}
	for i, p := range parts {
		parts[i] = r.Replace(p)
	}
	return &scrubbedError{msg: strings.Join(parts, s.redacted), err: err}
}
