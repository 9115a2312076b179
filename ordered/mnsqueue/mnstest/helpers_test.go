package mnstest_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// SDK error codes (namespace "MNS") the tests check.
const (
	codeSendFailed       = 5
	codeInternal         = 102
	codeInvalidArgument  = 105
	codeMalformedXML     = 109
	codeMessageNotExist  = 115
	codeQueueExists      = 116
	codeQueueNotExist    = 122
	codeReceiptHandle    = 123
	codeSignature        = 124
	codeInvalidAccessKey = 101
	codeSameAttr         = 133
	codeBatchOpFail      = 136
	codeInvalidDigest    = 106
)

// mnsCode returns the SDK error code of err, or 0.
func mnsCode(err error) uint64 {
	c, ok := err.(interface {
		Code() uint64
		Namespace() string
	})
	if !ok || c.Namespace() != "MNS" {
		return 0
	}
	return c.Code()
}

func newServer(t testing.TB, opts *mnstest.Options) *mnstest.Server {
	t.Helper()
	srv, err := mnstest.NewServer(opts)
	require.NoError(t, err, "NewServer")
	t.Cleanup(func() { require.NoError(t, srv.Close(), "Close") })
	return srv
}

func newClient(srv *mnstest.Server) ali_mns.MNSClient {
	return newClientWith(srv, srv.AccessKeyID(), srv.AccessKeySecret())
}

func newClientWith(srv *mnstest.Server, id, secret string) ali_mns.MNSClient {
	return ali_mns.NewAliMNSClientWithConfig(ali_mns.AliMNSClientConfig{
		EndPoint:        srv.Endpoint(),
		AccessKeyId:     id,
		AccessKeySecret: secret,
		TimeoutSecond:   40,
	})
}

var queueSeq atomic.Int64

// newQueue creates a fresh queue with attrs and returns an SDK queue object
// for it (one per goroutine: the SDK's object is not race-free).
func newQueue(t testing.TB, srv *mnstest.Server, attrs *mnstest.QueueAttributes) (string, ali_mns.AliMNSQueue) {
	t.Helper()
	name := fmt.Sprintf("q-%d", queueSeq.Add(1))
	require.NoError(t, srv.CreateQueue(name, attrs), "CreateQueue %s", name)
	return name, ali_mns.NewMNSQueue(name, newClient(srv))
}

func receive(q ali_mns.AliMNSQueue, wait ...int64) (ali_mns.MessageReceiveResponse, error) {
	rc := make(chan ali_mns.MessageReceiveResponse, 1)
	ec := make(chan error, max(1, len(wait)))
	q.ReceiveMessage(rc, ec, wait...)
	select {
	case r := <-rc:
		return r, nil
	case err := <-ec:
		return ali_mns.MessageReceiveResponse{}, err
	}
}

func batchReceive(q ali_mns.AliMNSQueue, n int32, wait ...int64) ([]ali_mns.MessageReceiveResponse, error) {
	rc := make(chan ali_mns.BatchMessageReceiveResponse, 1)
	ec := make(chan error, max(1, len(wait)))
	q.BatchReceiveMessage(rc, ec, n, wait...)
	select {
	case r := <-rc:
		return r.Messages, nil
	case err := <-ec:
		return nil, err
	}
}

func peek(q ali_mns.AliMNSQueue) (ali_mns.MessageReceiveResponse, error) {
	rc := make(chan ali_mns.MessageReceiveResponse, 1)
	ec := make(chan error, 1)
	q.PeekMessage(rc, ec)
	select {
	case r := <-rc:
		return r, nil
	case err := <-ec:
		return ali_mns.MessageReceiveResponse{}, err
	}
}

func batchPeek(q ali_mns.AliMNSQueue, n int32) ([]ali_mns.MessageReceiveResponse, error) {
	rc := make(chan ali_mns.BatchMessageReceiveResponse, 1)
	ec := make(chan error, 1)
	q.BatchPeekMessage(rc, ec, n)
	select {
	case r := <-rc:
		return r.Messages, nil
	case err := <-ec:
		return nil, err
	}
}

func msg(body string) ali_mns.MessageSendRequest {
	return ali_mns.MessageSendRequest{MessageBody: body, Priority: 8}
}

func msgs(prefix string, n int) []ali_mns.MessageSendRequest {
	out := make([]ali_mns.MessageSendRequest, n)
	for i := range out {
		out[i] = msg(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// requireCode asserts that err is the SDK error with the given code.
func requireCode(t testing.TB, want uint64, err error, what string) {
	t.Helper()
	require.Error(t, err, "%s: want MNS#%d, got success", what, want)
	require.Equal(t, want, mnsCode(err), "%s: want MNS#%d, got %v", what, want, err)
}

func since(start time.Time) time.Duration { return time.Since(start) }
