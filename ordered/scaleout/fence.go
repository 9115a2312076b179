package scaleout

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/inorder/inorder/internal/shard"
	"github.com/inorder/inorder/seqstore"
)

// errForeign marks a stream whose group the topology places on another
// shard: a sender with another topology wrote it into this shard's queue.
var errForeign = errors.New("scaleout: group belongs to another shard")

// fencedStore is the store a shard's ordered.Queue sees while its receiver
// holds the shard's lease with token. Reads claim each stream for token
// before the Queue sees its cursor, advances carry token, and a cursor that
// shows a newer owner fails its stream with seqstore.ErrFenced and fences
// the whole shard (onFence, once).
type fencedStore struct {
	seqstore.Store
	shard, shards int
	token         uint64
	onFence       func(error)

	once sync.Once
}

func (s *fencedStore) fence(err error) {
	s.once.Do(func() { s.onFence(err) })
}

// Cursors reads the cursors and claims for the token every one that an
// older owner holds (or none does). A stream that a newer owner claimed, or
// whose group belongs to another shard, fails alone.
func (s *fencedStore) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	curs, err := s.Store.Cursors(ctx, streams)
	var be *seqstore.BatchError
	if err != nil && !errors.As(err, &be) {
		return nil, err
	}
	errs := make([]error, len(streams))
	failed := false
	for i, st := range streams {
		if errs[i] = seqstore.Failed(err, i, len(streams)); errs[i] != nil {
			failed = true
			continue
		}
		if own := shard.Of(st.Group, s.shards); own != s.shard {
			errs[i] = fmt.Errorf("%w: %s is on shard %d, not %d", errForeign, st, own, s.shard)
			failed = true
			continue
		}
		c := curs[i]
		if c.Owner == s.token {
			continue
		}
		if seqstore.Fenced(c, s.token) {
			errs[i] = fmt.Errorf("%w: %s is claimed by token %d, above this receiver's %d", seqstore.ErrFenced, st, c.Owner, s.token)
		} else {
			curs[i], errs[i] = seqstore.Claim(ctx, s.Store, st, s.token)
		}
		if errs[i] != nil {
			failed = true
			if errors.Is(errs[i], seqstore.ErrFenced) {
				s.fence(errs[i])
			}
		}
	}
	if !failed {
		return curs, nil
	}
	return curs, &seqstore.BatchError{Errs: errs}
}

// Advance writes the batch with the token as the owner in From and To, so
// that a cursor a newer owner claimed refuses it.
func (s *fencedStore) Advance(ctx context.Context, batch []seqstore.Advance) error {
	fenced := make([]seqstore.Advance, len(batch))
	for i, a := range batch {
		a.From.Owner, a.To.Owner = s.token, s.token
		fenced[i] = a
	}
	return s.Store.Advance(ctx, fenced)
}

// Park parks the entries, then reads their cursors again: a stream that a
// newer owner claimed meanwhile may have read its park before this one
// landed, so the call fails with ErrFenced and fences the shard, and the
// Queue keeps the messages in the queue (it deletes only what it parked),
// where the new owner finds them.
func (s *fencedStore) Park(ctx context.Context, entries []seqstore.Parked) error {
	if err := s.Store.Park(ctx, entries); err != nil {
		return err
	}
	streams := make([]seqstore.Stream, 0, len(entries))
	seen := make(map[seqstore.Stream]bool, len(entries))
	for _, e := range entries {
		if !seen[e.Stream] {
			seen[e.Stream] = true
			streams = append(streams, e.Stream)
		}
	}
	curs, err := s.Store.Cursors(ctx, streams)
	if err != nil {
		return fmt.Errorf("scaleout: park: reading the cursors back: %w", err)
	}
	for i, c := range curs {
		if seqstore.Fenced(c, s.token) {
			err := fmt.Errorf("%w: %s was claimed by token %d while this receiver (token %d) parked", seqstore.ErrFenced, streams[i], c.Owner, s.token)
			s.fence(err)
			return err
		}
	}
	return nil
}

// ParkedStreams lists only the streams of this shard's groups: another
// shard's parks are its owner's to read.
func (s *fencedStore) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	all, err := s.Store.ParkedStreams(ctx, queue)
	if err != nil {
		return nil, err
	}
	mine := all[:0]
	for _, st := range all {
		if shard.Of(st.Group, s.shards) == s.shard {
			mine = append(mine, st)
		}
	}
	return mine, nil
}

// Close leaves the store open: it belongs to the Receiver.
func (s *fencedStore) Close() error { return nil }
