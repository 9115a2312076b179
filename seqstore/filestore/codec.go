package filestore

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/inorder/inorder/seqstore"
)

// On-disk format: logs of version 1, snapshots of version 3 (versions 1,
// without parked entries, and 2, with their bodies inline, are still read),
// park segments of version 1. All integers are little endian; "uvarint" is
// encoding/binary's unsigned varint.
//
// Log file (log-<gen as 16 hex digits>):
//
//	header: magic "INORDLOG" | version u32 | gen u64 | crc32c(previous 20 bytes) u32
//	frames: length u32 | crc u32 | offset u64 | payload (length bytes)
//
// A frame's crc is CRC-32C over the log's gen u64, length u32, offset u64 and
// payload. Offset is where the frame was written: a frame read anywhere else
// (shifted by lost or extra bytes, swapped with another, or copied from
// another log) does not count as the frame expected there, but its checksum
// still verifies, which is how recovery tells a torn tail (nothing valid
// after the bad bytes) from damage in the middle (valid frames after them).
// One frame is one commit: the writer writes one frame and fsyncs it before
// writing the next, so only the last frame of the last log can be torn by a
// crash. A payload is a sequence of records, each a type byte followed by
// its fields. One store call is one record, so it is in one frame and takes
// effect whole or not at all. Record types 1 and 2 were written before the
// multi-stream calls and are still read; today's logs, of the same format
// version, may hold both (testdata/format1 is a store of that release).
// Record type 6 (parked entries) came with parking; a release before it
// reports a log holding one as corrupt rather than misread it.
//
// Snapshot file (snapshot):
//
//	magic "INORDSNP" | version u32 | reserved u32 | next log gen u64 | payload |
//	payload length u64 | crc32c(everything before it) u32
//
// The payload is: stream count, then per stream its name, sender epoch and
// next seq, cursor, and unsent journal (count, then seq, length, body).
// Version 2 adds the parked entries after it: the count of streams with
// parked entries, then per stream its name and count, then per entry, in
// (epoch, seq) order, epoch, seq, crc u32, length and body
// (testdata/format2 is a store of the first release that wrote it).
// Version 3 writes no bodies: each entry has, after its length, the
// generation of the park segment holding its body (uvarint) and the body's
// offset in it (uvarint).
//
// Park segment file (park-<gen as 16 hex digits>, written by the snapshot
// that starts log gen):
//
//	header: magic "INORDPRK" | version u32 | gen u64 | crc32c(previous 20 bytes) u32
//	bodies, back to back
//
// A segment is written whole and synced before a snapshot names it, and
// never written again; each body is checked by its entry's crc when read.
//
// A parked entry's crc is CRC-32C over its stream key (seqstore.Stream.Key),
// epoch u64, seq u64 and body: the store keeps only the entries' locations
// in memory and verifies each body when it reads it back.
const (
	logMagic        = "INORDLOG"
	snapMagic       = "INORDSNP"
	logVersion      = 1
	snapVersion     = 3
	snapVersion2    = 2 // parked bodies in the snapshot itself
	snapVersion1    = 1 // before parking: no parked entries
	segMagic        = "INORDPRK"
	segVersion      = 1
	segHeaderSize   = 8 + 4 + 8 + 4
	logHeaderSize   = 8 + 4 + 8 + 4
	frameHeaderSize = 4 + 4 + 8
	snapHeaderSize  = 8 + 4 + 4 + 8
	snapTrailerSize = 8 + 4

	// maxFrameBytes bounds one frame's payload. A frame holds calls of at
	// most batchBytes together (or one larger call up to maxRequestBytes),
	// plus the Sent marks that fit below the bound, each of at most
	// maxMarkSeqs seqs.
	maxFrameBytes = 256 << 20
	// maxRequestBytes bounds one Reserve or Advance call's encoding.
	maxRequestBytes = 64 << 20
	// maxLogBytes bounds the size of one log file (SnapshotBytes is
	// capped below it).
	maxLogBytes = 1 << 40
	// maxMarkSeqs bounds the seqs of one sent record (10 bytes each at most).
	maxMarkSeqs = 1 << 20
)

