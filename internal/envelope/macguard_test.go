package envelope_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMACsComparedInConstantTime is a source-level guard: in the module's
// non-test Go files, MAC bytes are compared only with hmac.Equal or
// crypto/subtle, never with == or != or a plain byte comparison, which
// return at the first differing byte and so tell an attacker, byte by
// byte, how much of a forged MAC is right. No test that runs the code can
// see the difference; only the source can.
//
// What it counts as MAC bytes (macExpr), with go/parser and go/ast only:
//   - a name whose last camel-case word is "mac" or "macs": mac, h.MAC,
//     wantMAC (not MACLen or macDomain, whose last word is not);
//   - a call of a function that returns MACs: one whose name ends in such
//     a word, or whose result type names one (Sign returns [MACLen]byte),
//     and X.Sum(...) where X is a MAC (the HMAC state);
//   - slices, indexes, conversions ([]byte(x), string(x)) and base64 or hex
//     encodings (any call whose name contains Encode) of MAC bytes;
//   - a local variable assigned MAC bytes (want := Sign(k, h, payload)).
//
// What it reports: ==, != or a switch whose operand is MAC bytes (against
// anything but nil), and bytes.Equal, bytes.Compare, slices.Equal,
// slices.Compare, strings.Compare, strings.EqualFold or reflect.DeepEqual
// with a MAC argument. It also requires that it sees the module's constant-
// time comparisons (hmac.Equal or subtle.ConstantTimeCompare of MAC bytes),
// so that a rename that hides the MACs from it fails here instead of
// silently guarding nothing.
//
// Not matched, on purpose: the emulator's receipt handles
// (mnstest.encodeHandle), authenticated with a maphash, not an HMAC, and
// compared as whole strings: a handle is not named a MAC.
func TestMACsComparedInConstantTime(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(files), 50, "Go files found under %s", root)
	bad, good := checkMACCompares(fset, files)
	for _, b := range bad {
		rel, _ := filepath.Rel(root, b.pos.Filename)
		assert.Fail(t, "MAC bytes compared with "+b.how, "%s:%d: use hmac.Equal (or crypto/subtle)", rel, b.pos.Line)
	}
	assert.GreaterOrEqual(t, good, 2, "constant-time MAC comparisons seen (envelope.Verify, mnstest's signature check): "+
		"if they are no longer recognised as MACs, this guard sees nothing")
	t.Logf("%d files, %d constant-time MAC comparisons, %d others", len(files), good, len(bad))
}

// TestMACGuardFinds runs the guard on small sources: what it must report
// and what it must not.
func TestMACGuardFinds(t *testing.T) {
	cases := []struct {
		src  string
		want []string // how each finding compares, in order
	}{
		{`func f(h H, want [16]byte) bool { return want == h.MAC }`, []string{"=="}},
		{`func f(k []byte, h H, p []byte) bool { want := Sign(k, h, p); return want != h.MAC }`, []string{"!="}},
		{`func f(k []byte, h H, p []byte) bool { want := Sign(k, h, p); return bytes.Equal(want[:], h.MAC[:]) }`, []string{"bytes.Equal"}},
		{`func f(a, b []byte) bool { return string(a) == string(b) }`, nil},
		{`func f(mac, got []byte) bool { return string(mac) == string(got) }`, []string{"=="}},
		{`func f(mac hash.Hash, sig string) bool { return base64.StdEncoding.EncodeToString(mac.Sum(nil)) == sig }`, []string{"=="}},
		{`func f(mac hash.Hash, sig []byte) bool { want := hex.AppendEncode(nil, mac.Sum(nil)); return slices.Equal(want, sig) }`, []string{"slices.Equal"}},
		{`func f(a, b []byte) bool { for i := range a { if a[i] != wantMAC[i] { return false } }; return true }`, []string{"!="}},
		{`func f(m []byte) bool { switch m { }; switch computeMAC(m) { case nil: }; return true }`, []string{"switch"}},
		{`func f(x, y any) bool { return reflect.DeepEqual(x, y.(T).MAC) }`, []string{"reflect.DeepEqual"}},
		// Constant time, lengths, nil, other names: not reported.
		{`func f(k []byte, h H, p []byte) bool { want := Sign(k, h, p); return hmac.Equal(want[:], h.MAC[:]) }`, nil},
		{`func f(mac, b []byte) bool { return subtle.ConstantTimeCompare(mac, b) == 1 }`, nil},
		{`func f(mac []byte, n int) bool { return len(mac) == MACLen && n != MACLen && mac != nil }`, nil},
		{`func f(a, b string) bool { return a == b && macDomain != "" && bytes.Equal([]byte(a), []byte(b)) }`, nil},
		{`func f(s *S, h string) bool { return s.encodeHandle(1) != h }`, nil},
	}
	for name, want := range map[string]bool{"mac": true, "MAC": true, "wantMAC": true, "headerMacs": true, "MACs": true,
		"MACLen": false, "macDomain": false, "hmac": false, "machine": false, "Mach": false} {
		assert.Equal(t, want, macName(name), "macName(%q), words %q", name, camelWords(name))
	}
	for i, c := range cases {
		fset := token.NewFileSet()
		src := "package p\n\nfunc Sign(k []byte, h H, p []byte) [MACLen]byte { return [MACLen]byte{} }\n\n" + c.src + "\n"
		f, err := parser.ParseFile(fset, fmt.Sprintf("case%d.go", i), src, parser.SkipObjectResolution)
		require.NoError(t, err, "case %d: %s", i, c.src)
		bad, _ := checkMACCompares(fset, []*ast.File{f})
		var got []string
		for _, b := range bad {
			got = append(got, b.how)
		}
		assert.Equal(t, c.want, got, "case %d: %s", i, c.src)
	}
}

