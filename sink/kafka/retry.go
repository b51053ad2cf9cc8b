package kafka

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tide-cdc/tide/cdc"
)

var _ cdc.Retrier = (*Sink)(nil)

// SetRetry implements cdc.Retrier: the sink reports each failed attempt
// to reach the cluster (a dial the client retries, a metadata request
// while starting), so that the pipeline shows as degraded while Kafka is
// away, and the first acknowledgement after them, which ends it. Its own
// max_outage (default 1m), not the policy's max_elapsed, says when it
// gives up, and the client keeps its own backoff.
func (s *Sink) SetRetry(_ cdc.RetryPolicy, report cdc.RetryFunc) { s.report = report }

// retries counts the consecutive failed attempts to reach the cluster,
// which the client reports from its own goroutines.
type retries struct {
	failing atomic.Bool // read on every acknowledgement: cheap
	mu      sync.Mutex  // guards the field below, and orders the reports
	n       int
}

// fail reports one more failed attempt.
func (r *retries) fail(report cdc.RetryFunc, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.failing.Store(true)
	if report != nil {
		report(r.n, err)
	}
}

// succeed ends the failures, if there were any, and says so once.
func (r *retries) succeed(report cdc.RetryFunc) {
	if !r.failing.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return
	}
	r.n = 0
	r.failing.Store(false)
	if report != nil {
		report(0, nil)
	}
}

// connectHook hears of the client's dials: a failed one is a retry of
// the outage, a successful one ends it.
type connectHook struct{ s *Sink }

var _ kgo.HookBrokerConnect = connectHook{}

func (h connectHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.s.retries.fail(h.s.report, err)
		return
	}
	h.s.retries.succeed(h.s.report)
}
