package ordered_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
)

// A message this process sends while Recover's journal read is in flight
// is listed by the read (its Sent mark is not written yet), and its send
// completes before Recover looks at the list: its group has nothing in
// flight then and was dropped from the sender's books. Recover must still
// know it as this process's (its Sent mark is buffered) and not send it
// again. Before the fix it sent a copy: TestReview8RecoverBusyGroupLivelock
// counted 790 under CI's load where 1 was due (2026-12-06).
func TestRecoverSkipsWhatWasSentDuringItsRead(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	d.block = make(chan struct{})
	store := &otherEpochStore{testStore: newTestStore(), read: make(chan struct{}), resume: make(chan struct{})} // no other epoch's entry
	q := newSendQueue(t, d, store, &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Hour}})

	r, err := q.SendAsync(ctx, "g", []byte("in flight during the read"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return store.journalLen() == 1 }, 5*time.Second, time.Millisecond, "reserved and journaled")

	type result struct {
		n   int
		err error
	}
	rec := make(chan result, 1)
	store.armed.Store(true)
	go func() {
		n, err := q.Recover(ctx)
		rec <- result{n, err}
	}()
	<-store.read // the journal lists the message
	close(d.block)
	require.NoError(t, r.Wait(ctx), "sent while Recover's read is in flight")
	close(store.resume)
	res := <-rec
	require.NoError(t, res.err)
	assert.Equal(t, 0, res.n, "Recover sent again a message this process sent during its read")
	d.mu.Lock()
	defer d.mu.Unlock()
	assert.Len(t, d.accepted, 1, "one copy on the queue")
}
