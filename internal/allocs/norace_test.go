//go:build !race

package allocs_test

const raceEnabled = false
