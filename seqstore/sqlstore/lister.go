package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.Lister = (*Store)(nil)

// Streams implements seqstore.Lister: four SELECTs (send, cursor, journal
// and parked rows of queue, body lengths only), outside the group commit
// and not in one transaction. A row that fails validation fails the call
// with an error wrapping seqstore.ErrCorrupt.
func (s *Store) Streams(ctx context.Context, queue string) ([]seqstore.StreamState, error) {
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("sqlstore: streams: %w", err)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("sqlstore: streams %q: %w", queue, seqstore.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: streams %q: %w", queue, err)
	}
	states, err := s.list(ctx, queue, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: streams %q: %w", queue, err)
	}
	return states, nil
}

// State implements seqstore.Lister, as Streams does for one stream.
func (s *Store) State(ctx context.Context, st seqstore.Stream) (seqstore.StreamState, error) {
	if err := st.Validate(); err != nil {
		return seqstore.StreamState{}, fmt.Errorf("sqlstore: state: %w", err)
	}
	if s.isClosed() {
		return seqstore.StreamState{}, fmt.Errorf("sqlstore: state of %s: %w", st, seqstore.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return seqstore.StreamState{}, fmt.Errorf("sqlstore: state of %s: %w", st, err)
	}
	states, err := s.list(ctx, st.Queue, &st.Group)
	if err != nil {
		return seqstore.StreamState{}, fmt.Errorf("sqlstore: state of %s: %w", st, err)
	}
	if len(states) == 0 {
		return seqstore.StreamState{Stream: st}, nil
	}
	return states[0], nil
}

// list reads the state of the streams of queue (of its group, if group is
// not nil) that have any, sorted by stream key.
func (s *Store) list(ctx context.Context, queue string, group *string) ([]seqstore.StreamState, error) {
	where, args := " WHERE queue = ?", []any{queue}
	if group != nil {
		where, args = where+" AND grp = ?", append(args, *group)
	}
	states := make(map[string]*seqstore.StreamState)
	state := func(grp string) (*seqstore.StreamState, error) {
		if st := states[grp]; st != nil {
			return st, nil
		}
		stream := seqstore.Stream{Queue: queue, Group: grp}
		if err := stream.Validate(); err != nil {
			return nil, fmt.Errorf("%w: row of group %q: %v", seqstore.ErrCorrupt, grp, err)
		}
		st := &seqstore.StreamState{Stream: stream}
		states[grp] = st
		return st, nil
	}
	err := s.rows(ctx, "SELECT grp, epoch, last_seq FROM "+s.prefix+"send"+where, args, 2, func(st *seqstore.StreamState, vals []any) error {
		epoch, last, err := sendFromRow(vals)
		st.SendEpoch, st.LastSeq = uint64(epoch), uint64(last)
		return err
	}, state)
	if err == nil {
		err = s.rows(ctx, "SELECT grp, "+cursorCols+" FROM "+s.prefix+"cursor"+where, args, 4, func(st *seqstore.StreamState, vals []any) error {
			var err error
			st.Cursor, err = cursorFromRow(vals)
			return err
		}, state)
	}
	if err == nil {
		err = s.rows(ctx, "SELECT grp, seq, LENGTH(body) FROM "+s.prefix+"journal"+where, args, 2, func(st *seqstore.StreamState, vals []any) error {
			seq, ok1 := toInt64(vals[0])
			size, ok2 := toInt64(vals[1])
			if !ok1 || !ok2 || seq < 1 || size < 0 {
				return fmt.Errorf("%w: journal row has seq %v and a body of %v bytes", seqstore.ErrCorrupt, vals[0], vals[1])
			}
			st.Journal = append(st.Journal, seqstore.EntryInfo{Seq: uint64(seq), Size: int(size)})
			return nil
		}, state)
	}
	if err == nil {
		err = s.rows(ctx, "SELECT grp, epoch, seq, LENGTH(body) FROM "+s.prefix+"parked"+where, args, 3, func(st *seqstore.StreamState, vals []any) error {
			epoch, ok1 := toInt64(vals[0])
			seq, ok2 := toInt64(vals[1])
			size, ok3 := toInt64(vals[2])
			if !ok1 || !ok2 || !ok3 || epoch < 0 || seq < 1 || size < 0 {
				return fmt.Errorf("%w: parked row has epoch %v seq %v and a body of %v bytes", seqstore.ErrCorrupt, vals[0], vals[1], vals[2])
			}
			st.Parked = append(st.Parked, seqstore.EntryInfo{Epoch: uint64(epoch), Seq: uint64(seq), Size: int(size)})
			return nil
		}, state)
	}
	if err != nil {
		return nil, err
	}
	out := make([]seqstore.StreamState, 0, len(states))
	for _, st := range states {
		if len(st.Journal) > 0 && st.SendEpoch == 0 {
			return nil, fmt.Errorf("%w: %s has journal entries but no send row", seqstore.ErrCorrupt, st.Stream)
		}
		for i := range st.Journal {
			st.Journal[i].Epoch = st.SendEpoch
		}
		slices.SortFunc(st.Journal, func(a, b seqstore.EntryInfo) int { return cmp.Compare(a.Seq, b.Seq) })
		// Rows the cursor passed that no write dropped yet are not shown,
		// as Unpark does not return them.
		st.Parked = slices.DeleteFunc(st.Parked, func(e seqstore.EntryInfo) bool { return st.Cursor.Below(e.Epoch, e.Seq) })
		slices.SortFunc(st.Parked, func(a, b seqstore.EntryInfo) int {
			return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Seq, b.Seq))
		})
		// A zero cursor row (written for Park to lock) with nothing else
		// is no state.
		if !st.Empty() {
			out = append(out, *st)
		}
	}
	slices.SortFunc(out, func(a, b seqstore.StreamState) int { return cmp.Compare(a.Stream.Key(), b.Stream.Key()) })
	return out, nil
}

// rows runs query and calls row with the state of each row's group (from
// state) and its n values after grp, scanned as they come.
func (s *Store) rows(ctx context.Context, query string, args []any, n int,
	row func(st *seqstore.StreamState, vals []any) error, state func(grp string) (*seqstore.StreamState, error)) error {
	rs, err := s.db.QueryContext(ctx, s.ph(query), args...)
	if err != nil {
		return err
	}
	defer func() { _ = rs.Close() }()
	vals := make([]any, n)
	dest := make([]any, n+1)
	var grp string
	dest[0] = &grp
	for i := range vals {
		dest[i+1] = &vals[i]
	}
	for rs.Next() {
		if err := rs.Scan(dest...); err != nil {
			return err
		}
		st, err := state(grp)
		if err == nil {
			err = row(st, vals)
		}
		if err != nil {
			return fmt.Errorf("group %q: %w", grp, err)
		}
	}
	return rs.Err()
}
