package mnstest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSmokeSendReceiveDelete(t *testing.T) {
	srv := newServer(t, nil)
	_, q := newQueue(t, srv, nil)
	resp, err := q.SendMessage(msg("hello"))
	require.NoError(t, err, "SendMessage")
	assert.NotEmpty(t, resp.MessageId)
	assert.Equal(t, "5D41402ABC4B2A76B9719D911017C592", resp.MessageBodyMD5)
	r, err := receive(q, 1)
	require.NoError(t, err, "ReceiveMessage")
	assert.Equal(t, "hello", r.MessageBody)
	assert.Equal(t, resp.MessageId, r.MessageId)
	assert.EqualValues(t, 1, r.DequeueCount)
	require.NoError(t, q.DeleteMessage(r.ReceiptHandle), "DeleteMessage")
	_, err = receive(q)
	requireCode(t, codeMessageNotExist, err, "receive on empty queue")
}
