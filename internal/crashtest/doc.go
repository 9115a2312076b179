// Package crashtest proves inorder's guarantees under crashes and chaos.
//
// It has two halves. The history checker (Load, Check) is pure code: it reads
// the history files that every sender and receiver process appends to (one
// JSON Event per line) and checks, per group, the rules of the receive mode
// under test (see Check). The harness (the tests of this package and the
// worker program in internal/crashtest/worker) runs real sender and receiver
// processes over the MNS emulator with faults on, kills them with SIGKILL at
// random moments and at chosen kill points, restarts them, and feeds their
// histories to the checker.
//
// # What a history can lose
//
// Each incarnation of a process writes its own file, so a SIGKILL can only
// tear the last line of the file it was writing; Load ignores a torn last
// line and reports a malformed line anywhere else. Records that gate an
// action of the system under test are fsynced before the action: an
// "attempt" before the message is admitted to Send, a "delivered" before the
// message is acknowledged. Records of outcomes ("sent", "acked") are written
// after the outcome and may be lost with the process; losing one only makes
// the checker more permissive (a sent message it does not require, a
// duplicate it allows), never a false alarm. The GUARANTEES.md file beside
// this one lists each guarantee and the test that proves it.
package crashtest
