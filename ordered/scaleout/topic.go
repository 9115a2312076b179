package scaleout

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/inorder/inorder/seqstore"
)

// Sharded topic subscriptions.
//
// An MNS topic pushes a copy of each publish into every subscribed queue
// whose subscription's FilterTag is empty or equals the publish's
// MessageTag (one tag per publish, at most 16 characters). A topic's
// subscriber is sharded with that alone:
//
//   - the publisher is a sender (NewSender) over T shards that all publish
//     to the topic, shard i with the MessageTag TopicTag(i) (with package
//     mnsqueue: T Topic drivers, Options.MessageTag = TopicTag(i)); T, the
//     topic's tag count, is fixed for the life of the topic, as S is for a
//     queue;
//   - a sharded subscriber is S queues, S dividing T, and T subscriptions:
//     the one with FilterTag TopicTag(i) pushes into queue i mod S
//     (TopicSubscriptions). Each group reaches exactly the queue of its
//     shard among S, because ShardOf(g, T) mod S = ShardOf(g, S) when S
//     divides T (the hash is reduced modulo the shard count);
//   - its receivers are ordinary receivers (NewReceiver) over the S
//     queues, with Options.Queue.Name the subscriber's own logical queue.
//
// Several subscribers share a topic, each with its own name, queues and S
// (any divisor of T), and so its own cursors, leases and receivers. A
// subscriber that does not scale out subscribes one queue with no filter
// and receives with ordered.New. Each sharded subscriber takes T of the
// topic's 100 subscriptions.
//
// CheckTopicSubscriptions is the subscriber's topology check (one missing
// or mis-set subscription makes groups never arrive, or arrive at a queue
// whose receiver refuses them), CheckTopicTags the publisher's (a
// subscriber planned for another T). Both read the topic's subscriptions,
// the only record publisher and subscribers share.

// TopicTag returns the MessageTag that a sharded topic's publisher gives
// the messages of tag shard i, and the FilterTag that subscribes a queue
// to them: "shard-" and i in decimal.
func TopicTag(i int) string { return topicTagPrefix + strconv.Itoa(i) }

const topicTagPrefix = "shard-"

// maxTopicSubscriptions is the service's cap on a topic's subscriptions
// (not adjustable): a sharded subscriber takes one per tag.
const maxTopicSubscriptions = 100

// topicTagShard returns i for TopicTag(i), or false for any other tag.
func topicTagShard(tag string) (int, bool) {
	s, ok := strings.CutPrefix(tag, topicTagPrefix)
	if !ok || s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= seqstore.MaxShards {
		return 0, false
	}
	return i, true
}

// TopicSubscription is a subscription of a topic to a queue, with its
// filter: what a sharded subscriber needs, and what a check reads.
type TopicSubscription struct {
	// Name is the subscription's name.
	Name string
	// Queue is the queue it pushes into ("" for an endpoint that is not a
	// queue).
	Queue string
	// FilterTag is the MessageTag it pushes ("": every publish).
	FilterTag string
}

// checkTags validates a topic's tag count and a subscriber's queues.
func checkTags(queues []string, tags int) error {
	switch s := len(queues); {
	case tags < 1 || tags > seqstore.MaxShards:
		return fmt.Errorf("scaleout: %w: a topic's tag count is 1..%d, got %d", seqstore.ErrInvalidArgument, seqstore.MaxShards, tags)
	case s < 1 || tags%s != 0:
		return fmt.Errorf("scaleout: %w: a sharded subscriber's queue count must divide the topic's tag count %d, got %d queues", seqstore.ErrInvalidArgument, tags, s)
	}
	seen := make(map[string]bool, len(queues))
	for _, q := range queues {
		if q == "" || seen[q] {
			return fmt.Errorf("scaleout: %w: subscriber queue %q is empty or named twice", seqstore.ErrInvalidArgument, q)
		}
		seen[q] = true
	}
	return nil
}

// TopicSubscriptions returns the subscriptions that make the S = len(queues)
// queues, in shard order, a sharded subscriber of a topic whose publisher
// tags its messages with TopicTag(0..tags-1): one per tag i, named
// subscriber-i, pushing into queues[i mod S] with FilterTag TopicTag(i).
// S must divide tags, and tags is at most 100, the service's cap on a
// topic's subscriptions.
func TopicSubscriptions(subscriber string, queues []string, tags int) ([]TopicSubscription, error) {
	if err := checkTags(queues, tags); err != nil {
		return nil, err
	}
	if subscriber == "" {
		return nil, fmt.Errorf("scaleout: %w: the subscriber needs a name, the prefix of its subscriptions' names", seqstore.ErrInvalidArgument)
	}
	if tags > maxTopicSubscriptions {
		return nil, fmt.Errorf("scaleout: %w: a sharded subscriber of %d tags needs %d subscriptions; an MNS topic has at most %d", seqstore.ErrInvalidArgument, tags, tags, maxTopicSubscriptions)
	}
	out := make([]TopicSubscription, tags)
	for i := range out {
		out[i] = TopicSubscription{Name: subscriber + "-" + strconv.Itoa(i), Queue: queues[i%len(queues)], FilterTag: TopicTag(i)}
	}
	return out, nil
}

