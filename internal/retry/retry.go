package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Backoff computes the waits between attempts: before retry n (1 for the
// first) it waits a random duration in [d/2, d], where d is Initial doubled
// n-1 times and capped at Max. The jitter spreads the retries of callers
// that failed together.
type Backoff struct {
	// Initial is the base of the first wait; it must be positive.
	Initial time.Duration
	// Max caps the base of every wait; it must be at least Initial.
	Max time.Duration
}

// Delay returns the wait before retry n (n >= 1; smaller n counts as 1).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// Policy says when and how long to retry.
type Policy struct {
	Backoff
	// MaxAttempts bounds the calls of the operation, the first included;
	// 0 means no bound (until the context ends).
	MaxAttempts int
	// Retryable reports whether an error is worth another attempt; nil
	// means every error is.
	Retryable func(error) bool
	// Sleep waits d, or until ctx ends and then returns ctx.Err(); nil
	// means the real Sleep. Tests inject one that records the waits.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnRetry, when set, is called before each wait with the number of the
	// attempt that failed, its error and the wait (for logs and counters).
	OnRetry func(attempt int, err error, wait time.Duration)
}

// Call calls f, with attempt 1, 2, ..., until it returns nil or an error
// that is not retryable, the attempts run out or ctx ends, and returns f's
// last error. When ctx ends during a wait, the error joins f's last error
// with ctx.Err(), so that errors.Is finds either. Call does not call f once
// ctx has ended.
func Call(ctx context.Context, p Policy, f func(ctx context.Context, attempt int) error) error {
	sleep := p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := f(ctx, attempt)
		if err == nil || p.Retryable != nil && !p.Retryable(err) || p.MaxAttempts > 0 && attempt >= p.MaxAttempts {
			return err
		}
		wait := p.Delay(attempt)
		if p.OnRetry != nil {
			p.OnRetry(attempt, err, wait)
		}
		if cerr := sleep(ctx, wait); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
}

// Sleep waits d or until ctx ends, whichever comes first, and returns
// ctx.Err() in the latter case.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
