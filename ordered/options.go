package ordered

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/inorder/inorder/internal/retry"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore"
)

// Options configures a Queue. The zero value (or a nil *Options) selects the
// documented defaults.
type Options struct {
	// Name names this queue's streams in the store: a stream is (Name,
	// group). Senders and receivers of one queue must use the same Name.
	// Default "default". Use distinct names when one store serves several
	// queues.
	Name string

	// Logger receives the Queue's logs with stable keys (group, epoch, seq,
	// err). Nil discards them.
	Logger *slog.Logger

	// Hooks are called on notable events; see Hooks.
	Hooks Hooks

	// Retry bounds the backoff of retried driver and store calls.
	Retry RetryOptions

	// Send configures the send side.
	Send SendOptions

	// Receive configures the receive side.
	Receive ReceiveOptions

	// Key, when set, authenticates message headers: the sender appends a
	// MAC (HMAC-SHA256 over group, epoch, seq and payload, truncated to
	// 128 bits) to each header, and the receiver treats a header without
	// a MAC valid under Key or OldKeys as untagged (reported through
	// Hooks.OnUntagged). Without a key, anyone who can send to the queue
	// can forge a header: replace a payload, switch a group to a forged
	// epoch, or make GapSkip jump. To rotate: give receivers the new key
	// in OldKeys first, then make it Key on senders and receivers (the old
	// one moving to OldKeys), and drop it once no message signed with it
	// can remain in the queue. FormatLegacy carries no MAC: it cannot be
	// used with a key.
	Key []byte

	// OldKeys are accepted by the receiver besides Key, during a rotation.
	OldKeys [][]byte
}

// keys returns every key a receiver accepts, Key first.
func (o *Options) keys() [][]byte {
	if len(o.Key) == 0 {
		return nil
	}
	return append([][]byte{o.Key}, o.OldKeys...)
}

// RetryOptions bounds the exponential backoff, with full jitter, between
// attempts of a retryable driver or store call.
type RetryOptions struct {
	// Initial is the first backoff. Default 50ms.
	Initial time.Duration
	// Max caps the backoff. Default 5s.
	Max time.Duration
}

func (o *Options) setDefaults(limits driver.Limits) error {
	if o.Name == "" {
		o.Name = "default"
	}
	if err := (seqstore.Stream{Queue: o.Name}).Validate(); err != nil {
		return fmt.Errorf("ordered: options: name: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(o.Key) == 0 && len(o.OldKeys) > 0 {
		return errors.New("ordered: options: OldKeys without Key")
	}
	if len(o.Key) > 0 && o.Send.Format == FormatLegacy {
		return errors.New("ordered: options: FormatLegacy carries no MAC: it cannot be used with Key")
	}
	if o.Retry.Initial == 0 {
		o.Retry.Initial = 50 * time.Millisecond
	}
	if o.Retry.Max == 0 {
		o.Retry.Max = 5 * time.Second
	}
	if o.Retry.Initial < 0 || o.Retry.Max < o.Retry.Initial {
		return errors.New("ordered: options: retry: need 0 < Initial <= Max")
	}
	if limits.MaxBatch < 1 || limits.MaxBody < 1 {
		return fmt.Errorf("ordered: driver limits invalid: MaxBatch %d, MaxBody %d", limits.MaxBatch, limits.MaxBody)
	}
	// The receive side first: the send side's MaxDisorder derives from its
	// cap.
	if err := o.Receive.setDefaults(limits); err != nil {
		return err
	}
	return o.Send.setDefaults(limits, o.Receive.MaxUndeleted)
}

// backoff returns the wait before retry number attempt (1 for the first
// retry): exponential from Initial, capped at Max, with full jitter.
func (o *RetryOptions) backoff(attempt int) time.Duration {
	return retry.Backoff{Initial: o.Initial, Max: o.Max}.Delay(attempt)
}
