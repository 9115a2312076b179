package ordered

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/seqstore"
)

// The journal seal. In durable-send mode the store journals each message's
// payload with its reservation, and recovery signs and sends whatever the
// journal holds: without a seal, whoever can write the sender's store (and
// has no key) could plant an entry and have the sender sign it, any group,
// epoch, seq and payload. With Options.Key each journal entry is sealed:
//
//	sealMagic (4 bytes) || tag (sealTagLen bytes) || payload
//
// where tag is HMAC-SHA256 under the key, truncated, of sealDomain and the
// stream's queue, group (each length-prefixed) and the payload. Recovery
// sends an entry only if its seal verifies under Key or OldKeys; any other
// is logged, counted (SendStats.Tampered) and left in the journal unsent.
//
// The seqs are allocated by the same store write that journals the entry,
// so the seal cannot cover epoch and seq: a store writer can still move a
// sealed entry to another seq or epoch of its stream (as it can rewind or
// advance the stream's counter). It cannot make the sender sign a payload
// the application did not send on that stream, nor an epoch more than a
// day ahead of the clock (see epochAhead), which would let it take the
// group over at the receivers.
const (
	sealMagic  = "\xffiJ1"
	sealTagLen = 16
	sealLen    = len(sealMagic) + sealTagLen
	sealDomain = "inorder/journal/v1 seal\x00"
)

// errUnsealed is why recovery refuses a journal entry whose seal is missing
// or does not verify.
var errUnsealed = errors.New("journal entry not sealed by Options.Key or OldKeys (tampered, or journaled before sealing)")

// sealTag computes an entry's tag under key.
func sealTag(key []byte, stream seqstore.Stream, payload []byte) [sealTagLen]byte {
	m := hmac.New(sha256.New, key)
	var n [8]byte
	m.Write([]byte(sealDomain))
	binary.BigEndian.PutUint64(n[:], uint64(len(stream.Queue)))
	m.Write(n[:])
	m.Write([]byte(stream.Queue))
	binary.BigEndian.PutUint64(n[:], uint64(len(stream.Group)))
	m.Write(n[:])
	m.Write([]byte(stream.Group))
	m.Write(payload)
	var sum [sha256.Size]byte
	var tag [sealTagLen]byte
	copy(tag[:], m.Sum(sum[:0]))
	return tag
}

// appendSealed appends the sealed journal entry of payload to dst.
func appendSealed(dst, key []byte, stream seqstore.Stream, payload []byte) []byte {
	tag := sealTag(key, stream, payload)
	dst = append(dst, sealMagic...)
	dst = append(dst, tag[:]...)
	return append(dst, payload...)
}

// openSealed returns the payload of a sealed journal entry whose tag
// verifies under one of keys, or errUnsealed.
func openSealed(entry []byte, stream seqstore.Stream, keys [][]byte) ([]byte, error) {
	if len(entry) < sealLen || string(entry[:len(sealMagic)]) != sealMagic {
		return nil, errUnsealed
	}
	tag, payload := entry[len(sealMagic):sealLen], entry[sealLen:]
	ok := false
	for _, k := range keys {
		want := sealTag(k, stream, payload)
		if hmac.Equal(want[:], tag) {
			ok = true
		}
	}
	if !ok {
		return nil, errUnsealed
	}
	return payload, nil
}

// sealKeys returns the keys that open journal entries: Key, then OldKeys
// (an entry journaled before a rotation). Nil without a key: the journal
// is not sealed.
func (o *Options) sealKeys() [][]byte {
	if len(o.Key) == 0 {
		return nil
	}
	return append([][]byte{o.Key}, o.OldKeys...)
}

// epochAhead reports whether epoch, whose high bits are a wall clock in
// milliseconds (seqstore.NewEpoch), lies more than maxEpochAhead after now:
// the receive core's clamp, applied by the sender to what its store hands
// it.
func epochAhead(epoch uint64, now time.Time) bool {
	return int64(epoch>>20) > now.Add(maxEpochAhead).UnixMilli()
}

// openJournal returns the entries of a Pending listing that recovery may
// send, with their payloads unsealed (with Options.Key), in place. The
// others (a seal that does not verify, an epoch far ahead of the clock)
// are logged, counted in SendStats.Tampered and left in the journal.
func (s *sender) openJournal(entries []seqstore.Entry) []seqstore.Entry {
	keys := s.q.opts.sealKeys()
	now := time.Now()
	out := entries[:0]
	for _, e := range entries {
		var err error
		switch {
		case epochAhead(e.Epoch, now):
			err = fmt.Errorf("%w: epoch %d", ErrEpochAhead, e.Epoch)
		case keys != nil:
			e.Body, err = openSealed(e.Body, e.Stream, keys)
		}
		if err != nil {
			s.stat.tampered.Add(1)
			s.q.log.Error("ordered: recover: refusing journal entry", "group", e.Stream.Group, "epoch", e.Epoch, "seq", e.Seq, "err", err)
			continue
		}
		out = append(out, e)
	}
	return out
}

// Metadata in the journal. The entry of a message sent with metadata
// (SendWithMetadata) is framed, so that recovery sends it again with its
// metadata:
//
//	metaMagic (4 bytes) || length of the block (2 bytes, big-endian) || block || payload
//
// Any other entry is its bare payload, as before metadata existed, except a
// payload that itself begins with metaMagic: it is framed with an empty
// block, so that every entry written since reads back as it was written.
// With Options.Key the seal covers the framed entry. An entry that begins
// with metaMagic but whose frame does not hold a valid block is read as a
// bare payload: only a payload journaled by a release before metadata that
// began with these four bytes and a valid-looking frame would be misread.
// A release before metadata recovering a framed entry sends the frame as
// part of the payload: do not downgrade senders with such entries pending.
const (
	metaMagic    = "\xffiM1"
	metaFrameLen = len(metaMagic) + 2
)

// framed reports whether the journal entry of a message is framed.
func framed(meta, payload []byte) bool {
	return meta != nil || len(payload) >= len(metaMagic) && string(payload[:len(metaMagic)]) == metaMagic
}

// entryLen is the length of a message's unsealed journal entry.
func entryLen(meta, payload []byte) int {
	if framed(meta, payload) {
		return metaFrameLen + len(meta) + len(payload)
	}
	return len(payload)
}

// appendEntry appends a message's unsealed journal entry to dst.
func appendEntry(dst, meta, payload []byte) []byte {
	if !framed(meta, payload) {
		return append(dst, payload...)
	}
	dst = append(dst, metaMagic...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(meta))) // at most envelope.MaxMetadataLen
	dst = append(dst, meta...)
	return append(dst, payload...)
}

// openEntry splits an unsealed journal entry into the message's metadata
// block (nil for none) and payload. Both alias entry.
func openEntry(entry []byte) (meta, payload []byte) {
	if len(entry) < metaFrameLen || string(entry[:len(metaMagic)]) != metaMagic {
		return nil, entry
	}
	n := int(binary.BigEndian.Uint16(entry[len(metaMagic):]))
	rest := entry[metaFrameLen:]
	switch {
	case n == 0:
		return nil, rest
	case n <= len(rest) && envelope.ValidMetadata(rest[:n]):
		return rest[:n:n], rest[n:]
	}
	return nil, entry
}
