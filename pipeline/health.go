package pipeline

import (
	"sync"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// RetryObserver is an Observer that also wants each retry of the source
// or the sink (cdc.Retrier) counted: component is "source" or "sink",
// attempt the count of consecutive failures.
type RetryObserver interface {
	Retrying(component string, attempt int, err error)
}

// Health is what the pipeline knows of its ends' retries: a source or a
// sink that is retrying makes the pipeline Degraded until it reports a
// success or a batch commits.
type Health struct {
	Degraded  bool
	Component string // "source" or "sink": the end that is retrying
	Err       error  // its last error
	Attempts  int    // its consecutive failed attempts
	// LastSuccess is when the last batch committed, or when Run began
	// before the first; zero before Run.
	LastSuccess time.Time
	// LastError is when the last retried error happened; zero if none.
	LastError time.Time
}

// health is the state behind Health and the lag, guarded by its mutex.
type health struct {
	mu          sync.Mutex
	retrying    map[string]retrying // by component
	lastSuccess time.Time
	lastError   time.Time

	// pending holds, for each batch in flight that has a change, the time
	// of its oldest change: its wall time, or when it was read. Batches
	// commit in order, so the first is the oldest.
	pending  []pendingBatch
	caughtUp bool // the source's last poll found nothing new
	opened   bool // the source is open
	// restored is the time of the checkpoint's change (cdc.PositionTimer),
	// the lag's start until the source is first polled; zero if unknown.
	restored time.Time
}

type retrying struct {
	attempts int
	err      error
}

type pendingBatch struct {
	b *batchBuf
	t time.Time
}

// reportRetry returns the cdc.RetryFunc of component: what the source or
// the sink calls as it retries.
func (p *Pipeline) reportRetry(component string) cdc.RetryFunc {
	return func(attempt int, err error) {
		h := &p.health
		h.mu.Lock()
		was := len(h.retrying) > 0
		if attempt <= 0 || err == nil {
			delete(h.retrying, component)
		} else {
			if h.retrying == nil {
				h.retrying = map[string]retrying{}
			}
			h.retrying[component] = retrying{attempt, err}
			h.lastError = time.Now()
		}
		now := len(h.retrying) > 0
		h.mu.Unlock()
		switch {
		case attempt > 0 && err != nil:
			if !was {
				p.log.Warn("pipeline degraded: "+component+" retrying", "component", component, "attempt", attempt, "err", err)
			}
			if ro, ok := p.obs.(RetryObserver); ok {
				ro.Retrying(component, attempt, err)
			}
		case was && !now:
			p.log.Info("pipeline recovered: " + component + " succeeded after retrying")
		}
	}
}

// committed records a successful commit: whatever was retrying has
// recovered, and batch b is no longer pending.
func (p *Pipeline) committedHealth(b *batchBuf) {
	h := &p.health
	h.mu.Lock()
	was := len(h.retrying) > 0
	clear(h.retrying)
	h.lastSuccess = time.Now()
	if len(h.pending) > 0 && h.pending[0].b == b {
		h.pending[0] = pendingBatch{}
		h.pending = h.pending[1:]
	}
	h.mu.Unlock()
	if was {
		p.log.Info("pipeline recovered: a batch committed")
	}
}

// Health returns what the pipeline knows of its ends' retries.
func (p *Pipeline) Health() Health {
	h := &p.health
	h.mu.Lock()
	defer h.mu.Unlock()
	out := Health{LastSuccess: h.lastSuccess, LastError: h.lastError}
	// The sink first: a sink that cannot write stops everything.
	for _, c := range []string{"sink", "source"} {
		if r, ok := h.retrying[c]; ok {
			out.Degraded, out.Component, out.Err, out.Attempts = true, c, r.err, r.attempts
			break
		}
	}
	return out
}

// degraded reports whether an end is retrying.
func (p *Pipeline) degraded() bool {
	p.health.mu.Lock()
	defer p.health.mu.Unlock()
	return len(p.health.retrying) > 0
}

// Ready reports whether the pipeline does its work: both ends are open,
// and neither is retrying (the last commit succeeded, or none was due).
// It is what a readiness probe asks.
func (p *Pipeline) Ready() bool {
	select {
	case <-p.opened:
	default:
		return false
	}
	switch p.State() {
	case Running, Paused, Draining:
		return true
	}
	return false
}

// started records the start of Run: the first "last success".
func (p *Pipeline) startedHealth() {
	p.health.mu.Lock()
	p.health.lastSuccess = time.Now()
	p.health.mu.Unlock()
}

// sourceOpened records that the source is open: from now on an empty
// poll means the source is caught up.
func (p *Pipeline) sourceOpened() {
	p.health.mu.Lock()
	p.health.opened = true
	p.health.mu.Unlock()
}

// notePolled records what a poll found: nothing or markers only (the
// source is caught up), or events of the open batch b, whose first
// change, if b has none yet, is the oldest change of b.
func (p *Pipeline) notePolled(b *batchBuf, evs []cdc.Event) {
	h := &p.health
	if len(evs) == 0 {
		h.mu.Lock()
		h.caughtUp = true
		h.restored = time.Time{}
		h.mu.Unlock()
		return
	}
	var t time.Time
	changes := false
	for i := range evs {
		if evs[i].Op == cdc.OpMarker {
			continue
		}
		changes = true
		if b.pending.IsZero() {
			if ms := evs[i].WallTimeMS; ms != 0 {
				t = time.UnixMilli(ms)
			} else {
				t = time.Now()
			}
		}
		break
	}
	h.mu.Lock()
	// Markers alone (a change stream's post-batch token after an empty
	// batch) say that the source is at its head.
	h.caughtUp = !changes
	h.restored = time.Time{}
	if !t.IsZero() {
		b.pending = t
		h.pending = append(h.pending, pendingBatch{b, t})
	}
	h.mu.Unlock()
}

// lag fills the lag of st: the time of the oldest change read and not
// yet committed, or whether the source is caught up with nothing
// pending.
func (p *Pipeline) lag(st *Stats) {
	h := &p.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending) > 0 {
		st.Pending = h.pending[0].t
		return
	}
	if !h.restored.IsZero() {
		// Restarted, and nothing polled yet: the changes after the
		// checkpoint, if any, wait since its time at the latest.
		st.Pending = h.restored
		return
	}
	_, sourceRetrying := h.retrying["source"]
	st.CaughtUp = h.opened && h.caughtUp && !sourceRetrying
}

// restoredHealth notes the time of the restored checkpoint's change, when
// the source can tell it.
func (p *Pipeline) restoredHealth(cp *cdc.Checkpoint) {
	pt, ok := p.src.(cdc.PositionTimer)
	if !ok || cp == nil || len(cp.Source) == 0 {
		return
	}
	if t, ok := pt.PositionTime(cp.Source); ok {
		p.health.mu.Lock()
		p.health.restored = t
		p.health.mu.Unlock()
	}
}
