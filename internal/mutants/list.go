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
}

// edit replaces the one occurrence of Old in File by New.
type edit struct {
	File, Old, New string
}

// mutants is the standing list. Anchors are on the code of main as of the
// crash branch (ordered's receive side, filestore, redisstore, sqlstore as
// they were); re-anchor them when those are rewritten.
var mutants = []mutant{
	{
		Name:   "commit-before-delete",
		Breaks: "an acknowledged message goes to the reaper at once, before its cursor advance is durable",
		Edits: []edit{{
			File: "ordered/recv_deliver.go",
			Old: `		g.ack.Epoch, g.ack.Next = e.epoch, e.seq+1
	}
	g.unflushed = append(g.unflushed, e)
	r.markDirtyLocked(g)
}`,
			New: `		g.ack.Epoch, g.ack.Next = e.epoch, e.seq+1
	}
	r.reapLocked(e)
	r.markDirtyLocked(g)
}`,
		}},
		Pkg: "./internal/crashtest",
		Run: "^TestCrash$/^alo$",
	},
	{
		Name:   "fsync-order",
		Breaks: "filestore releases the callers of a commit before it writes and fsyncs their frame",
		Edits: []edit{{
			File: "seqstore/filestore/writer.go",
			Old: `	if records > 0 {
		err := s.writeFrame(frame, records)`,
			New: `	for _, r := range taken {
		close(r.done)
	}
	if records > 0 {
		err := s.writeFrame(frame, records)`,
		}, {
			File: "seqstore/filestore/writer.go",
			Old: `	for _, r := range taken {
		close(r.done)
	}
	if len(batch) > 0 {`,
			New: `	if len(batch) > 0 {`,
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
		Name:   "lua-cas",
		Breaks: "redisstore's advance script applies every move without comparing the stored cursor with From",
		Edits: []edit{{
			File: "seqstore/redisstore/scripts.go",
			Old:  `  if e ~= ARGV[b + 1] or n ~= ARGV[b + 2] or o ~= ARGV[b + 3] then`,
			New:  `  if false then`,
		}},
		Pkg:   "./seqstore/redisstore",
		Run:   "^TestConformance$",
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
		Pkg:   "./internal/crashtest",
		Run:   "^TestFaultSecondReceiver$/^postgres$",
		Needs: []string{"INORDER_TEST_POSTGRES_DSN"},
	},
}
