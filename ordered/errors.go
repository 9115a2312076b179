package ordered

import "errors"

// Errors shared by both directions. Send- and receive-specific errors are
// declared beside the code that returns them.
var (
	// ErrClosed is returned by calls made after Close began.
	ErrClosed = errors.New("ordered: queue closed")
)
