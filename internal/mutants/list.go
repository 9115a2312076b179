package main

import "time"

// mutant is one planted break and the tests that must catch it.
//
// # Adding a row
//
// Plant the break by hand first, run the test, watch it fail, restore; then
// write the row:
//
//	{
//		Name:   "commit-before-delete",            // unique, lower-case, names the property broken
//		Breaks: "the reaper deletes before ...",   // one line: what the break does
//		Edits: []edit{{
//			File: "ordered/recv_deliver.go",    // from the repository root
//			Old:  "...",                        // exact text, tabs and newlines included;
//			                                    // it must occur exactly once in File
//			New:  "...",                        // what replaces it
//		}},
//		Pkg:     "./internal/crashtest",        // the package whose tests must fail
//		Run:     "^TestCrash$/^alo$",           // go test -run regexp
//		Env:     []string{"KEY=value"},         // optional, added to the environment
//		Needs:   []string{"INORDER_TEST_POSTGRES_DSN"}, // optional: skipped without (a failure with CI=true)
//		Race:    true,                          // optional: build the tests with -race
//		Timeout: 3 * time.Minute,               // optional, default 5m
//		Cost:    2 * time.Minute,               // optional: the time it takes, build included,
//		                                        // for -rotate's budget (default 30s)
//	},
//
// Edits apply in order; each Old must occur exactly once in its file as the
// edits before it left it. Snippets are Go raw strings, so keep the file's
// tabs in them; take a few
// lines of context, enough to be unique, and no more: every line of an
// anchor is a line that can go stale. A mutant must compile: a break that
// does not build is reported invalid, never as caught. When the code an
// anchor points at is rewritten, `.ci/mutants -check` (run by .ci/run)
// reports the mutant stale: re-plant the same break in the new code and
// update the row; delete it only with the property.
type mutant struct {
	Name    string
	Breaks  string
	Edits   []edit
	Pkg     string
	Run     string
	Env     []string
	Needs   []string
	Race    bool
	Timeout time.Duration
	Cost    time.Duration
}

// defaultCost is the time a mutant without a Cost is taken to need: the
// build of its package's tests and a short test run.
const defaultCost = 30 * time.Second

// cost is m's estimated time, for the rotation's budget.
func (m mutant) cost() time.Duration {
	if m.Cost > 0 {
		return m.Cost
	}
	return defaultCost
}

// edit replaces the one occurrence of Old in File by New.
type edit struct {
	File, Old, New string
}

