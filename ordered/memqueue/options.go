package memqueue

import (
	"errors"
	"fmt"
	"time"
)

// Default values of the fields of Options.
const (
	DefaultShards        = 4
	DefaultMaxBatch      = 16
	DefaultMaxBody       = 65536
	DefaultMaxWait       = 30 * time.Second
	DefaultVisibility    = 30 * time.Second
	DefaultMinVisibility = time.Second
	DefaultMaxVisibility = 12 * time.Hour
	// DefaultSeed seeds the random source when Options.Seed is 0.
	DefaultSeed = 0x5eed
)

// Options configures a Queue. The zero value of every field means its
// default; a nil *Options means all defaults.
type Options struct {
	// Shards is the number of internal shards messages are spread over
	// (default 4). One shard makes the queue FIFO apart from redeliveries.
	Shards int
	// MaxBatch is the largest batch of SendBatch, ReceiveBatch and
	// DeleteBatch (default 16, as MNS).
	MaxBatch int
	// MaxBody is the largest body in bytes (default 65536).
	MaxBody int
	// MaxBatchBytes bounds the sum of body sizes in one SendBatch; 0 means
	// MaxBatch * MaxBody (reported as 0 in driver.Limits).
	MaxBatchBytes int
	// MaxWait is the longest long-poll wait of ReceiveBatch (default 30s);
	// longer waits are cut to it.
	MaxWait time.Duration
	// Visibility is the queue's visibility timeout (default 30s).
	Visibility time.Duration
	// MinVisibility is the shortest timeout ChangeVisibility accepts. It
	// defaults to 1s as MNS, or to Visibility when that is shorter, so tests
	// can use visibility timeouts of a few milliseconds.
	MinVisibility time.Duration
	// MaxVisibility is the longest timeout ChangeVisibility accepts
	// (default 12h).
	MaxVisibility time.Duration
	// Retention drops messages older than this (counted in Stats.Lost) when
	// they would otherwise be delivered or counted by Len. 0 keeps messages
	// forever.
	Retention time.Duration

	// Seed seeds the random source of shard choice and chaos. 0 means
	// DefaultSeed, so runs are reproducible unless a seed is chosen.
	Seed int64
	// Redeliver is the probability (0..1) that a received message becomes
	// visible again after RedeliverAfter instead of at its NextVisible: it
	// is delivered again, with a new receipt, while the first receiver still
	// holds it, whose receipt then goes stale.
	Redeliver float64
	// RedeliverAfter is how soon a message chosen by Redeliver becomes
	// visible again (default 0: at the next call).
	RedeliverAfter time.Duration
	// EarlyEmpty is the probability (0..1) that a receive that finds no
	// message returns at once, empty, instead of waiting, as MNS does when
	// its long-poll concurrency limit is exceeded.
	EarlyEmpty float64
	// Loss is the probability (0..1) that a message accepted by SendBatch
	// is dropped and never delivered, as when retention expires unnoticed.
	Loss float64
	// LoseReceive is the probability (0..1) that a receive which took
	// messages loses its response: the messages stay invisible until their
	// visibility timeout, as if the network dropped the answer, and the
	// call fails with an error wrapping ErrInjected (counted in
	// Stats.LostReceives).
	LoseReceive float64
	// Latency is added to every call, before it takes effect.
	Latency time.Duration
	// LatencyJitter adds a uniform random 0..LatencyJitter to Latency.
	LatencyJitter time.Duration
	// ErrorRate is the probability (0..1) that a call fails with an error
	// wrapping ErrInjected. Half of those failures happen after the call
	// took effect, so the outcome is unknown, as on a real network: a send
	// enqueued its messages, a receive made its messages invisible (they
	// come back after their visibility timeout), a delete deleted, a
	// visibility change rotated the receipt.
	ErrorRate float64
}

// withDefaults returns a copy of o (which may be nil) with defaults filled in.
func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Shards == 0 {
		r.Shards = DefaultShards
	}
	if r.MaxBatch == 0 {
		r.MaxBatch = DefaultMaxBatch
	}
	if r.MaxBody == 0 {
		r.MaxBody = DefaultMaxBody
	}
	if r.MaxWait == 0 {
		r.MaxWait = DefaultMaxWait
	}
	if r.Visibility == 0 {
		r.Visibility = DefaultVisibility
	}
	if r.MinVisibility == 0 {
		r.MinVisibility = min(DefaultMinVisibility, r.Visibility)
	}
	if r.MaxVisibility == 0 {
		r.MaxVisibility = max(DefaultMaxVisibility, r.Visibility)
	}
	if r.Seed == 0 {
		r.Seed = DefaultSeed
	}
	return r
}

// validate reports the first invalid field of a filled-in Options.
func (o *Options) validate() error {
	switch {
	case o.Shards < 1 || o.Shards > 1<<16:
		return fmt.Errorf("memqueue: Shards %d out of range 1..65536", o.Shards)
	case o.MaxBatch < 1:
		return fmt.Errorf("memqueue: MaxBatch %d must be positive", o.MaxBatch)
	case o.MaxBody < 1:
		return fmt.Errorf("memqueue: MaxBody %d must be positive", o.MaxBody)
	case o.MaxBatchBytes < 0:
		return fmt.Errorf("memqueue: MaxBatchBytes %d is negative", o.MaxBatchBytes)
	case o.MaxWait < 0:
		return fmt.Errorf("memqueue: MaxWait %v is negative", o.MaxWait)
	case o.MinVisibility <= 0:
		return fmt.Errorf("memqueue: MinVisibility %v must be positive", o.MinVisibility)
	case o.Visibility < o.MinVisibility || o.Visibility > o.MaxVisibility:
		return fmt.Errorf("memqueue: Visibility %v out of range %v..%v", o.Visibility, o.MinVisibility, o.MaxVisibility)
	case o.Retention < 0:
		return fmt.Errorf("memqueue: Retention %v is negative", o.Retention)
	case o.RedeliverAfter < 0:
		return fmt.Errorf("memqueue: RedeliverAfter %v is negative", o.RedeliverAfter)
	case o.Latency < 0 || o.LatencyJitter < 0:
		return errors.New("memqueue: Latency and LatencyJitter must not be negative")
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"Redeliver", o.Redeliver}, {"EarlyEmpty", o.EarlyEmpty}, {"Loss", o.Loss}, {"LoseReceive", o.LoseReceive}, {"ErrorRate", o.ErrorRate}} {
		if !(p.v >= 0 && p.v <= 1) { // also rejects NaN
			return fmt.Errorf("memqueue: %s %v out of range 0..1", p.name, p.v)
		}
	}
	return nil
}
