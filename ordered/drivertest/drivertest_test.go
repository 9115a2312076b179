package drivertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/drivertest"
	"github.com/inorder/inorder/ordered/memqueue"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// weak is a driver without ChangeVisibility that cannot tell stale receipts:
// deleting with one succeeds.
type weak struct{ *memqueue.Queue }

func (weak) ChangeVisibility(context.Context, string, time.Duration) (string, error) {
	return "", errors.New("weak: ChangeVisibility is not supported")
}

func (w weak) DeleteBatch(ctx context.Context, receipts []string) error {
	err := w.Queue.DeleteBatch(ctx, receipts)
	var be *driver.BatchError
	if !errors.As(err, &be) {
		return err
	}
	failed := false
	for i, e := range be.Errs {
		if errors.Is(e, driver.ErrStaleReceipt) {
			be.Errs[i] = nil
		}
		failed = failed || be.Errs[i] != nil
	}
	if !failed {
		return nil
	}
	return err
}

// TestCapabilityFlags runs the suite on a driver that lacks what
// Harness.NoStaleReceipts and Harness.NoVisibility say it lacks: the tests
// that need them must skip, and the others must still pass.
func TestCapabilityFlags(t *testing.T) {
	drivertest.RunConformanceTests(t, drivertest.Harness{
		NoStaleReceipts: true,
		NoVisibility:    true,
		New: func(t *testing.T, visibility time.Duration) driver.Queue {
			q := memqueue.New(&memqueue.Options{Visibility: visibility, MinVisibility: 10 * time.Millisecond})
			t.Cleanup(func() { q.Close() })
			return weak{q}
		},
	})
}
