//go:build !race

package crashtest

// raceEnabled reports whether the tests run under -race; the worker is then
// built with -race too.
const raceEnabled = false
