package filestore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.Lister = (*Store)(nil)

// Streams implements seqstore.Lister from the state in memory. Like every
// read it reflects only durable state: if a frame is being written it
// waits for its fsync.
func (s *Store) Streams(ctx context.Context, queue string) ([]seqstore.StreamState, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("filestore: streams %q: %w", queue, err)
	}
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("filestore: streams: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filestore: streams %q: %w", queue, err)
	}
	var out []seqstore.StreamState
	s.mu.Lock()
	if g := s.st.queues[queue]; g != nil {
		out = make([]seqstore.StreamState, 0, len(g.full)+len(g.plain))
		for group := range g.full {
			out = append(out, s.st.streamState(seqstore.Stream{Queue: queue, Group: group}))
		}
		for group := range g.plain {
			out = append(out, s.st.streamState(seqstore.Stream{Queue: queue, Group: group}))
		}
	}
	wait := s.inflight
	s.mu.Unlock()
	if err := s.awaitDurable(ctx, wait); err != nil {
		return nil, fmt.Errorf("filestore: streams %q: %w", queue, err)
	}
	// A stream kept whole may hold nothing to show: only parks its cursor
	// passed.
	out = slices.DeleteFunc(out, seqstore.StreamState.Empty)
	slices.SortFunc(out, func(a, b seqstore.StreamState) int { return cmp.Compare(a.Stream.Key(), b.Stream.Key()) })
	return out, nil
}

// State implements seqstore.Lister. It waits for a frame being written, as
// Streams does.
func (s *Store) State(ctx context.Context, st seqstore.Stream) (seqstore.StreamState, error) {
	if err := s.checkOpen(); err != nil {
		return seqstore.StreamState{}, fmt.Errorf("filestore: state of %s: %w", st, err)
	}
	if err := st.Validate(); err != nil {
		return seqstore.StreamState{}, fmt.Errorf("filestore: state: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return seqstore.StreamState{}, fmt.Errorf("filestore: state of %s: %w", st, err)
	}
	s.mu.Lock()
	out := s.st.streamState(st)
	wait := s.inflight
	s.mu.Unlock()
	if err := s.awaitDurable(ctx, wait); err != nil {
		return seqstore.StreamState{}, fmt.Errorf("filestore: state of %s: %w", st, err)
	}
	return out, nil
}

// streamState returns what the state holds for s, in copies.
func (st *state) streamState(s seqstore.Stream) seqstore.StreamState {
	c := st.cursor(s)
	c.Skipped = cloneRanges(c.Skipped)
	out := seqstore.StreamState{Stream: s, Cursor: c}
	ss := st.get(s)
	if ss == nil {
		return out
	}
	if ss.next != 0 {
		out.SendEpoch, out.LastSeq = ss.epoch, ss.next-1
	}
	for seq, body := range ss.journal.All() {
		out.Journal = append(out.Journal, seqstore.EntryInfo{Epoch: ss.epoch, Seq: seq, Size: len(body)})
	}
	for _, e := range ss.parks {
		if !c.Below(e.epoch, e.seq) {
			out.Parked = append(out.Parked, seqstore.EntryInfo{Epoch: e.epoch, Seq: e.seq, Size: int(e.size)})
		}
	}
	return out
}
