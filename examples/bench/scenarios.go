package main

import (
	"context"
	"fmt"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// scenario is one row of the table. base names the row whose rate the
// ratio divides by ("" when the scenario measures its own base); floor, of
// an ordered row, the floor row of its driver, store and groups (see
// floorWork), which runs before it and which it is compared with too.
type scenario struct {
	name  string
	base  string
	floor string
	run   func(ctx context.Context) (*result, error)
}

// floorStore is the store of the floor rows: memstore, whose Advance costs
// a map write. A filestore floor would fsync once per received batch, more
// than an ordered row's commits every few milliseconds do, and would be no
// floor.
const floorStore = "memstore"

// scenarios lists every scenario in the order they run: bases first.
func scenarios(c *config, e *environment) []scenario {
	var ss []scenario
	groupCounts := []int{1, 1000}
	modes := []ordered.SendMode{ordered.SendDurable, ordered.SendFast}
	for _, dk := range drivers(e) {
		n := max(c.messages/dk.scale, 1)
		for _, groups := range groupCounts {
			ss = append(ss, scenario{name: fmt.Sprintf("raw/%s/g%d", dk.name, groups), run: func(ctx context.Context) (*result, error) {
				return runRaw(ctx, c, e, rawRun{driver: dk, groups: groups, n: n})
			}})
		}
		floors := dk.name != "mns" // a real queue is slow and costs money
		if floors {
			for _, sk := range stores(e) {
				if sk.name != floorStore {
					continue
				}
				for _, groups := range groupCounts {
					fr := floorRun{driver: dk, store: sk, groups: groups, n: n}
					ss = append(ss, scenario{
						name: fmt.Sprintf("floor/%s/%s/g%d", dk.name, sk.name, groups),
						base: fmt.Sprintf("raw/%s/g%d", dk.name, groups),
						run: func(ctx context.Context) (*result, error) {
							return runFloor(ctx, c, e, fr)
						},
					})
				}
			}
		}
		for _, sk := range stores(e) {
			if dk.name == "mns" && sk.name != "filestore" {
				continue // a real queue is slow and costs money: one store
			}
			for _, mode := range modes {
				for _, groups := range groupCounts {
					or := orderedRun{driver: dk, store: sk, mode: mode, groups: groups, n: n}
					var floor string
					if floors && sk.name == floorStore {
						floor = fmt.Sprintf("floor/%s/%s/g%d", dk.name, sk.name, groups)
					}
					ss = append(ss, scenario{
						name:  fmt.Sprintf("ordered/%s/%s/%s/g%d", dk.name, sk.name, modeName(mode), groups),
						base:  fmt.Sprintf("raw/%s/g%d", dk.name, groups),
						floor: floor,
						run: func(ctx context.Context) (*result, error) {
							return runOrdered(ctx, c, e, or)
						},
					})
				}
			}
		}
	}

	ss = append(ss, fifoScenarios(c, e)...)

	serialN, pipelinedN := 1000, 50_000
	if c.quick {
		serialN, pipelinedN = 200, 5000
	}
	for _, sk := range stores(e)[:2] { // memstore, filestore
		serial := "serial/" + sk.name
		ss = append(ss,
			scenario{name: serial, run: func(ctx context.Context) (*result, error) {
				return runSerial(ctx, e, sk, serialN, c.size)
			}},
			scenario{name: "pipelined/" + sk.name, base: serial, run: func(ctx context.Context) (*result, error) {
				return runPipelined(ctx, e, sk, pipelinedN, c.size)
			}},
		)
	}

	ss = append(ss, backlogScenarios(c, e)...)

	coreN, fsDur := 1_000_000, 3*time.Second
	if c.quick {
		coreN, fsDur = 100_000, 600*time.Millisecond
	}
	for _, groups := range groupCounts {
		ss = append(ss, scenario{name: fmt.Sprintf("engine/core/g%d", groups), run: func(context.Context) (*result, error) {
			return runCore(coreN, groups)
		}})
	}
	for _, callers := range []int{1, 16} {
		ss = append(ss, scenario{
			name: fmt.Sprintf("engine/filestore-%d", callers),
			base: fmt.Sprintf("%dx fdatasync/s", callers),
			run: func(ctx context.Context) (*result, error) {
				return runFilestoreCommit(ctx, callers, fsDur)
			},
		})
	}
	return ss
}

// backlogScenarios are the hot-group rows of issue 12: one group's deep
// backlog drained over memqueue, calm and with lost receive responses, and
// one group's unbounded burst over the emulator against raw.
func backlogScenarios(c *config, e *environment) []scenario {
	backlogN, emulatorN := 200_000, 20_000
	var visibility time.Duration // memqueue's default, 30 s
	if c.quick {
		// A lost receive costs one visibility timeout: 30 s would take
		// the quick run past its timeout and budget.
		backlogN, emulatorN, visibility = 20_000, 2000, 5*time.Second
	}
	calm := "backlog/memqueue/memstore/g1"
	// The emulator's queue has the service's default visibility timeout,
	// 30 s, set explicitly so that the row does not depend on the default.
	emu := driverKind{name: "emulator", scale: 1, open: func(ctx context.Context, e *environment, _ time.Duration) (*openDriver, error) {
		return openEmulatorWith(ctx, e, &mnstest.QueueAttributes{VisibilityTimeout: 30})
	}}
	mem := stores(e)[0]
	rawEmu := "raw/emulator/g1/unbounded"
	return []scenario{
		{name: calm, run: func(ctx context.Context) (*result, error) {
			return runBacklog(ctx, c, e, backlogRun{n: backlogN, visibility: visibility})
		}},
		{name: calm + "/lossy", base: calm, run: func(ctx context.Context) (*result, error) {
			return runBacklog(ctx, c, e, backlogRun{n: backlogN, loseReceive: 0.01, visibility: visibility})
		}},
		{name: rawEmu, run: func(ctx context.Context) (*result, error) {
			return runRaw(ctx, c, e, rawRun{driver: emu, groups: 1, n: emulatorN, unbounded: true})
		}},
		{name: "backlog/emulator/memstore/g1", base: rawEmu, run: func(ctx context.Context) (*result, error) {
			r, err := runOrdered(ctx, c, e, orderedRun{driver: emu, store: mem, mode: ordered.SendDurable, groups: 1, n: emulatorN, hot: true})
			if r != nil {
				r.Notes += ", no lost receive responses (mnstest has no fault that loses only a receive's response)"
			}
			return r, err
		}},
	}
}

// fifoScenarios are the rows over an emulator FIFO queue (emulatorFIFO):
// raw, where the service's own per-group order is all the order there is
// (checked per producer, see checker.grouped), and ordered.Queue on
// memstore, durable, over the same kind of queue. Their counterparts over
// a standard queue are raw/emulator/g<groups> and
// ordered/emulator/memstore/durable/g<groups>. One group on a FIFO queue
// has one message in flight at a time, so its rows run a tenth of the
// emulator's count.
func fifoScenarios(c *config, e *environment) []scenario {
	dk := emulatorFIFO
	mem := stores(e)[0]
	var ss []scenario
	for _, groups := range []int{1, 1000} {
		n := max(c.messages/dk.scale, 1)
		if groups == 1 {
			n = max(n/fifoHotDivisor, 1)
		}
		raw := fmt.Sprintf("raw/%s/g%d", dk.name, groups)
		or := orderedRun{driver: dk, store: mem, mode: ordered.SendDurable, groups: groups, n: n}
		ss = append(ss,
			scenario{name: raw, run: func(ctx context.Context) (*result, error) {
				return runRaw(ctx, c, e, rawRun{driver: dk, groups: groups, n: n})
			}},
			scenario{name: fmt.Sprintf("ordered/%s/%s/%s/g%d", dk.name, mem.name, modeName(or.mode), groups), base: raw,
				run: func(ctx context.Context) (*result, error) {
					return runOrdered(ctx, c, e, or)
				}},
		)
	}
	return ss
}

// fifoHotDivisor divides the message count of the one-group FIFO rows.
const fifoHotDivisor = 10

func modeName(m ordered.SendMode) string {
	if m == ordered.SendFast {
		return "fast"
	}
	return "durable"
}
