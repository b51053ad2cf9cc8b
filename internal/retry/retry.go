// Package retry holds the waiting that the sources' and sinks' retry
// loops share: a sleep that a cancelled context ends, and the jitter that
// keeps many pipelines that failed together from retrying together.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d, or until ctx is done, and then returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Jitter returns a wait drawn uniformly from the upper half of d, [d/2, d].
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1)
}
