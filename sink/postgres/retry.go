package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/retry"
)

var _ cdc.Retrier = (*Sink)(nil)

// SetRetry implements cdc.Retrier: the pipeline's retry policy for
// connecting and for writing a batch, and where to report each retry.
// Config.RetryTimeout, where set, overrides policy.MaxElapsed.
func (s *Sink) SetRetry(policy cdc.RetryPolicy, report cdc.RetryFunc) {
	if s.cfg.RetryTimeout > 0 {
		policy.MaxElapsed = s.cfg.RetryTimeout
	}
	s.policy, s.report = policy, report
}

// backoff returns a fresh retry loop under the sink's policy. Without a
// policy (a sink used outside a pipeline), batches are retried for
// DefaultRetryTimeout, from 50 ms up to 5 s apart.
func (s *Sink) backoff() *retry.Backoff {
	p := s.policy
	if p == (cdc.RetryPolicy{}) {
		p = cdc.RetryPolicy{Initial: 50 * time.Millisecond, Max: 5 * time.Second, MaxElapsed: DefaultRetryTimeout}
		if s.cfg.RetryTimeout > 0 {
			p.MaxElapsed = s.cfg.RetryTimeout
		}
	}
	return &retry.Backoff{Policy: p, Report: s.report}
}

// connectRetrying connects, retrying while the server cannot be reached
// (it is down, or restarting); a server that answers with an error
// (authentication, a missing database) fails at once.
func (s *Sink) connectRetrying(ctx context.Context) error {
	b := s.backoff()
	for {
		err := s.connect(ctx)
		if err == nil {
			b.Succeed()
			return nil
		}
		if ctx.Err() != nil || !unreachable(err) {
			return err
		}
		if b.Attempts() == 0 || b.Attempts()%10 == 0 {
			s.log.Warn("waiting for PostgreSQL; retrying", "attempt", b.Attempts()+1, "err", err)
		}
		if werr := b.Fail(ctx, err); werr != nil {
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("postgres sink: connect: %w", werr)
		}
	}
}

// unreachable reports whether err says that the server could not be
// reached or went away, rather than that it refused us.
func unreachable(err error) bool {
	var pe *pgconn.PgError
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pe) || errors.As(err, &pce) {
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.As(err, &oe)
}
