package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/seqstore"
)

// call is one script invocation; cmd holds its reply after the flush.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// op is one caller's request: calls sent in one pipeline, then (only if they
// all succeeded) the follow-up calls in a second one.
type op struct {
	calls  []*call
	then   []*call
	cancel <-chan struct{}
	done   chan struct{}
	// skipped is set (before done is closed) when the flusher found the
	// caller's context ended and did not send the op.
	skipped bool
}

// err returns the first failed call's error, mapped to the sentinels.
func (o *op) err() error {
	if err := callsErr(o.calls); err != nil {
		return err
	}
	return callsErr(o.then)
}

func callsErr(calls []*call) error {
	for _, c := range calls {
		if c.cmd == nil {
			return errors.New("call was not sent")
		}
		if err := c.cmd.Err(); err != nil {
			return mapErr(err)
		}
	}
	return nil
}

// do queues o and waits for its flush or for ctx.
func (s *Store) do(ctx context.Context, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o.cancel = ctx.Done()
	o.done = make(chan struct{})
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return seqstore.ErrClosed
	}
	select {
	case s.queue <- o:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case <-o.done:
		if o.skipped {
			return ctx.Err()
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flusher sends queued ops, everything queued at once in one pipeline, until
// Close closes the queue.
func (s *Store) flusher() {
	defer s.wg.Done()
	// Flushes are bounded by the client's own timeouts; a caller that stops
	// waiting does not cancel a pipeline that other callers share.
	ctx := context.Background()
	batch := make([]*op, 0, maxBatchCalls)
	for first := range s.queue {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < maxBatchCalls {
			select {
			case o, ok := <-s.queue:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		s.flush(ctx, batch)
	}
}

func (s *Store) flush(ctx context.Context, batch []*op) {
	var calls, then []*call
	for _, o := range batch {
		select {
		case <-o.cancel:
			o.skipped = true // the caller has gone; do not write on its behalf
			continue
		default:
		}
		calls = append(calls, o.calls...)
	}
	s.run(ctx, calls)
	for _, o := range batch {
		if len(o.then) > 0 && callsErr(o.calls) == nil {
			then = append(then, o.then...)
		}
	}
	s.run(ctx, then)
	for _, o := range batch {
		close(o.done)
	}
}

// run sends calls as EVALSHA in one pipeline and resends those the server
// did not have cached as EVAL (which caches them) in a second.
func (s *Store) run(ctx context.Context, calls []*call) {
	if len(calls) == 0 {
		return
	}
	pipe := s.client.Pipeline()
	for _, c := range calls {
		c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
	s.calls.Add(uint64(len(calls)))
	s.roundTrips.Add(1)
	var retry []*call
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			retry = append(retry, c)
		}
	}
	if len(retry) == 0 {
		return
	}
	s.log.DebugContext(ctx, "redisstore: loading scripts", "calls", len(retry))
	pipe = s.client.Pipeline()
	for _, c := range retry {
		c.cmd = c.script.Eval(ctx, pipe, c.keys, c.args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		s.log.DebugContext(ctx, "redisstore: flush after loading scripts failed", "err", fmt.Sprint(err))
	}
	s.roundTrips.Add(1)
}
