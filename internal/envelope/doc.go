// Package envelope encodes and decodes the header that inorder puts in front
// of every message body: the stream's group, the sender epoch and the seq.
//
// # Forms
//
// The legacy form is byte-compatible with the MNS ordered-queue sample:
//
//	#<seq>#<payload>
//
// It carries no group and no epoch. The default form carries all three:
//
//	#v1;<epoch>;<seq>;<group>#<payload>
//
// Numbers are decimal without leading zeros; seq is 1..2^63-1 and epoch
// 0..2^63-1. A group made only of printable ASCII other than space and the
// bytes '#', ';', '%' and '~' is written verbatim; any other group is written
// as '~' followed by the unpadded base64url encoding of its bytes. A group of
// MaxGroupLen bytes thus needs at most 172 header bytes, and every valid
// header fits MaxHeaderLen bytes.
//
// # Metadata
//
// A message may carry a small set of string key/values (W3C trace context,
// user metadata) in the v2 form, which is the default form plus the length
// of a metadata block that follows the header:
//
//	#v2;<epoch>;<seq>;<metalen>;<group>[;<mac>]#<metadata><payload>
//
// The block is metalen (1..MaxMetadataLen) bytes of "key=value" entries
// joined by ';', in increasing key order, each key once. A key is one or
// more bytes of [A-Za-z0-9._-]; a value is any bytes, printable ASCII and
// space written verbatim except '%', ';', '<', '>' and '&', every other byte
// as '%' and two upper-case hex digits. The block is text, so the MNS
// adapter's raw mode and the SDKs that write bodies into XML unescaped carry
// it unchanged.
//
// Compatibility: a message without metadata is written in the v1 (or legacy)
// form, byte for byte as before v2 existed, so every reader of those forms
// reads it; v2 is written only when a sender sets metadata. Readers older
// than v2 (and the MNS sample's legacy reader) see a v2 body as untagged:
// upgrade receivers before senders start to set metadata.
//
// # Strictness
//
// Parse accepts only the canonical encoding of a header, so every header has
// exactly one encoding and re-encoding a parsed header gives back the bytes
// it came from, the metadata block included. A body without a valid header
// is untagged: Parse reports it with ok == false, never with an error, and
// never panics. Parse looks at no
// more than the first MaxHeaderLen bytes to find the header, and then at
// most MaxMetadataLen bytes of metadata, so hostile bodies cost bounded work.
//
// The payload is opaque and may be binary; Append copies it unchanged and
// Parse returns a slice of the body.
//
// # Authentication
//
// A default-form (or v2) header may end with a MAC, the unpadded base64url of
// MACLen bytes after one more ';':
//
//	#v1;<epoch>;<seq>;<group>;<mac>#<payload>
//
// The MAC (Sign) is HMAC-SHA256, truncated to 128 bits, of a domain string,
// the group (length-prefixed), epoch and seq, the metadata block of a v2
// header (length-prefixed, under a domain string of its own, so that no MAC
// verifies once metadata is added, removed or changed), and the payload. Senders make
// it under a context key (ContextKey): a key derived from the shared key
// and a context that both ends know and the header does not carry, by
// default the queue's name (ordered.Options.Name, or Options.MACContext).
// A signed body copied into a queue of another context does not verify
// there, even when both queues share the key. The header is unchanged in
// shape and length; only the MAC's value differs. A MAC under the bare key
// is the context-free form that senders made before MACs were bound to a
// context (issue 21): a receiver accepts it only when told to during an
// upgrade, by verifying against the bare keys as well as the context keys.
// Keys shorter than MinKeyLen never verify anything (ValidateKey refuses
// them).
//
// # Errors
//
// ValidateGroup and Header.Validate return errors wrapping ErrInvalidHeader;
// ValidateKey one wrapping ErrWeakKey; AppendMetadata, MetadataLen and
// ValidateMetadataKey ones wrapping ErrInvalidMetadata.
// Append panics on an invalid header: callers validate the group before
// reserving a seq, and seqs and epochs come from a store that keeps them
// within MaxNumber.
package envelope