// Record types inside a frame payload. A reservation is: stream, epoch,
// first, n, journal flag (0 or 1), and with the flag n bodies (length,
// bytes). A mark is: stream, count, seqs.
const (
	// recReserve and recSent hold one reservation or mark. Releases
	// before the multi-stream contract wrote them; they are still read,
	// so that an upgraded store keeps its counters, and no longer written.
	recReserve byte = 1
	recSent    byte = 2
	// recAdvance is one Advance call: count, then per stream: stream and
	// its new cursor.
	recAdvance byte = 3
	// recReserves is one Reserve call: count, then its reservations.
	recReserves byte = 4
	// recSents holds Sent marks, of any number of calls: count, then marks.
	recSents byte = 5
	// recParks is one Park call: count, then per entry: stream, epoch,
	// seq, crc u32, length, body.
	recParks byte = 6
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errDecode is the cause wrapped into ErrCorrupt when a payload does not
// parse; decoders return it and callers add the location.
var errDecode = errors.New("malformed record")

func logHeader(gen uint64) []byte {
	b := make([]byte, 0, logHeaderSize)
	b = append(b, logMagic...)
	b = binary.LittleEndian.AppendUint32(b, logVersion)
	b = binary.LittleEndian.AppendUint64(b, gen)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// segHeader returns the header of park segment gen.
func segHeader(gen uint64) []byte {
	b := make([]byte, 0, segHeaderSize)
	b = append(b, segMagic...)
	b = binary.LittleEndian.AppendUint32(b, segVersion)
	b = binary.LittleEndian.AppendUint64(b, gen)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// checkLogHeader reports whether h is a valid header of log gen.
func checkLogHeader(h []byte, gen uint64) bool {
	if len(h) < logHeaderSize {
		return false
	}
	want := logHeader(gen)
	return string(h[:logHeaderSize]) == string(want)
}

// frameCRC returns the checksum of frame, a whole frame whose length and
// offset fields are set, in log gen.
func frameCRC(gen uint64, frame []byte) uint32 {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[0:], gen)
	copy(b[8:], frame[0:4])
	return crc32.Update(crc32.Update(0, castagnoli, b[:]), castagnoli, frame[8:])
}

// sealFrame fills the header of frame (whose payload starts at
// frameHeaderSize) for a frame written at offset off of log gen.
func sealFrame(frame []byte, gen, off uint64) {
	binary.LittleEndian.PutUint32(frame[0:], uint32(len(frame)-frameHeaderSize))
	binary.LittleEndian.PutUint64(frame[8:], off)
	binary.LittleEndian.PutUint32(frame[4:], frameCRC(gen, frame))
}

// frameAt returns the payload of the frame at off in data (a whole log file)
// and the frame's total size, or ok == false if no valid frame written for
// offset off starts there.
func frameAt(data []byte, gen uint64, off int) (payload []byte, size int, ok bool) {
	payload, size, ok = frameAnywhere(data, gen, off)
	if ok && binary.LittleEndian.Uint64(data[off+8:]) != uint64(off) {
		return nil, 0, false
	}
	return payload, size, ok
}

// frameAnywhere is frameAt without the offset check: it finds a frame of
// log gen that verifies at off, wherever it was written.
func frameAnywhere(data []byte, gen uint64, off int) (payload []byte, size int, ok bool) {
	if off < 0 || len(data)-off < frameHeaderSize {
		return nil, 0, false
	}
	n := binary.LittleEndian.Uint32(data[off:])
	if n == 0 || n > maxFrameBytes || uint64(len(data)-off-frameHeaderSize) < uint64(n) {
		return nil, 0, false
	}
	// Rejecting implausible offsets before computing the checksum keeps
	// a scan through random bytes linear: a random length fits the rest
	// of a large file often, a random offset below maxLogBytes almost never.
	if o := binary.LittleEndian.Uint64(data[off+8:]); o < logHeaderSize || o > maxLogBytes {
		return nil, 0, false
	}
	frame := data[off : off+frameHeaderSize+int(n)]
	if binary.LittleEndian.Uint32(frame[4:]) != frameCRC(gen, frame) {
		return nil, 0, false
	}
	return frame[frameHeaderSize:], len(frame), true
}

// validFrameAfter reports whether any frame of log gen verifies anywhere
// at or after off. It tells a torn tail (nothing valid follows the bad bytes) from
// damage in the middle of a log (frames follow, possibly shifted). A torn
// frame whose journal body happens to hold a whole valid frame of this log
// also counts as damage: a false alarm that stops Open, never lost data.
func validFrameAfter(data []byte, gen uint64, off int) bool {
	for p := off; p+frameHeaderSize <= len(data); p++ {
		if _, _, ok := frameAnywhere(data, gen, p); ok {
			return true
		}
	}
	return false
}

// Encoding helpers.

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStream(b []byte, s seqstore.Stream) []byte {
	return appendString(appendString(b, s.Queue), s.Group)
}

func appendCursor(b []byte, c seqstore.Cursor) []byte {
	b = binary.AppendUvarint(b, c.Epoch)
	b = binary.AppendUvarint(b, c.Next)
	b = binary.AppendUvarint(b, c.Owner)
	b = binary.AppendUvarint(b, uint64(len(c.Skipped)))
	for _, r := range c.Skipped {
		b = binary.AppendUvarint(b, r.Epoch)
		b = binary.AppendUvarint(b, r.First)
		b = binary.AppendUvarint(b, r.Last)
	}
	return b
}

// appendReserves appends the record of one Reserve call whose requests
// got the reservations res.
func appendReserves(b []byte, reqs []seqstore.ReserveRequest, res []seqstore.Reservation) []byte {
	b = append(b, recReserves)
	b = binary.AppendUvarint(b, uint64(len(reqs)))
	for i, r := range reqs {
		b = appendReservation(b, r.Stream, res[i].Epoch, res[i].First, r.N, r.Journal)
	}
	return b
}

func appendReservation(b []byte, s seqstore.Stream, epoch, first uint64, n int, journal [][]byte) []byte {
	b = appendStream(b, s)
	b = binary.AppendUvarint(b, epoch)
	b = binary.AppendUvarint(b, first)
	b = binary.AppendUvarint(b, uint64(n))
	if journal == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	for _, body := range journal {
		b = binary.AppendUvarint(b, uint64(len(body)))
		b = append(b, body...)
	}
	return b
}

// appendSents appends one record holding marks.
func appendSents(b []byte, marks []seqstore.SentMark) []byte {
	b = append(b, recSents)
	b = binary.AppendUvarint(b, uint64(len(marks)))
	for _, m := range marks {
		b = appendMark(b, m.Stream, m.Seqs)
	}
	return b
}

func appendMark(b []byte, s seqstore.Stream, seqs []uint64) []byte {
	b = appendStream(b, s)
	b = binary.AppendUvarint(b, uint64(len(seqs)))
	for _, q := range seqs {
		b = binary.AppendUvarint(b, q)
	}
	return b
}

func appendAdvance(b []byte, batch []seqstore.Advance) []byte {
	b = append(b, recAdvance)
	b = binary.AppendUvarint(b, uint64(len(batch)))
	for _, a := range batch {
		b = appendStream(b, a.Stream)
		b = appendCursor(b, a.To)
	}
	return b
}

// appendParks appends the record of one Park call whose entries have the
// checksums crcs, and sets bodies[i] to where entry i's body starts in b.
func appendParks(b []byte, entries []seqstore.Parked, crcs []uint32, bodies []int) []byte {
	b = append(b, recParks)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for i, p := range entries {
		b = appendStream(b, p.Stream)
		b = binary.AppendUvarint(b, p.Epoch)
		b = binary.AppendUvarint(b, p.Seq)
		b = binary.LittleEndian.AppendUint32(b, crcs[i])
		b = binary.AppendUvarint(b, uint64(len(p.Body)))
		bodies[i] = len(b)
		b = append(b, p.Body...)
	}
	return b
}

// parkCRC returns the checksum stored with a parked body: CRC-32C over the
// stream key, epoch, seq and body.
func parkCRC(key string, epoch, seq uint64, body []byte) uint32 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], epoch)
	binary.LittleEndian.PutUint64(b[8:], seq)
	c := crc32.Update(0, castagnoli, []byte(key))
	c = crc32.Update(c, castagnoli, b[:])
	return crc32.Update(c, castagnoli, body)
}

