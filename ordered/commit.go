package ordered

import (
	"context"
	"errors"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// maxAdvanceBatch bounds the cursor advances of one store write.
const maxAdvanceBatch = 4096

// commitLoop is the committer: it makes acknowledged cursor advances
// durable, many groups per store write (group commit), and only then hands
// the messages concerned to the reaper. Commit before delete, always.
func (r *receiver) commitLoop() {
	defer close(r.commitDone)
	ctx := r.ctx
	flushing := false
	for {
		if !flushing {
			select {
			case <-ctx.Done():
				return
			case <-r.commitWake:
			case <-r.commitFlush:
				flushing = true
			}
			if r.o.CommitInterval > 0 && !flushing {
				select {
				case <-time.After(r.o.CommitInterval):
				case <-r.commitFlush:
					flushing = true
				case <-ctx.Done():
					return
				}
			}
		}
		r.commitOnce(ctx)
		r.resolveConflicts(ctx)
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		left := len(r.dirty) > 0 || len(r.resolve) > 0
		r.mu.Unlock()
		if flushing && !left {
			return
		}
		if left {
			signal(r.commitWake)
		}
	}
}

// commitOnce writes the advances of up to maxAdvanceBatch dirty groups in
// one store call.
func (r *receiver) commitOnce(ctx context.Context) {
	// The slices are reused from one commit to the next: only the
	// committer goroutine uses them, and stores keep no reference.
	batch, gs, taken := r.cbatch[:0], r.cgroups[:0], r.ctaken[:0]
	defer func() {
		clear(batch)
		clear(gs)
		clear(taken)
		r.cbatch, r.cgroups, r.ctaken = batch[:0], gs[:0], taken[:0]
	}()
	r.mu.Lock()
	n := 0
	for _, g := range r.dirty {
		if len(batch) == maxAdvanceBatch {
			break
		}
		n++
		g.clear(gDirty)
		if g.has(gEvicted | gConflict | gResolving) {
			continue
		}
		if !cursorBefore(g.dur, g.ack) {
			r.flushUnflushedLocked(g)
			r.maybeIdleLocked(g, time.Now())
			continue
		}
		g.set(gCommitting)
		batch = append(batch, seqstore.Advance{Stream: r.streamOf(g), From: cloneCursor(g.dur), To: cloneCursor(g.ack)})
		gs = append(gs, g)
		taken = append(taken, g.unflushed)
		g.unflushed = nil
	}
	rest := copy(r.dirty, r.dirty[n:])
	clear(r.dirty[rest:])
	r.dirty = r.dirty[:rest]
	r.mu.Unlock()
	if len(batch) == 0 {
		return
	}

	err := r.advance(ctx, batch)

	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if err == nil {
		r.st.Commits++
	}
	for i, g := range gs {
		g.clear(gCommitting)
		if err != nil {
			// Nothing was applied: put the messages back for the next try.
			g.unflushed = append(taken[i], g.unflushed...)
			if errors.Is(seqstore.Failed(err, i, len(batch)), seqstore.ErrConflict) {
				r.conflictLocked(g, err)
			} else {
				r.markDirtyLocked(g)
			}
			continue
		}
		r.st.Committed++
		g.dur = batch[i].To
		for _, e := range taken[i] {
			r.reapLocked(e)
		}
		r.notifyWaitersLocked(g)
		if cursorBefore(g.dur, g.ack) || len(g.unflushed) > 0 {
			r.markDirtyLocked(g)
		} else {
			r.maybeIdleLocked(g, now)
		}
	}
	if len(r.reapq) > 0 {
		signal(r.reapWake)
	}
}

// advance calls the store, retrying failures other than a conflict with
// backoff until ctx ends.
func (r *receiver) advance(ctx context.Context, batch []seqstore.Advance) error {
	for attempt := 1; ; attempt++ {
		err := r.q.storeAdvance(ctx, batch)
		if err == nil || errors.Is(err, seqstore.ErrConflict) || ctx.Err() != nil {
			return err
		}
		r.log.WarnContext(ctx, "ordered: commit cursors", "advances", len(batch), "attempt", attempt, "err", err)
		if !sleepCtx(ctx, r.q.opts.Retry.backoff(attempt)) {
			return err
		}
	}
}

// conflictLocked stops g after the store refused its advance: a second
// receiver, or a stale view of this one, moved the cursor.
func (r *receiver) conflictLocked(g *group, err error) {
	if !g.has(gConflict) {
		g.set(gConflict)
		r.st.Conflicts++
		r.stuck[g] = stuckInfo{since: time.Now(), reason: "conflict"}
		if r.hooks.OnConflict != nil {
			r.hooks.OnConflict(Event{Group: g.name, Epoch: g.ack.Epoch, Seq: g.ack.Next, Err: err})
		}
		r.log.Error("ordered: cursor conflict: is a second receiver consuming this queue?", "group", g.name, "err", err)
	}
	if g.x != nil {
		for _, w := range g.x.waiters {
			w.ch <- ErrConflict
		}
		g.x.waiters = nil
	}
	if g.out == nil || !g.has(gHanded) {
		r.queueResolveLocked(g)
	}
}

func (r *receiver) queueResolveLocked(g *group) {
	if g.has(gResolving) {
		return
	}
	g.set(gResolving)
	r.resolve = append(r.resolve, g)
	signal(r.commitWake)
}

// resolveConflicts re-reads the cursor of groups in conflict. If the store
// is behind what this receiver acknowledged, the advance is tried again from
// the stored value (nothing acknowledged is delivered twice); otherwise the
// group drops what it holds in memory and resumes from the stored cursor:
// messages below it are deleted, the others come back from the queue.
func (r *receiver) resolveConflicts(ctx context.Context) {
	r.mu.Lock()
	gs := r.resolve
	r.resolve = nil
	r.mu.Unlock()
	for _, g := range gs {
		c, err := r.q.storeCursor(ctx, r.streamOf(g))
		r.mu.Lock()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "ordered: re-read cursor", "group", g.name, "err", err)
				r.resolve = append(r.resolve, g)
			}
		case g.has(gEvicted):
		default:
			r.adoptLocked(g, c)
		}
		r.mu.Unlock()
	}
}

