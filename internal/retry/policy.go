package retry

import (
	"context"
	"fmt"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// Backoff follows one run of consecutive failures under a
// cdc.RetryPolicy: it reports each failure, waits the next jittered
// backoff, and gives up once the run has lasted MaxElapsed. Its zero
// value retries under the default policy and reports to no one. It is
// not safe for concurrent use: each retry loop has its own.
type Backoff struct {
	Policy cdc.RetryPolicy
	Report cdc.RetryFunc // nil: none

	attempts int
	first    time.Time // of the current run of failures
	wait     time.Duration
}

// Attempts is the number of consecutive failures so far.
func (b *Backoff) Attempts() int { return b.attempts }

// Since is when the current run of failures began; zero when none.
func (b *Backoff) Since() time.Time { return b.first }

// Fail records a failed attempt whose error err is transient, reports
// it, and waits before the next attempt. It returns an error, wrapping
// err, once the failures have lasted the policy's MaxElapsed, and ctx's
// error if ctx ends the wait.
func (b *Backoff) Fail(ctx context.Context, err error) error {
	p := b.Policy.WithDefaults()
	now := time.Now()
	if b.attempts == 0 {
		b.first = now
		b.wait = p.Initial
	}
	b.attempts++
	if p.MaxElapsed > 0 && now.Sub(b.first) >= p.MaxElapsed {
		return fmt.Errorf("giving up after %d attempts in %s (retry.max_elapsed %s): %w",
			b.attempts, now.Sub(b.first).Round(time.Millisecond), p.MaxElapsed, err)
	}
	if b.Report != nil {
		b.Report(b.attempts, err)
	}
	d := Jitter(b.wait)
	if p.MaxElapsed > 0 { // never sleep past the deadline
		d = min(d, max(0, b.first.Add(p.MaxElapsed).Sub(now)))
	}
	b.wait = min(2*b.wait, p.Max)
	return Sleep(ctx, d)
}

// Succeed ends a run of failures, and reports the recovery if there was
// one.
func (b *Backoff) Succeed() {
	if b.attempts == 0 {
		return
	}
	b.attempts, b.first, b.wait = 0, time.Time{}, 0
	if b.Report != nil {
		b.Report(0, nil)
	}
}