// macFinding is a comparison of MAC bytes that is not constant-time.
type macFinding struct {
	pos token.Position
	how string // "==", "bytes.Equal", ...
}

// variableTime are the calls that compare their arguments byte by byte
// and stop at the first difference.
var variableTime = map[string]bool{
	"bytes.Equal": true, "bytes.Compare": true, "slices.Equal": true, "slices.Compare": true,
	"strings.Compare": true, "strings.EqualFold": true, "reflect.DeepEqual": true,
}

// constantTime are the calls that compare MACs as they should.
var constantTime = map[string]bool{"hmac.Equal": true, "subtle.ConstantTimeCompare": true}

// checkMACCompares reports the comparisons of MAC bytes in files that are
// not constant-time, and counts those that are.
func checkMACCompares(fset *token.FileSet, files []*ast.File) (bad []macFinding, good int) {
	// Functions that return MACs, across all files: by name.
	producers := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Type.Results != nil {
				for _, r := range fd.Type.Results.List {
					if mentionsMAC(r.Type) {
						producers[fd.Name.Name] = true
					}
				}
			}
		}
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			g := &macGuard{producers: producers, vars: map[string]bool{}}
			g.localVars(fd.Body)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BinaryExpr:
					if (n.Op == token.EQL || n.Op == token.NEQ) && !isNil(n.X) && !isNil(n.Y) && (g.mac(n.X) || g.mac(n.Y)) {
						bad = append(bad, macFinding{fset.Position(n.OpPos), n.Op.String()})
					}
				case *ast.SwitchStmt:
					if n.Tag != nil && g.mac(n.Tag) {
						bad = append(bad, macFinding{fset.Position(n.Switch), "switch"})
					}
				case *ast.CallExpr:
					name := qualified(n.Fun)
					if !variableTime[name] && !constantTime[name] {
						break
					}
					for _, a := range n.Args {
						if g.mac(a) {
							if constantTime[name] {
								good++
							} else {
								bad = append(bad, macFinding{fset.Position(n.Lparen), name})
							}
							break
						}
					}
				}
				return true
			})
		}
	}
	return bad, good
}

// macGuard knows, within one function, which expressions are MAC bytes.
type macGuard struct {
	producers map[string]bool // functions returning MACs
	vars      map[string]bool // local names assigned MAC bytes
}

