package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/internal/batcher"
	"github.com/inorder/inorder/seqstore"
)

// call is one script invocation; cmd holds its reply after the flush.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	// idx lists the requests of the caller's call that this script covers,
	// in order: all of them on a single node, one stream's on a cluster.
	idx []int
	// then are follow-up calls, sent in a second pipeline once this one
	// got a reply (cluster: the pending index lives in another slot).
	then []*call
	cmd  *redis.Cmd
}

// op is one caller's calls, sent in one pipeline of the group commit.
type op struct {
	calls []*call
	bytes int // journal bytes, for the group commit's bound
}

// Size implements batcher.Sizer: the journal bytes, which bound one
// pipeline (maxPipelineBytes).
func (o *op) Size() int { return o.bytes }

// do submits o to the group commit and waits for its flush or for ctx. An
// op whose ctx ends before its pipeline is sent is withdrawn.
func (s *Store) do(ctx context.Context, o *op) error {
	err := s.flushes.Add(ctx, o)
	if errors.Is(err, batcher.ErrShutdown) {
		return seqstore.ErrClosed
	}
	return err
}

// flush is the group commit's handler: every call of ops in one pipeline,
// then their follow-ups in a second. Each caller reads its own replies.
func (s *Store) flush(ops []*op, _ []error) {
	// Flushes are bounded by the client's own timeouts; a caller that stops
	// waiting does not cancel a pipeline that other callers share.
	ctx := context.Background()
	var calls, then []*call
	for _, o := range ops {
		calls = append(calls, o.calls...)
	}
	s.run(ctx, calls)
	for _, c := range calls {
		if c.cmd.Err() == nil {
			then = append(then, c.then...)
		}
	}
	s.run(ctx, then)
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
