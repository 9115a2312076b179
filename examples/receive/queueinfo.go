package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
)

// queueCounts are a queue's message counts, as GetQueueAttributes reports
// them: visible, invisible (received and not deleted, their visibility
// timeout running) and delayed.
type queueCounts struct {
	active, inactive, delayed int64
}

// readCounts reads c's queue's counts with the MNS SDK: package mnsqueue
// reads the queue's attributes when it opens it, but does not expose the
// counts. The SDK takes no context: the call runs on the caller's goroutine,
// bounded by the client's timeout (2s per request), and ctx is only checked
// before.
func readCounts(ctx context.Context, c config) (n queueCounts, err error) {
	if err := ctx.Err(); err != nil {
		return n, err
	}
	defer func() {
		// The SDK panics on what it does not accept; mnsqueue.New took
		// the same endpoint and key already, so this is a backstop.
		if p := recover(); p != nil {
			err = fmt.Errorf("mns sdk: %v", p)
		}
	}()
	client := ali_mns.NewAliMNSClientWithConfig(ali_mns.AliMNSClientConfig{
		EndPoint:        strings.TrimSuffix(c.endpoint, "/"),
		AccessKeyId:     c.cred.AccessKeyID,
		AccessKeySecret: c.cred.AccessKeySecret,
		Token:           c.cred.SecurityToken,
		TimeoutSecond:   int64(2 * time.Second / time.Second),
	})
	a, err := ali_mns.NewMNSQueueManager(client).GetQueueAttributes(c.queue)
	if err != nil {
		return n, fmt.Errorf("GetQueueAttributes: %w", err)
	}
	return queueCounts{active: a.ActiveMessages, inactive: a.InactiveMessages, delayed: a.DelayMessages}, nil
}