// streamSize bounds the encoded size of a stream name.
func streamSize(s seqstore.Stream) int {
	return 2*binary.MaxVarintLen64 + len(s.Queue) + len(s.Group)
}

// reservationSize bounds the encoded size of one reservation.
func reservationSize(r seqstore.ReserveRequest) int {
	n := streamSize(r.Stream) + 3*binary.MaxVarintLen64 + 1
	for _, body := range r.Journal {
		n += binary.MaxVarintLen64 + len(body)
	}
	return n
}

// markSize bounds the encoded size of one mark.
func markSize(m seqstore.SentMark) int {
	return streamSize(m.Stream) + binary.MaxVarintLen64*(1+len(m.Seqs))
}

// advanceSize bounds the encoded size of one advance.
func advanceSize(a seqstore.Advance) int {
	return streamSize(a.Stream) + binary.MaxVarintLen64*(4+3*len(a.To.Skipped))
}

// parkSize bounds the encoded size of one parked entry.
func parkSize(p seqstore.Parked) int {
	return streamSize(p.Stream) + 3*binary.MaxVarintLen64 + 4 + len(p.Body)
}

// decoder reads fields from a payload. The first failure sticks: later reads
// return zero values and err reports errDecode.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	d.err = errDecode
	d.b = nil
}

func (d *decoder) empty() bool { return len(d.b) == 0 }

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length that must not exceed max.
func (d *decoder) count(max int) int {
	v := d.uvarint()
	if v > uint64(max) {
		d.fail()
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(n int) []byte {
	if n > len(d.b) {
		d.fail()
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) uint32() uint32 {
	p := d.bytes(4)
	if d.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}

func (d *decoder) string(max int) string {
	return string(d.bytes(d.count(max)))
}

func (d *decoder) stream() seqstore.Stream {
	s := seqstore.Stream{Queue: d.string(seqstore.MaxQueueLen), Group: d.string(seqstore.MaxGroupLen)}
	if d.err == nil && s.Validate() != nil {
		d.fail()
	}
	return s
}

func (d *decoder) cursor() seqstore.Cursor {
	c := seqstore.Cursor{Epoch: d.uvarint(), Next: d.uvarint(), Owner: d.uvarint()}
	n := d.count(seqstore.MaxSkipped)
	if n > 0 {
		c.Skipped = make([]seqstore.Range, 0, n)
		for range n {
			c.Skipped = append(c.Skipped, seqstore.Range{Epoch: d.uvarint(), First: d.uvarint(), Last: d.uvarint()})
		}
	}
	if c.Epoch > seqstore.MaxSeq || c.Next > seqstore.MaxSeq {
		d.fail()
	}
	return c
}
