package nats

import "github.com/tide-cdc/tide/cdc"

var _ cdc.Retrier = (*Sink)(nil)

// SetRetry implements cdc.Retrier: the sink reports each retry of an
// outage, so that the pipeline shows as degraded while NATS is away. Its
// own max_outage (default 1m), not the policy's max_elapsed, says when it
// gives up, and it keeps its own backoff (50 ms doubling to 5 s), which a
// reconnection cuts short.
func (s *Sink) SetRetry(_ cdc.RetryPolicy, report cdc.RetryFunc) { s.report = report }

// reportRetry tells the pipeline of a retry (attempt > 0) or of the
// success that ends an outage (attempt 0).
func (s *Sink) reportRetry(attempt int, err error) {
	if s.report != nil {
		s.report(attempt, err)
	}
}
