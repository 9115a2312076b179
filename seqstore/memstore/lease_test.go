package memstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/storetest"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) pass(_ *testing.T, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestLeaser runs the lease section on instances that share one memstore
// with a fake clock.
func TestLeaser(t *testing.T) {
	storetest.RunLeaser(t, storetest.LeaseHarness{
		Persistent: true,
		Shared:     true,
		Watches:    true,
		Open: func(t *testing.T) (func(*testing.T) seqstore.Store, storetest.Clock) {
			clock := &fakeClock{now: time.Now()}
			storage := memstore.New()
			storage.SetClock(clock.Now)
			t.Cleanup(func() { _ = storage.Close() })
			return func(*testing.T) seqstore.Store { return storetest.Share(storage) }, clock.pass
		},
	})
}

// TestLeaserRealClock runs the lease section on plain stores and the real
// clock, as a program uses them.
func TestLeaserRealClock(t *testing.T) {
	storetest.RunLeaser(t, storetest.LeaseHarness{
		TTL:     100 * time.Millisecond,
		Watches: true,
		Open: func(t *testing.T) (func(*testing.T) seqstore.Store, storetest.Clock) {
			return func(*testing.T) seqstore.Store { return memstore.New() }, nil
		},
	})
}
