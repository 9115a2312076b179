package recvcore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// TestLanesDueAsksEveryLane checks that lanesDue, which Deadline uses,
// asks the same lanes as lanes, which Flushed uses, and each once: a lane
// left out of lanesDue would never wake the shell for its batching window
// or backoff.
func TestLanesDueAsksEveryLane(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "lane.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var listed, asked []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		switch fn.Name.Name {
		case "lanes":
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if u, ok := n.(*ast.UnaryExpr); ok && u.Op == token.AND {
					if s, ok := u.X.(*ast.SelectorExpr); ok {
						listed = append(listed, s.Sel.Name)
					}
				}
				return true
			})
		case "lanesDue":
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if due, ok := call.Fun.(*ast.SelectorExpr); ok && due.Sel.Name == "due" {
						if lane, ok := due.X.(*ast.SelectorExpr); ok {
							asked = append(asked, lane.Sel.Name)
						}
					}
				}
				return true
			})
		}
	}
	if len(listed) != len(new(Core).lanes()) {
		t.Fatalf("found %d lanes in lanes' source (%v), it returns %d", len(listed), listed, len(new(Core).lanes()))
	}
	slices.Sort(listed)
	slices.Sort(asked)
	if !slices.Equal(listed, asked) {
		t.Errorf("lanesDue asks %v, lanes lists %v", asked, listed)
	}
}
