package crashtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestFaultStoreChaos: both stores fail calls at random all along, the
// three ways a real store does: 8% before the call is applied, 4% of the
// writes after (durable, reported failed: Reserve, Advance, Park, Sent), 5%
// slow, and every third park of the receiver fails before it is applied.
// The receiver parks (a window of 8), so parks and unparks go through the
// chaos too. Every Send that returned nil is delivered, in order, once, and
// the checker's rules hold (no delete before a durable cursor or park). A
// Reserve applied and reported failed leaves journal entries whose Sends
// failed: Recover sends them, so they leave no hole (the queue ends empty)
// and arrive under their own seqs (delivered counts them: more than sent).
func TestFaultStoreChaos(t *testing.T) {
	e := newEnv(t, nil, nil)
	rec := newRecorder()
	sstore := NewFaultStore(openFilestore(t, t.TempDir()), 1, StoreFaults{Before: 0.08, After: 0.04, Slow: 0.05, ReserveAfter: true})
	rstore := NewFaultStore(memstore.New(), 2, StoreFaults{Before: 0.08, After: 0.04, Slow: 0.05, ParkEvery: 3})
	tx := e.open(sstore, nil)
	rx := e.open(rstore, &ordered.Options{Receive: ordered.ReceiveOptions{SyncAck: true, Window: 8, MaxUndeleted: 16}})
	stop := run(t, rx, rec.handler("r", 1, nil))
	for range 5 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		for g := range 4 {
			rec.send(ctx, tx, "s", 1, fmt.Sprintf("g%d", g), 15)
		}
		cancel()
		time.Sleep(200 * time.Millisecond)
	}
	// Recover meets the chaos too: a failed call is the caller's to
	// retry, as any store error.
	var err error
	for range 10 {
		if _, err = tx.Recover(t.Context()); err == nil {
			break
		}
	}
	require.NoError(t, err, "Recover, retried through the chaos")
	rec.waitDelivered(t, 30*time.Second, rx)
	// The messages of failed Sends that Recover sent may still be on their
	// way (waitDelivered waits for those whose Send returned nil): the
	// queue must empty while the receiver runs. Stopped first, it left 8
	// in one CI-loaded run of the package.
	left := e.waitEmpty(20 * time.Second)
	stop()
	rep := rec.check(t, Config{Leftover: max(left, e.left())})
	st := rx.Stats().Receive
	assert.Positive(t, sstore.FailedBefore.Load()+sstore.FailedAfter.Load(), "sender store calls failed")
	assert.Positive(t, rstore.FailedAfter.Load(), "receiver store writes applied and reported failed")
	t.Logf("sender store: %d failed before, %d after, %d slow; receiver store: %d before, %d after, %d slow; parked %d; %s",
		sstore.FailedBefore.Load(), sstore.FailedAfter.Load(), sstore.Slowed.Load(),
		rstore.FailedBefore.Load(), rstore.FailedAfter.Load(), rstore.Slowed.Load(), st.Parked, rep.Figures())
}
