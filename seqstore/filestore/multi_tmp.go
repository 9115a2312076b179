package filestore

// TEMPORARY (branch stores-v2): the multi-stream calls of seqstore.Store
// over this package's single-stream ones, so that the repository builds
// and runs until branch filestore-v2 implements them natively (one frame
// and one fsync per call). Replace this whole file.
//
// What it does not give: a Reserve of several requests is checked first
// against the state in memory (validation, overflow), then applied one
// request (one frame) at a time, so a concurrent Reserve on the same
// stream can interleave between the requests of one call, and a failure of
// the log part-way is reported per request (nil for those applied).

import (
	"context"
	"fmt"

	"github.com/inorder/inorder/seqstore"
)

// Reserve implements seqstore.Store (temporary adapter, see above).
func (s *Store) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if err := seqstore.CheckReserve(reqs); err != nil {
		return nil, fmt.Errorf("filestore: reserve: %w", err)
	}
	if err := s.checkReserve(reqs); err != nil {
		return nil, fmt.Errorf("filestore: reserve: %w", err)
	}
	out := make([]seqstore.Reservation, len(reqs))
	for i, r := range reqs {
		res, err := s.reserveOne(ctx, r.Stream, r.N, r.Journal)
		if err != nil {
			if i == 0 {
				return nil, err
			}
			errs := make([]error, len(reqs))
			errs[i] = err
			for k := i + 1; k < len(reqs); k++ {
				errs[k] = seqstore.ErrAborted
			}
			return out, fmt.Errorf("filestore: reserve: %w", &seqstore.BatchError{Errs: errs})
		}
		out[i] = res
	}
	return out, nil
}

// checkReserve plans reqs against the counters in memory and returns the
// call's *seqstore.BatchError if a request would overflow.
func (s *Store) checkReserve(reqs []seqstore.ReserveRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[seqstore.Stream]uint64{}
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		n, ok := next[r.Stream]
		if !ok {
			n = 1
			if ss := s.st.get(r.Stream); ss != nil && ss.next != 0 {
				n = ss.next
			}
		}
		if uint64(r.N) > seqstore.MaxSeq+1-n {
			errs[i] = fmt.Errorf("%w: %d seqs of %s from %d", seqstore.ErrOverflow, r.N, r.Stream, n)
			continue
		}
		next[r.Stream] = n + uint64(r.N)
	}
	return seqstore.Abort(errs)
}

// Sent implements seqstore.Store (temporary adapter, see above).
func (s *Store) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	if err := seqstore.CheckSent(marks); err != nil {
		return fmt.Errorf("filestore: sent: %w", err)
	}
	for _, m := range marks {
		if err := s.sentOne(ctx, m.Stream, m.Seqs); err != nil {
			return err
		}
	}
	return nil
}

// Cursors implements seqstore.Store (temporary adapter, see above).
func (s *Store) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("filestore: cursors: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filestore: cursors: %w", err)
	}
	out := make([]seqstore.Cursor, len(streams))
	errs := make([]error, len(streams))
	failed := false
	for i, st := range streams {
		if errs[i] = st.Validate(); errs[i] != nil {
			failed = true
			continue
		}
		c, err := s.cursorOne(ctx, st)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	if failed {
		return out, fmt.Errorf("filestore: cursors: %w", &seqstore.BatchError{Errs: errs})
	}
	return out, nil
}
