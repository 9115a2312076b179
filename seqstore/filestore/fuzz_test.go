package filestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"testing"

	"github.com/inorder/inorder/seqstore"
)

// appendFrame appends a sealed frame holding payload to a log image.
func appendFrame(log []byte, gen uint64, payload []byte) []byte {
	off := len(log)
	log = append(log, make([]byte, frameHeaderSize)...)
	log = append(log, payload...)
	sealFrame(log[off:], gen, uint64(off))
	return log
}

// appendLegacyReserve and appendLegacySent append records as releases
// before the multi-stream contract wrote them: one stream each.
func appendLegacyReserve(b []byte, s seqstore.Stream, epoch, first uint64, n int, journal [][]byte) []byte {
	return appendReservation(append(b, recReserve), s, epoch, first, n, journal)
}

func appendLegacySent(b []byte, s seqstore.Stream, seqs []uint64) []byte {
	return appendMark(append(b, recSent), s, seqs)
}

// FuzzRecord feeds arbitrary bytes to the decoders: as the payload of a
// frame whose checksum verifies, as a snapshot payload with a valid
// envelope, and as the tail of a log. Nothing may panic; every failure must
// be ErrCorrupt; an accepted log must end where no valid frame follows.
func FuzzRecord(f *testing.F) {
	st := seqstore.Stream{Queue: "q", Group: "g"}
	f.Add(appendReserves(nil, []seqstore.ReserveRequest{{Stream: st, N: 2, Journal: [][]byte{[]byte("a"), []byte("bc")}}, {Stream: st, N: 1}},
		[]seqstore.Reservation{{Epoch: 7, First: 1}, {Epoch: 7, First: 3}}))
	f.Add(appendSents(nil, []seqstore.SentMark{{Stream: st, Seqs: []uint64{1, 2}}, {Stream: seqstore.Stream{Queue: "r"}, Seqs: []uint64{5}}}))
	f.Add(appendLegacyReserve(nil, st, 7, 1, 2, [][]byte{[]byte("a"), []byte("bc")}))
	f.Add(appendLegacySent(nil, st, []uint64{1, 2}))
	f.Add(appendAdvance(nil, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 7, Next: 3, Skipped: []seqstore.Range{{Epoch: 7, First: 1, Last: 1}}}}}))
	parks := []seqstore.Parked{{Stream: st, Epoch: 7, Seq: 2, Body: []byte("p2")}, {Stream: st, Epoch: 7, Seq: 1, Body: nil}}
	f.Add(appendParks(nil, parks, []uint32{1, 2}, make([]int, 2)))
	f.Add([]byte{recReserve, 1, 'q', 0, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		// As a frame payload.
		if len(data) > 0 {
			log := appendFrame(logHeader(1), 1, data)
			end, err := replayLog("fuzz", log, 1, true, newState(), bytes.NewReader(log))
			if err != nil && !errors.Is(err, seqstore.ErrCorrupt) {
				t.Fatalf("replay of a verified frame: error %v does not wrap ErrCorrupt", err)
			}
			if err == nil && end != len(log) {
				t.Fatalf("replay accepted a verified frame but ended at %d of %d", end, len(log))
			}
		}

		// As a snapshot payload.
		snap := append([]byte(snapMagic), make([]byte, snapHeaderSize-len(snapMagic))...)
		binary.LittleEndian.PutUint32(snap[8:], snapVersion)
		binary.LittleEndian.PutUint64(snap[16:], 1)
		snap = append(snap, data...)
		snap = binary.LittleEndian.AppendUint64(snap, uint64(len(data)))
		snap = binary.LittleEndian.AppendUint32(snap, crc32.Checksum(snap, castagnoli))
		// Every park segment it names holds the bytes of a header and
		// zeros.
		anySeg := func(gen uint64) (io.ReaderAt, int64, error) {
			seg := append(segHeader(gen), make([]byte, 1<<16)...)
			return bytes.NewReader(seg), int64(len(seg)), nil
		}
		if st, _, err := decodeSnapshot(snap, bytes.NewReader(snap), anySeg); err == nil {
			// A snapshot that decodes must encode back to a snapshot
			// that decodes to the same state.
			enc, seg, err := st.encodeSnapshot(1)
			if err != nil {
				t.Fatalf("snapshot round trip: encode: %v", err)
			}
			again, _, err := decodeSnapshot(enc, bytes.NewReader(enc), func(gen uint64) (io.ReaderAt, int64, error) {
				if gen != 1 {
					return nil, 0, fmt.Errorf("segment %d", gen)
				}
				return bytes.NewReader(seg), int64(len(seg)), nil
			})
			if err != nil || again.streams != st.streams || again.entries != st.entries || again.journalBytes != st.journalBytes ||
				again.parked != st.parked || again.parkedBytes != st.parkedBytes {
				t.Fatalf("snapshot round trip: %v", err)
			}
		}

		// As raw log bytes after a valid header.
		log := append(logHeader(1), data...)
		end, err := replayLog("fuzz", log, 1, true, newState(), bytes.NewReader(log))
		switch {
		case err != nil:
			if !errors.Is(err, seqstore.ErrCorrupt) {
				t.Fatalf("replay of raw bytes: error %v does not wrap ErrCorrupt", err)
			}
		case end < logHeaderSize || end > len(log):
			t.Fatalf("replay ended at %d of %d", end, len(log))
		case end < len(log) && validFrameAfter(log, 1, end):
			t.Fatalf("replay cut at %d although a valid frame follows", end)
		}
	})
}

