package crashtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// slowAdvanceStore answers Advance late and records, per group, the
// cursor its Advance calls made durable.
type slowAdvanceStore struct {
	seqstore.Store
	delay time.Duration

	mu   sync.Mutex
	next map[string]uint64
}

func (s *slowAdvanceStore) Advance(ctx context.Context, b []seqstore.Advance) error {
	time.Sleep(s.delay)
	err := s.Store.Advance(ctx, b)
	if err == nil {
		s.mu.Lock()
		for _, a := range b {
			s.next[a.Stream.Group] = max(s.next[a.Stream.Group], a.To.Next)
		}
		s.mu.Unlock()
	}
	return err
}

func (s *slowAdvanceStore) durable(group string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next[group]
}

// TestFaultSyncAckWaitsForStore: with SyncAck, Ack returns only once the
// cursor past the message is durable, so an application may act on a
// returned Ack as on a commit (the crash harness's workers record such an
// ack as durable). The store answers each Advance 100 ms late; after every
// Ack that returned nil, the store's Advance must already have returned
// a cursor past the message. A SyncAck resolved before its cursor is durable
// (review 2's plant RC7) returns while the write is still in flight: a
// crash then would deliver the message again although Ack said it was done.
// (TestCrash's kill point acked-recorded looks for the same from outside,
// but a SIGKILL after the store's write(2) loses nothing, so it rarely sees
// it.)
func TestFaultSyncAckWaitsForStore(t *testing.T) {
	e := newEnv(t, nil, nil)
	store := &slowAdvanceStore{Store: memstore.New(), delay: 100 * time.Millisecond, next: map[string]uint64{}}
	tx := e.open(memstore.New(), nil)
	rx := e.open(store, &ordered.Options{Receive: ordered.ReceiveOptions{SyncAck: true}})
	const groups, per = 4, 10
	var mu sync.Mutex
	var early []string
	acked := 0
	stop := run(t, rx, func(ctx context.Context, m *ordered.Message) error {
		if err := m.Ack(ctx); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		acked++
		if d := store.durable(m.Group); d <= m.Seq {
			early = append(early, fmt.Sprintf("%s/%d (store's cursor %d)", m.Group, m.Seq, d))
		}
		return nil
	})
	for g := range groups {
		for i := range per {
			require.NoError(t, tx.Send(t.Context(), fmt.Sprintf("g%d", g), fmt.Appendf(nil, "%d", i)))
		}
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("%d acks", groups*per), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acked >= groups*per
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, early, "Ack returned before the store's Advance past the message did")
}