// CheckTopicSubscriptions checks that the topic's subscriptions (have, as
// listed: mnsqueue.ListSubscriptions) push into the S = len(queues) queues
// of a sharded subscriber exactly what TopicSubscriptions plans for tags:
// each queue gets the tags of its shards, and nothing else reaches it. It
// returns an error wrapping seqstore.ErrTopology that names every
// subscription missing or mis-set, so that a receiver does not start on
// queues where some groups never arrive, or arrive at a queue whose
// receiver refuses them as another shard's.
func CheckTopicSubscriptions(have []TopicSubscription, queues []string, tags int) error {
	if err := checkTags(queues, tags); err != nil {
		return err
	}
	idx := make(map[string]int, len(queues))
	for j, q := range queues {
		idx[q] = j
	}
	var problems []string
	got := make([]map[int]bool, len(queues)) // queue -> tag shards pushed into it
	for j := range got {
		got[j] = map[int]bool{}
	}
	for _, s := range have {
		j, mine := idx[s.Queue]
		if !mine {
			continue
		}
		i, ok := topicTagShard(s.FilterTag)
		switch {
		case s.FilterTag == "":
			problems = append(problems, fmt.Sprintf("subscription %s has no FilterTag: it pushes every group into %s (shard %d)", s.Name, s.Queue, j))
		case !ok:
			problems = append(problems, fmt.Sprintf("subscription %s has FilterTag %q, not a shard tag (%s): it pushes into %s (shard %d) what the sharded publisher never tags so", s.Name, s.FilterTag, TopicTag(j), s.Queue, j))
		case i >= tags:
			problems = append(problems, fmt.Sprintf("subscription %s has FilterTag %s, beyond the topic's %d tags: nothing reaches %s through it", s.Name, s.FilterTag, tags, s.Queue))
		case i%len(queues) != j:
			problems = append(problems, fmt.Sprintf("subscription %s pushes the groups tagged %s (shard %d of %d) into %s, the queue of shard %d", s.Name, s.FilterTag, i%len(queues), len(queues), s.Queue, j))
		default:
			got[j][i] = true
		}
	}
	for i := range tags {
		j := i % len(queues)
		if !got[j][i] {
			problems = append(problems, fmt.Sprintf("no subscription pushes the groups tagged %s into %s (shard %d): they would never arrive", TopicTag(i), queues[j], j))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("scaleout: %w: the topic's subscriptions do not shard %d queues over %d tags: %s", seqstore.ErrTopology, len(queues), tags, strings.Join(problems, "; "))
	}
	return nil
}

// CheckTopicTags checks, for a publisher that tags its messages with
// TopicTag(0..tags-1), that every sharded subscriber of the topic (have, as
// listed) was planned for tags. A subscriber is told by its subscriptions'
// names (TopicSubscriptions names them subscriber-i) and its shard count S
// by the queues they push into; each must pass CheckTopicSubscriptions for
// tags, or the subscriber would miss some groups, or refuse them. It
// returns an error wrapping seqstore.ErrTopology that names each subscriber
// that does not fit. Subscriptions without a filter, or with tags of the
// user's own, are not its concern.
func CheckTopicTags(have []TopicSubscription, tags int) error {
	if tags < 1 || tags > seqstore.MaxShards {
		return fmt.Errorf("scaleout: %w: a topic's tag count is 1..%d, got %d", seqstore.ErrInvalidArgument, seqstore.MaxShards, tags)
	}
	// The sharded subscribers, by the queues their shard tags reach; then
	// every subscription into one of those queues is that subscriber's
	// concern, whatever its filter.
	bySub := map[string][]TopicSubscription{}
	queueSub := map[string]string{}
	for _, s := range have {
		if _, ok := topicTagShard(s.FilterTag); ok && s.Queue != "" {
			sub := s.Name
			if k := strings.LastIndexByte(sub, '-'); k > 0 {
				sub = sub[:k]
			}
			queueSub[s.Queue] = sub
		}
	}
	for _, s := range have {
		if sub, ok := queueSub[s.Queue]; ok {
			bySub[sub] = append(bySub[sub], s)
		}
	}
	var problems []string
	for _, sub := range slices.Sorted(maps.Keys(bySub)) {
		subs := bySub[sub]
		// Its queues in shard order: the queue of tag j is shard j's, for
		// j below S (the number of its queues).
		first := map[string]int{}
		for _, s := range subs {
			i, ok := topicTagShard(s.FilterTag)
			if j, seen := first[s.Queue]; ok && (!seen || i < j) {
				first[s.Queue] = i
			}
		}
		queues := slices.SortedFunc(maps.Keys(first), func(a, b string) int { return first[a] - first[b] })
		err := errors.New("its queues' first tags are not shard-0, shard-1 and so on")
		if first[queues[len(queues)-1]] == len(queues)-1 {
			err = CheckTopicSubscriptions(subs, queues, tags)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("subscriber %s (%d queues): %v", sub, len(queues), err))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("scaleout: %w: a sharded subscriber of the topic was not planned for %d tags: %s", seqstore.ErrTopology, tags, strings.Join(problems, "; "))
	}
	return nil
}
