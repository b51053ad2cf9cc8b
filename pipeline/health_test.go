package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

var errDown = errors.New("connection refused")

// flakySink is a memSink and a cdc.Retrier whose Commit, while down,
// reports a failed attempt every 100 ms and waits, as a sink waiting for
// its database does.
type flakySink struct {
	*memSink

	mu     sync.Mutex
	down   bool
	policy cdc.RetryPolicy
	report cdc.RetryFunc
}

func (s *flakySink) SetRetry(p cdc.RetryPolicy, report cdc.RetryFunc) {
	s.policy, s.report = p, report
}

func (s *flakySink) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

func (s *flakySink) Commit(ctx context.Context, next cdc.Checkpoint) error {
	for attempt := 1; ; attempt++ {
		s.mu.Lock()
		down := s.down
		s.mu.Unlock()
		if !down {
			return s.memSink.Commit(ctx, next)
		}
		s.report(attempt, errDown)
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// retryingSource is a sliceSource and a cdc.Retrier.
type retryingSource struct {
	*sliceSource
	report cdc.RetryFunc
}

func (s *retryingSource) SetRetry(_ cdc.RetryPolicy, report cdc.RetryFunc) { s.report = report }

// retryCounter is an Observer that counts retries by component.
type retryCounter struct {
	obsRecorder
	mu      sync.Mutex
	retries map[string]int
}

func (o *retryCounter) Retrying(component string, _ int, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.retries[component]++
}

func (o *retryCounter) count(component string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.retries[component]
}

// A sink that retries makes the pipeline degraded, with its error, its
// attempts and the time since the last success, not ready, and with a lag
// that grows from the oldest pending change; once a commit succeeds it is
// running and ready again, and caught up its lag is 0.
func TestDegradedWhileSinkRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, nil)
		sink := &flakySink{memSink: newSink(log)}
		obs := &retryCounter{retries: map[string]int{}}
		policy := cdc.RetryPolicy{Initial: time.Second, Max: time.Minute}
		p := New(Config{Name: "p", Logger: discard(), Observer: obs, Retry: policy}, src, testEncode, sink, newStore(log))
		if sink.policy != policy || sink.report == nil {
			t.Fatalf("New gave the sink policy %+v (report set: %v), want %+v", sink.policy, sink.report != nil, policy)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := run(ctx, p)
		synctest.Wait()
		if !p.Ready() || p.State() != Running {
			t.Fatalf("idle pipeline: state %s, ready %v; want running and ready", p.State(), p.Ready())
		}
		if lag, known := p.Stats().Lag(time.Now()); !known || lag != 0 {
			t.Fatalf("idle pipeline: lag %s (known %v), want 0", lag, known)
		}

		sink.setDown(true)
		start := time.Now()
		evs := events(0, 3)
		for i := range evs {
			evs[i].WallTimeMS = start.Add(-2 * time.Second).UnixMilli()
		}
		src.add(evs...)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := p.State(); got != Degraded {
			t.Fatalf("state with the sink down = %s, want degraded", got)
		}
		if p.Ready() {
			t.Error("Ready with the sink down")
		}
		h := p.Health()
		if !h.Degraded || h.Component != "sink" || !errors.Is(h.Err, errDown) || h.Attempts < 250 {
			t.Errorf("Health = %+v, want the sink degraded by %v after about 300 attempts", h, errDown)
		}
		if since := time.Since(h.LastSuccess); since < 30*time.Second || h.LastError.Before(start) {
			t.Errorf("Health: last success %s ago, last error at %v; want 30 s ago, and an error since %v", since, h.LastError, start)
		}
		if lag, known := p.Stats().Lag(time.Now()); !known || lag != 32*time.Second {
			t.Errorf("lag with the sink down 30 s = %s (known %v), want 32 s: from the oldest pending change's wall time", lag, known)
		}
		if obs.count("sink") < 250 || obs.count("source") != 0 {
			t.Errorf("retries observed: sink %d, source %d", obs.count("sink"), obs.count("source"))
		}

		sink.setDown(false)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := p.State(); got != Running || !p.Ready() || p.Health().Degraded {
			t.Errorf("after the sink returned: state %s, ready %v, health %+v; want running and ready", got, p.Ready(), p.Health())
		}
		if got := sink.committedList(); len(got) != 3 {
			t.Errorf("committed %v, want the three events", got)
		}
		if lag, known := p.Stats().Lag(time.Now()); !known || lag != 0 {
			t.Errorf("lag once caught up = %s (known %v), want 0", lag, known)
		}
		cancel()
		<-errc
	})
}

