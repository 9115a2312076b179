package main

import "time"

// sendMutants are the breaks of the sender's disorder bound
// (SendOptions.MaxDisorder): its pure bookkeeping (ordered/send_window.go),
// against the model test, and the sender's use of it (ordered/send.go,
// ordered/options.go), against the Queue tests.
var sendMutants = []mutant{
	{
		Name:   "batcher-partial-bound-loose",
		Breaks: "the batcher lets one batch that is not full more than MaxPartial go: a handler back from a full batch takes a partial one",
		Edits: []edit{{
			File: "internal/batcher/batcher.go",
			Old:  `b.partials >= b.opts.MaxPartial && !b.shutdown`,
			New:  `b.partials > b.opts.MaxPartial && !b.shutdown`,
		}},
		Pkg:     "./internal/batcher",
		Run:     "^TestMaxPartial$",
		Timeout: time.Minute,
	},
	{
		Name:   "batcher-shutdown-starts-nothing",
		Breaks: "Shutdown lifts MaxPartial but starts no handler: a partial batch held back behind one in flight waits until that one ends (review56)",
		Edits: []edit{{
			File: "internal/batcher/batcher.go",
			Old:  "	b.startLocked() // for a partial batch the bound held back\n",
			New:  "",
		}},
		Pkg:     "./internal/batcher",
		Run:     "^TestShutdownTakesPartialBehindPartial$",
		Timeout: time.Minute,
	},
	{
		Name:   "batcher-partial-hold-never-ends",
		Breaks: "a partial batch in flight past PartialHold stops holding the others back, but nobody starts a handler for the one waiting: it waits until some batch ends",
		Edits: []edit{{
			File: "internal/batcher/batcher.go",
			Old:  "	b.releaseLocked(h)\n	b.startLocked()",
			New:  "	b.releaseLocked(h)",
		}},
		Pkg:     "./internal/batcher",
		Run:     "^TestPartialHold$",
		Timeout: time.Minute,
	},
	{
		Name:   "batcher-partial-hold-not-rearmed",
		Breaks: "a handler's next partial batch keeps the timer of its previous one, which fired: once that batch outlived its hold, the handler's next partial batch holds its place until it ends, stuck or not",
		Edits: []edit{{
			File: "internal/batcher/batcher.go",
			Old:  "		h.timer.Reset(hold)",
			New:  "		_ = hold",
		}},
		Pkg:     "./internal/batcher",
		Run:     "^TestPartialHold$",
		Timeout: time.Minute,
	},
	{
		Name:   "batcher-partial-hold-fixed",
		Breaks: "a partial batch holds its place for PartialHold whatever the usual time per batch: over a driver slower than PartialHold every request is taken as stuck and a partial request leaves every PartialHold",
		Edits: []edit{{
			File: "internal/batcher/batcher.go",
			Old:  "	return max(b.opts.PartialHold, HoldFactor*last[n/2])",
			New:  "	return b.opts.PartialHold",
		}},
		Pkg:     "./internal/batcher",
		Run:     "^TestPartialHoldFollowsUsualTime$",
		Timeout: time.Minute,
	},
	{
		Name:   "batcher-partial-hold-slowest",
		Breaks: "the usual time per batch is the slowest of the last ones, not their median: one batch that timed out makes the next stuck one hold every partial batch back for four times the timeout",
		Edits: []edit{{
			File: "internal/batcher/batcher.go",
			Old:  "	return max(b.opts.PartialHold, HoldFactor*last[n/2])",
			New:  "	return max(b.opts.PartialHold, HoldFactor*last[n-1])",
		}},
		Pkg:     "./internal/batcher",
		Run:     "^TestReview10SlowBatchInflatesHold$",
		Timeout: time.Minute,
	},
	{
		Name:   "send-partial-hold-fixed",
		Breaks: "the sender's partial requests hold the next one back for 5 ms whatever a request usually takes: over a 20 ms driver a partial request leaves every 5 ms (review9 #1: 3.7 times the requests)",
		Edits: []edit{{
			File: "internal/batcher/batcher.go",
			Old:  "	return max(b.opts.PartialHold, HoldFactor*last[n/2])",
			New:  "	return b.opts.PartialHold",
		}},
		Pkg: "./ordered",
		Run: "^TestReview9SlowDriver",
	},
	{
		Name:   "send-partial-hold-off",
		Breaks: "the sender's partial requests hold the next one back for as long as they are in flight: one stuck request stalls every message that does not make a full batch",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  "MaxPartial: 1, PartialHold: partialHold}",
			New:  "MaxPartial: 1}",
		}},
		Pkg: "./ordered",
		Run: "^TestSendSlowPartialDoesNotStall$",
	},
	{
		Name:   "send-no-nagle",
		Breaks: "the send batcher lets every handler take a batch that is not full: while one is in flight, each later message goes in a request of its own",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `MaxPartial: 1, PartialHold`,
			New:  `MaxPartial: o.Concurrency, PartialHold`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendNagleBatching$",
	},
	{
		Name:   "send-window-release-loose",
		Breaks: "off by one: a message one seq beyond MaxDisorder is released",
		Edits: []edit{{
			File: "ordered/send_window.go",
			Old:  `	for w.released < w.reserved && w.released-w.oldest <= w.limit {`,
			New:  `	for w.released < w.reserved && w.released-w.oldest <= w.limit+1 {`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendWindow",
	},
	{
		Name:   "send-window-release-loose-burst",
		Breaks: "the same break, against the 50k burst at a plain consumer",
		Edits: []edit{{
			File: "ordered/send_window.go",
			Old:  `	for w.released < w.reserved && w.released-w.oldest <= w.limit {`,
			New:  `	for w.released < w.reserved && w.released-w.oldest <= w.limit+1 {`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendDisorderBurst$",
	},
	{
		Name:   "send-window-release-strict",
		Breaks: "off by one the other way: a message exactly MaxDisorder ahead is held, so the bound is MaxDisorder-1",
		Edits: []edit{{
			File: "ordered/send_window.go",
			Old:  `	for w.released < w.reserved && w.released-w.oldest <= w.limit {`,
			New:  `	for w.released < w.reserved && w.released-w.oldest < w.limit {`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendWindow",
	},
	{
		Name:   "send-window-no-sweep",
		Breaks: "when the oldest finishes, the oldest moves by one, not past the later ones that finished first",
		Edits: []edit{{
			File: "ordered/send_window.go",
			Old:  `	for w.oldest < w.released && w.isSet(w.oldest) {`,
			New:  `	for w.oldest < w.released && w.isSet(w.oldest) && false {`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendWindow",
	},
	{
		Name:   "send-window-any-finish-advances",
		Breaks: "any finished message moves the oldest unfinished one, though the oldest is still in flight",
		Edits: []edit{{
			File: "ordered/send_window.go",
			Old: `	if p != w.oldest {
		w.set(p)
		return false
	}`,
			New: `	if p < w.oldest {
		w.set(p)
		return false
	}`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendWindow",
	},
	{
		Name:   "send-window-no-wakeup",
		Breaks: "finishing the oldest never says that held messages may go: they wait for ever",
		Edits: []edit{{
			File: "ordered/send_window.go",
			Old: `	return w.released < w.reserved
}`,
			New: `	return false
}`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendWindow",
	},
	{
		Name:   "send-window-stale-bit",
		Breaks: "a finished flag is not cleared when the oldest moves past it: the ring wraps onto a stale flag and an unfinished message counts as finished",
		Edits: []edit{{
			File: "ordered/send_window.go",
			Old: `		w.unset(w.oldest)
		w.oldest++`,
			New: `		w.oldest++`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendWindow",
	},
	{
		Name:   "send-window-grow-loses-flags",
		Breaks: "growing the ring drops the finished flags of the messages in flight",
		Edits: []edit{{
			File: "ordered/send_window.go",
			Old:  `		if old.isSet(p) {`,
			New:  `		if old.isSet(p) && false {`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendWindow",
	},
	{
		Name:   "send-window-ring-index",
		Breaks: "the ring is indexed modulo half its size: two positions in flight share a flag",
		Edits: []edit{{
			File: "ordered/send_window.go",
			Old:  `	i := p % (uint64(len(w.done)) * 64)`,
			New:  `	i := p % (uint64(len(w.done)) * 32)`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendWindow",
	},
	{
		Name:   "send-retry-loses-place",
		Breaks: "a request that failed with a retryable error gives its messages' place in the bound up before its retry",
		Edits: []edit{{
			File: "ordered/send.go",
			Old: `			if retry {
				s.retryWait(batch, attempt, err)
				continue
			}`,
			New: `			if retry {
				s.mu.Lock()
				var rel []*sendItem
				for _, it := range batch {
					if it.grp != nil && it.seq != 0 && it.grp.win.finish(it.pos) {
						rel = s.releaseLocked(it.grp, rel)
					}
					it.seq = 0 // not finished again
				}
				s.mu.Unlock()
				s.dispatch(rel)
				s.retryWait(batch, attempt, err)
				continue
			}`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendHeldRetryKeepsPlace$",
	},
	{
		Name:   "send-retry-loses-place-burst",
		Breaks: "the same break, against the 50k burst at a plain consumer",
		Edits: []edit{{
			File: "ordered/send.go",
			Old: `			if retry {
				s.retryWait(batch, attempt, err)
				continue
			}`,
			New: `			if retry {
				s.mu.Lock()
				var rel []*sendItem
				for _, it := range batch {
					if it.grp != nil && it.seq != 0 && it.grp.win.finish(it.pos) {
						rel = s.releaseLocked(it.grp, rel)
					}
					it.seq = 0 // not finished again
				}
				s.mu.Unlock()
				s.dispatch(rel)
				s.retryWait(batch, attempt, err)
				continue
			}`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendDisorderBurst$",
	},
	{
		Name:   "send-no-wakeup-on-finish",
		Breaks: "the sender records a finished message in the window but never releases what it lets go",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `			if s.bounded && it.seq != 0 && g.win.finish(it.pos) {`,
			New:  `			if s.bounded && it.seq != 0 && g.win.finish(it.pos) && false {`,
		}},
		Pkg:     "./ordered",
		Run:     "^TestSendHeldCancel$",
		Timeout: time.Minute,
	},
	{
		Name:   "send-no-release-on-reserve",
		Breaks: "a reservation puts its messages in the window but releases none: a group with nothing in flight never starts",
		Edits: []edit{{
			File: "ordered/send.go",
			Old: `	out = s.releaseLocked(g, out)
	// The run is at the tail`,
			New: `	// The run is at the tail`,
		}},
		Pkg:     "./ordered",
		Run:     "^TestSendHeldCancel$",
		Timeout: time.Minute,
	},
	{
		Name:   "send-close-drops-held",
		Breaks: "when Close gives up, released messages are dropped instead of failed: held ones never finish",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `		items = s.settle(items, err)`,
			New: `		_ = err
		return`,
		}},
		Pkg:     "./ordered",
		Run:     "^TestSendHeldClose$",
		Timeout: time.Minute,
	},
	{
		Name:   "send-held-error-unclear",
		Breaks: "a Send whose ctx ends while its message is held says only that the ctx ended",
		Edits: []edit{{
			File: "ordered/send.go",
			Old:  `		if n := r.held.Load(); n > 0 {`,
			New:  `		if n := r.held.Load(); n > 1<<30 {`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendHeldCancel$",
	},
	{
		Name:   "send-held-not-counted",
		Breaks: "SendStats.Held misses the messages that had to wait",
		Edits: []edit{{
			File: "ordered/send.go",
			Old: `	if n > 0 {
		s.stat.held.Add(int64(n))
	}`,
			New: `	if n > 1 {
		s.stat.held.Add(int64(n - 1))
	}`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendHeldCancel$",
	},
	{
		Name:   "send-default-before-receive",
		Breaks: "MaxDisorder's default is derived before the receive defaults apply: from MaxUndeleted 0, a bound of 1",
		Edits: []edit{{
			File: "ordered/options.go",
			Old: `	if err := o.Receive.setDefaults(limits); err != nil {
		return err
	}
	return o.Send.setDefaults(limits, o.Receive.MaxUndeleted)`,
			New: `	if err := o.Send.setDefaults(limits, o.Receive.MaxUndeleted); err != nil {
		return err
	}
	return o.Receive.setDefaults(limits)`,
		}},
		Pkg: "./ordered",
		Run: "^TestSendMaxDisorderDefault$",
	},
}

func init() {
	mutants = append(mutants, sendMutants...)
}
