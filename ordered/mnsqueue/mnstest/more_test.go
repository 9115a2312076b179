package mnstest_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

func TestCreateQueueIdempotent(t *testing.T) {
	srv := newServer(t, nil)
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	require.NoError(t, mgr.CreateSimpleQueue("orders"), "first create answers 201")
	requireCode(t, codeSameAttr, mgr.CreateSimpleQueue("orders"), "second create with the same attributes")
	requireCode(t, codeQueueExists, mgr.CreateQueue("orders", 0, 65536, 345600, 60, 0, 2), "create with another visibility timeout")
	require.NoError(t, srv.CreateQueue("orders", nil), "Go API create with the same (default) attributes")
	err := srv.CreateQueue("orders", &mnstest.QueueAttributes{VisibilityTimeout: 60})
	assert.ErrorIs(t, err, mnstest.ErrQueueExists)

	attr, err := mgr.GetQueueAttributes("orders")
	require.NoError(t, err, "GetQueueAttributes")
	assert.Equal(t, "orders", attr.QueueName)
	assert.EqualValues(t, 30, attr.VisibilityTimeout)
	assert.EqualValues(t, 65536, attr.MaxMessageSize)
	assert.EqualValues(t, 345600, attr.MessageRetentionPeriod)
	assert.NotZero(t, attr.CreateTime)
}

func TestQueueNamesValidated(t *testing.T) {
	srv := newServer(t, nil)
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	for _, name := range []string{"-lead", "has_underscore", "dot.ted", strings.Repeat("a", 121)} {
		err := mgr.CreateSimpleQueue(name)
		require.Error(t, err, "create %q", name)
		assert.Contains(t, []uint64{118, 121}, mnsCode(err), "create %q: InvalidQueueName or QueueNameLengthError, got %v", name, err)
	}
	for _, name := range []string{"a", "A-1-b", "0queue"} {
		assert.NoError(t, mgr.CreateSimpleQueue(name), "create %q", name)
	}
	assert.ErrorIs(t, srv.CreateQueue("bad name", nil), mnstest.ErrInvalidArgument)
	assert.ErrorIs(t, srv.CreateQueue("ok", &mnstest.QueueAttributes{VisibilityTimeout: 43201}), mnstest.ErrInvalidArgument)
}

func TestSetQueueAttributes(t *testing.T) {
	srv := newServer(t, nil)
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	require.NoError(t, mgr.CreateSimpleQueue("s"))
	require.NoError(t, mgr.SetQueueAttributesWithOptions("s", ali_mns.WithVisibilityTimeout(120), ali_mns.WithPollingWaitSeconds(3)))
	attr, err := mgr.GetQueueAttributes("s")
	require.NoError(t, err)
	assert.EqualValues(t, 120, attr.VisibilityTimeout)
	assert.EqualValues(t, 3, attr.PollingWaitSeconds)
	assert.EqualValues(t, 345600, attr.MessageRetentionPeriod, "attributes not sent are kept")
	require.Error(t, mgr.SetQueueAttributes("missing", 0, 65536, 345600, 30, 0, 2), "set on a missing queue")

	// The new visibility timeout applies to the next receive.
	q := ali_mns.NewMNSQueue("s", newClient(srv))
	_, err = q.SendMessage(msg("x"))
	require.NoError(t, err)
	r, err := receive(q, 1)
	require.NoError(t, err)
	assert.InDelta(t, 120_000, r.NextVisibleTime-r.FirstDequeueTime, 5, "next visible = dequeue + 120 s")
}

func TestDeleteQueue(t *testing.T) {
	srv := newServer(t, nil)
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	require.NoError(t, mgr.CreateSimpleQueue("d"))
	q := ali_mns.NewMNSQueue("d", newClient(srv))
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := batchReceive(q, 16, 10)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, mgr.DeleteQueue("d"))
	err := <-done
	require.Error(t, err, "a poll on a deleted queue ends")
	assert.Less(t, since(start), 5*time.Second, "the poll ended with the queue, not after 10 s")
	_, err = q.SendMessage(msg("x"))
	requireCode(t, codeQueueNotExist, err, "send after delete")
	assert.ErrorIs(t, srv.DeleteQueue("d"), mnstest.ErrQueueNotExist)
}

