package nats

import "github.com/tide-cdc/tide/cdc"

var _ cdc.Retrier = (*Source)(nil)

// SetRetry implements cdc.Retrier: the source reports its retries (while
// JetStream cannot prepare the consumer at Open, or reposition it after
// an interruption), so that the pipeline shows as degraded meanwhile. It
// keeps its own backoff, 0.5 s doubling to 5 s, and its own bounds.
func (s *Source) SetRetry(_ cdc.RetryPolicy, report cdc.RetryFunc) { s.report = report }

// reportRetry tells the pipeline of a retry (attempt > 0) or of the
// success that ends one (attempt 0).
func (s *Source) reportRetry(attempt int, err error) {
	if s.report != nil {
		s.report(attempt, err)
	}
}
