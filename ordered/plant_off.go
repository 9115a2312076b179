//go:build !inorder_plant

package ordered

// plantHandOut runs the planted regressions of a hand-out (see plant.go):
// none in this build.
func plantHandOut() {}
