package retry_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/retry"
)

func TestDelayBounds(t *testing.T) {
	b := retry.Backoff{Initial: 10 * time.Millisecond, Max: 70 * time.Millisecond}
	for _, tc := range []struct {
		n    int
		base time.Duration
	}{{-1, 10}, {0, 10}, {1, 10}, {2, 20}, {3, 40}, {4, 70}, {50, 70}} {
		base := tc.base * time.Millisecond
		lo, hi := base, time.Duration(0)
		for range 2000 {
			d := b.Delay(tc.n)
			lo, hi = min(lo, d), max(hi, d)
		}
		assert.GreaterOrEqual(t, lo, base/2, "retry %d: no wait below half of the base %v", tc.n, base)
		assert.LessOrEqual(t, hi, base, "retry %d: no wait above the base %v", tc.n, base)
		assert.Less(t, lo, base*3/4, "retry %d: waits are spread (jitter), lowest %v", tc.n, lo)
		assert.Greater(t, hi, base*3/4, "retry %d: waits are spread (jitter), highest %v", tc.n, hi)
	}
	assert.Zero(t, retry.Backoff{}.Delay(3), "a zero Backoff does not wait")
}

// recorder is an injected Sleep: it records the waits and returns at once.
type recorder struct{ waits []time.Duration }

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.waits = append(r.waits, d)
	return ctx.Err()
}

var errTransient = errors.New("transient")

func TestCallRetriesUntilSuccess(t *testing.T) {
	var rec recorder
	var retried []int
	p := retry.Policy{
		Backoff: retry.Backoff{Initial: time.Second, Max: 4 * time.Second},
		Sleep:   rec.sleep,
		OnRetry: func(attempt int, err error, wait time.Duration) {
			assert.ErrorIs(t, err, errTransient)
			retried = append(retried, attempt)
		},
	}
	var attempts []int
	err := retry.Call(t.Context(), p, func(_ context.Context, attempt int) error {
		attempts = append(attempts, attempt)
		if attempt < 4 {
			return errTransient
		}
		return nil
	})
	require.NoError(t, err, "the fourth attempt succeeds")
	assert.Equal(t, []int{1, 2, 3, 4}, attempts, "f is called with the attempt number")
	assert.Equal(t, []int{1, 2, 3}, retried, "OnRetry is called after each failed attempt")
	require.Len(t, rec.waits, 3, "one wait between attempts")
	for i, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		assert.True(t, base/2 <= rec.waits[i] && rec.waits[i] <= base, "wait %d is %v, want in [%v, %v]", i, rec.waits[i], base/2, base)
	}
}

func TestCallStops(t *testing.T) {
	permanent := errors.New("permanent")
	for _, tc := range []struct {
		name     string
		p        retry.Policy
		fail     func(attempt int) error
		want     error
		attempts int
	}{
		{"not retryable", retry.Policy{Retryable: func(err error) bool { return err == errTransient }},
			func(int) error { return permanent }, permanent, 1},
		{"retryable, then not", retry.Policy{Retryable: func(err error) bool { return err == errTransient }},
			func(a int) error {
				if a < 3 {
					return errTransient
				}
				return permanent
			}, permanent, 3},
		{"out of attempts", retry.Policy{MaxAttempts: 5}, func(int) error { return errTransient }, errTransient, 5},
	} {
		var rec recorder
		tc.p.Sleep = rec.sleep
		tc.p.Backoff = retry.Backoff{Initial: time.Millisecond, Max: time.Millisecond}
		n := 0
		err := retry.Call(t.Context(), tc.p, func(_ context.Context, attempt int) error {
			n++
			return tc.fail(attempt)
		})
		assert.ErrorIs(t, err, tc.want, "%s: the last error is returned", tc.name)
		assert.Equal(t, tc.attempts, n, "%s: attempts made", tc.name)
		assert.Len(t, rec.waits, tc.attempts-1, "%s: waits between attempts", tc.name)
	}
}

func TestCallContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	p := retry.Policy{
		Backoff: retry.Backoff{Initial: time.Hour, Max: time.Hour},
		// The context ends while Call waits after the second attempt.
		Sleep: func(ctx context.Context, _ time.Duration) error {
			if calls == 2 {
				cancel()
			}
			return ctx.Err()
		},
	}
	err := retry.Call(ctx, p, func(context.Context, int) error {
		calls++
		return errTransient
	})
	assert.Equal(t, 2, calls, "no attempt after the context ended")
	assert.ErrorIs(t, err, errTransient, "the last attempt's error is kept")
	assert.ErrorIs(t, err, context.Canceled, "and joined with the context's")

	calls = 0
	err = retry.Call(ctx, retry.Policy{}, func(context.Context, int) error { calls++; return nil })
	assert.ErrorIs(t, err, context.Canceled, "an ended context fails before the first attempt")
	assert.Zero(t, calls)
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		require.NoError(t, retry.Sleep(t.Context(), 3*time.Second))
		assert.Equal(t, 3*time.Second, time.Since(start), "Sleep waits d")

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		assert.ErrorIs(t, retry.Sleep(ctx, time.Hour), context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start), "Sleep returns when ctx ends")
		assert.ErrorIs(t, retry.Sleep(ctx, 0), context.DeadlineExceeded, "a zero wait still reports an ended ctx")
		assert.NoError(t, retry.Sleep(t.Context(), 0))
	})
}

func TestCallRealSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := retry.Policy{Backoff: retry.Backoff{Initial: time.Minute, Max: time.Minute}, MaxAttempts: 3}
		err := retry.Call(t.Context(), p, func(context.Context, int) error { return errTransient })
		assert.ErrorIs(t, err, errTransient)
		waited := time.Since(start)
		assert.True(t, time.Minute <= waited && waited <= 2*time.Minute, "two waits of 30-60 s with the default Sleep, got %v", waited)
	})
}
