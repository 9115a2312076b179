package memqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
)

// FuzzReceipt feeds arbitrary receipt handles to DeleteBatch and
// ChangeVisibility on a queue holding a few messages: they must never panic,
// and fail with ErrBadReceipt or ErrStaleReceipt unless the handle is the
// current one of a message in flight.
func FuzzReceipt(f *testing.F) {
	q := memqueue.New(&memqueue.Options{Shards: 1})
	defer q.Close()
	ctx := context.Background()
	valid := map[string]bool{}
	for range 3 {
		if err := q.SendBatch(ctx, [][]byte{[]byte("a"), []byte("b")}); err != nil {
			f.Fatal(err)
		}
		msgs, err := q.ReceiveBatch(ctx, 2, 0)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range msgs {
			f.Add(m.Receipt)
			valid[m.Receipt] = true
		}
	}
	f.Add("")
	f.Add(".")
	f.Add("mq1.0.0")
	f.Add("mq1.zzzzzzzzzzzzzzzz.1")
	// The queue lives across inputs, so valid also collects the handles
	// that ChangeVisibility returns.
	f.Fuzz(func(t *testing.T, r string) {
		nr, err := q.ChangeVisibility(ctx, r, time.Hour)
		if err == nil {
			valid[nr] = true
		}
		if valid[r] {
			// The fuzzer may replay a handle that was already rotated.
			if err != nil && !errors.Is(err, driver.ErrStaleReceipt) {
				t.Fatalf("ChangeVisibility(%q): want nil or ErrStaleReceipt, got %v", r, err)
			}
			return
		}
		if !errors.Is(err, driver.ErrBadReceipt) && !errors.Is(err, driver.ErrStaleReceipt) {
			t.Fatalf("ChangeVisibility(%q) with a handle never issued: want ErrBadReceipt or ErrStaleReceipt, got %v", r, err)
		}
		err = q.DeleteBatch(ctx, []string{r})
		var be *driver.BatchError
		if !errors.As(err, &be) || !errors.Is(be.Errs[0], driver.ErrBadReceipt) && !errors.Is(be.Errs[0], driver.ErrStaleReceipt) {
			t.Fatalf("DeleteBatch(%q) with a handle never issued: want a BatchError with ErrBadReceipt or ErrStaleReceipt, got %v", r, err)
		}
	})
}
