//go:build race

package ordered_test

const raceEnabled = true
