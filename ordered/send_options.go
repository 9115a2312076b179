package ordered

import "github.com/inorder/inorder/ordered/driver"

// SendOptions configures the send side of a Queue.
type SendOptions struct {
	// TODO(send): fields.
}

func (o *SendOptions) setDefaults(limits driver.Limits) error {
	return nil
}
