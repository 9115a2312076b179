package mnstest_test

import (
	"fmt"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// The real SDK, unchanged, against the emulator on a loopback port.
func Example() {
	srv, err := mnstest.NewServer(&mnstest.Options{Shards: 1}) // one shard: FIFO
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if err := srv.CreateQueue("jobs", nil); err != nil {
		panic(err)
	}

	client := ali_mns.NewAliMNSClientWithConfig(ali_mns.AliMNSClientConfig{
		EndPoint:        srv.Endpoint(), // http://127.0.0.1:PORT/.
		AccessKeyId:     srv.AccessKeyID(),
		AccessKeySecret: srv.AccessKeySecret(),
		TimeoutSecond:   35,
	})
	q := ali_mns.NewMNSQueue("jobs", client)
	for _, body := range []string{"first", "second"} {
		if _, err := q.SendMessage(ali_mns.MessageSendRequest{MessageBody: body, Priority: 8}); err != nil {
			panic(err)
		}
	}

	// The SDK answers on channels: buffer them, or it blocks.
	resp := make(chan ali_mns.BatchMessageReceiveResponse, 1)
	errc := make(chan error, 1)
	q.BatchReceiveMessage(resp, errc, 16, 1)
	select {
	case r := <-resp:
		for _, m := range r.Messages {
			fmt.Println(m.MessageBody, m.DequeueCount)
			if err := q.DeleteMessage(m.ReceiptHandle); err != nil {
				panic(err)
			}
		}
	case err := <-errc:
		panic(err)
	}
	fmt.Println("sent", srv.Stats().Sent, "deleted", srv.Stats().Deleted)
	// Output:
	// first 1
	// second 1
	// sent 2 deleted 2
}

// Advance moves the emulator's clock so that a test of visibility timeouts
// does not sleep.
func ExampleServer_Advance() {
	srv, err := mnstest.NewServer(nil)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if err := srv.CreateQueue("jobs", &mnstest.QueueAttributes{VisibilityTimeout: 60}); err != nil {
		panic(err)
	}
	q := ali_mns.NewMNSQueue("jobs", ali_mns.NewAliMNSClientWithConfig(ali_mns.AliMNSClientConfig{
		EndPoint: srv.Endpoint(), AccessKeyId: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret(),
	}))
	if _, err := q.SendMessage(ali_mns.MessageSendRequest{MessageBody: "work", Priority: 8}); err != nil {
		panic(err)
	}
	receive := func() {
		resp := make(chan ali_mns.MessageReceiveResponse, 1)
		errc := make(chan error, 1)
		q.ReceiveMessage(resp, errc) // no waitseconds: the queue's PollingWaitSeconds, 0
		select {
		case m := <-resp:
			fmt.Println("received", m.MessageBody, "dequeue count", m.DequeueCount)
		case <-errc:
			fmt.Println("nothing visible")
		}
	}
	receive()
	receive()
	srv.Advance(61 * time.Second) // the visibility timeout lapses
	receive()
	// Output:
	// received work dequeue count 1
	// nothing visible
	// received work dequeue count 2
}