// localVars finds the names body assigns MAC bytes to, until no more
// appear (want := Sign(...); enc := hex.EncodeToString(want[:])).
func (g *macGuard) localVars(body *ast.BlockStmt) {
	for changed := true; changed; {
		changed = false
		mark := func(lhs, rhs []ast.Expr) {
			if len(lhs) != len(rhs) {
				return
			}
			for i, l := range lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" && !g.vars[id.Name] && g.mac(rhs[i]) {
					g.vars[id.Name] = true
					changed = true
				}
			}
		}
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				mark(n.Lhs, n.Rhs)
			case *ast.ValueSpec:
				lhs := make([]ast.Expr, len(n.Names))
				for i, id := range n.Names {
					lhs[i] = id
				}
				mark(lhs, n.Values)
			}
			return true
		})
	}
}

// mac reports whether e is MAC bytes.
func (g *macGuard) mac(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return macName(e.Name) || g.vars[e.Name]
	case *ast.SelectorExpr:
		return macName(e.Sel.Name)
	case *ast.ParenExpr:
		return g.mac(e.X)
	case *ast.StarExpr:
		return g.mac(e.X)
	case *ast.SliceExpr:
		return g.mac(e.X)
	case *ast.IndexExpr:
		return g.mac(e.X)
	case *ast.TypeAssertExpr:
		return false
	case *ast.CallExpr:
		switch fun := e.Fun.(type) {
		case *ast.ArrayType: // []byte(mac)
			return len(e.Args) == 1 && g.mac(e.Args[0])
		case *ast.Ident:
			if fun.Name == "string" {
				return len(e.Args) == 1 && g.mac(e.Args[0])
			}
			return g.producers[fun.Name] || macName(fun.Name)
		case *ast.SelectorExpr:
			name := fun.Sel.Name
			switch {
			case name == "Sum": // the HMAC state's sum
				return g.mac(fun.X) || qualified(fun.X) == "hmac.New" || isCallOf(fun.X, "hmac.New")
			case strings.Contains(name, "Encode"): // base64, hex
				for _, a := range e.Args {
					if g.mac(a) {
						return true
					}
				}
				return false
			}
			return g.producers[name] || macName(name)
		}
	}
	return false
}

func isCallOf(e ast.Expr, name string) bool {
	c, ok := e.(*ast.CallExpr)
	return ok && qualified(c.Fun) == name
}

// macName reports whether the last camel-case word of name is "mac" or
// "macs": mac, MAC, h.MAC, wantMAC, headerMacs; not MACLen, macDomain.
func macName(name string) bool {
	words := camelWords(name)
	if len(words) == 0 {
		return false
	}
	last := strings.ToLower(words[len(words)-1])
	return last == "mac" || last == "macs"
}

// camelWords splits a Go name into its words: wantMAC -> want MAC,
// MACLen -> MAC Len, mac_key -> mac key.
func camelWords(name string) []string {
	var words []string
	rs := []rune(name)
	start := 0
	for i := 1; i <= len(rs); i++ {
		// An acronym ends before its last capital when a lower-case
		// word follows (HTTPServer -> HTTP Server), but not before a
		// final s (MACs is one word).
		pluralAcronym := i+2 == len(rs) && rs[i+1] == 's'
		boundary := i == len(rs) || rs[i] == '_' ||
			unicode.IsLower(rs[i-1]) && unicode.IsUpper(rs[i]) ||
			i+1 < len(rs) && !pluralAcronym && unicode.IsUpper(rs[i-1]) && unicode.IsUpper(rs[i]) && unicode.IsLower(rs[i+1])
		if !boundary {
			continue
		}
		if w := strings.Trim(string(rs[start:i]), "_"); w != "" {
			words = append(words, w)
		}
		start = i
	}
	return words
}

// mentionsMAC reports whether a type expression names a MAC (a result type
// such as [MACLen]byte or MAC).
func mentionsMAC(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			for _, w := range camelWords(id.Name) {
				if strings.EqualFold(w, "mac") || strings.EqualFold(w, "macs") {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// qualified returns pkg.Name for a selector on an identifier, or the name
// of a plain identifier.
func qualified(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return x.Name + "." + e.Sel.Name
		}
	}
	return ""
}

func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "nil"
}

// moduleRoot is the directory of the go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}