// A source that retries makes the pipeline degraded, and its lag unknown
// rather than 0; its own success report makes it running again.
func TestDegradedWhileSourceRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := &retryingSource{sliceSource: newSource(log, nil)}
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, newSink(log), newStore(log))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := run(ctx, p)
		synctest.Wait()

		src.report(1, errDown)
		src.report(2, errDown)
		if got := p.State(); got != Degraded {
			t.Fatalf("state with the source retrying = %s, want degraded", got)
		}
		if h := p.Health(); h.Component != "source" || h.Attempts != 2 {
			t.Errorf("Health = %+v, want the source after 2 attempts", h)
		}
		if lag, known := p.Stats().Lag(time.Now()); known {
			t.Errorf("lag with the source retrying = %s, known; want unknown: the source cannot say what waits upstream", lag)
		}
		src.report(0, nil)
		if got := p.State(); got != Running || p.Health().Degraded {
			t.Errorf("after the source's success: state %s, health %+v", got, p.Health())
		}
		cancel()
		<-errc
	})
}

// Before Run, a pipeline is neither ready nor of known lag.
func TestNotReadyBeforeOpen(t *testing.T) {
	log := &callLog{}
	p := New(Config{Name: "p"}, newSource(log, nil), testEncode, newSink(log), nil)
	if p.Ready() {
		t.Error("Ready before Run")
	}
	if _, known := p.Stats().Lag(time.Now()); known {
		t.Error("lag known before Run")
	}
	if got := Degraded.String(); got != "degraded" {
		t.Errorf("Degraded.String() = %q", got)
	}
}

// timedSource is a sliceSource whose positions tell their time: event i
// was made at epoch + i seconds.
type timedSource struct {
	*sliceSource
	epoch time.Time
}

func (s *timedSource) PositionTime(p cdc.Position) (time.Time, bool) {
	var i int
	if _, err := fmt.Sscan(string(p), &i); err != nil {
		return time.Time{}, false
	}
	return s.epoch.Add(time.Duration(i) * time.Second), true
}

// openGateSink is a memSink whose Open waits for its gate, as a sink
// whose database is down at start.
type openGateSink struct {
	*memSink
	gate chan struct{}
}

func (s *openGateSink) Open(ctx context.Context, cp *cdc.Checkpoint) error {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.memSink.Open(ctx, cp)
}

// After a restart, before anything is polled or committed, the lag is
// known from the checkpoint's time (cdc.PositionTimer), and grows while
// the sink cannot open; once the source is caught up it is 0.
func TestLagKnownAtRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		store := newStore(log)
		epoch := time.Now().Add(-time.Hour)
		first := &timedSource{sliceSource: newSource(log, events(0, 10)), epoch: epoch}
		first.end = true
		if err := New(Config{Name: "p", Logger: discard()}, first, testEncode, newSink(log), store).Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Checkpoint at event 9, made at epoch+9s.
		src := &timedSource{sliceSource: newSource(log, events(0, 10)), epoch: epoch}
		sink := &openGateSink{memSink: newSink(log), gate: make(chan struct{})}
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, store)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := run(ctx, p)
		synctest.Wait()
		want := time.Since(epoch.Add(9 * time.Second))
		if lag, known := p.Stats().Lag(time.Now()); !known || lag != want {
			t.Fatalf("lag at restart with the sink not open = %s (known %v), want %s: since the checkpoint's change", lag, known, want)
		}
		time.Sleep(30 * time.Second)
		if lag, _ := p.Stats().Lag(time.Now()); lag != want+30*time.Second {
			t.Errorf("lag 30 s later = %s, want %s: it grows", lag, want+30*time.Second)
		}
		close(sink.gate)
		synctest.Wait()
		if lag, known := p.Stats().Lag(time.Now()); !known || lag != 0 {
			t.Errorf("lag once open and caught up = %s (known %v), want 0", lag, known)
		}
		cancel()
		<-errc
	})
}

// A poll of markers alone (an idle change stream's post-batch token) is
// a source at its head: the lag is 0, however old the markers' positions.
func TestMarkersAloneAreCaughtUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, nil)
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, newSink(log), newStore(log))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := run(ctx, p)
		synctest.Wait()
		for i := range 5 {
			time.Sleep(10 * time.Second)
			src.add(marker(i))
			synctest.Wait()
			if lag, known := p.Stats().Lag(time.Now()); !known || lag != 0 {
				t.Fatalf("after marker %d: lag %s (known %v), want 0", i, lag, known)
			}
		}
		cancel()
		<-errc
	})
}
