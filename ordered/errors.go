package ordered

import (
	"errors"

	"github.com/inorder/inorder/internal/recvcore"
)

// Errors shared by both directions. Send- and receive-specific errors are
// declared beside the code that returns them.
var (
	// ErrClosed is returned by calls made after Close began.
	ErrClosed = errors.New("ordered: queue closed")

	// ErrStoreLost is the Err of a Hooks.OnConflict event whose stored
	// cursor went back (Event.From was durable, Event.Seq is stored now):
	// the receiver's store lost data, a wipe or an old backup restored.
	// What the store had parked is lost with it: those messages were
	// deleted from the queue once parked. Event.Last is the highest parked
	// seq the group knew of (0: none known). The group goes on from what
	// it acknowledged, writing its cursor again.
	ErrStoreLost = recvcore.ErrStoreLost
)
