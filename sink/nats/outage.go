package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultMaxOutage bounds how long Open and Commit wait for NATS to come
// back before the pipeline fails.
const DefaultMaxOutage = time.Minute

// The retry waits: doubling from minBackoff up to maxBackoff, with
// jitter. maxBackoff is also the longest silence between the log lines
// of an outage.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// errNoPubAck is a commit that waited its whole time for a PubAck.
var errNoPubAck = errors.New("no PubAck")

// permanentError is an error that a retry cannot fix, even though it
// wraps one that could be transient.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// outage paces the retries of one outage: it says when to give up, how
// long to wait before the next try, and when to log again.
type outage struct {
	max      time.Duration
	since    time.Time // the last progress: the outage began here
	wait     time.Duration
	attempts int
	logged   time.Time
}

func newOutage(max time.Duration, since time.Time) *outage {
	return &outage{max: max, since: since, wait: minBackoff}
}

// progressed restarts the clock: some records got through, so the
// outage, if there is one, is a new one.
func (o *outage) progressed() {
	o.since = time.Now()
	o.wait = minBackoff
}

// over reports whether the outage has lasted max_outage.
func (o *outage) over() bool { return time.Since(o.since) >= o.max }

// length is how long the outage has lasted.
func (o *outage) length() time.Duration { return time.Since(o.since).Round(time.Millisecond) }

// shouldLog reports whether to log this attempt: the first one, then at
// most once every maxBackoff, so a long outage does not flood the log.
func (o *outage) shouldLog() bool {
	if !o.logged.IsZero() && time.Since(o.logged) < maxBackoff {
		return false
	}
	o.logged = time.Now()
	return true
}

// sleep waits the next backoff, with full jitter so that many pipelines
// do not retry in step, the way the postgres sink does; a signal on wake
// (the connection is back) ends it early.
func (o *outage) sleep(ctx context.Context, wake <-chan struct{}) error {
	o.attempts++
	d := o.wait/2 + rand.N(o.wait/2+1)
	o.wait = min(2*o.wait, maxBackoff)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// transient reports whether err is NATS being unreachable or briefly
// unable to answer, which a retry can outlast. Everything else (a stream
// that does not exist, a subject no stream captures, a message too large,
// a permission or authorization error) is permanent.
func transient(err error) bool {
	var pe permanentError
	if errors.As(err, &pe) {
		return false
	}
	for _, t := range []error{
		nats.ErrNoServers, nats.ErrTimeout, nats.ErrNoResponders,
		nats.ErrDisconnected, nats.ErrConnectionClosed, nats.ErrConnectionReconnecting,
		nats.ErrReconnectBufExceeded, nats.ErrStaleConnection,
		jetstream.ErrNoStreamResponse, jetstream.ErrAsyncPublishTimeout, jetstream.ErrTooManyStalledMsgs,
		context.DeadlineExceeded, errNoPubAck,
	} {
		if errors.Is(err, t) {
			return true
		}
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.Code == 503 // JetStream temporarily unavailable, or not ready yet
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// explain makes a transient error read as what it means for the sink.
func explain(err error) error {
	if errors.Is(err, nats.ErrReconnectBufExceeded) {
		return fmt.Errorf("not connected, reconnecting: %w", err)
	}
	return err
}
