package envelope

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMACCompareConstantTime reads the package's source: no MAC (a byte
// array or slice of MACLen bytes) is compared with == or !=, which returns
// at the first differing byte and so tells an attacker, byte by byte, how
// much of a forged MAC is right; Verify compares with hmac.Equal. Only a
// source-level check can see this (review 2, planted break EN2).
func TestMACCompareConstantTime(t *testing.T) {
	fset := token.NewFileSet()
	ents, err := os.ReadDir(".")
	require.NoError(t, err)
	var files []*ast.File
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, n, nil, 0)
			require.NoError(t, err)
			files = append(files, f)
		}
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	_, err = conf.Check("envelope", fset, files, info)
	require.NoError(t, err)

	isMAC := func(e ast.Expr) bool {
		switch t := info.Types[e].Type.Underlying().(type) {
		case *types.Array:
			return t.Len() == MACLen && types.Identical(t.Elem(), types.Typ[types.Byte])
		}
		return false
	}
	equalInVerify := false
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (isMAC(n.X) || isMAC(n.Y)) {
					t.Errorf("%s: a MAC compared with %s: use hmac.Equal", fset.Position(n.Pos()), n.Op)
				}
			case *ast.FuncDecl:
				if n.Name.Name == "Verify" {
					ast.Inspect(n.Body, func(m ast.Node) bool {
						if sel, ok := m.(*ast.SelectorExpr); ok {
							if obj := info.Uses[sel.Sel]; obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == "crypto/hmac" && obj.Name() == "Equal" {
								equalInVerify = true
							}
						}
						return true
					})
				}
			}
			return true
		})
	}
	assert.True(t, equalInVerify, "Verify compares MACs with hmac.Equal")
}
