package ordered_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
)

// SendAsync's results come from per-P slabs through a sync.Pool: from
// many goroutines (Gosched between, so that they move between Ps), every
// result is its own (distinct pointers, its own seq, Done closed, Err nil)
// and no state leaks between them. Run with -race.
func TestReview15_SendResultsFromSlabsAreDistinct(t *testing.T) {
	ctx := sendCtx(t)
	d := newSendDriver()
	q := newSendQueue(t, d, newTestStore(), nil)
	const workers, each = 8, 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	all := map[*ordered.SendResult]string{}
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			g := fmt.Sprintf("g%d", w)
			var rs []*ordered.SendResult
			for i := range each {
				r, err := q.SendAsync(ctx, g, []byte(strconv.Itoa(i)))
				if err != nil {
					errs <- err
					return
				}
				_ = r.Done() // makes its done channel now, on half of them
				rs = append(rs, r)
				mu.Lock()
				if prev, dup := all[r]; dup {
					errs <- fmt.Errorf("result %p handed out twice: %s and %s/%d", r, prev, g, i)
				}
				all[r] = fmt.Sprintf("%s/%d", g, i)
				mu.Unlock()
			}
			for i, r := range rs {
				if err := r.Wait(ctx); err != nil {
					errs <- err
				}
				<-r.Done()
				if r.Seq() != uint64(i+1) || r.Err() != nil {
					errs <- fmt.Errorf("%s #%d: seq %d err %v", g, i, r.Seq(), r.Err())
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, all, workers*each)
}
