package ordered

import "github.com/inorder/inorder/ordered/driver"

// ReceiveOptions configures the receive side of a Queue.
type ReceiveOptions struct {
	// TODO(receive): fields.
}

func (o *ReceiveOptions) setDefaults(limits driver.Limits) error {
	return nil
}
