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
// action of the system under test are written before the action (and
// fsynced with the worker's -fsync): an "attempt" before the message is
// admitted to Send, a "delivered" before the message is acknowledged, a
// "delete" before the delete request. Records of outcomes ("sent", "acked") are written
// after the outcome and may be lost with the process; losing one only makes
// the checker more permissive (a sent message it does not require, a
// duplicate it allows), never a false alarm.
//
// # What the library does under the application
//
// Commit before delete is judged from what the receiver does, not what the
// application sees: a receiver records each cursor the store returned or
// stored ("durable") and each message it is about to delete ("delete",
// before the request), and the checker requires every delete to follow a
// durable cursor past its message in the same incarnation.
//
// # Failures other than violations
//
// TestCrash also fails on any worker exit the harness did not cause (a
// panic, an error, a SIGKILL from elsewhere; under -race the workers are
// built with the race detector and a race report ends them), on a receiver
// that stalls during the drain, and when a kill point its mode must show
// never fired. The README's Guarantees section lists each guarantee and the
// test that proves it.
//
// # Scale-out
//
// TestScaleOut runs ordered/scaleout the same way: 8 shard queues on the
// emulator with chaos, 2 sender processes and 4 receiver processes (the
// worker's roles ssend and srecv, members r0..r3, a fifth r4 that joins and
// leaves) on lease timings scaled to a 2 s TTL, with their leases and
// cursors in PostgreSQL or Redis, each receiver through a TCP proxy of its
// own. The harness injects seeded faults (SIGKILL of an owner, SIGSTOP
// shorter and longer than the TTL, SIGTERM and restart, join and leave, a
// black hole between one receiver and the store for 2 x TTL) and records
// them in its own history file (RoleHarness). Every scale-out event carries
// the wall clock (Event.T): the processes share one host's clock, so
// CheckScaleOut orders events across processes by it; its rules are on
// CheckScaleOut. Failovers measures the time from a SIGKILL or SIGTERM of
// an owner to the next delivery of each of its shards elsewhere.
package crashtest