func TestListQueues(t *testing.T) {
	srv := newServer(t, nil)
	mgr := ali_mns.NewMNSQueueManager(newClient(srv))
	for i := range 5 {
		require.NoError(t, srv.CreateQueue(fmt.Sprintf("list-%d", i), nil))
	}
	require.NoError(t, srv.CreateQueue("other", nil))

	page, err := mgr.ListQueue("", 2, "list-")
	require.NoError(t, err, "ListQueue page 1")
	require.Len(t, page.Queues, 2)
	assert.Contains(t, page.Queues[0].QueueURL, "/queues/list-0")
	assert.Equal(t, "list-2", page.NextMarker)
	var names []string
	marker := ""
	for {
		p, err := mgr.ListQueue(marker, 2, "list-")
		require.NoError(t, err)
		for _, q := range p.Queues {
			names = append(names, q.QueueURL[len(q.QueueURL)-6:])
		}
		if p.NextMarker == "" {
			break
		}
		marker = p.NextMarker
	}
	assert.Equal(t, []string{"list-0", "list-1", "list-2", "list-3", "list-4"}, names, "pages cover all, in order")

	details, err := mgr.ListQueueDetail("", 0, "")
	require.NoError(t, err, "ListQueueDetail")
	require.Len(t, details.Attrs, 6)
	assert.Equal(t, "list-0", details.Attrs[0].QueueName)
	assert.EqualValues(t, 30, details.Attrs[0].VisibilityTimeout)
}

func TestDelaySeconds(t *testing.T) {
	srv := newServer(t, nil)
	name, q := newQueue(t, srv, &mnstest.QueueAttributes{DelaySeconds: 10})
	_, err := q.SendMessage(msg("queue-delayed"))
	require.NoError(t, err)
	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 1, info.Delayed, "queue delay applies")
	_, err = receive(q)
	requireCode(t, codeMessageNotExist, err, "receive before the delay ends")
	srv.Advance(11 * time.Second)
	r, err := receive(q)
	require.NoError(t, err, "receive after the delay")
	assert.Equal(t, "queue-delayed", r.MessageBody)

	name2, q2 := newQueue(t, srv, nil)
	resp, err := q2.SendMessage(ali_mns.MessageSendRequest{MessageBody: "msg-delayed", DelaySeconds: 5, Priority: 8})
	require.NoError(t, err)
	assert.NotEmpty(t, resp.ReceiptHandle, "a delayed send answers a receipt handle")
	info, err = srv.Queue(name2)
	require.NoError(t, err)
	assert.Equal(t, 1, info.Delayed)
	srv.Advance(4 * time.Second)
	_, err = receive(q2)
	requireCode(t, codeMessageNotExist, err, "receive 4 s into a 5 s delay")
	srv.Advance(2 * time.Second)
	r, err = receive(q2)
	require.NoError(t, err, "receive after the message delay")
	assert.Equal(t, "msg-delayed", r.MessageBody)

	_, err = q2.SendMessage(ali_mns.MessageSendRequest{MessageBody: "x", DelaySeconds: 604801})
	requireCode(t, codeInvalidArgument, err, "delay over 7 days")
}

func TestLongPollSeesDelayEnd(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, nil)
	_, err := q.SendMessage(ali_mns.MessageSendRequest{MessageBody: "d", DelaySeconds: 1, Priority: 8})
	require.NoError(t, err)
	start := time.Now()
	r, err := receive(q, 5)
	require.NoError(t, err, "a long poll returns the message when its delay ends")
	assert.Equal(t, "d", r.MessageBody)
	took := since(start)
	assert.Less(t, took, 2500*time.Millisecond, "returned at the end of the 1 s delay, not after 5 s")
}

func TestRetentionExpiry(t *testing.T) {
	srv := newServer(t, nil)
	name, q := newQueue(t, srv, &mnstest.QueueAttributes{MessageRetentionPeriod: 60})
	_, err := q.BatchSendMessage(msgs("e", 3)...)
	require.NoError(t, err)
	_, err = receive(q, 1) // one in flight, two visible, one delayed below
	require.NoError(t, err)
	_, err = q.SendMessage(ali_mns.MessageSendRequest{MessageBody: "late", DelaySeconds: 100, Priority: 8})
	require.NoError(t, err)
	srv.Advance(59 * time.Second)
	peeked, err := batchPeek(q, 16)
	require.NoError(t, err, "still there before retention")
	assert.Len(t, peeked, 3, "two never received plus the one whose visibility lapsed")
	srv.Advance(2 * time.Second)
	_, err = batchReceive(q, 16)
	requireCode(t, codeMessageNotExist, err, "receive after retention")
	srv.Advance(100 * time.Second)
	_, err = receive(q)
	requireCode(t, codeMessageNotExist, err, "the delayed message expired too")
	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 0, info.Active+info.Inactive+info.Delayed, "nothing left")
	assert.EqualValues(t, 4, srv.Stats().Expired)
}

func TestPriority(t *testing.T) {
	srv := newServer(t, &mnstest.Options{Shards: 1})
	_, q := newQueue(t, srv, nil)
	_, err := q.BatchSendMessage(
		ali_mns.MessageSendRequest{MessageBody: "low", Priority: 16},
		ali_mns.MessageSendRequest{MessageBody: "default"}, // 0: the default 8
		ali_mns.MessageSendRequest{MessageBody: "high", Priority: 1},
	)
	require.NoError(t, err)
	got, err := batchReceive(q, 3, 1)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, []string{"high", "default", "low"}, []string{got[0].MessageBody, got[1].MessageBody, got[2].MessageBody})
	assert.EqualValues(t, 8, got[1].Priority, "0 is stored as 8")
	_, err = q.SendMessage(ali_mns.MessageSendRequest{MessageBody: "x", Priority: 17})
	requireCode(t, codeInvalidArgument, err, "priority 17")
}

