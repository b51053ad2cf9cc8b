package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/pipeline"
)

// StatusEvery is how often a worker writes the status of each pipeline it
// runs into tide_status.
const StatusEvery = 2 * time.Second

// Open retries: a pipeline that cannot be built or that fails is tried
// again after a pause that doubles from minRetry up to maxRetry, for as
// long as the lease is held. The common case is a file sink whose data
// directory is still locked by a former owner that is paused, not dead.
const (
	minRetry = 200 * time.Millisecond
	// BuildTimeout bounds one attempt to build a pipeline (connect,
	// fence), after which it is retried.
	BuildTimeout = 15 * time.Second
	maxRetry     = 2 * time.Second
)

// slot is one leased pipeline: it renews the lease, builds and runs the
// pipeline, and on release drains it before deleting the lease. Its
// goroutine is started and waited for by the Worker.
type slot struct {
	w       *Worker
	def     Definition
	lease   Lease
	record  []byte               // the lease's value
	reg     *prometheus.Registry // written under w.mu, by run only
	started time.Time

	stopOnce sync.Once
	stop     chan struct{} // closed by release

	rev uint64 // the lease key's latest revision; only run touches it

	mu        sync.Mutex // guards the fields below
	state     string
	lastErr   string
	runner    Runner
	lastOut   int64
	lastTaken time.Time
}

type built struct {
	runner Runner
	err    error
}

// freshRegistry gives the next build of the pipeline an empty registry:
// metrics register once per registry.
func (s *slot) freshRegistry() {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	s.reg = prometheus.NewRegistry()
}

// release asks the slot to drain its pipeline and give its lease back.
func (s *slot) release() { s.stopOnce.Do(func() { close(s.stop) }) }

func (s *slot) getState() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *slot) setState(state string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = state
	s.lastErr = ""
	if err != nil {
		s.lastErr = err.Error()
	}
}