// FuzzLog builds a clean log of three or more frames from fuzzed bodies and
// damages one byte. Damage in any frame but the last must be reported as
// ErrCorrupt; damage in the last frame must be cut as a torn tail (or, if
// its bodies happen to hold a valid frame, reported as ErrCorrupt), and the
// earlier frames must survive.
func FuzzLog(f *testing.F) {
	f.Add([]byte("hello world, some bodies"), uint32(30), byte(1))
	f.Add([]byte{}, uint32(0), byte(0x80))
	f.Add(bytes.Repeat([]byte{0}, 100), uint32(200), byte(0xff))
	f.Fuzz(func(t *testing.T, bodies []byte, pos uint32, flip byte) {
		if flip == 0 {
			flip = 1
		}
		st := seqstore.Stream{Queue: "q", Group: "g"}
		log := logHeader(1)
		var starts []int
		const frames = 4
		next := uint64(1)
		for i := range frames {
			chunk := bodies[i*len(bodies)/frames : (i+1)*len(bodies)/frames]
			j := [][]byte{chunk, bytes.ToUpper(chunk)}
			starts = append(starts, len(log))
			log = appendFrame(log, 1, appendReserves(nil, []seqstore.ReserveRequest{{Stream: st, N: len(j), Journal: j}}, []seqstore.Reservation{{Epoch: 9, First: next}}))
			next += uint64(len(j))
		}
		clean := newState()
		if end, err := replayLog("clean", log, 1, true, clean, nil); err != nil || end != len(log) {
			t.Fatalf("clean log: end %d of %d, err %v", end, len(log), err)
		}

		p := logHeaderSize + int(pos%uint32(len(log)-logHeaderSize))
		bad := bytes.Clone(log)
		bad[p] ^= flip
		got := newState()
		end, err := replayLog("damaged", bad, 1, true, got, nil)
		lastStart := starts[frames-1]
		if p < lastStart {
			if !errors.Is(err, seqstore.ErrCorrupt) {
				t.Fatalf("byte %d flipped in frame before the last (which starts at %d): end %d, err %v; want ErrCorrupt", p, lastStart, end, err)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, seqstore.ErrCorrupt) {
				t.Fatalf("byte %d of the last frame flipped: error %v does not wrap ErrCorrupt", p, err)
			}
			return
		}
		if end != lastStart {
			t.Fatalf("byte %d of the last frame flipped: replay ended at %d, want %d", p, end, lastStart)
		}
		if ss := got.get(st); ss == nil || ss.next != next-2 {
			t.Fatalf("after a torn last frame the counter must cover the first %d frames", frames-1)
		}
	})
}
