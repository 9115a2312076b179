package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.Lister = (*Store)(nil)

// Streams returns the state of every stream of queue that has any, ordered
// by stream key; see seqstore.Lister.
func (st *Store) Streams(ctx context.Context, queue string) ([]seqstore.StreamState, error) {
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("memstore: streams: %w", err)
	}
	if err := st.lock(ctx, "streams"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	seen := make(map[seqstore.Stream]bool)
	var out []seqstore.StreamState
	add := func(s seqstore.Stream) {
		if s.Queue != queue || seen[s] {
			return
		}
		seen[s] = true
		if ss := st.state(s); !ss.Empty() {
			out = append(out, ss)
		}
	}
	for s := range st.senders {
		add(s)
	}
	for s := range st.cursors {
		add(s)
	}
	for s := range st.parks {
		add(s)
	}
	slices.SortFunc(out, func(a, b seqstore.StreamState) int { return cmp.Compare(a.Stream.Key(), b.Stream.Key()) })
	return out, nil
}

// State returns the state of one stream; see seqstore.Lister.
func (st *Store) State(ctx context.Context, s seqstore.Stream) (seqstore.StreamState, error) {
	if err := s.Validate(); err != nil {
		return seqstore.StreamState{}, fmt.Errorf("memstore: state: %w", err)
	}
	if err := st.lock(ctx, "state"); err != nil {
		return seqstore.StreamState{}, err
	}
	defer st.mu.Unlock()
	return st.state(s), nil
}

// state returns what the store holds for s. The caller holds the mutex.
func (st *Store) state(s seqstore.Stream) seqstore.StreamState {
	out := seqstore.StreamState{Stream: s, Cursor: cloneCursor(st.cursors[s])}
	if sd := st.senders[s]; sd != nil {
		out.SendEpoch, out.LastSeq = sd.epoch, sd.next-1
		for seq, body := range sd.journal.All() {
			out.Journal = append(out.Journal, seqstore.EntryInfo{Epoch: sd.epoch, Seq: seq, Size: len(body)})
		}
	}
	if l := st.parks[s]; l != nil {
		c := out.Cursor
		keys := l.sorted()
		for _, k := range keys[l.search(pos{c.Epoch, c.Next}):] {
			out.Parked = append(out.Parked, seqstore.EntryInfo{Epoch: k.epoch, Seq: k.seq, Size: len(l.m[k].body)})
		}
	}
	return out
}
