package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// Options are a keeper's timings (scaleout.md 3.5). A nil *Options, and
// every zero field, means the default.
type Options struct {
	// TTL is the lease and heartbeat TTL the store counts on its own
	// clock. Default 15 s.
	TTL time.Duration
	// RenewEvery is the period of heartbeats and renewals. Default 5 s.
	RenewEvery time.Duration
	// RetryPeriod is the wait before the next heartbeat, renewal or
	// release after one failed. Default 2 s.
	RetryPeriod time.Duration
	// RenewDeadline is added to the send time of a lease's last good
	// renewal to make its local deadline, past which it is fenced. Default
	// 10 s.
	RenewDeadline time.Duration
	// RebalanceDelay is how long a held shard must be assigned to another
	// member before it is revoked. Default 3 s.
	RebalanceDelay time.Duration
	// CloseDrain bounds how long Close waits for the receiver to drain the
	// revoked shards. Default 30 s.
	CloseDrain time.Duration
	// Balance, when at least 1, caps each member's load as
	// shard.AssignBounded does; 0 means plain rendezvous (shard.Assign),
	// which moves fewest shards. Default 0.
	Balance float64
	// OnError, when set, is called with each store call that failed (its
	// kind and error), from the goroutine that made the call. The keeper
	// retries on its own; this is for logs and metrics.
	OnError func(Kind, error)
}

// Defaults of Options (scaleout.md 3.5).
const (
	DefaultTTL            = 15 * time.Second
	DefaultRenewEvery     = 5 * time.Second
	DefaultRetryPeriod    = 2 * time.Second
	DefaultRenewDeadline  = 10 * time.Second
	DefaultRebalanceDelay = 3 * time.Second
	DefaultCloseDrain     = 30 * time.Second
)

// ErrOptions is wrapped by the errors of invalid Options.
var ErrOptions = errors.New("lease: invalid options")

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&r.TTL, DefaultTTL)
	def(&r.RenewEvery, DefaultRenewEvery)
	def(&r.RetryPeriod, DefaultRetryPeriod)
	def(&r.RenewDeadline, DefaultRenewDeadline)
	def(&r.RebalanceDelay, DefaultRebalanceDelay)
	def(&r.CloseDrain, DefaultCloseDrain)
	return r
}

// validate checks the rules between the timings: a lease is renewed, and
// retried, before its local deadline, which comes before the store's
// expiry.
func (o Options) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"RenewEvery", o.RenewEvery}, {"RetryPeriod", o.RetryPeriod},
		{"RenewDeadline", o.RenewDeadline}, {"RebalanceDelay", o.RebalanceDelay},
		{"CloseDrain", o.CloseDrain},
	} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrOptions, d.name, d.v)
		}
	}
	if err := seqstore.CheckTTL(o.TTL); err != nil {
		return fmt.Errorf("%w: TTL: %w", ErrOptions, err)
	}
	if o.RenewDeadline >= o.TTL {
		return fmt.Errorf("%w: RenewDeadline %v must be below TTL %v", ErrOptions, o.RenewDeadline, o.TTL)
	}
	if o.RenewEvery >= o.RenewDeadline {
		return fmt.Errorf("%w: RenewEvery %v must be below RenewDeadline %v", ErrOptions, o.RenewEvery, o.RenewDeadline)
	}
	if o.RetryPeriod >= o.RenewDeadline {
		return fmt.Errorf("%w: RetryPeriod %v must be below RenewDeadline %v", ErrOptions, o.RetryPeriod, o.RenewDeadline)
	}
	if o.Balance != 0 && o.Balance < 1 {
		return fmt.Errorf("%w: Balance %v must be 0 or at least 1", ErrOptions, o.Balance)
	}
	return nil
}
