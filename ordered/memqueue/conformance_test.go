package memqueue_test

import (
	"testing"
	"time"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/drivertest"
	"github.com/inorder/inorder/ordered/memqueue"
)

func TestConformance(t *testing.T) {
	drivertest.RunConformanceTests(t, drivertest.Harness{
		New: func(t *testing.T, visibility time.Duration) driver.Queue {
			q := memqueue.New(&memqueue.Options{Visibility: visibility, MinVisibility: 10 * time.Millisecond})
			t.Cleanup(func() { q.Close() })
			return q
		},
	})
}
