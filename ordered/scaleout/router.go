package scaleout

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/shard"
	"github.com/inorder/inorder/ordered/driver"
)

// errSendOnly is what a router answers to the receive side's calls: a
// sender's Queue over the shards never receives.
var errSendOnly = errors.New("scaleout: the sender's queue over the shards only sends (receive with NewReceiver)")

// router is the driver.Queue of a sender: it sends each body to the shard
// of the group its header names (shard 0 for a body without one).
type router struct {
	shards []driver.Queue
	limits driver.Limits
}

func newRouter(shards []driver.Queue) *router {
	l := shards[0].Limits()
	for _, q := range shards[1:] {
		o := q.Limits()
		l.MaxBatch = min(l.MaxBatch, o.MaxBatch)
		l.MaxBody = min(l.MaxBody, o.MaxBody)
	}
	return &router{shards: shards, limits: l}
}

func (r *router) Limits() driver.Limits { return r.limits }

// SendBatch splits the batch by shard and sends the parts at once, one
// request per shard; the outcome is reported body by body.
func (r *router) SendBatch(ctx context.Context, bodies [][]byte) error {
	if len(r.shards) == 1 {
		return r.shards[0].SendBatch(ctx, bodies)
	}
	parts := make(map[int][]int) // shard -> indexes into bodies
	for i, b := range bodies {
		s := 0 // a body without a header has no group and no cursor
		if h, _, ok := envelope.Parse(b); ok {
			s = shard.Of(h.Group, len(r.shards)) // legacy (#seq#) bodies: group ""
		}
		parts[s] = append(parts[s], i)
	}
	if len(parts) == 1 {
		for s := range parts {
			return r.shards[s].SendBatch(ctx, bodies)
		}
	}
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for s, idx := range parts {
		wg.Go(func() {
			part := make([][]byte, len(idx))
			for j, i := range idx {
				part[j] = bodies[i]
			}
			err := r.shards[s].SendBatch(ctx, part)
			var be *driver.BatchError
			perEntry := errors.As(err, &be) && len(be.Errs) == len(idx)
			for j, i := range idx {
				switch {
				case perEntry:
					errs[i] = be.Errs[j]
				default:
					errs[i] = err
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return &driver.BatchError{Errs: errs}
		}
	}
	return nil
}

func (r *router) ReceiveBatch(context.Context, int, time.Duration) ([]*driver.Message, error) {
	return nil, errSendOnly
}

func (r *router) DeleteBatch(context.Context, []string) error { return errSendOnly }

func (r *router) ChangeVisibility(context.Context, string, time.Duration) (string, error) {
	return "", errSendOnly
}

// IsRetryable asks the shards' drivers: an error is retryable if one of
// them says so (they are of one kind).
func (r *router) IsRetryable(err error) bool {
	for _, q := range r.shards {
		if q.IsRetryable(err) {
			return true
		}
	}
	return false
}

// Close leaves the shards' drivers open: they belong to the caller.
func (r *router) Close() error { return nil }
