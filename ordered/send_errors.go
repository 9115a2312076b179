package ordered

import "errors"

// Errors returned by Send and its variants before anything is
// reserved: a message that fails them takes no seq and leaves no trace.
var (
	// ErrTooLarge means a payload plus the largest header its group can
	// need does not fit the driver's body or batch limit.
	ErrTooLarge = errors.New("ordered: message too large")
	// ErrInvalidGroup means a group cannot be carried in the wire header
	// (longer than 128 bytes, not UTF-8, a NUL byte), or is not the default
	// group "" while Options.Send.Format is FormatLegacy.
	ErrInvalidGroup = errors.New("ordered: invalid group")
	// ErrInvalidMetadata means the metadata given to SendWithMetadata or
	// SendAsyncWithMetadata cannot be carried in the wire header: a key
	// outside [A-Za-z0-9._-], more than 1 KiB encoded, or FormatLegacy.
	ErrInvalidMetadata = errors.New("ordered: invalid metadata")
)

// ErrEpochAhead means the store gave the sender an epoch more than a day
// ahead of its clock. Receivers would take such an epoch for a forgery
// (or, signed with Options.Key, let it take the group over): the sender
// does not send the message, which stays journaled in durable mode
// (recovery refuses it too, counted in SendStats.Tampered). The store was
// written by someone else, or the clocks disagree.
var ErrEpochAhead = errors.New("ordered: store epoch far ahead of the clock")
