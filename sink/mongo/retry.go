package mongo

import (
	"math"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

var _ cdc.Retrier = (*Sink)(nil)

// SetRetry implements cdc.Retrier: the sink reports each retried write,
// so that the pipeline shows as degraded while the target is away, and
// keeps retrying for the policy's max_elapsed (forever when 0) unless
// Config.RetryTimeout was set.
func (s *Sink) SetRetry(policy cdc.RetryPolicy, report cdc.RetryFunc) {
	s.report = report
	if s.retryTimeoutSet {
		return
	}
	s.cfg.RetryTimeout = policy.MaxElapsed
	if s.cfg.RetryTimeout <= 0 {
		s.cfg.RetryTimeout = time.Duration(math.MaxInt64)
	}
}

// reportRetry tells the pipeline of a retry (attempt > 0) or of the
// success that ends one (attempt 0).
func (s *Sink) reportRetry(attempt int, err error) {
	if s.report != nil {
		s.report(attempt, err)
	}
}