// TestBasicallyOrdered checks the reordering model: with several shards the
// order differs from FIFO, but no message is overtaken by one sent more than
// ReorderWindow sends after it.
func TestBasicallyOrdered(t *testing.T) {
	const n, window = 320, 8
	srv := newServer(t, &mnstest.Options{Shards: 4, ReorderWindow: window})
	_, q := newQueue(t, srv, nil)
	for i := 0; i < n; i += 16 {
		batch := make([]ali_mns.MessageSendRequest, 16)
		for j := range batch {
			batch[j] = msg(strconv.Itoa(i + j))
		}
		_, err := q.BatchSendMessage(batch...)
		require.NoError(t, err)
	}
	var order []int
	for len(order) < n {
		got, err := batchReceive(q, 16, 1)
		require.NoError(t, err)
		for _, m := range got {
			v, err := strconv.Atoi(m.MessageBody)
			require.NoError(t, err)
			order = append(order, v)
		}
	}
	swaps := 0
	maxSeen := -1
	for i, v := range order {
		if i > 0 && v < order[i-1] {
			swaps++
		}
		// Everything received before v was sent at most window sends after v.
		assert.LessOrEqual(t, maxSeen, v+window, "message %d at position %d overtaken by %d", v, i, maxSeen)
		maxSeen = max(maxSeen, v)
	}
	assert.Greater(t, swaps, n/20, "expected local reordering with 4 shards, got %d inversions in %d", swaps, n)
	seen := map[int]bool{}
	for _, v := range order {
		assert.False(t, seen[v], "message %d received twice", v)
		seen[v] = true
	}
}

func TestConcurrentClients(t *testing.T) {
	srv := newServer(t, nil)
	name, _ := newQueue(t, srv, &mnstest.QueueAttributes{VisibilityTimeout: 60})
	const senders, perSender = 4, 200
	errs := make(chan error, 16)
	for s := range senders {
		go func() {
			q := ali_mns.NewMNSQueue(name, newClient(srv))
			for i := 0; i < perSender; i += 10 {
				batch := make([]ali_mns.MessageSendRequest, 10)
				for j := range batch {
					batch[j] = msg(fmt.Sprintf("%d-%d", s, i+j))
				}
				if _, err := q.BatchSendMessage(batch...); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	got := make(chan string, senders*perSender)
	stop := make(chan struct{})
	const receivers = 4
	for range receivers {
		go func() {
			q := ali_mns.NewMNSQueue(name, newClient(srv))
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				ms, err := batchReceive(q, 16, 1)
				if mnsCode(err) == codeMessageNotExist {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				var hs []string
				for _, m := range ms {
					got <- m.MessageBody
					hs = append(hs, m.ReceiptHandle)
				}
				if _, err := q.BatchDeleteMessage(hs...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range senders {
		require.NoError(t, <-errs, "sender")
	}
	seen := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(seen) < senders*perSender {
		select {
		case b := <-got:
			assert.False(t, seen[b], "%s received twice without faults", b)
			seen[b] = true
		case <-deadline:
			t.Fatalf("received %d of %d messages in 30 s", len(seen), senders*perSender)
		}
	}
	close(stop)
	for range receivers {
		require.NoError(t, <-errs, "receiver")
	}
	info, err := srv.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 0, info.Active+info.Inactive, "all deleted")
}

func TestNewServerOptions(t *testing.T) {
	for _, o := range []mnstest.Options{
		{Addr: "localhost:0"},
		{Addr: "[::1]:0"},
		{Addr: "127.0.0.1"},
		{Shards: 65},
		{Shards: -1},
		{ReorderWindow: -1},
		{Faults: mnstest.Faults{Redeliver: -0.1}},
		{Faults: mnstest.Faults{Latency: -time.Second}},
	} {
		srv, err := mnstest.NewServer(&o)
		if !assert.Error(t, err, "options %+v", o) {
			_ = srv.Close()
		}
	}
	srv := newServer(t, nil)
	assert.True(t, strings.HasPrefix(srv.Endpoint(), "http://127.0.0.1:"), "loopback by default: %s", srv.Endpoint())
	assert.True(t, strings.HasSuffix(srv.Endpoint(), "/."))
	_, err := mnstest.NewServer(&mnstest.Options{Addr: srv.Addr()})
	assert.Error(t, err, "address in use")
	srv2 := newServer(t, nil)
	assert.Equal(t, mnstest.DefaultAccessKeyID, srv2.AccessKeyID())
	assert.Equal(t, mnstest.DefaultAccessKeySecret, srv2.AccessKeySecret())
	require.NoError(t, srv2.Close())
	assert.ErrorIs(t, srv2.CreateQueue("late", nil), mnstest.ErrClosed)
}
