package cdc

import "time"

// RetryPolicy is how a source or sink retries transient errors (a lost
// connection, a server restarting): it waits Initial after the first
// failure, doubling up to Max, jittered, and gives up once it has been
// failing for MaxElapsed. A zero MaxElapsed keeps retrying forever, the
// right default for a daemon: a database restart must not end a
// pipeline. Permanent errors (authentication, a missing table, a refused
// schema) are never retried. Zero Initial and Max mean their defaults.
type RetryPolicy struct {
	Initial    time.Duration
	Max        time.Duration
	MaxElapsed time.Duration
}

// Defaults of a RetryPolicy's zero fields.
const (
	DefaultRetryInitial = 100 * time.Millisecond
	DefaultRetryMax     = 30 * time.Second
)

// WithDefaults returns p with its zero Initial and Max set to their
// defaults, and Max at least Initial.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.Initial <= 0 {
		p.Initial = DefaultRetryInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultRetryMax
	}
	p.Max = max(p.Max, p.Initial)
	return p
}

// RetryFunc is told of a source's or sink's retries: after each failed
// attempt, with the count of consecutive failures so far (1, 2, …) and
// the error, and once after the first success that follows, with 0 and a
// nil error. It may be called from any goroutine and must not block.
type RetryFunc func(attempt int, err error)

// A Retrier is a source or sink that retries transient errors itself.
// The runtime calls SetRetry once, before Open, with the pipeline's
// policy and the function that hears of each retry: that is how a
// pipeline whose sink is waiting for its database shows as degraded,
// rather than as running. A connector's own setting for how long it
// keeps trying (the NATS sink's max_outage) overrides
// policy.MaxElapsed.
type Retrier interface {
	SetRetry(policy RetryPolicy, report RetryFunc)
}

// A PositionTimer is a source that can tell when the change at one of
// its positions was made (a MongoDB resume token's cluster time). At a
// restart, the runtime asks it about the checkpoint's position, so that
// the lag is known at once, before the source is open or the sink has
// committed, and grows while the sink cannot be reached.
type PositionTimer interface {
	PositionTime(pos Position) (t time.Time, ok bool)
}
