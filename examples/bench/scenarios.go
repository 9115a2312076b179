package main

import (
	"context"
	"fmt"
	"time"

	"github.com/inorder/inorder/ordered"
)

// scenario is one row of the table. base names the row whose rate the
// ratio divides by ("" when the scenario measures its own base).
type scenario struct {
	name string
	base string
	run  func(ctx context.Context) (*result, error)
}

// scenarios lists every scenario in the order they run: bases first.
func scenarios(c *config, e *environment) []scenario {
	var ss []scenario
	groupCounts := []int{1, 1000}
	modes := []ordered.SendMode{ordered.SendDurable, ordered.SendFast}
	for _, dk := range drivers(e) {
		n := max(c.messages/dk.scale, 1)
		for _, groups := range groupCounts {
			ss = append(ss, scenario{name: fmt.Sprintf("raw/%s/g%d", dk.name, groups), run: func(ctx context.Context) (*result, error) {
				return runRaw(ctx, c, e, dk, groups, n)
			}})
		}
		for _, sk := range stores(e) {
			if dk.name == "mns" && sk.name != "filestore" {
				continue // a real queue is slow and costs money: one store
			}
			for _, mode := range modes {
				for _, groups := range groupCounts {
					or := orderedRun{driver: dk, store: sk, mode: mode, groups: groups, n: n}
					ss = append(ss, scenario{
						name: fmt.Sprintf("ordered/%s/%s/%s/g%d", dk.name, sk.name, modeName(mode), groups),
						base: fmt.Sprintf("raw/%s/g%d", dk.name, groups),
						run: func(ctx context.Context) (*result, error) {
							return runOrdered(ctx, c, e, or)
						},
					})
				}
			}
		}
	}

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

	reorderN, fsDur := 20_000_000, 3*time.Second
	if c.quick {
		reorderN, fsDur = 2_000_000, 600*time.Millisecond
	}
	ss = append(ss, scenario{name: "engine/reorder", run: func(context.Context) (*result, error) {
		return runReorder(reorderN)
	}})
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

func modeName(m ordered.SendMode) string {
	if m == ordered.SendFast {
		return "fast"
	}
	return "durable"
}
