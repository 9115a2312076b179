// Command bench measures what strict per-group order costs: it runs the raw
// driver and ordered.Queue over the same queue, side by side, in one process,
// and prints a table (or JSON with -json).
//
//	go run ./examples/bench            # the full run, a few minutes
//	go run ./examples/bench -quick     # a smoke test, well under a minute
//	go run ./examples/bench -scenario 'emulator.*g1000' -messages 200000
//
// # Scenarios
//
//   - raw/<driver>/g<groups>: the same number of messages sent with SendBatch of 16 by
//     the same producer goroutines, received with ReceiveBatch of 16 and
//     deleted with DeleteBatch by the same number of consumer goroutines as
//     the ordered side's fetchers. No ordering. The baseline of the
//     ordered/<driver>/.../g<groups> rows (the group count only sets the
//     backlog bound, see -backlog).
//   - floor/<driver>/memstore/g<groups> (memqueue and emulator): the raw
//     row with ordering reduced to its unavoidable work: each message's
//     envelope header encoded at send (envelope.Append, as the sender
//     writes it), decoded at receive and checked against the message's
//     group and seq, and one store Advance per received batch, before its
//     delete, moving the cursor of every group in the batch with a correct
//     compare-and-set (each receive loop on its own streams). No
//     reservation, buffering, reordering or reaper. Its ratio is
//     floor/raw; each ordered row over the same driver and memstore is
//     also compared with it ("Ordered against its floor", after the
//     table; JSON floor_ratio and floor_cpu_ratio), and selecting an
//     ordered row runs its floor too. There is no filestore floor: one
//     fsync per received batch is more than the ordered rows' commits
//     cost, and would be no floor.
//   - ordered/<driver>/<store>/<mode>/g<groups>: the producers call
//     Queue.SendAsync, Queue.Run hands the messages to a handler, until
//     every message was delivered. The handler checks that every group sees
//     seqs 1..N in order, and that each producer's messages to a group
//     arrive in the order it sent them; a run that delivers wrongly is
//     reported as FAILED and the program exits with status 1.
//   - raw/emulator-fifo/g<groups> and
//     ordered/emulator-fifo/memstore/durable/g<groups>: the raw and
//     ordered rows over an emulator FIFO queue (QueueType fifo, 30 s
//     visibility timeout), which hands out one message of a group at a
//     time, in arrival order. Raw sends each message in its group with
//     SendGroups (SendBatch is refused on FIFO) and checks the service's
//     own order: each message comes back in the group it was sent to, and
//     each producer's messages to a group in the order it sent them; a
//     disorder fails the row, and the row notes how many deliveries were
//     out of order. The ordered row is ordered.Queue unchanged (it parks
//     every early arrival). Their counterparts over a standard queue are
//     raw/emulator/g<groups> and ordered/emulator/memstore/durable/g<groups>
//     (select both with -scenario 'emulator(-fifo)?/(memstore/durable/)?g1(000)?$').
//     One group on a FIFO queue has one message in flight at a time, so
//     the g1 rows run a tenth of the emulator's count.
//   - serial/<store> and pipelined/<store>: one group at 1 ms of emulated
//     queue latency (memqueue's Latency option). Serial is the MNS sample's
//     design (reserve one seq, send one message, wait, mark it, next);
//     pipelined is Queue.SendAsync from one goroutine. Send side only.
//   - backlog/memqueue/memstore/g1: one group's backlog (200,000 messages,
//     -quick 20,000) put in memqueue in a fully shuffled order, then drained
//     by Queue.Run on default options; /lossy is the same with 1% of receive
//     responses lost (memqueue Options.LoseReceive), its ratio the calm
//     drain time over the lossy one. Notes give the drain time, receives and
//     store writes (Advance and Park calls) per message, the longest pause
//     between two deliveries, the peak of messages received and not deleted,
//     arrivals parked and not kept, and the heap in use at the end. -quick
//     gives memqueue a 5 s visibility timeout instead of 30 s, so that a
//     lost receive fits in its budget.
//   - backlog/emulator/memstore/g1 and its base raw/emulator/g1/unbounded:
//     one group of 20,000 messages (-quick 2,000) sent with SendAsync (raw:
//     SendBatch) by producers that never wait, while the receiver runs, over
//     the emulator with a 30 s visibility timeout; the same notes.
//   - engine/core/g1 and g1000: the receive core (internal/recvcore) alone,
//     on one goroutine, each message's whole life (arrival in batches of 16
//     jittered as an MNS standard queue jitters them, hand-out, ack, commit,
//     delete) with every store and queue call succeeding at once.
//   - engine/filestore-N: N goroutines each waiting on one filestore
//     reservation at a time, against N times the append+fdatasync rate
//     measured in the same directory in the same run (group commit).
//
// Drivers: memqueue (in process, its default 4 shards, so delivery is
// "basically ordered" with local swaps), emulator (package mnstest through the
// real MNS SDK over loopback HTTP, via package mnsqueue) and, when
// MNS_ENDPOINT, MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET are set, a real
// MNS queue (created for the run and deleted after). Stores: memstore,
// filestore (a temporary directory), and redisstore, sqlstore on PostgreSQL
// and on MySQL/MariaDB when INORDER_TEST_REDIS_ADDR, INORDER_TEST_POSTGRES_DSN
// or INORDER_TEST_MYSQL_DSN is set (tables prefixed inorder_bench_, which
// are left in place; Redis keys under inorder-bench:, removed at the end;
// streams named after the run).
//
// # Columns
//
//   - msgs/s: messages delivered (or sent, for send-only rows) per second,
//     from the first send to the last delivery.
//   - ratio and base: msgs/s divided by the base row's (raw, serial, or the
//     physical limit for engine rows).
//   - reqs/msg: queue requests of every kind (send, receive, delete,
//     visibility, empty receives included) per message, counted by the queue
//     itself (memqueue's and the emulator's Stats) until the Queue closed.
//     Emulator rows note them by kind: sends, receives, deletes and
//     visibility changes per message (JSON: queue_requests_per_msg_by_kind).
//   - store/msg: store calls (Reserve, Sent, Advance) per message; notes add
//     fsyncs per message for filestore.
//   - p50 and p99 (ms): end-to-end latency, from just before the send call
//     admitted the message to the handler (a timestamp in the payload).
//   - peak: the Queue's peak of buffered messages (ReceiveStats.MaxBuffered).
//   - cpu µs/msg and cpu ratio: the process's CPU time (user and system)
//     per message, and the raw row's divided by this row's. On a machine
//     shared with other work the wall-clock ratio moves a lot between runs;
//     the CPU ratio is what the wall-clock ratio would be if both sides were
//     CPU-bound on an idle machine.
//   - allocs/msg: heap allocations of the whole process (runtime.MemStats
//     Mallocs) per message, from the first send to the last delivery. With
//     the emulator this includes the server's and the SDK's allocations.
//
// The table fits 120 columns: each heading is split over two lines (its
// unit under its name), p50 and p99 are in milliseconds, and each row's base
// and notes follow the table as wrapped paragraphs. After them, a Targets
// section compares the figures with the targets in
// docs/PERFORMANCE.md.
//
// With -guard FILE, a regression guard follows: FILE (CI passes README.md)
// holds a table of baseline ratios between the lines <!-- bench-guard:begin -->
// and <!-- bench-guard:end -->, one row per scenario (| scenario | ratio |),
// measured with the same flags. The ratio guarded is the row's CPU ratio
// where it has one (ordered against raw), else its throughput ratio. The
// run fails (exit status 1) if a ratio is more than 30% below its
// baseline. A ratio divides two figures of the same run, so a slower or
// busier machine moves both; what noise is left is handled by running a
// row under its floor again with its base (up to -guard-retries times,
// default 2) and keeping its best ratio. A row whose baseline ends in µs
// is a CPU row: the CPU µs per message that ordering adds to its raw base,
// whose own row (raw/..., also in µs) is the speed reference. A CPU row is
// not judged from the main run: it runs with its base in pairs of
// -guard-messages and 4 x -guard-messages messages, on one P, until a sign
// test decides whether it is over its baseline + 0.5 µs (at most
// -guard-pairs pairs; a row that fails is judged again on fresh pairs,
// up to -guard-retries times). cpuguard.go has the noise model. With
// -guard-ref BIN (a bench built from a reference commit; CI builds the one
// README.md pins), each CPU row is also judged against BIN: two children,
// BIN and this binary, serve runs of the row (-serve-cpu), in pairs,
// alternately first, and the row fails if it is decidedly more than 0.5
// µs per message dearer than the reference's run beside it. Both pay the
// host's speed alike, so this judgement needs no speed reference
// (cpuref.go). A scenario
// that did not run (not selected, or a store whose env var is unset) is
// reported as such and passes. The verdicts are printed after the table,
// or to stderr and in the JSON ("guard") with -json.
//
// # Flags
//
//	-quick            few messages per scenario, for CI
//	-json             print JSON instead of the table
//	-jsonfile FILE    also write the JSON to FILE
//	-svg FILE         write the ordered/raw ratios (wall and CPU) as an SVG
//	                  chart: a bar per ratio, grouped by transport and store,
//	                  with the 1.0 and target (0.9) lines (default with
//	                  -jsonfile: the JSON file's name with .svg)
//	-messages N       messages per memqueue scenario (emulator: N/4; default
//	                  200000, -quick 8000)
//	-count K          run the list K rounds; each row shows its median round
//	                  (by ratio, else msgs/s), its ratios from that round alone
//	-backlog B        most messages sent and not yet delivered, per group
//	                  (times the groups, at most 3000; default 1000, under
//	                  the receiver's default cap of 4000 undeleted); 0: no bound
//	-window W         the receiver's look-ahead window (default 8192)
//	-commit-interval D  the ordered rows' ReceiveOptions.CommitInterval (default
//	                  0: the receiver's, 5ms in AtLeastOnce mode; -1ns: none)
//	-timeout D        give up on a scenario after D (default 3m, -quick 30s)
//	-scenario RE      run the scenarios whose name matches RE (and their bases)
//	-skip RE          of those, leave out the ones matching RE (unless another
//	                  needs it as its base or floor)
//	-producers P      sending goroutines (default 4)
//	-consumers C      raw receive loops and ordered fetchers (default 2)
//	-size B           payload bytes (default 100, at least 32)
//	-cpuprofile FILE  write a CPU profile of the whole run
//	-guard FILE       fail if a ratio falls more than 30% below its baseline in
//	                  FILE's bench-guard table (CI: README.md), or a CPU row
//	                  (a baseline in µs) is over its baseline + 0.5 µs
//	-guard-retries N  run a row under its floor again up to N times (default 2)
//	-guard-pairs N    at most N pairs of runs per try of a CPU row (default 15)
//	-guard-messages N messages in each ordered run of a CPU row's pairs (default
//	                  40000; its raw base runs 4 x N)
//	-guard-ref BIN    also judge each CPU row against the bench BIN, in pairs:
//	                  fails if decidedly over the reference's run + 0.5 µs
//	-serve-cpu ROW    -guard-ref's children: run ROW once per line read from
//	                  stdin, write its CPU per message as a line of JSON
//	-blockprofile F   write a profile of blocking (channels, mutexes, conds)
//	-memprofile FILE  write a profile of the run's allocations
//	-list             list the scenarios and exit
//
// -h lists the flags and the environment variables above and exits 0; a
// bad flag or value exits 2.
//
// Samples of both profiles carry a "scenario" label: split a profile of
// several scenarios with go tool pprof -tagfocus scenario=NAME.
//
// # Progress
//
// Each scenario's line (name, msgs/s, seconds) goes to stderr. On a
// terminal, stderr also shows the running scenario's progress on one line
// rewritten in place every 250 ms: messages delivered of its total, the
// rate, the time left (for the rows with a checker; the others show their
// time). Off a terminal (a CI log, a file) that line is never written.
package main
