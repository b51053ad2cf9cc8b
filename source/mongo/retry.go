package mongo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/retry"
)

var _ cdc.Retrier = (*Source)(nil)

// SetRetry implements cdc.Retrier: the pipeline's policy for reaching
// the server, admission and reconnecting the stream, and where to report
// each retry. max_reconnects, where set, still caps the reconnects.
func (s *Source) SetRetry(policy cdc.RetryPolicy, report cdc.RetryFunc) {
	s.retryPolicy, s.retryReport = policy, report
}

// backoff returns a fresh retry loop under the source's policy; outside a
// pipeline, the defaults of BackoffBase and BackoffMax, forever.
func (s *Source) backoff() *retry.Backoff {
	p := s.retryPolicy
	if p.Initial <= 0 {
		p.Initial = s.cfg.BackoffBase
	}
	if p.Max <= 0 {
		p.Max = s.cfg.BackoffMax
	}
	return &retry.Backoff{Policy: p, Report: s.retryReport}
}

// reachTimeout bounds one attempt at reaching the server, so that a
// server that is not there is said to be missing within seconds, not
// after the driver's whole server selection timeout.
const reachTimeout = 2 * time.Second

// reach waits until the server answers hello, saying in plain words
// every so often what it waits for ("waiting for MongoDB at
// 127.0.0.1:27017: connection refused; retrying").
func (s *Source) reach(ctx context.Context) error {
	b := s.backoff()
	for {
		actx, cancel := context.WithTimeout(ctx, min(reachTimeout, s.cfg.ConnectTimeout))
		err := s.client.Database("admin").RunCommand(actx, bson.D{{Key: "hello", Value: 1}}).Err()
		cancel()
		if err == nil {
			b.Succeed()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !transient(err) {
			return explain(s.ns, s.split, err)
		}
		s.metrics.errors.Add(1)
		waiting := s.heartbeat.explain(err)
		if n := b.Attempts(); n == 0 || n%10 == 0 {
			s.log.Warn(waiting.Error() + "; retrying")
		}
		if werr := b.Fail(ctx, waiting); werr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return werr
		}
	}
}

// heartbeats keeps the driver's last failed heartbeat, which says why a
// server cannot be reached (connection refused, no such host) where a
// server selection error says only that none could be selected.
type heartbeats struct {
	mu   sync.Mutex
	addr string
	err  error
}

func (h *heartbeats) monitor() *event.ServerMonitor {
	return &event.ServerMonitor{
		ServerHeartbeatFailed: func(e *event.ServerHeartbeatFailedEvent) {
			addr, _, _ := strings.Cut(e.ConnectionID, "[-")
			h.mu.Lock()
			h.addr, h.err = addr, e.Failure
			h.mu.Unlock()
		},
		ServerHeartbeatSucceeded: func(*event.ServerHeartbeatSucceededEvent) {
			h.mu.Lock()
			h.addr, h.err = "", nil
			h.mu.Unlock()
		},
	}
}

// explain turns err, a failure to reach the server, into "waiting for
// MongoDB at ADDR: CAUSE", the cause as short as the system says it.
func (h *heartbeats) explain(err error) error {
	h.mu.Lock()
	addr, hb := h.addr, h.err
	h.mu.Unlock()
	cause := err
	if hb != nil {
		cause = hb
	}
	msg := cause.Error()
	var errno syscall.Errno
	if errors.As(cause, &errno) {
		msg = errno.Error()
	} else if errors.Is(cause, context.DeadlineExceeded) {
		msg = "no answer within " + reachTimeout.String()
	}
	if addr == "" {
		return fmt.Errorf("waiting for MongoDB: %s: %w", msg, err)
	}
	return &waitingError{addr: addr, msg: msg, err: err}
}

// waitingError is "waiting for MongoDB at ADDR: CAUSE", wrapping the
// driver's error.
type waitingError struct {
	addr, msg string
	err       error
}

func (e *waitingError) Error() string { return "waiting for MongoDB at " + e.addr + ": " + e.msg }
func (e *waitingError) Unwrap() error { return e.err }

// explainIfUnreachable is explain for an error of a server that cannot
// be reached (a heartbeat failed since the last success), and err itself
// otherwise.
func (h *heartbeats) explainIfUnreachable(err error) error {
	h.mu.Lock()
	hb := h.err
	h.mu.Unlock()
	if hb == nil {
		return err
	}
	return h.explain(err)
}
