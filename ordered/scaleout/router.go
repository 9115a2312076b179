package scaleout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/inorder/inorder/internal/batcher"
	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/shard"
	"github.com/inorder/inorder/ordered/driver"
)

// errSendOnly is what a router answers to the receive side's calls: a
// sender's Queue over the shards never receives.
var errSendOnly = errors.New("scaleout: the sender's queue over the shards only sends (receive with NewReceiver)")

// router is the driver.Queue of a sender: it sends each body to the shard
// of the group its header names (shard 0 for a body without one).
//
// The sender forms its batches across groups, so a batch split by shard
// would become up to S requests of a body or two (R=4, S=16 made 3.7x the
// requests of one queue). Each shard therefore has a batcher that merges
// the bodies of concurrent SendBatch calls: an idle shard sends at once,
// and while a shard's requests are in flight, its next request starts
// only once a full batch waits, up to the sender's Concurrency per shard.
type router struct {
	shards  []*batcher.Batcher[outBody]
	drvs    []driver.Queue
	limits  driver.Limits
	grouped bool // the shards are FIFO queues (driver.Grouped)
}

// outBody is a message body and, on FIFO shards, its group; it counts
// against the request's byte bound by the body's length.
type outBody struct {
	body  []byte
	group string
	ctx   context.Context // the caller's
}

func (b outBody) Size() int { return len(b.body) }

// newRouter returns the router over shards, with up to concurrency
// requests in flight per shard.
func newRouter(shards []driver.Queue, concurrency int) (*router, error) {
	l := shards[0].Limits()
	for _, q := range shards[1:] {
		o := q.Limits()
		l.MaxBatch = min(l.MaxBatch, o.MaxBatch)
		l.MaxBody = min(l.MaxBody, o.MaxBody)
		if o.MaxBatchBytes > 0 && (l.MaxBatchBytes == 0 || o.MaxBatchBytes < l.MaxBatchBytes) {
			l.MaxBatchBytes = o.MaxBatchBytes
		}
	}
	r := &router{drvs: shards, limits: l, grouped: grouped(shards[0])}
	if len(shards) == 1 {
		return r, nil // SendBatch passes the sender's batches through
	}
	for _, q := range shards {
		b, err := batcher.New(&batcher.Options{
			MaxHandlers: max(1, concurrency), MaxItems: l.MaxBatch, MaxSize: l.MaxBatchBytes,
			Backlog: max(0, l.MaxBatch-1),
		}, func(batch []outBody, errs []error) {
			bodies := make([][]byte, len(batch))
			var groups []string
			if r.grouped {
				groups = make([]string, len(batch))
			}
			for i, b := range batch {
				bodies[i] = b.body
				if groups != nil {
					groups[i] = b.group
				}
			}
			// The request serves several callers; it runs on the first
			// one's context. Every caller is the sender, with the context
			// of its driver calls (cancelled when its Close gives up),
			// and a body failed because another caller gave up is sent
			// again under its seq.
			ctx := batch[0].ctx
			if groups != nil {
				spread(q.(driver.Grouped).SendGroups(ctx, bodies, groups), errs)
			} else {
				spread(q.SendBatch(ctx, bodies), errs)
			}
		})
		if err != nil {
			return nil, err
		}
		r.shards = append(r.shards, b)
	}
	return r, nil
}

// spread sets errs from the outcome of a batch request.
func spread(err error, errs []error) {
	var be *driver.BatchError
	perEntry := errors.As(err, &be) && len(be.Errs) == len(errs)
	for i := range errs {
		if perEntry {
			errs[i] = be.Errs[i]
		} else {
			errs[i] = err
		}
	}
}

func (r *router) Limits() driver.Limits { return r.limits }

// SendBatch hands each body to its shard's batcher and reports the
// outcome body by body. A body whose outcome ctx did not wait for may
// still be sent: the sender retries it under the same seq, and receivers
// drop the copy.
func (r *router) SendBatch(ctx context.Context, bodies [][]byte) error {
	if r.grouped {
		return fmt.Errorf("scaleout: %w: the shards are FIFO queues: send with groups", driver.ErrInvalidGroup)
	}
	return r.send(ctx, bodies, nil)
}

// send sends bodies, with groups on FIFO shards (nil otherwise).
func (r *router) send(ctx context.Context, bodies [][]byte, groups []string) error {
	if len(r.drvs) == 1 {
		if groups != nil {
			return r.drvs[0].(driver.Grouped).SendGroups(ctx, bodies, groups)
		}
		return r.drvs[0].SendBatch(ctx, bodies)
	}
	waits := make([]<-chan error, len(bodies))
	for i, b := range bodies {
		s := 0 // a body without a header has no group and no cursor
		if h, _, ok := envelope.Parse(b); ok {
			s = shard.Of(h.Group, len(r.drvs)) // legacy (#seq#) bodies: group ""
		}
		ob := outBody{body: b, ctx: ctx}
		if groups != nil {
			ob.group = groups[i]
		}
		waits[i] = r.shards[s].AddNoWait(ob)
	}
	var errs []error
	for i, w := range waits {
		var err error
		select {
		case err = <-w:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil && errs == nil {
			errs = make([]error, len(bodies))
		}
		if errs != nil {
			errs[i] = err
		}
	}
	if errs != nil {
		return &driver.BatchError{Errs: errs}
	}
	return nil
}

// grouped reports whether q is a FIFO queue (driver.Grouped).
func grouped(q driver.Queue) bool {
	g, ok := q.(driver.Grouped)
	return ok && g.Grouped()
}

// Grouped reports whether the shards are FIFO queues: the sender then
// sends each message's group (driver.Grouped).
func (r *router) Grouped() bool { return r.grouped }

// SendGroups sends each body, with its group as the FIFO queue's message
// group, to the shard of its group.
func (r *router) SendGroups(ctx context.Context, bodies [][]byte, groups []string) error {
	if !r.grouped {
		return r.send(ctx, bodies, nil)
	}
	for _, g := range groups {
		if err := r.CheckGroup(g); err != nil {
			return err
		}
	}
	return r.send(ctx, bodies, groups)
}

// CheckGroup asks the first shard (the shards are of one kind).
func (r *router) CheckGroup(group string) error {
	if g, ok := r.drvs[0].(driver.Grouped); ok && r.grouped {
		return g.CheckGroup(group)
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
	for _, q := range r.drvs {
		if q.IsRetryable(err) {
			return true
		}
	}
	return false
}

// Close leaves the shards' drivers open: they belong to the caller.
func (r *router) Close() error { return nil }
