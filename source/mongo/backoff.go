package mongo

import (
	"time"

	"github.com/tide-cdc/tide/internal/retry"
)

// backoff returns the wait before retry attempt (1, 2, …): exponential
// from base, capped at max, with jitter over its upper half.
func backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return retry.Jitter(d)
}