// run holds the lease until it is released, lost, or ctx is done.
func (s *slot) run(ctx context.Context) {
	w := s.w
	log := w.log.With("pipeline", s.lease.Pipeline)
	ttl := w.cfg.LeaseTTL
	leases := w.cfg.Buckets.Leases

	// pctx is the pipeline's: cancelling it is a hard stop.
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()

	renew := time.NewTicker(ttl / 3)
	defer renew.Stop()
	status := time.NewTicker(StatusEvery)
	defer status.Stop()
	retry := time.NewTimer(0)
	defer retry.Stop()
	backoff := minRetry

	var runner Runner
	var runDone chan error // non-nil while the pipeline runs
	var drainDone chan error
	var buildDone chan built // non-nil while the pipeline is being built
	releasing := false
	stop := s.stop

	// renewLease extends the lease by compare-and-set on its revision. A
	// refusal means the lease may be someone else's now, and so does a
	// NATS that answers nothing for two thirds of the TTL: either way the
	// pipeline is stopped at once, before it can commit again. Shorter
	// outages (a NATS node's leader election) are retried.
	renewed := s.started
	renewLease := func() bool {
		for {
			left := ttl*2/3 - time.Since(renewed) // stop well before the lease can expire
			if left <= 0 {
				w.leaseChanges.WithLabelValues("lost").Inc()
				log.Info("lease renewal failed: stopping the pipeline", "revision", s.rev, "err", "no renewal succeeded within two thirds of the lease TTL")
				return false
			}
			rctx, cancel := context.WithTimeout(ctx, min(left, ttl/4))
			at := time.Now()
			rev, err := leases.Update(rctx, s.lease.Pipeline, s.record, s.rev)
			cancel()
			if err == nil {
				s.rev, renewed = rev, at
				log.Debug("lease renewed", "revision", rev)
				return true
			}
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) || ctx.Err() != nil {
				// Refused: the key moved past our revision, so the
				// lease expired and may be another worker's now.
				w.leaseChanges.WithLabelValues("lost").Inc()
				log.Info("lease renewal failed: stopping the pipeline", "revision", s.rev, "err", err)
				return false
			}
			log.Debug("lease renewal did not get through; retrying", "revision", s.rev, "err", err)
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
	stopHard := func() {
		pcancel()
		if buildDone != nil {
			if b := <-buildDone; b.err == nil {
				_ = b.runner.Close()
			}
		}
		if runDone != nil {
			<-runDone
		}
		if drainDone != nil {
			<-drainDone
		}
	}
	// giveBack deletes the lease, so that the next owner starts at once.
	// A NATS slow to answer is tried again until the lease would have
	// expired anyway; a revision that moved means it is no longer ours.
	giveBack := func() {
		rev := s.rev
		deadline := renewed.Add(ttl)
		for {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(ttl/3, time.Until(deadline)))
			err := leases.Delete(dctx, s.lease.Pipeline, jetstream.LastRevision(rev))
			cancel()
			if err == nil {
				w.leaseChanges.WithLabelValues("released").Inc()
				log.Info("lease released", "revision", rev)
				return
			}
			moved := errors.Is(err, jetstream.ErrKeyRevisionMismatch) // 10071, or 10164 from a replicated bucket
			if moved || time.Until(deadline) < 100*time.Millisecond {
				log.Warn("release lease; it will expire", "revision", rev, "err", err)
				return
			}
			log.Debug("lease release did not get through; retrying", "revision", rev, "err", err)
			time.Sleep(100 * time.Millisecond)
		}
	}

	for {
		select {
		case <-retry.C:
			if releasing {
				continue
			}
			// Fence only under a lease just proven ours: a worker that
			// was paused past its lease finds out here, not by taking
			// the checkpoint back from the new owner.
			if !renewLease() {
				return
			}
			// Build in the background, so that renewals go on while
			// it connects and fences.
			buildDone = make(chan built, 1)
			go func(reg prometheus.Registerer) { // owned by run: every return path waits for buildDone
				bctx, cancel := context.WithTimeout(pctx, BuildTimeout)
				defer cancel()
				r, err := w.cfg.Build(bctx, s.def, s.lease, reg)
				buildDone <- built{r, err}
			}(s.reg)

		case b := <-buildDone:
			buildDone = nil
			r, err := b.runner, b.err
			if err == nil && (releasing || ctx.Err() != nil) {
				_ = r.Close()
			}
			if ctx.Err() != nil {
				return // a hard stop leaves the lease to expire
			}
			if releasing {
				giveBack()
				return
			}
			if err != nil {
				s.setState("waiting", err)
				log.Warn("pipeline not started; retrying while holding the lease", "in", backoff.String(), "err", err)
				retry.Reset(backoff)
				backoff = min(2*backoff, maxRetry)
				s.freshRegistry()
				continue
			}
			runner = r
			s.mu.Lock()
			s.runner, s.lastOut, s.lastTaken = r, 0, time.Now()
			s.mu.Unlock()
			s.setState("running", nil)
			runDone = make(chan error, 1)
			go func() { runDone <- r.Run(pctx) }() // owned by run: every return path waits for runDone
			log.Info("pipeline started", "revision", s.rev)

		case err := <-runDone:
			runDone = nil
			_ = runner.Close()
			if releasing {
				if drainDone != nil {
					<-drainDone
				}
				if err != nil && !errors.Is(err, context.Canceled) {
					log.Warn("pipeline failed while draining", "err", err)
				}
				giveBack()
				return
			}
			if err == nil {
				s.setState("done", nil)
				log.Info("pipeline done: its source ended; holding the lease so that it is not run again")
				continue
			}
			if ctx.Err() != nil {
				return
			}
			s.setState("failed", err)
			log.Warn("pipeline failed; restarting while holding the lease", "in", backoff.String(), "err", err)
			s.freshRegistry()
			retry.Reset(backoff)
			backoff = min(2*backoff, maxRetry)

		case <-renew.C:
			if !renewLease() {
				stopHard()
				return
			}
			if runDone != nil && runner.State() == pipeline.Running {
				backoff = minRetry
			}

		case <-status.C:
			s.publish(ctx, runner)

		case <-stop:
			stop = nil
			releasing = true
			if buildDone != nil {
				pcancel() // nothing runs yet: cut the build short, give back once it returns
				continue
			}
			if runDone == nil {
				giveBack()
				return
			}
			log.Info("draining before the lease is released")
			drainDone = make(chan error, 1)
			go func() { // owned by run: waited for after runDone
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.DrainTimeout)
				defer cancel()
				err := runner.Drain(dctx)
				if err != nil {
					pcancel() // the drain outlived its time: stop hard
				}
				drainDone <- err
			}()

		case <-ctx.Done():
			stopHard()
			return
		}
	}
}

// publish writes the pipeline's status into tide_status.
func (s *slot) publish(ctx context.Context, r Runner) {
	w := s.w
	rec := StatusRecord{Pipeline: s.lease.Pipeline, Owner: w.cfg.ID, Updated: time.Now().UTC()}
	s.mu.Lock()
	rec.State, rec.Error = s.state, s.lastErr
	if r != nil {
		st := r.Stats()
		rec.EventsOut, rec.LastCheckpoint = st.EventsOut, st.LastCommit.UTC()
		if took := time.Since(s.lastTaken).Seconds(); took > 0 && s.state == "running" {
			rec.EventsPerSec = float64(st.EventsOut-s.lastOut) / took
		}
		s.lastOut, s.lastTaken = st.EventsOut, time.Now()
		if w.cfg.Lag != nil {
			rec.Lag = w.cfg.Lag(r)
		}
	}
	s.mu.Unlock()
	v, _ := json.Marshal(rec)
	pctx, cancel := context.WithTimeout(ctx, StatusEvery)
	defer cancel()
	if _, err := w.cfg.Buckets.Status.Put(pctx, s.lease.Pipeline, v); err != nil && ctx.Err() == nil {
		w.log.Debug("publish status", "pipeline", s.lease.Pipeline, "err", err)
	}
}
