package filestore

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.Parker = (*Store)(nil)

// Park implements seqstore.Parker. The call is one record of the log,
// written and fsynced with whatever Reserve and Advance calls share its
// commit; its bodies stay in the log (and later in the snapshot), and
// memory keeps only where they are. An entry its stream's cursor already
// passed fails the call with a *seqstore.BatchError wrapping
// seqstore.ErrConflict, nothing applied; a call whose encoding passes
// 64 MiB fails with one wrapping seqstore.ErrInvalidArgument. Cancellation
// works as for Reserve.
func (s *Store) Park(ctx context.Context, entries []seqstore.Parked) error {
	if err := s.checkOpen(); err != nil {
		return fmt.Errorf("filestore: park: %w", err)
	}
	err := seqstore.CheckPark(entries)
	size := 1 + binary.MaxVarintLen64
	for i := 0; err == nil && i < len(entries); i++ {
		if size += parkSize(entries[i]); size > maxRequestBytes {
			err = tooLarge(len(entries), i, fmt.Errorf("%w: park %s: the call's encoding passes %d bytes here", seqstore.ErrInvalidArgument, entries[i].Stream, maxRequestBytes))
		}
	}
	if err != nil {
		return fmt.Errorf("filestore: park: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("filestore: park: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	// The checksums are computed here, in the callers, not in the writer.
	crcs := make([]uint32, len(entries))
	var key string
	for i, p := range entries {
		if i == 0 || p.Stream != entries[i-1].Stream {
			key = p.Stream.Key()
		}
		crcs[i] = parkCRC(key, p.Epoch, p.Seq, p.Body)
	}
	r := s.newRequest()
	r.kind, r.park, r.crcs, r.size = kindPark, entries, crcs, size
	if err := s.do(ctx, r); err != nil {
		return fmt.Errorf("filestore: park: %w", err)
	}
	return nil
}

// Unpark implements seqstore.Parker. It reads each body from the log or
// snapshot (one pread per entry) and verifies its checksum: a mismatch or
// a body past the end of its file fails the call with an error wrapping
// seqstore.ErrCorrupt. Like every read it reflects only durable parks and
// advances: if a frame is being written it waits for its fsync.
func (s *Store) Unpark(ctx context.Context, queries []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("filestore: unpark: %w", err)
	}
	errs := make([]error, len(queries))
	for i, q := range queries {
		errs[i] = q.Check()
	}
	if err := seqstore.Abort(errs); err != nil {
		return nil, fmt.Errorf("filestore: unpark: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filestore: unpark: %w", err)
	}
	s.fileMu.RLock()
	defer s.fileMu.RUnlock()
	if s.filesClosed {
		return nil, fmt.Errorf("filestore: unpark: %w", seqstore.ErrClosed)
	}
	found := make([][]parkEntry, len(queries))
	s.mu.Lock()
	for i, q := range queries {
		found[i] = s.st.unpark(q)
	}
	wait := s.inflight
	s.mu.Unlock()
	if err := s.awaitDurable(ctx, wait); err != nil {
		return nil, fmt.Errorf("filestore: unpark: %w", err)
	}
	out := make([][]seqstore.Parked, len(queries))
	for i, q := range queries {
		if len(found[i]) == 0 {
			continue
		}
		key := q.Stream.Key()
		out[i] = make([]seqstore.Parked, 0, len(found[i]))
		for _, e := range found[i] {
			body := make([]byte, e.size)
			if err := readBody(e, body); err != nil {
				return nil, fmt.Errorf("filestore: unpark %s %d/%d: %w", q.Stream, e.epoch, e.seq, err)
			}
			if parkCRC(key, e.epoch, e.seq, body) != e.crc {
				return nil, fmt.Errorf("filestore: unpark %s %d/%d: parked body fails its checksum: %w", q.Stream, e.epoch, e.seq, seqstore.ErrCorrupt)
			}
			out[i] = append(out[i], seqstore.Parked{Stream: q.Stream, Epoch: e.epoch, Seq: e.seq, Body: body})
		}
	}
	return out, nil
}

// ParkedStreams implements seqstore.Parker. It waits for a frame being
// written, as Pending does.
func (s *Store) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("filestore: parked streams %q: %w", queue, err)
	}
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("filestore: parked streams: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filestore: parked streams %q: %w", queue, err)
	}
	s.mu.Lock()
	streams := s.st.parkedStreams(queue)
	wait := s.inflight
	s.mu.Unlock()
	if err := s.awaitDurable(ctx, wait); err != nil {
		return nil, fmt.Errorf("filestore: parked streams %q: %w", queue, err)
	}
	return streams, nil
}