func (r *receiver) adoptLocked(g *group, c seqstore.Cursor) {
	now := time.Now()
	g.clear(gConflict | gResolving)
	delete(r.stuck, g)
	if r.o.Mode != ExactlyOnce && cursorBefore(c, g.ack) {
		g.dur = c
		r.markDirtyLocked(g)
		r.updateLocked(g, now)
		return
	}
	// Forget everything held; delete only what the stored cursor covers.
	drop := func(e *entry) {
		if below(c, e.epoch, e.seq) {
			r.reapLocked(e)
		}
	}
	if g.buf != nil {
		g.buf.Reset(1, func(_ uint64, e *entry) { r.unholdLocked(e); drop(e) })
		r.readyMsg -= int(g.run)
		g.run = 0
		g.buf = nil
	}
	if e := g.out; e != nil && !g.has(gHanded) {
		delete(r.out, e)
		drop(e)
		g.out = nil
		g.clear(gAwait)
	}
	for _, e := range g.unflushed {
		drop(e)
	}
	g.unflushed = nil
	if x := g.x; x != nil {
		for _, es := range [][]*entry{x.newer, x.pending} {
			for _, e := range es {
				r.unholdLocked(e)
			}
		}
		g.x = nil
	}
	g.dur, g.ack = c, cloneCursor(c)
	g.epoch, g.next = c.Epoch, max(c.Next, 1)
	g.clear(gFresh)
	if c.Next == 0 {
		g.set(gFresh)
	}
	if g.out == nil {
		r.updateLocked(g, now)
	}
}
