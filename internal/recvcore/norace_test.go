//go:build !race

package recvcore_test

const raceEnabled = false
