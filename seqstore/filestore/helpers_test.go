package filestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

func openT(t testing.TB, dir string, opts *Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	require.NoError(t, err, "open %s", dir)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// senderState returns the durable sender counter of st as the store holds it.
func senderState(s *Store, st seqstore.Stream) (epoch, next uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.st.get(st); ss != nil {
		return ss.epoch, ss.next
	}
	return 0, 0
}

func body(st seqstore.Stream, seq uint64) []byte {
	return fmt.Appendf(nil, "body %s #%d", st, seq)
}

// reserveN makes k serial reservations of one seq each on st, journaling
// body(st, seq). Serial calls produce one frame each.
func reserveN(t testing.TB, s *Store, st seqstore.Stream, k int) {
	t.Helper()
	for range k {
		_, next := senderState(s, st)
		if next == 0 {
			next = 1
		}
		res, err := reserve(context.Background(), s, st, 1, [][]byte{body(st, next)})
		require.NoError(t, err)
		require.Equal(t, next, res.First, "reservation of %s", st)
	}
}

func logPath(dir string, gen uint64) string { return filepath.Join(dir, logName(gen)) }

// frameOffsets returns the offsets of the frames of a log file.
func frameOffsets(t testing.TB, data []byte, gen uint64) []int {
	t.Helper()
	var offs []int
	for off := logHeaderSize; off < len(data); {
		_, size, ok := frameAt(data, gen, off)
		require.True(t, ok, "frame at %d of a clean log", off)
		offs = append(offs, off)
		off += size
	}
	return offs
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// reserve makes one single-request Reserve call.
func reserve(ctx context.Context, s *Store, st seqstore.Stream, n int, journal [][]byte) (seqstore.Reservation, error) {
	res, err := s.Reserve(ctx, []seqstore.ReserveRequest{{Stream: st, N: n, Journal: journal}})
	if err != nil {
		return seqstore.Reservation{}, err
	}
	return res[0], nil
}

// sent marks seqs of st sent in one Sent call.
func sent(ctx context.Context, s *Store, st seqstore.Stream, seqs []uint64) error {
	return s.Sent(ctx, []seqstore.SentMark{{Stream: st, Seqs: seqs}})
}

// cursor reads the cursor of st in one Cursors call.
func cursor(ctx context.Context, s *Store, st seqstore.Stream) (seqstore.Cursor, error) {
	cs, err := s.Cursors(ctx, []seqstore.Stream{st})
	if err != nil {
		return seqstore.Cursor{}, err
	}
	return cs[0], nil
}
