package scaleout

import (
	"context"
	"errors"
	"fmt"

	"github.com/inorder/inorder/internal/shard"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore"
)

// ErrFenced is wrapped by what a receiver reports when it lost a shard to a
// newer owner (seqstore.ErrFenced).
var ErrFenced = seqstore.ErrFenced

// Shard is one queue of a logical queue.
type Shard struct {
	// Name is the queue's name, as the topology stores it.
	Name string
	// Queue is the driver over it. The caller keeps it open while the
	// Queue or Receiver runs, and closes it after.
	Queue driver.Queue
}

// Topology returns the topology of shards: their number, the hash that
// places groups (shard.Hash) and their names, in order.
func Topology(shards []Shard) seqstore.Topology {
	t := seqstore.Topology{Shards: len(shards), Hash: shard.Hash, Queues: make([]string, len(shards))}
	for i, s := range shards {
		t.Queues[i] = s.Name
	}
	return t
}

// ShardOf returns the shard of group among n shards: the one its messages
// travel through.
func ShardOf(group string, n int) int { return shard.Of(group, n) }

func checkShards(shards []Shard) error {
	if len(shards) == 0 {
		return fmt.Errorf("scaleout: %w: no shards", seqstore.ErrInvalidArgument)
	}
	for i, s := range shards {
		if s.Queue == nil {
			return fmt.Errorf("scaleout: %w: shard %d (%q) has no driver", seqstore.ErrInvalidArgument, i, s.Name)
		}
	}
	fifo := grouped(shards[0].Queue)
	for i, s := range shards {
		if grouped(s.Queue) != fifo {
			return fmt.Errorf("scaleout: %w: shard %d (%q) is a FIFO queue and shard 0 (%q) is not, or the other way round: the shards must be of one kind", seqstore.ErrInvalidArgument, i, s.Name, shards[0].Name)
		}
	}
	return Topology(shards).Check()
}

// checkTopology stores the topology of shards for ns, or checks it against
// the stored one.
func checkTopology(ctx context.Context, ls seqstore.Leaser, ns string, shards []Shard) error {
	if err := ls.Topology(ctx, ns, Topology(shards)); err != nil {
		return fmt.Errorf("scaleout: %w", err)
	}
	return nil
}

// defaultConcurrency is ordered.SendOptions.Concurrency's default;
// maxDefaultConcurrency bounds NewSender's default, 16 per shard.
const (
	defaultConcurrency    = 16
	maxDefaultConcurrency = 256
)

// NewSender returns an ordered.Queue that sends each message to the shard
// of its group, for a sender of the logical queue opts.Name. It is an
// ordinary Queue in every other respect (its send journal, recovery and
// options); use it only to send. Its requests are merged per shard, up to
// opts.Send.Concurrency in flight per shard; left 0, the Queue's own
// Concurrency becomes 16 per shard (at most 256), so that each shard's
// requests fill. When store is a seqstore.Leaser the
// topology is stored, or checked (seqstore.ErrTopology on a mismatch);
// otherwise (a filestore of the sender's own) the receivers check it.
func NewSender(ctx context.Context, shards []Shard, store seqstore.Store, opts *ordered.Options) (*ordered.Queue, error) {
	if err := checkShards(shards); err != nil {
		return nil, err
	}
	if opts == nil || opts.Name == "" {
		return nil, fmt.Errorf("scaleout: %w: Options.Name names the logical queue and must be set", seqstore.ErrInvalidArgument)
	}
	if ls, ok := store.(seqstore.Leaser); ok {
		err := checkTopology(ctx, ls, opts.Name, shards)
		if err != nil && !errors.Is(err, seqstore.ErrNotSupported) {
			return nil, err
		}
	}
	drvs := make([]driver.Queue, len(shards))
	for i, s := range shards {
		drvs[i] = s.Queue
	}
	o := *opts
	perShard := o.Send.Concurrency
	if perShard == 0 {
		perShard = defaultConcurrency
		// Enough bodies in flight for every shard's requests to fill up
		// (the router merges them per shard), within a bound: the sender
		// starts a worker per request in flight.
		o.Send.Concurrency = min(defaultConcurrency*len(shards), maxDefaultConcurrency)
	}
	r, err := newRouter(drvs, perShard)
	if err != nil {
		return nil, fmt.Errorf("scaleout: %w", err)
	}
	return ordered.New(ctx, r, store, &o)
}