// mutants is the standing list. The receive side's breaks are planted in
// the receive core (internal/recvcore) or its shell (ordered/receive.go,
// ordered/recv_io.go), most of them twice: against the crash harness and
// against the core's model test.
var mutants = []mutant{
	{
		Name:   "commit-before-delete",
		Breaks: "an acknowledged message goes to the reaper at once, before its cursor advance is durable",
		Edits: []edit{{
			File: "internal/recvcore/deliver.go",
			Old: `	c.settleMsg(g, m) // m is recycled
	c.markDirty(g)`,
			New: `	c.queueDelete(c.now, m)
	c.markDirty(g)`,
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestCrash$/^alo$",
		Cost: time.Minute, // caught in 50s on a 2-CPU machine
	},
	{
		Name:   "commit-before-delete-model",
		Breaks: "the same break, against the receive core's model test",
		Edits: []edit{{
			File: "internal/recvcore/deliver.go",
			Old: `	c.settleMsg(g, m) // m is recycled
	c.markDirty(g)`,
			New: `	c.queueDelete(c.now, m)
	c.markDirty(g)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestModel$",
	},
	{
		Name:   "dup-reap-before-commit",
		Breaks: "a duplicate of a seq acknowledged but not yet durable is deleted at once, before the cursor past it is durable",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old:  `	if below(g.dur, m.epoch, m.seq) && g.uncertain == nil {`,
			New:  `	if true {`,
		}},
		Pkg: "./ordered",
		Run: "^TestSynctestCrashBeforeCommit$",
	},
	{
		Name:   "dup-reap-before-commit-model",
		Breaks: "the same break, against the receive core's model test",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old:  `	if below(g.dur, m.epoch, m.seq) && g.uncertain == nil {`,
			New:  `	if true {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestModel$",
	},
	{
		Name:   "dedup-below-cursor",
		Breaks: "an arrival below the group's cursor is not recognised as a duplicate: never deleted, it comes back for ever",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old: `	m.flags |= fDup
	c.st.Duplicates++
	c.report(Report{Kind: ReportDuplicate, Group: g.name,`,
			New: `	if true {
		c.release(m, now)
		return
	}
	m.flags |= fDup
	c.st.Duplicates++
	c.report(Report{Kind: ReportDuplicate, Group: g.name,`,
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestCrash$/^alo$",
		Cost: 75 * time.Second, // caught in 64s on a 2-CPU machine
	},
	{
		Name:   "dedup-below-cursor-model",
		Breaks: "the same break, against the receive core's model test (liveness: the copies never leave the queue)",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old: `	m.flags |= fDup
	c.st.Duplicates++
	c.report(Report{Kind: ReportDuplicate, Group: g.name,`,
			New: `	if true {
		c.release(m, now)
		return
	}
	m.flags |= fDup
	c.st.Duplicates++
	c.report(Report{Kind: ReportDuplicate, Group: g.name,`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestModel$",
	},
	{
		Name:   "group-lock",
		Breaks: "a group whose message is out is still ready: its message is handed out a second time while the first is out",
		Edits: []edit{{
			File: "internal/recvcore/group.go",
			Old:  `		return m.out == outReady || m.out == outOwed`,
			New:  `		return true`,
		}},
		Pkg: "./internal/crashtest",
		Run: "^TestCrash$/^alo$",
	},
	{
		Name:   "group-lock-model",
		Breaks: "the same break, against the receive core's model test",
		Edits: []edit{{
			File: "internal/recvcore/group.go",
			Old:  `		return m.out == outReady || m.out == outOwed`,
			New:  `		return true`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestModel$",
	},
	{
		Name:   "fetch-wakeups",
		Breaks: "fetchers that found no room are never woken when room comes back",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old: `	if room {
		signal(r.room)
	}`,
			New: `	_ = room`,
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestFaultHeldStall$/^no-park$",
		Cost: 75 * time.Second, // caught in 59-65s on a 2-CPU machine
	},
	{
		Name:   "deletes-dropped",
		Breaks: "the reaper never sends its deletes but counts them done: acknowledged messages stay in the queue",
		Edits: []edit{{
			File: "ordered/recv_io.go",
			Old:  `	err := r.q.drvDelete(ctx, a.Receipts)`,
			New:  `	var err error // planted: the delete is never sent`,
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^(TestFaultPoison|TestFaultBodySizeLimit|TestFaultHeldStall|TestFaultSecondReceiver)$",
		Cost: 4 * time.Minute, // caught in 3m45s on a 2-CPU machine
	},
	{
		Name:   "held-deleted",
		Breaks: "a message held behind a hole is deleted from the queue while it waits, undelivered",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old: `	g.held = insertAt(g.held, i, m)
	c.hold(m)
}`,
			New: `	g.held = insertAt(g.held, i, m)
	c.hold(m)
	if m.seq > g.next {
		g.held = slices.DeleteFunc(g.held, func(x *msg) bool { return x == m })
		c.budget.unbuffer(m)
		c.queueDelete(now, m)
	}
}`,
		}, {
			File: "internal/recvcore/route.go",
			Old: `	"bytes"
`,
			New: `	"bytes"
	"slices"
`,
		}},
		Pkg: "./internal/crashtest",
		Run: "^TestFaultRetentionExpiry$",
	},
	{
		Name:   "held-deleted-model",
		Breaks: "the same break, against the receive core's model test",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old: `	g.held = insertAt(g.held, i, m)
	c.hold(m)
}`,
			New: `	g.held = insertAt(g.held, i, m)
	c.hold(m)
	if m.seq > g.next {
		g.held = slices.DeleteFunc(g.held, func(x *msg) bool { return x == m })
		c.budget.unbuffer(m)
		c.queueDelete(now, m)
	}
}`,
		}, {
			File: "internal/recvcore/route.go",
			Old: `	"bytes"
`,
			New: `	"bytes"
	"slices"
`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestModel$",
	},
	{
		Name:   "library-panic",
		Breaks: "one Ack in 300 panics (inside the worker processes of the crash harness)",
		Edits: []edit{{
			File: "internal/recvcore/deliver.go",
			Old: `	c.outstanding--
	c.st.Acked++
`,
			New: `	c.outstanding--
	c.st.Acked++
	if c.st.Acked%300 == 0 {
		panic("planted: one Ack in 300 panics")
	}
`,
		}},
		Pkg: "./internal/crashtest",
		Run: "^TestCrash$/^alo$",
	},
	{
		Name:   "library-race",
		Breaks: "Ack touches the fetchers' room count before taking the receiver's lock: a data race the workers' race detector must report",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old: `func (r *receiver) ack(ctx context.Context, m *Message) error {
	var err error`,
			New: `func (r *receiver) ack(ctx context.Context, m *Message) error {
	r.fetching++
	r.fetching--
	var err error`,
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestCrash$/^alo$",
		Race: true,
		Cost: 2 * time.Minute, // caught in 89s on a 2-CPU machine
	},
	{
		Name:   "kill-point-never-fires",
		Breaks: "the worker never passes its delete-before kill point: the crash harness must notice a kill point its mode cites that never fired",
		Edits: []edit{{
			File: "internal/crashtest/worker/main.go",
			Old: `	d.recordDeletes(receipts)
	d.k.at("delete-before")
`,
			New: `	d.recordDeletes(receipts)
`,
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestCrash$/^alo$",
		Cost: time.Minute, // caught in 54s on a 2-CPU machine
	},
	{
		Name:   "fsync-order",
		Breaks: "filestore releases the callers of a commit before it writes and fsyncs their frame",
		Edits: []edit{{
			File: "seqstore/filestore/writer.go",
			Old: `	records, reserved, advanced, parked := w.records, w.reserved, w.advanced, w.parked
	if records > 0 {`,
			New: `	records, reserved, advanced, parked := w.records, w.reserved, w.advanced, w.parked
	for _, r := range w.taken {
		r.done <- struct{}{}
	}
	if records > 0 {`,
		}, {
			File: "seqstore/filestore/writer.go",
			Old: `	for _, r := range w.taken {
		r.done <- struct{}{} // the caller may recycle r from here on
	}
`,
			New: ``,
		}},
		Pkg: "./seqstore/filestore",
		Run: "^TestPowerLoss$",
	},
	{
		Name:   "crc-check",
		Breaks: "filestore accepts a log frame whose CRC does not match",
		Edits: []edit{{
			File: "seqstore/filestore/codec.go",
			Old:  `	if binary.LittleEndian.Uint32(frame[4:]) != frameCRC(gen, frame) {`,
			New:  `	if false && binary.LittleEndian.Uint32(frame[4:]) != frameCRC(gen, frame) {`,
		}},
		Pkg: "./seqstore/filestore",
		Run: "^(TestTornTailEveryOffset|TestCorruptMiddleFrame)$",
	},
	{
		Name:   "snapshot-fsync",
		Breaks: "filestore renames a snapshot into place without fsyncing it (review2 plant ST5)",
		Edits: []edit{{
			File: "seqstore/filestore/writer.go",
			Old: `	err = writeSnapshot(bw, head, parked, refs)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = s.sync(f)
	}`,
			New: `	err = writeSnapshot(bw, head, parked, refs)
	if err == nil {
		err = bw.Flush()
	}`,
		}},
		Pkg: "./seqstore/filestore",
		Run: "^(TestSnapshotSyncOrder|TestPowerLoss)$",
	},
	{
		Name:   "fdatasync-error",
		Breaks: "filestore drops the error of a log frame's fdatasync and acknowledges the commit (review2 plant ST6)",
		Edits: []edit{{
			File: "seqstore/filestore/writer.go",
			Old:  `		err = s.fs.syncData(w.f)`,
			New:  `		s.fs.syncData(w.f)`,
		}},
		Pkg: "./seqstore/filestore",
		Run: "^TestSyncFailures$",
	},
	{
		Name:   "unfinished-log-left",
		Breaks: "filestore leaves behind a new log whose header it could not sync: every later snapshot fails to create it",
		Edits: []edit{{
			File: "seqstore/filestore/writer.go",
			Old: `		_ = f.Close()
		_ = s.fs.remove(s.root, name)
		return nil, err`,
			New: `		_ = f.Close()
		return nil, err`,
		}},
		Pkg: "./seqstore/filestore",
		Run: "^TestSyncFailures$",
	},
	{
		Name:   "readonly-repairs",
		Breaks: "filestore opened ReadOnly truncates a torn log tail as a writable Open does: an operator's look changes the store",
		Edits: []edit{{
			File: "seqstore/filestore/recover.go",
			Old:  `		if end < len(data) && s.opts.ReadOnly {`,
			New:  `		if end < len(data) && false {`,
		}},
		Pkg: "./seqstore/filestore",
		Run: "^TestReadOnly$",
	},
	{
		Name:   "lock-not-regular",
		Breaks: "filestore opens LOCK whatever it is: a FIFO or a device is accepted (review2 plant H1)",
		Edits: []edit{{
			File: "seqstore/filestore/store.go",
			Old:  `	return openRegular(dir, lockName, os.O_RDWR|os.O_CREATE, 0o600)`,
			New:  `	return dir.OpenFile(lockName, os.O_RDWR|os.O_CREATE|oNoFollow, 0o600)`,
		}},
		Pkg: "./seqstore/filestore",
		Run: "^TestNonRegularFiles$/_as_LOCK$",
	},
	{
		Name:   "log-not-regular",
		Breaks: "filestore reads a log or snapshot that is not a regular file: a FIFO hangs Open, a device is read",
		// openRegular looks before it opens and at what it opened: the
		// break drops both (either alone is covered by the other since
		// the os.Root rewrite, and survived a rotation of .ci/run).
		Edits: []edit{{
			File: "seqstore/filestore/store.go",
			Old:  `	if info, err := dir.Lstat(name); err == nil && !info.Mode().IsRegular() {`,
			New:  `	if info, err := dir.Lstat(name); false && err == nil && !info.Mode().IsRegular() {`,
		}, {
			File: "seqstore/filestore/store.go",
			Old:  `	if err == nil && !info.Mode().IsRegular() {`,
			New:  `	if false && err == nil && !info.Mode().IsRegular() {`,
		}},
		Pkg: "./seqstore/filestore",
		Run: "^TestNonRegularFiles$/_as_(only_log|older_log|snapshot)$",
	},
	{
		Name:   "cursors-not-durable",
		Breaks: "filestore Cursors does not wait for the fsync of a frame being written: it returns a cursor a crash can take away (blind round 2026-12-04 #19)",
		Edits: []edit{{
			File: "seqstore/filestore/store.go",
			Old: `	if err := s.awaitDurable(ctx, wait); err != nil {
		return nil, fmt.Errorf("filestore: cursors: %w", err)
	}
`,
			New: `	_ = wait
`,
		}},
		Pkg: "./seqstore/filestore",
		Run: "^TestCursorsWaitForFsync$",
	},
	{
		Name:   "lua-cas",
		Breaks: "redisstore's advance script applies every move without comparing the stored cursor with From",
		Edits: []edit{{
			File: "seqstore/redisstore/scripts.go",
			Old:  `    if status[i] == '' and (e ~= ARGV[b + 1] or n ~= ARGV[b + 2] or o ~= ARGV[b + 3]) then`,
			New:  `    if false then`,
		}},
		Pkg:   "./seqstore/redisstore",
		Run:   "^TestConformance$",
		Needs: []string{"INORDER_TEST_REDIS_ADDR"},
	},
	{
		Name:   "lua-cas-receivers",
		Breaks: "the same break, against two receivers racing over the real Redis",
		Edits: []edit{{
			File: "seqstore/redisstore/scripts.go",
			Old:  `    if status[i] == '' and (e ~= ARGV[b + 1] or n ~= ARGV[b + 2] or o ~= ARGV[b + 3]) then`,
			New:  `    if false then`,
		}},
		Pkg:   "./internal/crashtest",
		Run:   "^TestFaultSecondReceiver$/^redis$",
		Needs: []string{"INORDER_TEST_REDIS_ADDR"},
	},
	{
		Name:   "sql-cas",
		Breaks: "sqlstore reads the cursor rows it compares without locking them (no FOR UPDATE)",
		Edits: []edit{{
			File: "seqstore/sqlstore/apply.go",
			Old:  `	return " FOR UPDATE"`,
			New:  `	return ""`,
		}},
		// TestFaultSecondReceiver/postgres catches it only when two
		// receivers' commits happen to interleave; this test forces the order.
		Pkg:   "./seqstore/sqlstore",
		Run:   "^TestAdvanceCASWaitsForRowLock$/^postgres$",
		Needs: []string{"INORDER_TEST_POSTGRES_DSN"},
	},
	{
		Name:   "sql-rerun-unknown-commit",
		Breaks: "sqlstore re-runs one by one the calls of a group transaction whose COMMIT failed with an unknown outcome: a reservation that committed is applied twice (blind round 2026-12-04 #24)",
		Edits: []edit{{
			File: "seqstore/sqlstore/batch.go",
			Old: `	err, unknown := s.runTx(ops)
	if err != nil && !unknown && len(ops) > 1 {`,
			New: `	err, _ := s.runTx(ops)
	if err != nil && len(ops) > 1 {`,
		}},
		Pkg: "./seqstore/sqlstore",
		Run: "^TestGroupCommitUnknownOutcomeNotRerun$",
	},
	{
		Name:   "bench-best-of-rounds",
		Breaks: "examples/bench -count keeps each row's fastest run and divides the rows shown: a ratio can mix two rounds",
		Edits: []edit{{
			File: "examples/bench/rounds.go",
			Old:  `		if runs[0].Ratio > 0 {`,
			New:  `		if false {`,
		}, {
			File: "examples/bench/rounds.go",
			Old:  `		k := order[(len(order)-1)/2]`,
			New:  `		k := order[len(order)-1]`,
		}, {
			File: "examples/bench/rounds.go",
			Old: `		out[i] = r
	}
	return out
}`,
			New: `		out[i] = r
	}
	for _, r := range out {
		r.baseRate, r.Ratio, r.CPURatio = 0, 0, 0
	}
	withRatios(selected, out)
	return out
}`,
		}},
		Pkg: "./examples/bench",
		Run: "^TestRoundsRatioFromOneRound$",
	},
	{
		Name:   "mac-compare-constant-time",
		Breaks: "a header's MAC is compared with == instead of hmac.Equal (review2 plant EN2: only the source can show it)",
		Edits: []edit{{
			File: "internal/envelope/envelope.go",
			Old:  `		if hmac.Equal(want[:], h.MAC[:]) {`,
			New:  `		if want == h.MAC {`,
		}},
		Pkg: "./internal/envelope",
		Run: "^TestMACsComparedInConstantTime$",
	},
	{
		Name:   "mac-skips-metadata",
		Breaks: "a v2 header's MAC leaves out its metadata block: a changed traceparent or user metadata still verifies",
		Edits: []edit{{
			File: "internal/envelope/envelope.go",
			Old: `		m.Write(b)
		m.Write(h.Meta)`,
			New: `		m.Write(b)`,
		}},
		Pkg: "./internal/envelope",
		Run: "^TestMetadataMAC$",
	},
	{
		Name:   "fanout-stops-at-failed-push",
		Breaks: "the emulator's topic fan-out stops at the first failed push: later subscriptions get nothing (review2 plant EM2)",
		Edits: []edit{{
			File: "ordered/mnsqueue/mnstest/topic_ops.go",
			Old: `			failed, reasons = append(failed, p), append(reasons, reason)
		}`,
			New: `			failed, reasons = append(failed, p), append(reasons, reason)
			break
		}`,
		}},
		Pkg: "./ordered/mnsqueue/mnstest",
		Run: "^TestTopicFanOutPastFailedPush$",
	},
	{
		Name:   "cap-lost-extension-answer",
		Breaks: "an extension whose answer was lost is taken as not applied: the cap stops counting the message before the queue does",
		Edits: []edit{{
			File: "internal/recvcore/visibility.go",
			Old: `		if applied(err) {
			m.setVisibleAt(maxTime(m.visibleAt(), now.Add(v.timeout)))
		}`,
			New: `		_ = applied(err)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestFailedExtensionCountsUntilItsEnd$",
	},
	{
		Name:   "cap-late-shortening",
		Breaks: "a shortening queued behind the request budget is sent when the visibility has nearly ended: it lengthens it",
		Edits: []edit{{
			File: "internal/recvcore/visibility.go",
			Old:  `		if !c.worthShortening(c.now, e.until) {`,
			New:  `		if false && !c.worthShortening(c.now, e.until) {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestLateShorteningIsDropped$",
	},
	{
		Name:   "hold-slack",
		Breaks: "an extension may carry a hold to MaxHold exactly: applied late, it carries it past",
		Edits: []edit{{
			File: "internal/recvcore/visibility.go",
			Old:  `int64(c.cfg.MaxHold-c.holdSlack())`,
			New:  `int64(c.cfg.MaxHold)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestHoldSlackCoversALateExtension$",
	},
	{
		Name:   "idle-spares-kept",
		Breaks: "an idle Core keeps its spare msgs (up to 750 KB) for good",
		Edits: []edit{{
			File: "internal/recvcore/core.go",
			Old:  `c.pool.spare = nil`,
			New:  `c.pool.spare = c.pool.spare[:len(c.pool.spare):len(c.pool.spare)]`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestIdleCoreDropsItsSpares$|^TestReview13_SparesKeptWhenDeletesOutlastCompaction$",
	},
	{
		Name:   "zombie-deletes-parked-copy",
		Breaks: "another message with a parked seq is deleted: a receiver whose lease ended deletes the copy a newer owner sent back",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old:  `case h.has(fStored) && h.id == m.id:`,
			New:  `case h.has(fStored):`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview13_WorldZombieDeletesRequeued$|^TestAnotherCopyOfAParkedSeqIsReleased$",
	},
	{
		Name:   "hold-slack-short",
		Breaks: "the hold's slack a hundredth of MaxHold (12 s of 20m): an extension applied 45 s late carries the hold past MaxHold",
		Edits: []edit{{
			File: "internal/recvcore/visibility.go",
			Old:  `return min(maxHold/10, time.Minute)`,
			New:  `return min(maxHold/100, time.Minute)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview13_HoldSlackAtTheBoundary$",
	},
	{
		Name:   "hold-due-no-slack",
		Breaks: "a hold whose visibility outlasts it ends at MaxHold exactly: its shortening, applied late, ends past MaxHold",
		Edits: []edit{{
			File: "internal/recvcore/visibility.go",
			Old:  `return time.Unix(0, m.since).Add(c.cfg.MaxHold - c.holdSlack())`,
			New:  `return time.Unix(0, m.since).Add(c.cfg.MaxHold)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview13_HoldDueKeepsTheSlack$",
	},
	{
		Name:   "amo-abandon-takes-back",
		Breaks: "an AtMostOnce hand-out abandoned before its commit went out is passed over by that commit (its park dropped) instead of taken back",
		Edits: []edit{{
			File: "internal/recvcore/deliver.go",
			Old:  `	case m.out == outCommit && m.g != nil && !m.g.writing && m.g.uncertain == nil:`,
			New:  `	case false:`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestAMOAbandonBeforeCommitTakesBack$",
	},
	{
		Name:   "amo-abandon-not-in-line",
		Breaks: "an AtMostOnce hand-out taken back by Abandon before its commit went out is not put back in line: it waits for another event of its group (found 2026-12-05, old)",
		Edits: []edit{{
			File: "internal/recvcore/deliver.go",
			Old:  `			c.update(g, now) // next in line again`,
			New:  `			_ = now`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestAMOAbandonBeforeCommitTakesBack$",
	},
	{
		Name:   "amo-no-carve",
		Breaks: "an AtMostOnce late arrival of a skipped seq is handed out without carving the seq out of its range: a later copy (a duplicate send) is late again at the next receiver and handed out twice (TestRev3_AMOCleanClosesLoseNothing's rare duplicate, found 2026-12-05)",
		Edits: []edit{{
			File: "internal/recvcore/carve.go",
			Old:  `	if c.cfg.Mode != AtMostOnce || c.cfg.DeadLetter || m.has(fStored) ||`,
			New:  `	if true || c.cfg.Mode != AtMostOnce || c.cfg.DeadLetter || m.has(fStored) ||`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestScripts$",
	},
	{
		Name:   "carve-not-skipped-again",
		Breaks: "a carved AtMostOnce message given back before the application settled it (Close, release) leaves its seq unskipped: the next receiver deletes its copy as a duplicate, never handed out",
		Edits: []edit{{
			File: "internal/recvcore/msg.go",
			Old:  `		c.uncarve(m, m.where == wOut)`,
			New:  `		c.uncarve(m, false)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestScripts$",
	},
	{
		Name:   "carve-not-pinned",
		Breaks: "a group with a carve in flight goes idle and is dropped: the carve is lost and the message waits for ever",
		Edits: []edit{{
			File: "internal/recvcore/group.go",
			Old:  `g.startAt.IsZero() && !behind(g.dur, g.ack) && g.phase == phActive && !g.pinned`,
			New:  `g.startAt.IsZero() && !behind(g.dur, g.ack) && g.phase == phActive`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestScripts$",
	},
	{
		Name:   "carve-copy-deleted",
		Breaks: "a copy of a carved message the application has not settled is taken for a duplicate and deleted: the same queue message received again is deleted under the receiver that holds it",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old:  `			if h := c.unord.held[key]; h != nil && h.has(fCarve) {`,
			New:  `			if h := c.unord.held[key]; false && h != nil && h.has(fCarve) {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestScripts$",
	},
	{
		Name:   "carve-behind-conflict-kept",
		Breaks: "a conflict whose stored cursor is behind this receiver's acknowledged one keeps a carve the other receiver already made: both hand the seq out (review16)",
		Edits: []edit{{
			File: "internal/recvcore/reads.go",
			Old: `		c.recarve(g, cur, false)
		c.markDirty(g)`,
			New: `		c.markDirty(g)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview16_ConflictBehindAckHandsOutOthersCarve$",
	},
	{
		Name:   "carve-failed-group-kept",
		Breaks: "a carve whose group stops on a store error is never resolved: its Receive waits for ever and the group stays pinned (review16)",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old:  `	c.dropCarves(g, err)`,
			New:  `	_ = err`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview16_FailedCarve",
	},
	{
		Name:   "carve-not-during-uncertain",
		Breaks: "a late arrival handed out while its group's commit has an unknown outcome is not carved: the next receiver hands a duplicate send of it out again (review16)",
		Edits: []edit{{
			File: "internal/recvcore/carve.go",
			Old:  `	if m.epoch == g.epoch && skippedIn(g.dur, r) && skippedIn(g.ack, r) {`,
			New:  `	if g.uncertain == nil && m.epoch == g.epoch && skippedIn(g.dur, r) && skippedIn(g.ack, r) {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview16_LateHandOutDuringAmbiguousCommitNotCarved$",
	},
	{
		Name:   "recover-resends-sent-during-read",
		Breaks: "Recover takes a journal entry that this process sent while the journal was read (its Sent mark buffered, its group since dropped from the sender's books) for an earlier process's, and sends a copy (TestReview8RecoverBusyGroupLivelock: 790 where 1 was due, under CI's load)",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `			case s.markedSent(&sent, key):`,
			New:  `			case false && s.markedSent(&sent, key):`,
		}},
		Pkg: "./ordered",
		Run: "^TestRecoverSkipsWhatWasSentDuringItsRead$",
	},
	{
		Name:   "sent-marks-dropped-on-failure",
		Breaks: "Sent marks whose store call failed are dropped, not buffered again: Recover takes the messages they name for an earlier process's and sends copies (review of 9920f34, finding C)",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `			s.marks.putBack(keys, batch)`,
			New:  `			_ = keys`,
		}},
		Pkg: "./ordered",
		Run: "^TestRevRecoverCopiesWhenItsFlushFails$",
	},
	{
		Name:   "failed-group-adopts-stored",
		Breaks: "an AtLeastOnce group stopped by a store error adopts the stored cursor when read again although nobody moved it: what the application acknowledged is handed out again, after its successor (world model with permanent store errors: [order])",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old: `	if g.kept {
		c.resumeFailed(g, now, cur)`,
			New: `	if false {
		c.resumeFailed(g, now, cur)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestFailedGroupKeepsAcknowledged$|^TestScripts$",
	},
	{
		Name:   "failed-group-flushed-early",
		Breaks: "a clean Close is done while an AtLeastOnce group stopped by a store error has an acknowledged advance unwritten: the next receiver hands the messages out again ([close-durable])",
		Edits: []edit{{
			File: "internal/recvcore/close.go",
			Old:  `		if g.phase == phFailed && !g.cold() && g.kept {`,
			New:  `		if false {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestFailedGroupKeepsAcknowledged$",
	},
	{
		Name:   "failed-group-gives-back-acked",
		Breaks: "an AtLeastOnce group stopped by a store error gives back the messages acknowledged and waiting for their commit, which its retry writes ([held-lapse])",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old: `	if !keep {
		c.dropSettled(g, release)
	}`,
			New: `	c.dropSettled(g, release)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestFailedGroupKeepsAcknowledged$",
	},
	{
		Name:   "failed-group-keeps-again",
		Breaks: "a group stopped again by a store error before what it kept was durable keeps again: its kept receipts pin MaxUndeleted for as long as the store refuses it, and grow with each retry (review of a13399d, B)",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old:  `	return c.cfg.Mode == AtLeastOnce && g.phase != phFailed && !g.kept && !sameCursor(g.ack, g.dur)`,
			New:  `	return c.cfg.Mode == AtLeastOnce && !sameCursor(g.ack, g.dur)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestRevKeepFailedGroupPinsCap$|^TestRevKeepFailingWritesGrowHeld$",
	},
	{
		Name:   "loaded-next-at-out",
		Breaks: "a group whose cursor is read again while the seq the store expects next is out stays at that seq: once its Ack is durable, it waits for ever for a seq below its cursor (review of a13399d, D)",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old:  `	g.goOnFrom(cur) // past the seq out too (review of a13399d, D)`,
			New:  `	g.epoch, g.next = cur.Epoch, max(cur.Next, 1)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestRevKeepFailedWithOutStallsAfterLoad$",
	},
	{
		Name:   "loaded-tickets-unresolved",
		Breaks: "SyncAcks made while a group was stopped by a store error, whose advance will not be written once it adopts the stored cursor, never resolve (review of a13399d, C)",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old: `	c.resolveDurable(g)
	c.refuseTickets(g)`,
			New: `	c.resolveDurable(g)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestRevKeepSyncAckAfterStopNeverResolves$",
	},
	{
		Name:   "loaded-stays-forced",
		Breaks: "an ExactlyOnce group whose forced write (a skip, a dead letter's advance) the store refused for good stays forced once its cursor is read again: it hands nothing out for ever ([liveness/eo-dead-letter] with permanent store errors)",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old: `	// liveness/eo-dead-letter with permanent store errors).
	g.forced = false`,
			New: `	// liveness/eo-dead-letter with permanent store errors).`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestRepairSkipHoleRefusedExactlyOnce$",
	},
	{
		Name:   "failed-amo-uncertain-released",
		Breaks: "an AtMostOnce hand-out whose commit's outcome is unknown, ended by a store error that stops its group, is released with no skip mark owed: if the commit took effect, its copy is deleted as a duplicate, unseen (world model with reads failing for good)",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old:  `		case g.uncertain == nil || !below(*g.uncertain, m.epoch, m.seq):`,
			New:  `		case true:`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestFailedAMOUncertainHandOutNotLost$",
	},
	{
		Name:   "owed-lost-on-reload",
		Breaks: "a skip mark owed (an AtMostOnce message committed or carved and never handed out) whose write failed for good is dropped when the group's cursor is read again: the next receiver deletes the message as a duplicate, unseen (review17, old for skipOwed)",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old: `	c.carryOwed(g)
	g.goOnFrom(cur) // past the seq out too`,
			New: `	g.goOnFrom(cur) // past the seq out too`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview17_FailedReskipLosesCarvedMessage$",
	},
	{
		Name:   "carve-no-wait",
		Breaks: "a late arrival to carve whose group is not active at its hand-out (a cursor read again after a conflict or a store error) is not made to wait for it",
		Edits: []edit{{
			File: "internal/recvcore/carve.go",
			Old: `	if g.phase != phActive {
		cs := c.carveOf(g)`,
			New: `	if false {
		cs := c.carveOf(g)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestCarveWaitsForItsGroup$",
	},
	{
		Name:   "owed-mark-flushed-early",
		Breaks: "Close is done (Flushed) while a group stopped by a store error owes a skip mark: Close returns nil and the next receiver deletes the AtMostOnce message as a duplicate, unseen",
		Edits: []edit{{
			File: "internal/recvcore/close.go",
			Old:  `		if g.phase == phFailed && !g.cold() && len(g.owed) > 0 {`,
			New:  `		if false {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview17_FailedReskipLosesCarvedMessage$",
	},
	{
		Name:   "signed-run-counter",
		Breaks: "signed runs of several messages go through the header counter, which panics on a signed header (blind plant #14)",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `	count := !s.signed() && len(items) > 1 && r.metas == 0`,
			New:  `	count := len(items) > 1 && r.metas == 0`,
		}},
		Pkg: "./ordered",
		Run: "^TestSignedSendBatch$",
	},
	{
		Name:   "journal-drops-metadata",
		Breaks: "the send journal keeps the payload but not the metadata: a message recovered after a failed send loses its trace context",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `			run.frame = appendEntry(run.frame[:0], it.meta, it.payload)`,
			New:  `			run.frame = appendEntry(run.frame[:0], nil, it.payload)`,
		}, {
			File: "ordered/send.go",
			Old:  `			buf = appendEntry(buf, it.meta, it.payload)`,
			New:  `			buf = appendEntry(buf, nil, it.payload)`,
		}},
		Pkg: "./ordered",
		Run: "^TestMetadataRecovered$",
	},
	{
		Name:   "otel-group-cap-loose",
		Breaks: "PerGroup lets one group more than MaxGroups have a series of its own (the cardinality cap is off by one)",
		Edits: []edit{{
			File: "ordered/otelinorder/metrics.go",
			Old: `	if l.n.Load() >= l.max {
		return &l.other
	}
	l.mu.Lock()`,
			New: `	if l.n.Load() > l.max {
		return &l.other
	}
	l.mu.Lock()`,
		}, {
			File: "ordered/otelinorder/metrics.go",
			Old: `	if l.n.Load() >= l.max {
		return &l.other
	}
	g := &groupLabel`,
			New: `	if l.n.Load() > l.max {
		return &l.other
	}
	g := &groupLabel`,
		}},
		Pkg: "./ordered/otelinorder",
		Run: "^TestMetricsPerGroupCap$",
	},
	{
		Name:   "otel-stuck-cause-dropped",
		Breaks: "the stuck-groups gauge loses its cause: every stuck group is reported under one series",
		Edits: []edit{{
			File: "ordered/otelinorder/observe.go",
			Old:  `			count[g.Reason]++`,
			New:  `			count["poison"]++`,
		}},
		Pkg: "./ordered/otelinorder",
		Run: "^TestMetricsStuckGap$",
	},
	{
		Name:   "amo-first-stale-delete-taken-as-own",
		Breaks: "AtMostOnce takes a first delete found stale for its own applied delete and hands the Unordered message out (blind plant #10)",
		Edits: []edit{{
			File: "internal/recvcore/deletes.go",
			Old:  `	ownDelete := r.Stale && m.tries > 0 && `,
			New:  `	ownDelete := r.Stale && `,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestAMOUnorderedFirstDeleteStaleRefused$",
	},
	{
		Name:   "epoch-ahead-allowance",
		Breaks: "an epoch ahead of the receiver's clock is refused even within MaxEpochAhead (blind plant #8)",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old:  `	return ms > now.Add(ahead).UnixMilli()`,
			New:  `	return ms > now.UnixMilli()`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestEpochAheadAllowance$",
	},
	{
		Name:   "park-limit-ignored",
		Breaks: "an early arrival is parked whatever the park limits say (a sender without a key fills the store's disk)",
		Edits: []edit{{
			File: "internal/recvcore/parkcap.go",
			Old:  `	over := func(limit, have, add int64) bool { return limit > 0 && add > 0 && have+add > limit }`,
			New:  `	over := func(limit, have, add int64) bool { return false }`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestParkLimits$",
	},
	{
		Name:   "park-count-never-passed",
		Breaks: "a durable commit does not take the parks it passed off the count: the limits fill for good and parking stops",
		Edits: []edit{{
			File: "internal/recvcore/commits.go",
			Old:  "\tg.dur = to\n\tc.passParks(g)\n",
			New:  "\tg.dur = to\n",
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestParkLimits$",
	},
	{
		Name:   "start-lowest-passes-first-time",
		Breaks: "StartLowest passes over a lowest seq received for the first time when the next seq seen lies more than Window above it (blind plant #2)",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old:  `second-low.seq > window && low.dequeue > 1`,
			New:  `second-low.seq > window && low.dequeue >= 1`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestStartLowestKeepsFirstTimeLowest$",
	},
	{
		Name:   "epoch-switch-skips-intermediate",
		Breaks: "with two newer epochs waiting, the group switches to the highest one: the intermediate epoch is handed out after it (blind plant #9)",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old:  `	if g.newerEpoch == 0 || m.epoch < g.newerEpoch {`,
			New:  `	if g.newerEpoch == 0 || m.epoch > g.newerEpoch {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestEpochSwitchTakesIntermediateEpochFirst$",
	},
	{
		Name:   "delete-timeout-not-retried",
		Breaks: "a delete that outlasts ReapTimeout is not retried: the message stays in the queue until its visibility ends (blind plant #15)",
		Edits: []edit{{
			File: "ordered/recv_io.go",
			Old:  `Retry: r.q.drv.IsRetryable(e) || ctx.Err() != nil && r.ctx.Err() == nil,`,
			New:  `Retry: r.q.drv.IsRetryable(e),`,
		}},
		Pkg: "./ordered",
		Run: "^TestDeleteRetriedAfterReapTimeout$",
	},
	{
		Name:   "mns-delete-unmatched-counted-deleted",
		Breaks: "an MNS batch delete failure naming no receipt of the batch: the entries it does not name count as deleted (blind plant #25)",
		Edits: []edit{{
			File: "ordered/mnsqueue/mnsqueue.go",
			Old:  "\t\t\tunmatched = true\n",
			New:  "",
		}},
		Pkg: "./ordered/mnsqueue",
		Run: "^TestBatchDeleteUnmatchedFailure$",
	},
	{
		Name:   "park-transient-taken-as-done",
		Breaks: "a transient park failure is taken as done: the message is deleted from the queue before its park is durable (issue 20's crash-harness plant)",
		Edits: []edit{{
			File: "internal/recvcore/park.go",
			Old:  "\tswitch {\n\tcase e == nil:\n\t\tc.st.Parked++",
			New:  "\tswitch {\n\tcase e == nil || !conflict && !errors.Is(e, seqstore.ErrAborted) && !(e != err && permanent(e)):\n\t\tc.st.Parked++",
		}},
		Pkg:     "./internal/crashtest",
		Run:     "^TestFaultStoreChaos$",
		Timeout: 3 * time.Minute,
		Cost:    time.Minute,
	}, {
		Name:   "start-lowest-keeps-highest",
		Breaks: "StartLowest, with more first arrivals than its window holds while it settles, keeps the highest and gives back the lower: the group starts past seqs that were present (review 2's plant RC6)",
		Edits: []edit{{
			File: "internal/recvcore/route.go",
			Old:  `if m.epoch > h.epoch || m.epoch == h.epoch && m.seq >= h.seq {`,
			New:  `if m.epoch > h.epoch || m.epoch == h.epoch && m.seq <= h.seq {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestStartLowestFullWindowKeepsLowest$",
	},
	{
		Name:   "commit-lane-change-unmarked",
		Breaks: "the first advance queued does not mark the commit lane changed: Ready and Deadline keep its stale due time and the commit waits for an unrelated change",
		Edits: []edit{{
			File: "internal/recvcore/commits.go",
			Old:  "\t\tl.changed = true // due now (a group behind others queued changes nothing)\n",
			New:  "",
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestModel$",
	},
	{
		Name:   "delete-lane-change-unmarked",
		Breaks: "the first receipt queued does not mark the delete lane changed: Ready and Deadline keep its stale due time and the delete waits for an unrelated change",
		Edits: []edit{{
			File: "internal/recvcore/deletes.go",
			Old:  "\t\tl.changed = true // due now (a receipt behind others queued changes nothing)\n",
			New:  "",
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestModel$",
	},
	{
		Name:   "stuck-group-compacted",
		Breaks: "a stuck group that holds nothing is compacted: its stuck report is cold state, and Stats/StuckStatus dereference nil (review 12)",
		Edits: []edit{{
			File: "internal/recvcore/phase.go",
			Old:  "\t\tif g.cold() || !g.empty() || g.stuck != \"\" {\n",
			New:  "\t\tif g.cold() || !g.empty() {\n",
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview12StatsAfterStuckGroupCompacted$",
	},
	{
		Name:   "no-margin-short-deadline",
		Breaks: "with VisibilityMargin -1 a released message's shortening makes a deadline that ready never serves before Close: due every step, a busy loop (review 12)",
		Edits: []edit{{
			File: "internal/recvcore/visibility.go",
			Old:  "\tif l.shortq.len() > 0 && c.cfg.VisibilityMargin >= 0 && (at.IsZero() || token.Before(at)) {\n",
			New:  "\tif l.shortq.len() > 0 && (at.IsZero() || token.Before(at)) {\n",
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview12NoMarginBusyLoop$",
	},
	{
		Name:   "urgent-delete-cleared-at-limit",
		Breaks: "an urgent delete at the in-flight limit loses its urgency and waits ReapInterval after a slot frees (review 12)",
		Edits: []edit{{
			File: "internal/recvcore/deletes.go",
			Old:  "\tif wasDue && l.q.len() == 0 {\n",
			New:  "\tif wasDue {\n",
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview12UrgentDeleteAtLimit$",
	},
	{
		Name:   "syncack-before-durable",
		Breaks: "a SyncAck resolves once the group's acks reach its target, before the cursor past it is durable (review 2's plant RC7)",
		Edits: []edit{{
			File: "internal/recvcore/commits.go",
			Old:  `		if behind(g.dur, w.target) {`,
			New:  `		if behind(g.ack, w.target) {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestWorldKnownDefects$",
	},
	{
		Name:   "room-ignores-released",
		Breaks: "messages given back but still invisible no longer count against the held cap: the receiver fetches past what the service counts (review 2's plant RC8)",
		Edits: []edit{{
			File: "internal/recvcore/budget.go",
			Old:  `room := c.cfg.MaxHeld - b.live - b.stillReleased(now)`,
			New:  `room := c.cfg.MaxHeld - b.live`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestFetchFailedCountsAgainstCap$|^TestFailedExtensionCountsUntilItsEnd$",
	},
	{
		Name:   "held-dropped-from-visibility",
		Breaks: "a message held for its turn leaves the visibility list: it is never extended, lapses and comes back (issue 20's crash-harness plant)",
		Edits: []edit{{
			File: "internal/recvcore/msg.go",
			Old:  "\tm.where = wHeld\n\tc.budget.buffer(m)\n",
			New:  "\tm.where = wHeld\n\tc.vis.list.remove(m)\n\tc.budget.buffer(m)\n",
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestFaultCapAtThreshold$/^hold$",
		Cost: 30 * time.Second,
	},
	{
		Name:   "visibility-receipt-ignored-core",
		Breaks: "the core keeps the old receipt after a visibility change: the next change and the delete use a receipt the queue replaced (issue 20's crash-harness plant)",
		Edits: []edit{{
			File: "internal/recvcore/visibility.go",
			Old:  "\tm.receipt = receipt\n\tm.setVisibleAt(now.Add(v.timeout))\n",
			New:  "\tm.setVisibleAt(now.Add(v.timeout))\n",
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestFaultCapAtThreshold$/^hold$",
		Cost: 30 * time.Second,
	},
	{
		Name:   "visibility-receipt-ignored-shell",
		Breaks: "the shell hands the core the receipt it sent, not the one the visibility change returned (issue 20's crash-harness plant)",
		Edits: []edit{{
			File: "ordered/recv_io.go",
			Old:  `r.core.Visibility(now, v.ID, receipt, err)`,
			New:  `_ = receipt; r.core.Visibility(now, v.ID, v.Receipt, err)`,
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestFaultCapAtThreshold$/^hold$",
		Cost: 30 * time.Second,
	},
	{
		Name:   "room-ignores-released-harness",
		Breaks: "messages given back but still invisible no longer count against the held cap, judged by the emulator's consumption threshold set one above the cap (review 2's plant RC8, issue 20's crash-harness plant)",
		Edits: []edit{{
			File: "internal/recvcore/budget.go",
			Old:  `room := c.cfg.MaxHeld - b.live - b.stillReleased(now)`,
			New:  `room := c.cfg.MaxHeld - b.live`,
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestFaultCapAtThreshold$/^give-back$",
		Cost: 30 * time.Second,
	},
	{
		Name:   "fetchers-not-sharing-room",
		Breaks: "each fetcher takes the core's whole room, not what the other fetchers left: together they receive past the cap (issue 20's crash-harness plant)",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old:  `n := min(r.coreRoom-r.fetching, r.q.limits.MaxBatch)`,
			New:  `n := min(r.coreRoom, r.q.limits.MaxBatch)`,
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestFaultCapAtThreshold$/^give-back$",
		Cost: 30 * time.Second,
	},
	{
		Name:   "syncack-before-durable-harness",
		Breaks: "a SyncAck resolves once the group's acks reach its target, before the cursor past it is durable (review 2's plant RC7, in the harness: over the emulator, a store that answers Advance late)",
		Edits: []edit{{
			File: "internal/recvcore/commits.go",
			Old:  `		if behind(g.dur, w.target) {`,
			New:  `		if behind(g.ack, w.target) {`,
		}},
		Pkg: "./internal/crashtest",
		Run: "^TestFaultSyncAckWaitsForStore$",
	},
	{
		Name:   "failed-sends-marked-sent",
		Breaks: "a send that failed after its seq was reserved is marked sent: its journal entry is dropped and Recover never sends it, a hole its group never gets past (issue 20's crash-harness plant)",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `	s.dispatch(s.settle(items, err))`,
			New:  "\ts.marks.add(items)\n\ts.dispatch(s.settle(items, err))",
		}},
		Pkg:  "./internal/crashtest",
		Run:  "^TestCrash$/^alo$",
		Cost: 2 * time.Minute,
	},
	{
		Name:   "repair-skip-not-durable",
		Breaks: "SkipHole moves the group past its hole and answers at once, without writing the skipped range: a crash forgets the skip, and the skip is not durable when SkipHole returns",
		Edits: []edit{{
			File: "internal/recvcore/gap.go",
			Old: `	if asked {
		c.repairsDurable(g, repairSkip, seqstore.Cursor{Epoch: g.epoch, Next: target})
		c.writeRepair(g)
	} else {`,
			New: `	if asked {
		c.endRepairs(g, repairSkip, nil)
	} else {`,
		}},
		Pkg: "./ordered",
		Run: "^TestRepairSkipHoleEndToEnd$",
	},
	{
		Name:   "repair-delete-before-dead-letter",
		Breaks: "DeadLetterHead deletes the poison message from the queue as it asks for its dead-letter copy: a failed send loses it",
		Edits: []edit{{
			File: "internal/recvcore/repair.go",
			Old: `		m.deadOut()
		c.queueDead(m)`,
			New: `		m.deadOut()
		c.deletes.push(now, &msg{receipt: m.receipt, visible: m.visible, where: wDelete})
		c.queueDead(m)`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestRepairDeadLetterHead$",
	},
	{
		Name:   "send-failed-not-recorded",
		Breaks: "a failed send is not recorded as failed: with another message of its group in flight Recover takes it for in flight, and during the group's next reservation for possibly that reservation's; either way it is never sent (blind round 2026-12-04, #12; CI's TestCrash/alo, 2026-12-05)",
		Edits: []edit{{
			File: "ordered/send.go",
			Old: `			if s.durable && it.seq != 0 && err != nil {
				s.recovery.items[recoverKey{it.group, it.epoch, it.seq}] = recoverFailed
			}`,
			New: ``,
		}},
		Pkg: "./ordered",
		Run: "^(TestSendRecoverWhileGroupLive|TestSendRecoverWhileGroupReserves)$",
	},
	{
		Name:   "dead-letter-failure-taken-as-done",
		Breaks: "a failed dead-letter send is reported as done: the poison message is deleted with no copy (blind round 2026-12-04, #13)",
		Edits: []edit{{
			File: "ordered/recv_io.go",
			Old:  "\terr := sendTo(ctx, r.o.DeadLetter, a.Bodies)\n\tr.step(func(now time.Time) { r.core.DeadLettered(now, a.ID, perBody(err, len(a.Bodies))) })",
			New:  "\t_ = sendTo(ctx, r.o.DeadLetter, a.Bodies)\n\tr.step(func(now time.Time) { r.core.DeadLettered(now, a.ID, perBody(nil, len(a.Bodies))) })",
		}},
		Pkg: "./ordered",
		Run: "^TestPoisonDeadLetterWaitsForTheCopy$",
	},
	{
		Name:   "maxhold-at-service-limit",
		Breaks: "MaxHold of exactly the service's 30 minutes is accepted (blind round 2026-12-04, #16)",
		Edits: []edit{{
			File: "ordered/receive_options.go",
			Old:  `case o.MaxHold < -1 || o.MaxHold >= 30*time.Minute:`,
			New:  `case o.MaxHold < -1 || o.MaxHold > 30*time.Minute:`,
		}},
		Pkg: "./ordered",
		Run: "^TestReceiveOptionsValidate$",
	},
	{
		Name:   "send-batch-overshoots-inflight",
		Breaks: "a batch is admitted while any in-flight room is left: MaxInFlight is overshot by up to a batch (blind round 2026-12-04, #17)",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `return s.room.inflight == 0 || s.room.inflight+n <= s.opts.MaxInFlight && s.room.inflightBytes+size <= s.opts.MaxInFlightBytes`,
			New:  `return s.room.inflight == 0 || s.room.inflight < s.opts.MaxInFlight && s.room.inflightBytes+size <= s.opts.MaxInFlightBytes`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendAdmissionFirstComeFirstServed$",
	},
	{
		Name:   "poison-one-attempt-late",
		Breaks: "PoisonDeadLetter dead-letters after MaxAttempts+1 failures, not MaxAttempts (blind round 2026-12-04, #3, caught)",
		Edits: []edit{{
			File: "internal/recvcore/deliver.go",
			Old:  `case int(m.attempt) >= c.cfg.MaxAttempts && c.cfg.Poison == PoisonDeadLetter:`,
			New:  `case int(m.attempt) > c.cfg.MaxAttempts && c.cfg.Poison == PoisonDeadLetter:`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestRev3_DeadLetterAfterRecycleSettlesAnotherMessage$",
	},
	{
		Name:   "redis-drop-at-cursor",
		Breaks: "redisstore's advance drops the parked entry at the new cursor too: the next message is lost (blind round 2026-12-04, #21, caught)",
		Edits: []edit{{
			File: "seqstore/redisstore/scripts.go",
			Old:  `local bound = '(' .. member(epoch, next)`,
			New:  `local bound = '[' .. member(epoch, next)`,
		}},
		Pkg: "./seqstore/redisstore",
		Run: "^TestAttack21DropRace$",
	},
	{
		Name:   "sql-drop-at-cursor",
		Breaks: "sqlstore's advance deletes the parked row at the new cursor too: the next message is lost (blind round 2026-12-04, #23, caught)",
		Edits: []edit{{
			File: "seqstore/sqlstore/apply.go",
			Old:  `const passedCond = "queue = ? AND grp = ? AND (epoch < ? OR epoch = ? AND seq < ?)"`,
			New:  `const passedCond = "queue = ? AND grp = ? AND (epoch < ? OR epoch = ? AND seq <= ?)"`,
		}},
		Pkg: "./seqstore/sqlstore",
		Run: "^TestAttack21DropRace$",
	},
	{
		Name:   "mns-next-visible-seconds",
		Breaks: "mnsqueue reads NextVisibleTime in seconds, not milliseconds: receipts look valid for millennia and visibility is never kept alive in time (blind round 2026-12-04, #26, caught)",
		Edits: []edit{{
			File: "ordered/mnsqueue/mnsqueue.go",
			Old:  `NextVisible:  time.UnixMilli(m.NextVisibleTime),`,
			New:  `NextVisible:  time.Unix(m.NextVisibleTime, 0),`,
		}},
		Pkg: "./ordered/mnsqueue",
		Run: "^TestReceiveFields$",
	},
	{
		Name:   "emulator-receipt-not-rotated",
		Breaks: "the emulator's ChangeMessageVisibility keeps the old receipt valid, unlike the service: the emulator would hide a receiver that ignores the new one (blind round 2026-12-04, #28, caught)",
		Edits: []edit{{
			File: "ordered/mnsqueue/mnstest/queue.go",
			Old:  "\tm.gen++\n\tm.visible = now + vt*second\n",
			New:  "\tm.visible = now + vt*second\n",
		}},
		Pkg:  "./ordered/mnsqueue/mnstest",
		Run:  "^TestQueueModel$",
		Cost: time.Minute,
	},
	{
		Name:   "mac-skips-seq",
		Breaks: "the header MAC does not cover the seq: a signed body replayed under another seq verifies (blind round 2026-12-04, #29, caught)",
		Edits: []edit{{
			File: "internal/envelope/envelope.go",
			Old:  "\tb = binary.BigEndian.AppendUint64(b, h.Seq)\n\tif len(h.Meta) > 0 {",
			New:  "\tif len(h.Meta) > 0 {",
		}},
		Pkg: "./internal/envelope",
		Run: "^TestSec3MACMutations$",
	},
	{
		Name:   "batcher-oversized-never-handled",
		Breaks: "an item larger than MaxSize is never handled (its batch is always empty): its caller waits for ever (blind round 2026-12-04, #32, caught then only by go test's timeout)",
		Edits: []edit{{
			File: "internal/batcher/batcher.go",
			Old:  `b.opts.MaxSize > 0 && len(batch) > 0 && size+e.size > b.opts.MaxSize {`,
			New:  `b.opts.MaxSize > 0 && size+e.size > b.opts.MaxSize {`,
		}},
		Pkg:     "./internal/batcher",
		Run:     "^TestSizeBound$",
		Timeout: time.Minute,
	},
	{
		Name:   "handoff-kept-by-leaving-worker",
		Breaks: "a Run worker whose context ends as a step hands it a message drops the hand-out instead of giving it back: its group is held for good",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old: `			if !r.unqueue(w) {
				r.giveBack(<-w.ch)
				r.took()`,
			New: `			if !r.unqueue(w) {
				<-w.ch
				r.took()`,
		}},
		Pkg:  "./ordered",
		Run:  "^TestRunLeavesWhileHandedOut$",
		Cost: 45 * time.Second, // caught in 30s (the test's deadline)
	},
	{
		Name:   "handoff-no-lease-check",
		Breaks: "a waiting Run worker hands the message a step gave it to the handler without asking Lease: handed out past the lease",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old: `	err := r.leased()
	if err == nil {
		err = ctx.Err()
	}`,
			New: `	var err error
	if err == nil {
		err = ctx.Err()
	}`,
		}},
		Pkg: "./ordered",
		Run: "^TestRunWaitingWorkerLeaseEnds$",
	},
	{
		Name:   "busy-handout-no-lease-check",
		Breaks: "a busy Run worker's next message, handed out by the step that acks its last one, goes to the handler without a look at Lease after that step: a lease that ended in between delivers once more",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old: `			if r.o.Mode != AtMostOnce {
				// Checked again right before`,
			New: `			if false {
				// Checked again right before`,
		}},
		Pkg: "./ordered",
		Run: "^TestRunBusyWorkerLeaseEndsInStep$",
	},
	{
		Name:   "recovered-failure-forgotten",
		Breaks: "a failed send that Recover sent again and that failed again is forgotten: while its group lives, the next Recover takes it for sent and returns nil",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `s.recovery.items[recoverKey{it.group, it.epoch, it.seq}] = recoverFailed // again`,
			New:  `delete(s.recovery.items, recoverKey{it.group, it.epoch, it.seq})`,
		}},
		Pkg: "./ordered",
		Run: "^TestReview6RecoverAfterRecoveredSendFailedAgain$",
	},
	{
		Name:   "reserve-orphans-skipped",
		Breaks: "a reservation the store applied and whose answer was lost leaves a journal entry of unknown seq; Recover, run while the group reserves again, skips it as possibly that reservation's instead of waiting for that reservation's end, and returns nil: a hole no later Recover is sure to fill",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `later = append(later, e)`,
			New:  `_ = later`,
		}},
		Pkg: "./ordered",
		Run: "^(TestSendRecoverAfterReserveAnswerLost|TestReview7RecoverAfterReserveTimeoutAppliedLate)$",
	},
	{
		Name:   "recover-wait-unpinned",
		Breaks: "a group Recover waits on is evicted as its reservation's sends complete: Recover then looks again at no group and sends a copy of every entry of that reservation (counted, sent twice)",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `if g.inflight == 0 && !g.reserving && g.recovering == 0 && s.groups.live[group] == g {`,
			New:  `if g.inflight == 0 && !g.reserving && s.groups.live[group] == g {`,
		}},
		Pkg: "./ordered",
		Run: "^TestReview7RecoverOrphanGroupResendsInFlight$",
	},
	{
		Name:   "recover-gap-taken-as-ours",
		Breaks: "a group's known seqs ignore the gap a reservation with a lost answer leaves: the range starts again at the next reservation, and Recover sends (and counts) a copy of a message of this process still in flight below the gap",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `case g.epoch == r.res.Epoch && g.hi < r.res.First && len(g.gaps) < maxGaps:`,
			New:  `case false:`,
		}},
		Pkg: "./ordered",
		Run: "^TestReview8RecoverCopiesInFlightAfterGap$",
	},
	{
		Name:   "recover-waits-holding-flush",
		Breaks: "Recover keeps the marks' flush lock while it waits for a reservation in progress: no Sent mark of any group is written meanwhile (a crash then sends them all again), and a second Recover cannot honour its ctx",
		Edits: []edit{{
			File: "ordered/send.go",
			Old: `		s.marks.flushMu.Unlock()
		select {
		case <-reserved:`,
			New: `		select {
		case <-reserved:`,
		}, {
			File: "ordered/send.go",
			Old: `			return n, fmt.Errorf("ordered: recover: waiting for a reservation in progress: %w", ctx.Err())
		}
		s.marks.flushMu.Lock()`,
			New: `			s.marks.flushMu.Unlock()
			return n, fmt.Errorf("ordered: recover: waiting for a reservation in progress: %w", ctx.Err())
		}`,
		}},
		Pkg: "./ordered",
		Run: "^(TestReview8RecoverWaitStopsSentMarks|TestReview8SecondRecoverIgnoresCtx)$",
	},
	{
		Name:   "close-ignores-taking",
		Breaks: "Close does not wait for a hand-out on its way to a Receive caller's check: it returns, and the give-back after it is never sent (the message stays invisible for its whole visibility timeout)",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old:  `r.fetching == 0 && r.taking.Load() == 0`,
			New:  `r.fetching == 0`,
		}},
		Pkg: "./ordered",
		Run: "^TestReview6ReceiveCloseFinishedAtTake$",
	},
	{
		Name:   "return-not-ready",
		Breaks: "Core.Return marks the message ready but never puts its group back in turn: it is never handed out again",
		Edits: []edit{{
			File: "internal/recvcore/deliver.go",
			Old: `	m.ready()
	if g := m.g; g != nil {
		c.update(g, now)
		return nil
	}`,
			New: `	m.ready()
	if g := m.g; g != nil {
		return nil
	}`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReturn$|^TestWorld$",
	},
	{
		Name:   "handoff-lifo-starves-receive",
		Breaks: "Receive callers do not wait among the waiters: the steps hand every ready message to Run's waiting workers and a Receive caller beside them gets none (review 4, #1)",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old: `			case !ok && r.o.Mode != AtMostOnce:
				if w == nil {
					w = r.newWaiter()
				}`,
			New: `			case !ok && w != nil:`,
		}},
		Pkg: "./ordered",
		Run: "^TestReview4ReceiveStarvesBesideIdleRun$",
	},
	{
		Name:   "take-ignores-close-and-ctx",
		Breaks: "a waiter takes its hand-out after a slow Lease without looking at Close or its ctx: a handler starts after Close returned, or with its ctx ended (review 4, #2 and #4)",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old: `	err := r.leased()
	if err == nil {
		err = ctx.Err()
	}`,
			New: `	err := r.leased()
	if false {
		err = ctx.Err()
	}`,
		}, {
			File: "ordered/receive.go",
			Old: `		case <-r.closingCh:
			err = ErrClosed
		default:`,
			New: `		default:`,
		}},
		Pkg: "./ordered",
		Run: "^TestReview4SlowLeaseHandlerAfterClose$|^TestReview4HandlerGetsEndedCtx$",
	},
	{
		Name:   "ioctx-share-shortens-timeout",
		Breaks: "I/O calls that share a context get less than ReapTimeout when they start late in the share (review 4, #3)",
		Edits: []edit{{
			File: "ordered/recv_io.go",
			Old:  `ctx, cancel := context.WithDeadline(r.ctx, until.Add(t))`,
			New:  `ctx, cancel := context.WithDeadline(r.ctx, now.Add(t))`,
		}},
		Pkg: "./ordered",
		Run: "^TestReview4IOCallGetsItsReapTimeout$",
	},
	{
		Name:   "reserve-without-demand",
		Breaks: "a reservation does not wait while reserved messages wait for a send: with a fast store, a steady producer makes a store call per message or two",
		Edits: []edit{{
			File: "ordered/send.go",
			Old: `	s.awaitSends()
	batch := make([]*sendRun, len(groups))`,
			New: `	batch := make([]*sendRun, len(groups))`,
		}},
		Pkg: "./ordered",
		Run: "^TestReservationsWaitForSends$",
	},
	{
		Name:   "batcher-drained-never-closed",
		Breaks: "Drained's channel is never closed once items waited",
		Edits: []edit{{
			File: "internal/batcher/batcher.go",
			Old: `		if b.drained != nil {
			close(b.drained)
			b.drained = nil
		}`,
			New: ``,
		}},
		Pkg:     "./internal/batcher",
		Run:     "^TestDrained$",
		Timeout: time.Minute,
	},
	{
		Name:   "ack-after-close-accepted",
		Breaks: "an Ack whose Lease call outlasts Close is accepted after Close's flush: its advance is never written, and with SyncAck its ticket is never resolved (review 5; old)",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old: `		if r.closed {
			// Close finished its flush while Lease ran: the advance
			// would never be written, nor a ticket resolved.
			err = ErrClosed
			return
		}`,
			New: ``,
		}},
		Pkg: "./ordered",
		Run: "^TestReview5SyncAckAcrossClose$",
	},
	{
		Name:   "slab-any-body",
		Breaks: "Run's Messages come from a slab whatever their body's size: a kept Message holds its 7 siblings' bodies (review 15: 13.8 MiB more for 50 kept of 32 KiB bodies)",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old:  `	if w != nil && w.slab && len(d.Raw) <= slabBody && len(d.Body) <= slabBody {`,
			New:  `	if w != nil && w.slab {`,
		}},
		Pkg: "./ordered",
		Run: "^TestReview15_KeptMessageRetainsSlabSiblingsBodies$",
	},
	{
		Name:   "disown-unordered-attempt",
		Breaks: "Disown takes back an Unordered message's attempt: the disowned Delivery, which reached the application, settles the next hand-out (review 15)",
		Edits: []edit{{
			File: "internal/recvcore/deliver.go",
			Old:  `	if unseen || m.g != nil {`,
			New:  `	if true {`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestReview15_DisownUnorderedStaleDeliveryRefused$",
	},
}
