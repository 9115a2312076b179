package ordered

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/inorder/inorder/internal/envelope"
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
	// 128 bits, under a key derived from Key and MACContext) to each
	// header, and the receiver treats a header without a MAC valid under
	// Key or OldKeys, for its MACContext, as untagged (reported through
	// Hooks.OnUntagged; see ReceiveOptions.Untagged for what happens to
	// it). Without a key, anyone who can send to the queue can forge a
	// header: replace a payload, switch a group to a forged epoch, or make
	// GapSkip jump. A key is at least 16 bytes (128 bits) of secret, random
	// bytes; New refuses a shorter one, in Key and in OldKeys. To rotate:
	// give receivers the new key in OldKeys first, then make it Key on
	// senders and receivers (the old one moving to OldKeys), and drop it
	// once no message signed with it can remain in the queue. FormatLegacy
	// carries no MAC: it cannot be used with a key.
	//
	// With a key, the send journal (SendDurable) is sealed too: recovery
	// sends only the entries this key (or one of OldKeys) wrote, so that
	// whoever can write the store cannot have arbitrary bodies signed
	// (SendStats.Tampered counts the entries it refused).
	Key []byte

	// OldKeys are accepted by the receiver besides Key, during a rotation,
	// and by recovery for the journal entries they sealed.
	OldKeys [][]byte

	// MACContext is what header MACs are bound to, besides Key: a body
	// signed for one context does not verify in another, so a signed
	// message copied into another queue that shares the key is untagged
	// there instead of taking its group over. Default Name: senders and
	// receivers of one queue already share it. Set it where they do not:
	// the receivers of a topic's subscription queues set it to the
	// publisher's context (its Name, or its MACContext).
	MACContext string

	// AcceptContextFreeMAC makes the receiver also accept the MAC that
	// senders made before MACs were bound to a context (issue 21): under
	// Key or OldKeys themselves, valid in any queue that shares the key.
	// Off by default, because such a MAC can be replayed into any queue
	// for ever. Turn it on in receivers for the upgrade only: upgrade the
	// receivers with it on, then the senders, then turn it off once no
	// message from an old sender can remain in the queue (its retention
	// period, or a drained queue). Without it, an old sender's messages are
	// untagged (Hooks.OnUntagged with a bad-MAC error): under the default
	// untagged policy with a key they stay in the queue or go to the dead
	// letter queue, never lost.
	AcceptContextFreeMAC bool
}

// macContext is the context header MACs are bound to (see MACContext).
func (o *Options) macContext() string {
	if o.MACContext != "" {
		return o.MACContext
	}
	return o.Name
}

// signingKey returns the key the sender signs headers with: Key bound to
// macContext. Nil without a key.
func (o *Options) signingKey() []byte {
	if len(o.Key) == 0 {
		return nil
	}
	return envelope.ContextKey(o.Key, o.macContext())
}

// macKeys returns every key a receiver verifies header MACs under: Key and
// then OldKeys, each bound to macContext, followed by the bare keys when
// AcceptContextFreeMAC is set. Nil without a key. These are the receive
// core's Config.Keys: the core verifies with envelope.Verify and needs to
// know nothing of contexts.
func (o *Options) macKeys() [][]byte {
	if len(o.Key) == 0 {
		return nil
	}
	all := append([][]byte{o.Key}, o.OldKeys...)
	keys := make([][]byte, 0, 2*len(all))
	for _, k := range all {
		keys = append(keys, envelope.ContextKey(k, o.macContext()))
	}
	if o.AcceptContextFreeMAC {
		keys = append(keys, all...)
	}
	return keys
}

// validateKeys refuses keys that authenticate nothing: empty or shorter
// than envelope.MinKeyLen, in Key or OldKeys (an unset environment variable
// read into OldKeys would otherwise let anyone sign with the empty key).
func (o *Options) validateKeys() error {
	if len(o.Key) == 0 && len(o.OldKeys) > 0 {
		return errors.New("ordered: options: OldKeys without Key")
	}
	if o.Key != nil {
		if err := envelope.ValidateKey(o.Key); err != nil {
			return fmt.Errorf("ordered: options: Key: %w", err)
		}
	}
	for i, k := range o.OldKeys {
		if err := envelope.ValidateKey(k); err != nil {
			return fmt.Errorf("ordered: options: OldKeys[%d]: %w", i, err)
		}
	}
	if len(o.Key) == 0 && (o.MACContext != "" || o.AcceptContextFreeMAC) {
		return errors.New("ordered: options: MACContext and AcceptContextFreeMAC need Key")
	}
	if len(o.Key) > 0 && o.Send.Format == FormatLegacy {
		return errors.New("ordered: options: FormatLegacy carries no MAC: it cannot be used with Key")
	}
	return nil
}

// defaultUntagged is the untagged policy UntaggedDefault stands for:
// without a key, UntaggedDeliver; with one, a body that is not signed must
// not reach the handler: UntaggedDeadLetter when there is a dead letter
// queue, else UntaggedReject.
func (o *Options) defaultUntagged() UntaggedPolicy {
	switch {
	case len(o.Key) == 0:
		return UntaggedDeliver
	case o.Receive.DeadLetter != nil:
		return UntaggedDeadLetter
	}
	return UntaggedReject
}

// RetryOptions bounds the exponential backoff between attempts of a
// retryable driver or store call, with equal jitter (a wait between half
// the backoff and all of it).
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
	if err := o.validateKeys(); err != nil {
		return err
	}
	if o.Receive.Untagged == UntaggedDefault {
		o.Receive.Untagged = o.defaultUntagged()
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
// retry): exponential from Initial, capped at Max, with equal jitter.
func (o *RetryOptions) backoff(attempt int) time.Duration {
	return retry.Backoff{Initial: o.Initial, Max: o.Max}.Delay(attempt)
}
